"""The normaliser's field mapping, table-driven, on real protobuf messages."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from taskcost.normalize import normalize_request


def _kv(key: str, value: Any) -> KeyValue:
    v = AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    elif isinstance(value, list):
        v.array_value.values.extend(AnyValue(string_value=x) for x in value)
    else:
        v.string_value = value
    return KeyValue(key=key, value=v)


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
