"""OTLP requests -> canonical span, call, tool and task records. Pure functions, no state."""

from taskcost.normalize._decode import DecodeError, decode_json, decode_protobuf
from taskcost.normalize._records import (
    LLMCallRecord,
    NormalizedBatch,
    SpanRecord,
    TaskRecord,
    ToolCallRecord,
    normalize_request,
)

__all__ = [
    "DecodeError",
    "LLMCallRecord",
    "NormalizedBatch",
    "SpanRecord",
    "TaskRecord",
    "ToolCallRecord",
    "decode_json",
    "decode_protobuf",
    "normalize_request",
]
