"""The normaliser's field mapping, table-driven, on real protobuf messages."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from taskcost.normalize import key_value, normalize_request

_kv = key_value


def _request(span_attrs: dict[str, Any], resource: dict[str, Any] | None = None, error: bool = False):
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(_kv(k, v) for k, v in (resource or {}).items())
    span = rs.scope_spans.add().spans.add(
        trace_id=bytes(range(1, 17)),
        span_id=bytes(range(1, 9)),
        name="s",
        start_time_unix_nano=1_000,
        end_time_unix_nano=2_000,
    )
    span.attributes.extend(_kv(k, v) for k, v in span_attrs.items())
    if error:
        span.status.code = Status.STATUS_CODE_ERROR
    return req


CALL = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o"}


@pytest.mark.parametrize(
    ("attrs", "field", "expected"),
    [
        ({"gen_ai.usage.input_tokens": 10}, "input_tokens", 10),
        ({"gen_ai.usage.input_tokens": "12"}, "input_tokens", 12),
        ({"gen_ai.usage.input_tokens": 12.0}, "input_tokens", 12),
        ({"gen_ai.usage.input_tokens": -5}, "input_tokens", None),
        ({"gen_ai.usage.input_tokens": 10**18}, "input_tokens", None),
        ({"gen_ai.usage.output_tokens": 7}, "output_tokens", 7),
        ({"gen_ai.usage.cache_read.input_tokens": 3}, "cache_read_tokens", 3),
        ({"gen_ai.usage.cache_creation.input_tokens": 4}, "cache_write_tokens", 4),
        (
            {"gen_ai.usage.cache_write.input_tokens": 5, "gen_ai.usage.cache_creation.input_tokens": 5},
            "cache_write_tokens",
            5,
        ),
        ({"gen_ai.usage.reasoning.output_tokens": 6}, "reasoning_tokens", 6),
        ({"gen_ai.response.time_to_first_chunk": 0.5}, "ttft_s", 0.5),
        ({"gen_ai.response.model": "gpt-4o-2024-08-06"}, "response_model", "gpt-4o-2024-08-06"),
        ({"gen_ai.provider.name": None, "gen_ai.system": "anthropic"}, "provider", "anthropic"),
        ({"taskcost.call.id": "c1"}, "call_id", "c1"),
        ({}, "call_id", "0102030405060708"),
        ({"taskcost.call.attempt": 3}, "attempt", 3),
        ({}, "attempt", 1),
        ({"taskcost.task.id": "t9"}, "task_id", "t9"),
        ({}, "task_id", "trace:0102030405060708090a0b0c0d0e0f10"),
        ({"taskcost.deployment": "self_hosted"}, "deployment", "self_hosted"),
        ({"taskcost.deployment": "on_the_moon"}, "deployment", None),
        ({"taskcost.gpu.count": 8}, "gpu_count", 8),
        ({"container.image.tags": ["v1", "latest"]}, "container_image_tags", ["v1", "latest"]),
        ({"error.type": "timeout"}, "status", "error"),
    ],
)
def test_llm_call_fields(attrs: dict[str, Any], field: str, expected: Any) -> None:
    span_attrs = {k: v for k, v in {**CALL, **attrs}.items() if v is not None}
    batch = normalize_request(_request(span_attrs))
    assert len(batch.llm_calls) == 1
    assert getattr(batch.llm_calls[0], field) == expected


def test_resource_supplies_infra_tags_and_the_span_wins() -> None:
    resource = {
        "taskcost.engine.name": "vllm",
        "taskcost.gpu.type": "H100",
        "service.name": "bot",
        "k8s.cluster.name": "eu-1",
    }
    call = normalize_request(_request({**CALL, "taskcost.gpu.type": "A100"}, resource)).llm_calls[0]
    assert (call.engine, call.gpu_type, call.service_name, call.k8s_cluster_name) == (
        "vllm",
        "A100",
        "bot",
        "eu-1",
    )


def test_task_outcome_from_attribute_or_status() -> None:
    t = normalize_request(_request({"taskcost.task.kind": "k", "taskcost.task.outcome": "abandoned"})).tasks[0]
    assert t.outcome == "abandoned"
    t = normalize_request(_request({"taskcost.task.kind": "k"}, error=True)).tasks[0]
    assert t.outcome == "failed"
    t = normalize_request(_request({"taskcost.task.kind": "k"})).tasks[0]
    assert t.outcome == "completed"


def test_tool_cost_is_decimal_from_a_string() -> None:
    batch = normalize_request(_request({"gen_ai.tool.name": "search", "taskcost.tool.cost_usd": "0.005"}))
    assert batch.tool_calls[0].cost_usd == Decimal("0.005")
    batch = normalize_request(_request({"gen_ai.tool.name": "search", "taskcost.tool.cost_usd": "lots"}))
    assert batch.tool_calls[0].cost_usd is None


def test_plain_spans_are_kept_raw_only() -> None:
    batch = normalize_request(_request({"http.method": "GET"}))
    assert len(batch.spans) == 1 and not batch.llm_calls and not batch.tool_calls and not batch.tasks
    assert '"http.method":"GET"' in batch.spans[0].attributes


# -- every convention in the wild: conventions.md §2.3, one row per name --------------------------------------------

OI_JSON = {"output.mime_type": "application/json"}
# (row id, span attributes (no gen_ai.operation.name added), field of the LLM call, expected value)
MAPPING: list[tuple[str, dict[str, Any], str, Any]] = [
    # provider: OTel -> deprecated OTel -> OpenInference llm.provider -> llm.system; names made OTel ids
    ("provider otel", {"gen_ai.provider.name": "openai"}, "provider", "openai"),
    ("provider deprecated gen_ai.system", {"gen_ai.system": "anthropic"}, "provider", "anthropic"),
    ("provider oi llm.provider", {"llm.provider": "mistralai"}, "provider", "mistral_ai"),
    ("provider oi llm.system", {"llm.system": "vertexai"}, "provider", "gcp.vertex_ai"),
    ("provider otel beats oi", {"gen_ai.provider.name": "openai", "llm.provider": "azure"}, "provider", "openai"),
    ("provider system beats oi", {"gen_ai.system": "cohere", "llm.system": "openai"}, "provider", "cohere"),
    ("provider legacy xai", {"gen_ai.system": "xai"}, "provider", "x_ai"),
    ("provider legacy capitalised", {"gen_ai.system": "OpenAI"}, "provider", "openai"),
    ("provider legacy az.ai", {"gen_ai.system": "az.ai.openai"}, "provider", "azure.ai.openai"),
    ("provider oi google", {"llm.provider": "google"}, "provider", "gcp.gen_ai"),
    ("provider oi azure", {"llm.provider": "azure"}, "provider", "azure.ai.openai"),
    ("provider oi aws", {"llm.provider": "aws"}, "provider", "aws.bedrock"),
    ("provider oi moonshot", {"llm.provider": "moonshot"}, "provider", "moonshot_ai"),
    ("provider unknown kept", {"gen_ai.provider.name": "My-Gateway"}, "provider", "My-Gateway"),
    # models
    ("request model otel", {"gen_ai.request.model": "gpt-4o"}, "request_model", "gpt-4o"),
    ("request model oi request", {"llm.request.model_name": "claude-x"}, "request_model", "claude-x"),
    ("request model oi model_name", {"llm.model_name": "gpt-4o-mini"}, "request_model", "gpt-4o-mini"),
    (
        "request model oi embedding",
        {"embedding.model_name": "text-embedding-3-small"},
        "request_model",
        "text-embedding-3-small",
    ),
    (
        "request model otel beats oi",
        {"gen_ai.request.model": "a", "llm.request.model_name": "b", "llm.model_name": "c"},
        "request_model",
        "a",
    ),
    ("response model otel", {"gen_ai.response.model": "gpt-4o-2024-08-06"}, "response_model", "gpt-4o-2024-08-06"),
    ("response model oi response", {"llm.response.model_name": "claude-y"}, "response_model", "claude-y"),
    ("response model oi model_name", {"llm.model_name": "m1"}, "response_model", "m1"),
    (
        "response model oi beats fallback",
        {"llm.response.model_name": "r", "llm.model_name": "m"},
        "response_model",
        "r",
    ),
    # operation
    ("operation otel", {"gen_ai.operation.name": "embeddings"}, "operation", "embeddings"),
    ("operation oi LLM", {"openinference.span.kind": "LLM"}, "operation", "chat"),
    ("operation oi EMBEDDING", {"openinference.span.kind": "EMBEDDING"}, "operation", "embeddings"),
    ("operation openllmetry request type", {"llm.request.type": "completion"}, "operation", "text_completion"),
    ("operation default", {}, "operation", "chat"),
    # input tokens (inclusive of cache in every family)
    ("input otel", {"gen_ai.usage.input_tokens": 1200}, "input_tokens", 1200),
    ("input deprecated prompt_tokens", {"gen_ai.usage.prompt_tokens": 1100}, "input_tokens", 1100),
    ("input oi", {"llm.token_count.prompt": 1000}, "input_tokens", 1000),
    (
        "input otel beats deprecated",
        {"gen_ai.usage.input_tokens": 9, "gen_ai.usage.prompt_tokens": 8},
        "input_tokens",
        9,
    ),
    ("input deprecated beats oi", {"gen_ai.usage.prompt_tokens": 8, "llm.token_count.prompt": 7}, "input_tokens", 8),
    # output tokens
    ("output otel", {"gen_ai.usage.output_tokens": 30}, "output_tokens", 30),
    ("output deprecated completion_tokens", {"gen_ai.usage.completion_tokens": 31}, "output_tokens", 31),
    ("output oi", {"llm.token_count.completion": 32}, "output_tokens", 32),
    ("output otel beats oi", {"gen_ai.usage.output_tokens": 30, "llm.token_count.completion": 60}, "output_tokens", 30),
    # cache reads
    (
        "cache read otel",
        {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.cache_read.input_tokens": 80},
        "cache_read_tokens",
        80,
    ),
    (
        "cache read oi",
        {"llm.token_count.prompt": 100, "llm.token_count.prompt_details.cache_read": 81},
        "cache_read_tokens",
        81,
    ),
    (
        "cache read openllmetry legacy",
        {"gen_ai.usage.prompt_tokens": 100, "gen_ai.usage.cache_read_input_tokens": 82},
        "cache_read_tokens",
        82,
    ),
    ("cache read vllm", {"gen_ai.usage.prompt_tokens": 100, "gen_ai.usage.cached_tokens": 83}, "cache_read_tokens", 83),
    (
        "cache read otel beats oi",
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.cache_read.input_tokens": 80,
            "llm.token_count.prompt_details.cache_read": 70,
        },
        "cache_read_tokens",
        80,
    ),
    # cache writes: the semconv-genai rename first, then the v1.40 name, OpenInference, OpenLLMetry legacy
    (
        "cache write new name",
        {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.cache_write.input_tokens": 20},
        "cache_write_tokens",
        20,
    ),
    (
        "cache write v1.40 name",
        {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.cache_creation.input_tokens": 21},
        "cache_write_tokens",
        21,
    ),
    (
        "cache write new beats old",
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.cache_write.input_tokens": 22,
            "gen_ai.usage.cache_creation.input_tokens": 99,
        },
        "cache_write_tokens",
        22,
    ),
    (
        "cache write oi",
        {"llm.token_count.prompt": 100, "llm.token_count.prompt_details.cache_write": 23},
        "cache_write_tokens",
        23,
    ),
    (
        "cache write openllmetry legacy",
        {"gen_ai.usage.prompt_tokens": 100, "gen_ai.usage.cache_creation_input_tokens": 24},
        "cache_write_tokens",
        24,
    ),
    # reasoning
    (
        "reasoning otel",
        {"gen_ai.usage.output_tokens": 50, "gen_ai.usage.reasoning.output_tokens": 10},
        "reasoning_tokens",
        10,
    ),
    (
        "reasoning oi",
        {"llm.token_count.completion": 50, "llm.token_count.completion_details.reasoning": 11},
        "reasoning_tokens",
        11,
    ),
    (
        "reasoning openllmetry",
        {"gen_ai.usage.output_tokens": 50, "gen_ai.usage.reasoning_tokens": 12},
        "reasoning_tokens",
        12,
    ),
    (
        "reasoning openllmetry legacy",
        {"gen_ai.usage.output_tokens": 50, "llm.usage.reasoning_tokens": 13},
        "reasoning_tokens",
        13,
    ),
    # totals: never summed in; they only fill a missing input or output
    ("total oi fills output", {"llm.token_count.prompt": 100, "llm.token_count.total": 130}, "output_tokens", 30),
    (
        "total openllmetry fills output",
        {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.total_tokens": 140},
        "output_tokens",
        40,
    ),
    (
        "total legacy fills input",
        {"gen_ai.usage.completion_tokens": 10, "llm.usage.total_tokens": 110},
        "input_tokens",
        100,
    ),
    (
        "total never overrides",
        {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 5, "llm.token_count.total": 999},
        "output_tokens",
        5,
    ),
    # response id: OTel, else the id in OpenInference's JSON output.value
    ("response id otel", {"gen_ai.response.id": "chatcmpl-1"}, "response_id", "chatcmpl-1"),
    (
        "response id oi output.value",
        {**OI_JSON, "output.value": '{"choices": [{"id": "x"}], "id": "msg_01"}'},
        "response_id",
        "msg_01",
    ),
    (
        "response id oi not json",
        {"output.mime_type": "text/plain", "output.value": '{"id": "msg_01"}'},
        "response_id",
        None,
    ),
    ("response id oi junk", {**OI_JSON, "output.value": "{not json"}, "response_id", None),
    # time to first token
    ("ttft otel", {"gen_ai.response.time_to_first_chunk": 0.25}, "ttft_s", 0.25),
    ("ttft vllm", {"gen_ai.latency.time_to_first_token": 0.125}, "ttft_s", 0.125),
    ("ttft openlit streamed", {"gen_ai.request.stream": True, "gen_ai.server.time_to_first_token": 0.5}, "ttft_s", 0.5),
    (
        "ttft streamed flag openllmetry",
        {"gen_ai.is_streaming": True, "gen_ai.server.time_to_first_token": 0.4},
        "ttft_s",
        0.4,
    ),
    (
        "ttft streamed flag legacy",
        {"llm.is_streaming": "true", "gen_ai.server.time_to_first_token": 0.3},
        "ttft_s",
        0.3,
    ),
    ("ttft openlit not streamed is latency", {"gen_ai.server.time_to_first_token": 2.0}, "ttft_s", None),
    # context
    ("conversation otel", {"gen_ai.conversation.id": "c1"}, "conversation_id", "c1"),
    ("conversation oi session", {"session.id": "s1"}, "conversation_id", "s1"),
    ("conversation traceloop", {"traceloop.association.properties.session_id": "s2"}, "conversation_id", "s2"),
    ("conversation otel beats oi", {"gen_ai.conversation.id": "c1", "session.id": "s1"}, "conversation_id", "c1"),
    ("agent otel", {"gen_ai.agent.name": "reviewer"}, "agent_name", "reviewer"),
    ("agent oi", {"agent.name": "planner"}, "agent_name", "planner"),
    (
        "agent traceloop entity of a task is not an agent",
        {"traceloop.span.kind": "task", "traceloop.entity.name": "step"},
        "agent_name",
        None,
    ),
    ("server otel", {"server.address": "api.openai.com"}, "server_address", "api.openai.com"),
    (
        "server openllmetry api_base",
        {"gen_ai.openai.api_base": "http://10.0.0.7:8080/v1/"},
        "server_address",
        "10.0.0.7",
    ),
    ("error type otel", {"error.type": "RateLimitError"}, "error_type", "RateLimitError"),
]


@pytest.mark.parametrize(("attrs", "field", "expected"), [m[1:] for m in MAPPING], ids=[m[0] for m in MAPPING])
def test_every_convention_maps_to_the_canonical_field(attrs: dict[str, Any], field: str, expected: Any) -> None:
    attrs = {"gen_ai.usage.input_tokens": 1, **attrs} if not _has_usage(attrs) else attrs
    batch = normalize_request(_request(attrs))
    assert len(batch.llm_calls) == 1, batch
    assert getattr(batch.llm_calls[0], field) == expected


def _has_usage(attrs: dict[str, Any]) -> bool:
    from taskcost.normalize._extract import span_has_usage

    return (
        span_has_usage(attrs)
        or attrs.get("openinference.span.kind") in ("LLM", "EMBEDDING")
        or bool({"gen_ai.operation.name", "llm.request.type"} & set(attrs))
    )


def test_every_name_the_normaliser_reads_has_a_mapping_row() -> None:
    """A new name in the table must come with a row above (the test table cannot silently fall behind)."""
    from taskcost.normalize._conventions import READ_NAMES

    covered = {k for _, attrs, _, _ in MAPPING for k in attrs} | set(CALL) | {k for attrs, _ in ROLES for k in attrs}
    covered |= {"traceloop.workflow.name", "gen_ai.workflow.name"}  # tests/test_interop_tasks.py
    missing = sorted(set(READ_NAMES) - covered)
    assert not missing, f"names read by the normaliser without a mapping row: {missing}"


def test_ttft_from_the_first_chunk_event_when_no_attribute_says_it() -> None:
    from tests.interop.otlp import S, request

    oi = S(
        "ChatCompletion",
        1,
        attrs={"openinference.span.kind": "LLM", "llm.token_count.prompt": 5},
        start_ms=0,
        events=[("First Token Stream Event", 250, {})],
    )
    ol = S(
        "openai.chat",
        2,
        trace=2,
        attrs={"gen_ai.operation.name": "chat", "gen_ai.is_streaming": True, "gen_ai.usage.input_tokens": 5},
        start_ms=0,
        events=[("gen_ai.content.completion.chunk", 400, {}), ("gen_ai.content.completion.chunk", 500, {})],
    )
    calls = {c.span_id: c for c in normalize_request(request(oi, ol)).llm_calls}
    assert [calls[s].ttft_s for s in sorted(calls)] == [0.25, 0.4]


def test_error_type_from_the_exception_event_when_error_type_is_absent() -> None:
    from tests.interop.otlp import S, request

    span = S(
        "ChatCompletion",
        1,
        attrs={"openinference.span.kind": "LLM"},
        error="BadRequestError: 400",
        events=[("exception", 10, {"exception.type": "openai.BadRequestError"})],
    )
    [call] = normalize_request(request(span)).llm_calls
    assert (call.status, call.error_type) == ("error", "openai.BadRequestError")


def test_both_conventions_on_one_span_count_once() -> None:
    """An OTel name and an OpenInference name for the same count: read once, never summed."""
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "llm.provider": "openai",
        "gen_ai.request.model": "gpt-4o",
        "llm.model_name": "gpt-4o",
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.prompt_tokens": 1200,
        "llm.token_count.prompt": 1200,
        "gen_ai.usage.output_tokens": 300,
        "llm.token_count.completion": 300,
        "gen_ai.usage.total_tokens": 1500,
        "llm.token_count.total": 1500,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "llm.token_count.prompt_details.cache_read": 1000,
        "gen_ai.usage.cache_creation.input_tokens": 100,
        "gen_ai.usage.cache_write.input_tokens": 100,
        "llm.token_count.prompt_details.cache_write": 100,
        "gen_ai.usage.reasoning.output_tokens": 50,
        "llm.token_count.completion_details.reasoning": 50,
        "openinference.span.kind": "LLM",
    }
    batch = normalize_request(_request(attrs))
    [call] = batch.llm_calls
    assert (call.input_tokens, call.output_tokens, call.cache_read_tokens, call.cache_write_tokens) == (
        1200,
        300,
        1000,
        100,
    )
    assert call.reasoning_tokens == 50 and call.provider == "openai" and call.operation == "chat"
    assert not batch.messages


def test_conventions_mix_field_by_field_when_one_lacks_a_count() -> None:
    """OTel input and output, the cache read only under the OpenInference name: each field read once."""
    attrs = {
        "gen_ai.usage.input_tokens": 1200,
        "gen_ai.usage.output_tokens": 300,
        "llm.token_count.prompt": 1200,
        "llm.token_count.prompt_details.cache_read": 1000,
    }
    [call] = normalize_request(_request(attrs)).llm_calls
    assert (call.input_tokens, call.cache_read_tokens, call.output_tokens) == (1200, 1000, 300)


def test_cache_exclusive_input_is_made_inclusive_with_a_warning() -> None:
    """Anthropic's raw counts (input 200 exclusive of 1,800 read and 500 written) become an inclusive 2,500."""
    attrs = {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.usage.input_tokens": 200,
        "gen_ai.usage.cache_read.input_tokens": 1800,
        "gen_ai.usage.cache_creation.input_tokens": 500,
        "gen_ai.usage.output_tokens": 120,
    }
    batch = normalize_request(_request(attrs))
    assert batch.llm_calls[0].input_tokens == 2500
    assert any("exclusive of cache" in m for m in batch.messages)
    # an inclusive count is left alone
    ok = normalize_request(_request({**attrs, "gen_ai.usage.input_tokens": 2500}))
    assert ok.llm_calls[0].input_tokens == 2500 and not ok.messages


def test_vllm_server_spans_are_engine_spans_not_calls() -> None:
    from tests.interop.otlp import S, request

    span = S(
        "llm_request",
        1,
        scope="vllm.v1.engine.output_processor",
        attrs={
            "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
            "gen_ai.request.id": "cmpl-abc",
            "gen_ai.usage.prompt_tokens": 900,
            "gen_ai.usage.completion_tokens": 64,
            "gen_ai.usage.cached_tokens": 512,
            "gen_ai.latency.time_to_first_token": 0.08,
        },
    )
    batch = normalize_request(request(span))
    assert batch.llm_calls == []  # the client's span is the call (tests/test_engine_spans.py)
    [engine] = batch.engine_spans
    assert (engine.prompt_tokens, engine.completion_tokens, engine.cached_tokens, engine.ttft_s) == (900, 64, 512, 0.08)
    assert (engine.engine, engine.request_id, engine.response_model) == (
        "vllm",
        "cmpl-abc",
        "meta-llama/Llama-3.1-8B-Instruct",
    )


ROLES: list[tuple[dict[str, Any], str | None]] = [
    ({"openinference.span.kind": "TOOL", "tool.name": "search"}, "tool"),
    ({"traceloop.span.kind": "tool", "traceloop.entity.name": "search"}, "tool"),
    ({"openinference.span.kind": "LLM"}, "llm"),
    ({"openinference.span.kind": "EMBEDDING", "embedding.model_name": "e"}, "llm"),
    ({"llm.request.type": "chat"}, "llm"),
    # agent and workflow spans carry the sum of their calls' usage: never an LLM call of their own
    ({"openinference.span.kind": "AGENT", "llm.token_count.prompt": 900}, None),
    ({"gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 900}, None),
    ({"traceloop.span.kind": "workflow", "gen_ai.usage.input_tokens": 900}, None),
    # openlit puts the requested tool's name on the chat span: still the LLM call
    ({"gen_ai.operation.name": "chat", "gen_ai.tool.name": "get_weather", "gen_ai.usage.input_tokens": 9}, "llm"),
    ({"gen_ai.tool.name": "get_weather", "gen_ai.usage.input_tokens": 9}, "llm"),
    ({"openinference.span.kind": "RETRIEVER"}, None),
]


@pytest.mark.parametrize(("attrs", "role"), ROLES)
def test_span_role_across_conventions(attrs: dict[str, Any], role: str | None) -> None:
    from tests.interop.otlp import S, request

    # a parent span keeps the test span from being a trace root (roots may become tasks)
    batch = normalize_request(
        request(S("root", 1, attrs={"taskcost.task.kind": "k"}), S("s", 2, parent=1, attrs=attrs))
    )
    found = {"llm": [c.span_id for c in batch.llm_calls], "tool": [t.span_id for t in batch.tool_calls]}
    got = [r for r, ids in found.items() if "0000000000000002" in ids]
    assert got == ([role] if role else [])
    if role == "tool":
        assert batch.tool_calls[0].tool_name == "search"


def test_the_conventions_page_lists_every_name_read_and_every_provider_translation() -> None:
    from pathlib import Path

    from taskcost.normalize import _conventions as C

    page = (Path(__file__).resolve().parent.parent / "docs" / "conventions.md").read_text()
    missing = sorted(n for n in C.READ_NAMES if f"`{n}`" not in page)
    assert not missing, f"docs/conventions.md does not mention: {missing}"
    untold = sorted(k for k, v in C.PROVIDER_OTEL_IDS.items() if k != v and f"`{k}`" not in page)
    assert not untold, f"provider translations missing from docs/conventions.md: {untold}"


def test_a_span_the_sdk_marked_as_a_duplicate_is_kept_raw_and_never_costed() -> None:
    usage = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 5}
    batch = normalize_request(_request({**CALL, **usage, "taskcost.call.duplicate_of": "call-1"}))
    assert len(batch.spans) == 1 and batch.llm_calls == []
    assert len(normalize_request(_request({**CALL, **usage})).llm_calls) == 1
