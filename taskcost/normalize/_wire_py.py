"""An ExportTraceServiceRequest's wire form read into the tuples the normaliser reads, through protobuf's messages:
what ``_wire`` (compiled at install) does straight from the bytes, for where it could not be compiled; and the
reference the tests hold it to.

``read_request`` returns one tuple per ResourceSpans: ``(attributes, scopes)``, each scope
``(name, version, attribute count, spans)``, each span the tuple ``(trace_id, span_id, parent_id, name, kind,
start_ns, end_ns, attributes, dropped_attributes, events, raw_events, dropped_events, status_code, status_message)``:

- ``trace_id``, ``span_id``: hex text, or None when not 16 (8) bytes or all zero; ``parent_id``: hex text, None when
  absent, False when not 8 bytes;
- ``kind`` and ``status_code``: the enum's number as sent (any int32); times and dropped counts as sent;
- attributes (of a span, resource or event): a dict (a later key wins) of values as Python (str truncated by
  ``truncate`` past ``max_length`` characters, bool, int, float, bytes as hex text, None; arrays and maps by
  ``nested`` from their AnyValue's bytes); over their count limit, a list of (key, AnyValue bytes) instead, for the
  normaliser to cut;
- events: each a dict as the store keeps it (name, time_ns, attributes, and dropped_attributes_count when not 0);
  or, when ``raw_events``, each Event's bytes (the span's events or one event's attributes are over their count
  limit: the normaliser cuts them);
- a span whose ids or times the normaliser refuses has None for its attributes and events (it never reads them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf.message import DecodeError as _PbDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["WireError", "read_request"]


_MAX_NS = 2**63
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)


class WireError(ValueError):
    """The bytes are not a valid protobuf ExportTraceServiceRequest."""


def read_request(
    data: bytes,
    span_limit: int,
    resource_limit: int,
    event_limit: int,
    max_events: int,
    max_length: int,
    truncate: Callable[[str], str],
    nested: Callable[[bytes], Any],
) -> list[tuple[Any, list[tuple[str, str, int, list[tuple[Any, ...]]]]]]:
    """The request in ``data`` (the module's docstring says how it is laid out). Raises WireError."""
    try:
        req = ExportTraceServiceRequest.FromString(data)
    except (_PbDecodeError, RuntimeError, ValueError) as exc:
        raise WireError(str(exc)) from None

    def value(v: AnyValue) -> Any:
        which = v.WhichOneof("value")
        if which == "string_value":
            text = v.string_value
            return text if len(text) <= max_length else truncate(text)
        if which is None:
            return None
        if which == "array_value" or which == "kvlist_value":
            return nested(v.SerializeToString())
        if which == "bytes_value":
            text = v.bytes_value.hex()
            return text if len(text) <= max_length else truncate(text)
        return getattr(v, which)

    def attributes(kvs: Sequence[KeyValue], limit: int) -> Any:
        if len(kvs) > limit:
            return [(kv.key, kv.value.SerializeToString()) for kv in kvs]
        return {kv.key: value(kv.value) for kv in kvs}

    out = []
    for rs in req.resource_spans:
        scopes = []
        for ss in rs.scope_spans:
            spans = []
            for span in ss.spans:
                raw_trace, raw_span, raw_parent = span.trace_id, span.span_id, span.parent_span_id
                trace_id = raw_trace.hex() if len(raw_trace) == 16 and raw_trace != _ZERO_TRACE else None
                span_id = raw_span.hex() if len(raw_span) == 8 and raw_span != _ZERO_SPAN else None
                parent: str | bool | None = (
                    None if not raw_parent else (raw_parent.hex() if len(raw_parent) == 8 else False)
                )
                start, end = span.start_time_unix_nano, span.end_time_unix_nano
                attrs: Any = None
                events: list[Any] | None = None
                raw_events = False
                if trace_id and span_id and parent is not False and 0 < start < _MAX_NS and 0 < end < _MAX_NS:
                    attrs = attributes(span.attributes, span_limit)
                    evs = span.events
                    raw_events = len(evs) > max_events or any(len(e.attributes) > event_limit for e in evs)
                    if raw_events:
                        events = [e.SerializeToString() for e in evs]
                    else:
                        events = []
                        for e in evs:
                            event = {
                                "name": e.name,
                                "time_ns": e.time_unix_nano,
                                "attributes": attributes(e.attributes, event_limit),
                            }
                            if e.dropped_attributes_count:
                                event["dropped_attributes_count"] = e.dropped_attributes_count
                            events.append(event)
                status = span.status
                spans.append(
                    (
                        trace_id,
                        span_id,
                        parent,
                        span.name,
                        span.kind,
                        start,
                        end,
                        attrs,
                        span.dropped_attributes_count,
                        events,
                        raw_events,
                        span.dropped_events_count,
                        status.code,
                        status.message,
                    )
                )
            scopes.append((ss.scope.name, ss.scope.version, len(ss.scope.attributes), spans))
        out.append((attributes(rs.resource.attributes, resource_limit), scopes))
    return out
