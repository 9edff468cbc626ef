"""The canonical records one ExportTraceServiceRequest becomes. The store writes their fields by name into its
columns: add or rename a field only together with a store migration."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = [
    "EngineSpanRecord",
    "LLMCallEngineRecord",
    "LLMCallRecord",
    "NormalizedBatch",
    "SpanRecord",
    "TaskRecord",
    "ToolCallRecord",
]

_MAX_MESSAGES = 5


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
    # OTLP's counts: what the sender dropped plus what the intake limits dropped (taskcost/normalize/_limits.py)
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0


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
    # the attributes that choose a price variant (NormalizeRules.pricing_attributes), span over resource: read here,
    # once, so pricing never parses the span's attribute text again; not a column of its own
    pricing_attributes: dict[str, Any] | None = field(default=None, metadata={"column": False})
    # the SDK's prompt fingerprint (taskcost.prompt.*): sizes and where the prefix broke, never content
    prompt_chars: int | None = None  # sum of taskcost.prompt.block_chars
    stable_prefix_chars: int | None = None
    prefix_break_block: int | None = None
    prefix_break_kind: str | None = None  # taskcost.prompt.block_kinds at the break: system, tools, user, ...
    # the call's engine timings and topology tags, when it has any (stored as its own row: LLMCallEngineRecord)
    engine_detail: LLMCallEngineRecord | None = field(default=None, metadata={"column": False})


@dataclass(slots=True)
class LLMCallEngineRecord:
    """What a call span says of the engine that served it (taskcost.engine.*, taskcost.spec.*, taskcost.parallel.*,
    taskcost.pd.*): made only when one of these is present; the key is the call's."""

    trace_id: str
    span_id: str
    prefill_s: float | None = None
    decode_s: float | None = None
    prefill_tokens: int | None = None
    cached_tokens: int | None = None
    decode_tokens: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    tp_size: int | None = None
    pp_size: int | None = None
    dp_size: int | None = None
    pd_disaggregated: bool | None = None
    prefill_gpu_type: str | None = None
    decode_gpu_type: str | None = None
    spec_method: str | None = None
    spec_draft_model: str | None = None


@dataclass(slots=True)
class EngineSpanRecord:
    """An inference engine's own server span (vLLM's ``llm_request``): never an LLM call of its own; the store ties it
    to the client call it served (the ``engine_spans`` and ``engine_calls`` views)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    request_id: str | None
    response_model: str | None
    engine: str | None
    cluster_id: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    queue_s: float | None
    ttft_s: float | None
    e2e_s: float | None
    prefill_s: float | None
    decode_s: float | None
    inference_s: float | None
    start_ns: int
    end_ns: int


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
    golden: bool = False  # taskcost.task.golden: one of the fixed task set canaries can be restricted to


@dataclass(slots=True)
class NormalizedBatch:
    spans: list[SpanRecord] = field(default_factory=list)
    llm_calls: list[LLMCallRecord] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    tasks: list[TaskRecord] = field(default_factory=list)
    engine_spans: list[EngineSpanRecord] = field(default_factory=list)
    call_engines: list[LLMCallEngineRecord] = field(default_factory=list)
    rejected_spans: int = 0
    messages: list[str] = field(default_factory=list)
    # attribute values a typed read skipped (odd values: not a number, out of range; docs/conventions.md)
    ignored_values: int = 0
    # what the intake limits cut (taskcost/normalize/_limits.py): attributes and span events dropped, values truncated
    dropped_attributes: int = 0
    dropped_events: int = 0
    truncated_values: int = 0

    def reject(self, why: str) -> None:
        self.rejected_spans += 1
        self.warn(why)

    def ignore(self, why: str) -> None:
        """An attribute value read as absent: counted, and said to the client (its span is kept)."""
        self.ignored_values += 1
        self.warn(why)

    def warn(self, why: str) -> None:
        """A message for the client (partial success); the first few are kept."""
        if len(self.messages) < _MAX_MESSAGES:
            self.messages.append(why)
