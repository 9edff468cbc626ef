"""Canonical records built from one ExportTraceServiceRequest."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from taskcost.normalize import _names as N

__all__ = [
    "LLMCallRecord",
    "NormalizedBatch",
    "SpanRecord",
    "TaskRecord",
    "ToolCallRecord",
    "normalize_request",
]

# A token count above this is not a real request; it is treated as absent (and counted as a warning).
MAX_TOKENS = 10**12
_ERROR = Status.STATUS_CODE_ERROR


@dataclass(slots=True)
class SpanRecord:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str
    service_name: str | None
    scope_name: str
    scope_version: str
    attributes: str  # JSON object
    resource_attributes: str  # JSON object
    events: str  # JSON array


@dataclass(slots=True)
class LLMCallRecord:
    trace_id: str
    span_id: str
    task_id: str
    call_id: str
    attempt: int
    start_ns: int
    end_ns: int
    operation: str
    provider: str | None
    request_model: str | None
    response_model: str | None
    response_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    ttft_s: float | None
    status: str  # ok | error
    error_type: str | None
    server_address: str | None
    service_name: str | None
    conversation_id: str | None
    agent_name: str | None
    agent_version: str | None
    harness_version: str | None
    engine: str | None
    engine_version: str | None
    quantization: str | None
    gpu_type: str | None
    gpu_count: int | None
    cluster_id: str | None
    deployment: str | None
    container_image_name: str | None
    container_image_tags: list[str] | None
    k8s_cluster_name: str | None
    cloud_region: str | None


@dataclass(slots=True)
class ToolCallRecord:
    trace_id: str
    span_id: str
    task_id: str
    tool_name: str | None
    start_ns: int
    end_ns: int
    status: str
    error_type: str | None
    cost_usd: Decimal | None
    service_name: str | None


@dataclass(slots=True)
class TaskRecord:
    trace_id: str
    span_id: str
    task_id: str
    kind: str | None
    outcome: str
    start_ns: int
    end_ns: int
    status: str
    error_type: str | None
    harness_version: str | None
    agent_name: str | None
    agent_version: str | None
    conversation_id: str | None
    service_name: str | None


@dataclass(slots=True)
class NormalizedBatch:
    spans: list[SpanRecord] = field(default_factory=list)
    llm_calls: list[LLMCallRecord] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    tasks: list[TaskRecord] = field(default_factory=list)
    rejected_spans: int = 0
    messages: list[str] = field(default_factory=list)

    def reject(self, why: str) -> None:
        self.rejected_spans += 1
        if len(self.messages) < 5:
            self.messages.append(why)


def any_value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return attributes_dict(v.kvlist_value.values)
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def attributes_dict(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


class _Attrs:
    """Span attributes over resource attributes: the span wins."""

    __slots__ = ("span", "resource")

    def __init__(self, span: dict[str, Any], resource: dict[str, Any]) -> None:
        self.span = span
        self.resource = resource

    def get(self, key: str) -> Any:
        value = self.span.get(key)
        return self.resource.get(key) if value is None else value

    def text(self, *keys: str) -> str | None:
        for key in keys:
            value = self.get(key)
            if value is not None and value != "":
                return value if isinstance(value, str) else str(value)
        return None

    def integer(self, *keys: str, warn: NormalizedBatch | None = None) -> int | None:
        for key in keys:
            value = _to_int(self.get(key))
            if value is not None:
                if 0 <= value <= MAX_TOKENS:
                    return value
                if warn is not None and len(warn.messages) < 5:
                    warn.messages.append(f"ignored out-of-range {key}={value}")
        return None

    def number(self, key: str) -> float | None:
        value = self.get(key)
        if isinstance(value, bool) or value is None:
            return None
        try:
            f = float(value)
        except (TypeError, ValueError):
            return None
        return f if math.isfinite(f) and f >= 0 else None

    def text_list(self, key: str) -> list[str] | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, list):
            return [str(x) for x in value]
        return [str(value)]


def _to_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _role(span_attrs: dict[str, Any]) -> str | None:
    if N.TASK_KIND in span_attrs:
        return "task"
    op = span_attrs.get(N.OPERATION)
    if op == N.TOOL_OPERATION or N.TOOL_NAME in span_attrs:
        return "tool"
    if op in N.LLM_OPERATIONS or any(k in span_attrs for k in (N.INPUT_TOKENS, N.OUTPUT_TOKENS, N.CACHE_READ_TOKENS)):
        return "llm"
    return None


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() and d >= 0 else None


def normalize_request(req: ExportTraceServiceRequest) -> NormalizedBatch:
    out = NormalizedBatch()
    for rs in req.resource_spans:
        resource = attributes_dict(rs.resource.attributes)
        resource_json = json.dumps(resource, separators=(",", ":"), sort_keys=True)
        service = resource.get(N.SERVICE_NAME)
        service = None if service is None else str(service)
        for ss in rs.scope_spans:
            for span in ss.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8 or not any(span.trace_id):
                    out.reject(f"span {span.name!r}: trace_id must be 16 bytes and span_id 8 bytes")
                    continue
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    out.reject(f"span {span.name!r}: parent_span_id must be 8 bytes")
                    continue
                _one_span(out, span, ss.scope.name, ss.scope.version, resource, resource_json, service)
    return out


def _one_span(
    out: NormalizedBatch,
    span: Span,
    scope_name: str,
    scope_version: str,
    resource: dict[str, Any],
    resource_json: str,
    service: str | None,
) -> None:
    span_attrs = attributes_dict(span.attributes)
    trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
    events = [
        {"name": e.name, "time_ns": e.time_unix_nano, "attributes": attributes_dict(e.attributes)} for e in span.events
    ]
    out.spans.append(
        SpanRecord(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=span.parent_span_id.hex() or None,
            name=span.name,
            kind=int(span.kind),
            start_ns=span.start_time_unix_nano,
            end_ns=span.end_time_unix_nano,
            status_code=int(span.status.code),
            status_message=span.status.message,
            service_name=service,
            scope_name=scope_name,
            scope_version=scope_version,
            attributes=json.dumps(span_attrs, separators=(",", ":"), sort_keys=True),
            resource_attributes=resource_json,
            events=json.dumps(events, separators=(",", ":")),
        )
    )
    a = _Attrs(span_attrs, resource)
    role = _role(span_attrs)
    if role is None:
        return
    task_id = a.text(N.TASK_ID) or f"trace:{trace_id}"
    status = "error" if span.status.code == _ERROR else "ok"
    error_type = a.text(N.ERROR_TYPE) if status == "error" or N.ERROR_TYPE in span_attrs else None
    if error_type is not None:
        status = "error"
    if role == "llm":
        out.llm_calls.append(_llm_call(a, out, span, trace_id, span_id, task_id, status, error_type, service))
    elif role == "tool":
        out.tool_calls.append(
            ToolCallRecord(
                trace_id=trace_id,
                span_id=span_id,
                task_id=task_id,
                tool_name=a.text(N.TOOL_NAME),
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                status=status,
                error_type=error_type,
                cost_usd=_decimal(span_attrs.get(N.TOOL_COST)),
                service_name=service,
            )
        )
    else:
        outcome = a.text(N.TASK_OUTCOME)
        if outcome not in N.OUTCOMES:
            outcome = "failed" if status == "error" else "completed"
        out.tasks.append(
            TaskRecord(
                trace_id=trace_id,
                span_id=span_id,
                task_id=task_id,
                kind=a.text(N.TASK_KIND),
                outcome=outcome,
                start_ns=span.start_time_unix_nano,
                end_ns=span.end_time_unix_nano,
                status=status,
                error_type=error_type,
                harness_version=a.text(N.HARNESS_VERSION),
                agent_name=a.text(N.AGENT_NAME),
                agent_version=a.text(N.AGENT_VERSION),
                conversation_id=a.text(N.CONVERSATION_ID),
                service_name=service,
            )
        )


def _llm_call(
    a: _Attrs,
    out: NormalizedBatch,
    span: Span,
    trace_id: str,
    span_id: str,
    task_id: str,
    status: str,
    error_type: str | None,
    service: str | None,
) -> LLMCallRecord:
    attempt = a.integer(N.CALL_ATTEMPT)
    deployment = a.text(N.DEPLOYMENT)
    gpu_count = a.integer(N.GPU_COUNT)
    return LLMCallRecord(
        trace_id=trace_id,
        span_id=span_id,
        task_id=task_id,
        call_id=a.text(N.CALL_ID) or span_id,
        attempt=attempt if attempt and attempt >= 1 else 1,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        operation=a.text(N.OPERATION) or "chat",
        provider=a.text(N.PROVIDER, N.PROVIDER_LEGACY),
        request_model=a.text(N.REQUEST_MODEL),
        response_model=a.text(N.RESPONSE_MODEL),
        response_id=a.text(N.RESPONSE_ID),
        input_tokens=a.integer(N.INPUT_TOKENS, warn=out),
        output_tokens=a.integer(N.OUTPUT_TOKENS, warn=out),
        cache_read_tokens=a.integer(N.CACHE_READ_TOKENS, warn=out),
        cache_write_tokens=a.integer(N.CACHE_WRITE_TOKENS, N.CACHE_CREATION_TOKENS, warn=out),
        reasoning_tokens=a.integer(N.REASONING_TOKENS, warn=out),
        ttft_s=a.number(N.TTFT),
        status=status,
        error_type=error_type,
        server_address=a.text(N.SERVER_ADDRESS),
        service_name=service,
        conversation_id=a.text(N.CONVERSATION_ID),
        agent_name=a.text(N.AGENT_NAME),
        agent_version=a.text(N.AGENT_VERSION),
        harness_version=a.text(N.HARNESS_VERSION),
        engine=a.text(N.ENGINE),
        engine_version=a.text(N.ENGINE_VERSION),
        quantization=a.text(N.QUANTIZATION),
        gpu_type=a.text(N.GPU_TYPE),
        gpu_count=gpu_count if gpu_count and gpu_count <= 100_000 else None,
        cluster_id=a.text(N.CLUSTER_ID),
        deployment=deployment if deployment in N.DEPLOYMENTS else None,
        container_image_name=a.text(N.IMAGE_NAME),
        container_image_tags=a.text_list(N.IMAGE_TAGS),
        k8s_cluster_name=a.text(N.K8S_CLUSTER),
        cloud_region=a.text(N.CLOUD_REGION),
    )
