"""Hand-built OTLP requests for normaliser tests: exact ids, parents, times, scopes and attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from taskcost.normalize import key_value as kv

T0 = 1_796_000_000_000_000_000  # ns
MS = 1_000_000


def trace_id(n: int) -> bytes:
    return n.to_bytes(16, "big")


def span_id(n: int) -> bytes:
    return n.to_bytes(8, "big")


def trace_hex(n: int) -> str:
    return trace_id(n).hex()


def span_hex(n: int) -> str:
    return span_id(n).hex()


@dataclass
class S:
    """One span: ids are small integers, times are milliseconds after T0."""

    name: str
    id: int
    parent: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    start_ms: int = 0
    end_ms: int = 100
    scope: str = "tests"
    trace: int = 1
    error: str | None = None  # status message; sets STATUS_CODE_ERROR
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # (name, ms after T0, attributes)


def request(*spans: S, resource: dict[str, Any] | None = None) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(kv(k, v) for k, v in (resource or {}).items())
    scopes: dict[str, Any] = {}
    for s in spans:
        if s.scope not in scopes:
            ss = rs.scope_spans.add()
            ss.scope.name = s.scope
            scopes[s.scope] = ss
        span = scopes[s.scope].spans.add(
            trace_id=trace_id(s.trace),
            span_id=span_id(s.id),
            name=s.name,
            start_time_unix_nano=T0 + s.start_ms * MS,
            end_time_unix_nano=T0 + s.end_ms * MS,
        )
        if s.parent is not None:
            span.parent_span_id = span_id(s.parent)
        span.attributes.extend(kv(k, v) for k, v in s.attrs.items())
        if s.error is not None:
            span.status.code = Status.STATUS_CODE_ERROR
            span.status.message = s.error
        for name, at_ms, attrs in s.events:
            ev = span.events.add(name=name, time_unix_nano=T0 + at_ms * MS)
            ev.attributes.extend(kv(k, v) for k, v in attrs.items())
    return req
