"""OTLP requests -> canonical span, call, tool and task records. Pure functions, no state.

Which attribute names are read, in which precedence, is the table in _conventions (docs/conventions.md)."""

from typing import TYPE_CHECKING

from taskcost._internal.lazy import lazy_exports

# imported on first use: decoding loads protobuf, which a command that only reads settings never needs
if TYPE_CHECKING:
    from taskcost.normalize._decode import (
        DecodeError,
        decode_json,
        decode_protobuf,
        encode_json,
        json_wire,
        key_value,
        protobuf_wire,
        to_any_value,
    )
    from taskcost.normalize._limits import Cuts, DecodedTooLarge, IntakeLimits
    from taskcost.normalize._normalize import normalize_request, normalize_wire
    from taskcost.normalize._records import (
        EngineSpanRecord,
        LLMCallEngineRecord,
        LLMCallRecord,
        NormalizedBatch,
        SpanRecord,
        TaskRecord,
        ToolCallRecord,
    )
    from taskcost.normalize._rules import DEFAULT_RULES, NormalizeRules

__getattr__, __dir__ = lazy_exports(__name__)

__all__ = [
    "DEFAULT_RULES",
    "Cuts",
    "DecodeError",
    "DecodedTooLarge",
    "EngineSpanRecord",
    "IntakeLimits",
    "LLMCallEngineRecord",
    "LLMCallRecord",
    "NormalizeRules",
    "NormalizedBatch",
    "SpanRecord",
    "TaskRecord",
    "ToolCallRecord",
    "decode_json",
    "decode_protobuf",
    "encode_json",
    "json_wire",
    "key_value",
    "normalize_request",
    "normalize_wire",
    "protobuf_wire",
    "to_any_value",
]
