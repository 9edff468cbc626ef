from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import taskcost_sdk as tc
from taskcost_sdk._internal.values import coerce_cost, coerce_count, resolve_times
from taskcost_sdk.testing import CapturedSpans


class RateLimitError(Exception):
    pass


def test_llm_call_attributes_exact(taskcost_spans: CapturedSpans) -> None:
    with tc.task("bug_fix", "t-1") as t, t.llm_call("anthropic", "claude-sonnet-4", call_id="c-1") as c:
        c.set_usage(
            input_tokens=1500,
            output_tokens=300,
            cache_read_tokens=1000,
            cache_write_tokens=200,
            reasoning_tokens=50,
        )
        c.set_response(model="claude-sonnet-4-20250514", response_id="msg_1", finish_reasons=["stop"])
        c.set_ttft(0.25)
    [span] = taskcost_spans.spans("chat ")
    assert span.name == "chat claude-sonnet-4"
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4",
        "gen_ai.response.model": "claude-sonnet-4-20250514",
        "gen_ai.response.id": "msg_1",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.time_to_first_chunk": 0.25,
        "gen_ai.usage.input_tokens": 1500,
        "gen_ai.usage.output_tokens": 300,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "gen_ai.usage.cache_creation.input_tokens": 200,
        "gen_ai.usage.reasoning.output_tokens": 50,
        "taskcost.call.id": "c-1",
        "taskcost.call.attempt": 1,
        "taskcost.task.id": "t-1",
    }


def test_retry_of_shares_call_id(taskcost_spans: CapturedSpans) -> None:
    with tc.task("bug_fix") as t:
        with t.llm_call("openai", "gpt-4o") as first:
            first.set_error("429")
        with t.llm_call("openai", "gpt-4o", retry_of=first) as second:
            second.set_usage(input_tokens=10, output_tokens=2)
        third = t.record_llm_call("openai", "gpt-4o", input_tokens=10, output_tokens=2, retry_of=second)
    assert len(first.call_id) == 32
    assert (second.call_id, second.attempt) == (first.call_id, 2)
    assert (third.call_id, third.attempt) == (first.call_id, 3)
    calls = taskcost_spans.attributes("chat ")
    assert [a["taskcost.call.attempt"] for a in calls] == [1, 2, 3]
    assert {a["taskcost.call.id"] for a in calls} == {first.call_id}
    failed = taskcost_spans.spans("chat ")[0]
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "429"
    assert "error.type" not in calls[1]


def test_user_exception_in_call_propagates(taskcost_spans: CapturedSpans) -> None:
    error = RateLimitError("slow down")
    with pytest.raises(RateLimitError) as caught, tc.llm_call("openai", "gpt-4o"):
        raise error
    assert caught.value is error
    [span] = taskcost_spans.spans()
    assert (span.attributes or {})["error.type"] == "RateLimitError"
    assert span.status.status_code is StatusCode.ERROR


def test_set_error_type_wins_over_exception_class(taskcost_spans: CapturedSpans) -> None:
    with pytest.raises(TimeoutError), tc.llm_call("openai", "gpt-4o") as c:
        c.set_error("timeout")
        raise TimeoutError
    [attrs] = taskcost_spans.attributes()
    assert attrs["error.type"] == "timeout"


def test_record_llm_call_times_and_fields(taskcost_spans: CapturedSpans) -> None:
    start = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    call = tc.record_llm_call(
        "openai",
        "gpt-4o",
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=60,
        ttft_s=0.5,
        error_type="timeout",
        response_model="gpt-4o-2024-08-06",
        response_id="resp-1",
        start_time=start,
        duration_s=2.5,
        engine="api",
        deployment="api",
    )
    [span] = taskcost_spans.spans()
    assert span.start_time == 1735787045678901000
    assert span.end_time == span.start_time + 2_500_000_000
    assert span.status.status_code is StatusCode.ERROR
    attrs = dict(span.attributes or {})
    assert attrs["taskcost.call.id"] == call.call_id
    assert attrs["taskcost.call.attempt"] == 1
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 60
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert attrs["gen_ai.response.time_to_first_chunk"] == 0.5
    assert attrs["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    assert attrs["taskcost.engine.name"] == "api"
    assert attrs["taskcost.deployment"] == "api"
    assert "taskcost.task.id" not in attrs


def test_record_llm_call_epoch_ns_and_task(taskcost_spans: CapturedSpans) -> None:
    with tc.task("report") as t:
        pass
    tc.record_llm_call("openai", "m", input_tokens=1, output_tokens=1, start_time=10**18, end_time=10**18 + 5, task=t)
    [span] = taskcost_spans.spans("chat ")
    assert (span.start_time, span.end_time) == (10**18, 10**18 + 5)
    assert (span.attributes or {})["taskcost.task.id"] == t.id


def test_resolve_times() -> None:
    now = 2_000_000_000_000_000_000
    assert resolve_times(None, None, None, now) == (now, now)
    assert resolve_times(None, None, 1.5, now) == (now - 1_500_000_000, now)
    assert resolve_times(100, None, None, now) == (100, now)
    assert resolve_times(100, 200, 99.0, now) == (100, 200)
    end = datetime(2025, 1, 1, tzinfo=UTC)
    start_ns, end_ns = resolve_times(end - timedelta(seconds=1), end, None, now)
    assert end_ns - start_ns == 1_000_000_000


def test_infra_overrides_on_call(taskcost_spans: CapturedSpans) -> None:
    with tc.llm_call(
        "vllm",
        "llama",
        engine="vllm",
        engine_version="0.11.0",
        quantization="fp8",
        gpu_type="H100-SXM",
        gpu_count=8,
        cluster_id="c1",
        deployment="self_hosted",
        server_address="gpu-node-1",
    ):
        pass
    [attrs] = taskcost_spans.attributes()
    expected = {
        "taskcost.engine.name": "vllm",
        "taskcost.engine.version": "0.11.0",
        "taskcost.quantization": "fp8",
        "taskcost.gpu.type": "H100-SXM",
        "taskcost.gpu.count": 8,
        "taskcost.cluster.id": "c1",
        "taskcost.deployment": "self_hosted",
        "server.address": "gpu-node-1",
    }
    assert attrs.items() >= expected.items()


def test_bad_override_is_dropped_not_raised(taskcost_spans: CapturedSpans) -> None:
    bad: dict[str, Any] = {"deployment": "on_prem", "gpu_count": -1, "colour": "red", "engine": "vllm"}
    with tc.llm_call("vllm", "llama", **bad):
        pass
    [attrs] = taskcost_spans.attributes()
    assert attrs["taskcost.engine.name"] == "vllm"
    assert "taskcost.deployment" not in attrs and "taskcost.gpu.count" not in attrs


def test_nonsense_tokens_do_not_raise(
    taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "0")
    nonsense: dict[str, Any] = {
        "input_tokens": -5,
        "output_tokens": "many",
        "cache_read_tokens": None,
        "cache_write_tokens": 1.5,
        "reasoning_tokens": object(),
    }
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"):
        with tc.llm_call("openai", "gpt-4o") as c:
            c.set_usage(**nonsense)
            c.set_ttft(float("nan"))
        tc.record_llm_call("openai", "gpt-4o", **nonsense)
        with tc.tool("t", cost_usd="lots"):
            pass
    for attrs in taskcost_spans.attributes("chat "):
        assert not [k for k in attrs if k.startswith("gen_ai.usage.") or k.endswith("time_to_first_chunk")]
    assert "taskcost.tool.cost_usd" not in taskcost_spans.attributes("execute_tool ")[0]
    assert "dropped input_tokens=-5" in caplog.text
    assert caplog.text.count("dropped input_tokens") == 1  # once, not per call


def test_token_strings_and_integral_floats_accepted(taskcost_spans: CapturedSpans) -> None:
    with tc.llm_call("openai", "gpt-4o") as c:
        c.set_usage(input_tokens="12", output_tokens=3.0)  # type: ignore[arg-type]
    [attrs] = taskcost_spans.attributes()
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (12, 3)


def test_cache_exceeding_input_warns(taskcost_spans: CapturedSpans, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"), tc.llm_call("anthropic", "claude") as c:
        c.set_usage(input_tokens=10, output_tokens=5, cache_read_tokens=900)
    assert "input_tokens must include cache" in caplog.text
    assert taskcost_spans.attributes()[0]["gen_ai.usage.input_tokens"] == 10  # kept as given


def test_coercions() -> None:
    assert [coerce_count(v) for v in (0, 7, "7", 7.0, -1, True, "x", 1.5, None)] == [0, 7, 7, 7] + [None] * 5
    assert coerce_cost(0.1) == "0.1"
    assert coerce_cost(Decimal("0.005")) == "0.005"
    assert coerce_cost(1e-7) == "0.0000001"
    assert coerce_cost(3) == "3"
    assert coerce_cost(" 2.50 ") == "2.50"
    assert [coerce_cost(v) for v in ("abc", -1, float("inf"), True, None, "NaN")] == [None] * 6
