"""The call span's key table (taskcost/normalize/_plan.py) reads what the general, precedence-ordered readers read:
for any mix of conventions' names with any values (of the usual type or not, on the span or its resource), the
call's fields and the reasons given for skipped values are the same."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from taskcost.normalize import _conventions as C
from taskcost.normalize import _extract as X
from taskcost.normalize import _names as N
from taskcost.normalize import key_value, normalize_request
from taskcost.normalize._attrs import Attrs, attributes_dict
from taskcost.normalize._plan import CALL_FIELDS
from taskcost.normalize._records import LLMCallRecord, SpanRecord
from tests.budget import examples

# the names of the fields the key table chooses among, and of their fallbacks (the prompt fingerprint, engine timings
# and pricing names are read by their general readers whenever one is present: the table only says whether)
_NAMES = sorted(
    {n for field in CALL_FIELDS for n in field}
    | {*C.STREAM_FLAGS, C.OPENLIT_TTFT, C.OPENAI_API_BASE, C.TRACELOOP_SPAN_KIND, C.TRACELOOP_ENTITY_NAME}
    | {C.OI_OUTPUT_VALUE, C.OI_OUTPUT_MIME}
)
_VALUES = st.one_of(
    st.integers(-3, 2**40),
    st.sampled_from([0, 1, 7, 10**13]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "gpt-4o", " OpenAI ", "12", "agent", "true", '{"id": "r-1"}', "application/json"]),
    st.booleans(),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
)
_ATTRS = st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=12)


def _request(span: dict[str, Any], resource: dict[str, Any]) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(key_value(k, v) for k, v in resource.items())
    s = rs.scope_spans.add().spans.add(
        trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="s", start_time_unix_nano=1, end_time_unix_nano=2
    )
    s.attributes.extend(key_value(k, v) for k, v in {N.OPERATION: "chat", **span}.items())
    return req


def _general(span: dict[str, Any], resource: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields as the general readers read them, name by name in precedence order, and their reasons."""
    reasons: list[str] = []
    span_attrs = attributes_dict(_request(span, resource).resource_spans[0].scope_spans[0].spans[0].attributes)
    a = Attrs(span_attrs, attributes_dict(_request({}, resource).resource_spans[0].resource.attributes), None,
              reasons.append)  # fmt: skip
    usage = X.usage(a)
    attempt = a.integer(N.CALL_ATTEMPT, limit=1_000_000)
    fields = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "attempt": attempt if attempt and attempt >= 1 else 1,
        "call_id": a.text(N.CALL_ID) or "0102030405060708",
        "provider": X.provider(a),
        "request_model": a.text(*C.REQUEST_MODEL),
        "response_model": a.text(*C.RESPONSE_MODEL),
        "response_id": X.response_id(a),
        "ttft_s": X.ttft(a, _request({}, {}).resource_spans[0].scope_spans[0].spans[0], []),
        "server_address": X.server_address(a),
        "conversation_id": a.text(*C.CONVERSATION_ID),
        "agent_name": X.agent_name(a),
    }
    return fields, reasons


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(span=_ATTRS, resource=_ATTRS)
def test_the_key_table_reads_what_the_general_readers_read(span: dict[str, Any], resource: dict[str, Any]) -> None:
    # the task id names are left out of the resource: a conversation id there would be the task's, not the point here
    resource = {k: v for k, v in resource.items() if k not in C.CONVERSATION_ID}
    batch = normalize_request(_request(span, resource))
    want, reasons = _general(span, resource)
    call = batch.llm_calls[0]
    got = {k: getattr(call, k) for k in want}
    for k in ("ttft_s",):  # NaN never equals itself
        if got[k] != got[k] and want[k] != want[k]:
            got[k] = want[k] = "nan"
    assert got == want
    # each value the general readers skipped is skipped here, with the same reason
    assert batch.ignored_values == len(reasons)
    assert all(m in reasons or m.startswith("input tokens") for m in batch.messages), (batch.messages, reasons)


def test_records_are_built_positionally_in_their_field_order() -> None:
    # the normaliser builds these records positionally (keyword arguments cost several times more on the hot path):
    # a field added, removed or moved must be moved there too (_normalize._llm_call, _parse)
    assert [f.name for f in dataclasses.fields(LLMCallRecord)] == [
        "trace_id", "span_id", "task_id", "call_id", "attempt", "start_ns", "end_ns", "operation", "provider",
        "request_model", "response_model", "response_id", "input_tokens", "output_tokens", "cache_read_tokens",
        "cache_write_tokens", "reasoning_tokens", "ttft_s", "status", "error_type", "server_address", "service_name",
        "conversation_id", "agent_name", "agent_version", "harness_version", "engine", "engine_version",
        "quantization", "gpu_type", "gpu_count", "cluster_id", "deployment", "container_image_name",
        "container_image_tags", "k8s_cluster_name", "cloud_region", "pricing_attributes", "prompt_chars",
        "stable_prefix_chars", "prefix_break_block", "prefix_break_kind", "engine_detail",
    ]  # fmt: skip
    assert [f.name for f in dataclasses.fields(SpanRecord)] == [
        "trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status_code",
        "status_message", "service_name", "scope_name", "scope_version", "attributes", "resource_attributes", "events",
        "dropped_attributes_count", "dropped_events_count",
    ]  # fmt: skip


def test_every_field_lands_in_its_own_column() -> None:
    resource = {
        N.ENGINE: "vllm", N.ENGINE_VERSION: "0.7.0", N.QUANTIZATION: "fp8", N.GPU_TYPE: "H100", N.GPU_COUNT: 4,
        N.CLUSTER_ID: "c-1", N.DEPLOYMENT: "self_hosted", N.IMAGE_NAME: "img", N.IMAGE_TAGS: ["t1"],
        N.K8S_CLUSTER: "k8s-1", N.CLOUD_REGION: "eu-1", N.HARNESS_VERSION: "h-1", N.AGENT_VERSION: "av-1",
        N.SERVICE_NAME: "svc",
    }  # fmt: skip
    span = {
        N.PROVIDER: "openai", N.REQUEST_MODEL: "req-m", N.RESPONSE_MODEL: "resp-m", N.RESPONSE_ID: "rid-1",
        N.INPUT_TOKENS: 100, N.OUTPUT_TOKENS: 20, N.CACHE_READ_TOKENS: 30, N.CACHE_WRITE_TOKENS: 40,
        N.REASONING_TOKENS: 5, N.TTFT: 0.25, N.SERVER_ADDRESS: "api.example", N.CONVERSATION_ID: "conv-1",
        N.AGENT_NAME: "agent-1", N.CALL_ID: "call-1", N.CALL_ATTEMPT: 2, N.TASK_ID: "task-1",
        N.PROMPT_BLOCK_CHARS: [10, 20], N.PROMPT_STABLE_PREFIX_CHARS: 10, N.PROMPT_PREFIX_BREAK_BLOCK: 1,
        N.PROMPT_BLOCK_KINDS: ["system", "user"], N.PRICING_ATTRIBUTES[0]: "flex", N.ENGINE_DECODE_S: 1.5,
    }  # fmt: skip
    call = normalize_request(_request(span, resource)).llm_calls[0]
    assert (call.trace_id, call.span_id, call.task_id, call.call_id, call.attempt) == (
        bytes(range(1, 17)).hex(), bytes(range(1, 9)).hex(), "task-1", "call-1", 2
    )  # fmt: skip
    assert (call.start_ns, call.end_ns, call.operation, call.status, call.error_type) == (1, 2, "chat", "ok", None)
    assert (call.provider, call.request_model, call.response_model, call.response_id) == (
        "openai", "req-m", "resp-m", "rid-1"
    )  # fmt: skip
    assert (call.input_tokens, call.output_tokens, call.cache_read_tokens, call.cache_write_tokens) == (100, 20, 30, 40)
    assert (call.reasoning_tokens, call.ttft_s, call.server_address, call.service_name) == (
        5,
        0.25,
        "api.example",
        "svc",
    )
    assert (call.conversation_id, call.agent_name, call.agent_version, call.harness_version) == (
        "conv-1", "agent-1", "av-1", "h-1"
    )  # fmt: skip
    assert (call.engine, call.engine_version, call.quantization, call.gpu_type, call.gpu_count, call.cluster_id) == (
        "vllm", "0.7.0", "fp8", "H100", 4, "c-1"
    )  # fmt: skip
    assert (call.deployment, call.container_image_name, call.container_image_tags) == ("self_hosted", "img", ["t1"])
    assert (call.k8s_cluster_name, call.cloud_region, call.pricing_attributes) == (
        "k8s-1", "eu-1", {N.PRICING_ATTRIBUTES[0]: "flex"}
    )  # fmt: skip
    assert (call.prompt_chars, call.stable_prefix_chars, call.prefix_break_block, call.prefix_break_kind) == (
        30, 10, 1, "user"
    )  # fmt: skip
    assert call.engine_detail is not None and call.engine_detail.decode_s == 1.5
