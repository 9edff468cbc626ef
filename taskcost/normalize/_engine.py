"""The engine view of a span: an inference engine's own server span (vLLM's ``llm_request``) as an engine-span record,
and what a call span says of the engine that served it (timings the response reported, topology and decoding tags)
as a per-call engine record. Pure functions over one span's ``Attrs``.

Cheap on the hot path: whether a span is an engine's is one string test on its scope and two dict look-ups on its
attributes (``is_engine_span``); the per-call record is read only for LLM call spans, and its topology tags come with
the resource's shared context (``_normalize._Context``), read once per resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskcost.normalize import _conventions as C
from taskcost.normalize import _names as N
from taskcost.normalize._attrs import Attrs
from taskcost.normalize._records import EngineSpanRecord, LLMCallEngineRecord

__all__ = ["TIMING_NAMES", "TOPOLOGY_NAMES", "Topology", "call_engine", "engine_span", "is_engine_span"]

_MAX_PARALLEL = 100_000  # a parallel size above this is not a real deployment
_MAX_TEXT = 128  # characters kept of a GPU type, method or draft model name
_UNKNOWN_SERVICE = "unknown_service"  # OpenTelemetry's default service.name: names no engine

TOPOLOGY_NAMES = frozenset(
    {
        N.PARALLEL_TENSOR,
        N.PARALLEL_PIPELINE,
        N.PARALLEL_DATA,
        N.PD_DISAGGREGATED,
        N.PD_PREFILL_GPU_TYPE,
        N.PD_DECODE_GPU_TYPE,
        N.SPEC_METHOD,
        N.SPEC_DRAFT_MODEL,
    }
)
"""The topology and decoding tags: context names, like the GPU type (span over resource)."""


def is_engine_span(scope_name: str, span_attrs: dict[str, Any], vllm_resource: bool) -> bool:
    """vLLM's server span: its tracer's scope (``vllm.*``) or resource mark, or the latency attributes it sets on
    every request span."""
    return (
        vllm_resource
        or scope_name.startswith(C.VLLM_SCOPE_PREFIX)
        or C.LATENCY_E2E in span_attrs
        or C.LATENCY_QUEUE in span_attrs
    )


def _short(value: str | None) -> str | None:
    return value[:_MAX_TEXT] if value else None


def _size(a: Attrs, key: str) -> int | None:
    """A parallel size: a whole number >= 1 (0 is odd too: skipped, with a reason)."""
    value = a.integer(key, limit=_MAX_PARALLEL)
    if value == 0:
        if a.ignore is not None:
            a.ignore(f"ignored {key}=0: a parallel size is at least 1")
        return None
    return value


def _yes_no(a: Attrs, key: str) -> bool | None:
    value = a.get(key)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if a.ignore is not None:
        a.ignore(f"ignored {key}={str(value)[:40]!r}: not true or false")
    return None


@dataclass(frozen=True, slots=True)
class Topology:
    """The topology and decoding tags of a call: read once per resource (or per span that sets one itself)."""

    tp_size: int | None = None
    pp_size: int | None = None
    dp_size: int | None = None
    pd_disaggregated: bool | None = None
    prefill_gpu_type: str | None = None
    decode_gpu_type: str | None = None
    spec_method: str | None = None
    spec_draft_model: str | None = None

    @classmethod
    def read(cls, a: Attrs) -> Topology | None:
        """The tags ``a`` carries; None when it carries none (the common case: one look-up per name)."""
        get = a.get
        if all(get(name) is None for name in TOPOLOGY_NAMES):
            return None
        method = a.text(N.SPEC_METHOD)
        return cls(
            _size(a, N.PARALLEL_TENSOR),
            _size(a, N.PARALLEL_PIPELINE),
            _size(a, N.PARALLEL_DATA),
            _yes_no(a, N.PD_DISAGGREGATED),
            _short(a.text(N.PD_PREFILL_GPU_TYPE)),
            _short(a.text(N.PD_DECODE_GPU_TYPE)),
            _short(method.strip().lower() if method else None),
            _short(a.text(N.SPEC_DRAFT_MODEL)),
        )


TIMING_NAMES = (
    N.ENGINE_PREFILL_S,
    N.ENGINE_DECODE_S,
    N.ENGINE_PREFILL_TOKENS,
    N.ENGINE_CACHED_TOKENS,
    N.ENGINE_DECODE_TOKENS,
    N.SPEC_DRAFT_TOKENS,
    N.SPEC_ACCEPTED_TOKENS,
)
"""The engine timings a call span may carry (what its response reported: llama.cpp's ``timings``)."""


def call_engine(a: Attrs, trace_id: str, span_id: str, topology: Topology | None) -> LLMCallEngineRecord | None:
    """The call's engine record: the timings the response reported (``taskcost.engine.*``, ``taskcost.spec.*``
    counts) and its topology tags; None when it has none of them. An odd value is skipped alone, with a reason."""
    get = a.get
    timed = any(get(name) is not None for name in TIMING_NAMES)
    if not timed and topology is None:
        return None
    record = LLMCallEngineRecord(trace_id, span_id)
    if timed:
        record.prefill_s = a.number(N.ENGINE_PREFILL_S)
        record.decode_s = a.number(N.ENGINE_DECODE_S)
        record.prefill_tokens = a.integer(N.ENGINE_PREFILL_TOKENS)
        record.cached_tokens = a.integer(N.ENGINE_CACHED_TOKENS)
        record.decode_tokens = a.integer(N.ENGINE_DECODE_TOKENS)
        record.spec_draft_tokens = a.integer(N.SPEC_DRAFT_TOKENS)
        record.spec_accepted_tokens = a.integer(N.SPEC_ACCEPTED_TOKENS)
    if topology is not None:
        record.tp_size, record.pp_size, record.dp_size = topology.tp_size, topology.pp_size, topology.dp_size
        record.pd_disaggregated = topology.pd_disaggregated
        record.prefill_gpu_type, record.decode_gpu_type = topology.prefill_gpu_type, topology.decode_gpu_type
        record.spec_method, record.spec_draft_model = topology.spec_method, topology.spec_draft_model
    return record


def engine_span(
    a: Attrs,
    trace_id: str,
    span_id: str,
    parent_id: str | None,
    times: tuple[int, int],
    engine: str | None,
    cluster_id: str | None,
    service: str | None,
) -> EngineSpanRecord:
    """The engine-span record of an engine's server span. ``engine``: ``taskcost.engine.name`` (span, then resource),
    else the resource's ``service.name``, else ``vllm`` (the only shape recognised today)."""
    if engine is None and service and not service.startswith(_UNKNOWN_SERVICE):
        engine = service
    return EngineSpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        request_id=a.text(C.ENGINE_REQUEST_ID),
        response_model=a.text(N.RESPONSE_MODEL),
        engine=_short(engine) or C.VLLM_ENGINE,
        cluster_id=cluster_id,
        prompt_tokens=a.integer(*C.ENGINE_PROMPT_TOKENS),
        completion_tokens=a.integer(*C.ENGINE_COMPLETION_TOKENS),
        cached_tokens=a.integer(*C.ENGINE_CACHED_TOKENS),
        queue_s=a.number(C.LATENCY_QUEUE),
        ttft_s=a.number(C.LATENCY_TTFT),
        e2e_s=a.number(C.LATENCY_E2E),
        prefill_s=a.number(C.LATENCY_PREFILL),
        decode_s=a.number(C.LATENCY_DECODE),
        inference_s=a.number(C.LATENCY_INFERENCE),
        start_ns=times[0],
        end_ns=times[1],
    )
