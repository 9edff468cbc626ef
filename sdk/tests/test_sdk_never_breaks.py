"""The SDK never hurts the agent: no exception reaches user code, no collector problem slows a call."""

from __future__ import annotations

import logging
import socket
import statistics
import time
from typing import Any

import openai
import pytest
from sdk_exporting import stop_exporting

import taskcost_sdk as tc
from taskcost_sdk._internal import auto, config, usage
from taskcost_sdk.testing import CapturedSpans
from tests.fake_llm import FakeCollector, FakeLLM

MESSAGES = [{"role": "user", "content": "hi"}]


def _explode(*args: object, **kwargs: object) -> Any:
    raise RuntimeError("sdk bug")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(
    ("owner", "name"),
    [
        (auto.AutoCall, "__init__"),
        (auto.AutoCall, "begin_attempt"),
        (auto.AutoCall, "attempt_response"),
        (auto.AutoCall, "finish"),
        (usage.ChatStream, "feed"),
    ],
)
def test_internal_errors_never_reach_the_agent(
    taskcost_spans: CapturedSpans,
    llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    owner: type,
    name: str,
) -> None:
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "0")
    monkeypatch.setattr(owner, name, _explode)
    c = openai.OpenAI(base_url=llm.openai_url, api_key="k")
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"), tc.task("t"):
        for _ in range(2):
            answer = c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
            assert answer.choices[0].message.content == "Hello there, agent."
            pieces = [
                ch.choices[0].delta.content
                for ch in c.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
                if ch.choices
            ]
            assert "".join(p or "" for p in pieces) == "Hello there, agent."
    assert caplog.text.count("taskcost_sdk internal error") >= 1
    assert caplog.text.count("sdk bug") <= 3  # logged once per site, not per call
    assert [a["taskcost.task.outcome"] for a in taskcost_spans.attributes("task ")] == ["completed"]


@pytest.mark.usefixtures("instrumented")
def test_internal_errors_raise_in_this_projects_tests(
    taskcost_spans: CapturedSpans, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auto.AutoCall, "begin_attempt", _explode)
    with pytest.raises(RuntimeError, match="sdk bug"):
        openai.OpenAI(base_url=llm.openai_url, api_key="k").chat.completions.create(model="m", messages=MESSAGES)


def test_nonsense_from_user_code_is_dropped_not_raised(
    taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "0")
    nonsense: Any = None
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"), tc.task(nonsense) as t:
        with t.llm_call(nonsense, nonsense, attempt=-3, retry_of="x") as c:
            c.set_usage(input_tokens=-5, output_tokens=nonsense, cache_read_tokens=10**30 * -1)
            c.set_ttft(-1.0)
            c.set_response(model=nonsense, finish_reasons=nonsense)
            c.set_prompt(nonsense, system=object(), tools=nonsense)
        t.record_llm_call(nonsense, "gpt-4o", input_tokens=-1, output_tokens=-1, start_time="yesterday")
        with t.tool(nonsense, cost_usd=-4):
            pass
        t.set_outcome(nonsense)
    [first, second] = taskcost_spans.attributes("chat")
    assert first["taskcost.call.attempt"] == 1 and "gen_ai.request.model" not in first
    assert [s.name for s in taskcost_spans.spans()] == ["chat", "chat gpt-4o", "execute_tool unknown", "task unknown"]
    assert not [k for k in first if k.startswith("gen_ai.usage.")]
    assert "dropped input_tokens=-5" in caplog.text and "without a model" in caplog.text


@pytest.mark.usefixtures("instrumented")
def test_collector_down_slow_or_503_does_not_slow_calls(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")  # export while the agent works
    # a call that waited on an export would wait as long as the export's timeout: 5 s (the bad collectors answer in 6
    # or never), far above a stall of a loaded machine (up to ~1 s seen on a 2-core CI machine running the suite)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    c = openai.OpenAI(base_url=llm.openai_url, api_key="k")
    c.chat.completions.create(model="warm-up", messages=MESSAGES)
    providers = []

    def latency(endpoint: str) -> tuple[float, float]:
        """(median, longest) seconds per instrumented call while exporting to ``endpoint``."""
        tc.configure(endpoint=endpoint)
        providers.append(config._state.provider)
        latencies = []
        with tc.task("t") as t:
            for _ in range(40):
                started = time.perf_counter()
                c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
                with t.tool("grep"):
                    pass
                latencies.append(time.perf_counter() - started)
                time.sleep(0.002)  # give the export thread room to run into the bad collector
        started = time.perf_counter()
        tc.shutdown(timeout_millis=300)
        assert time.perf_counter() - started < 1.5  # bounded, even against a hanging collector
        return statistics.median(latencies), max(latencies)

    with FakeCollector("ok") as healthy:
        baseline, _ = latency(healthy.url)
        assert healthy.requests >= 1
    results = {"down": latency(f"http://127.0.0.1:{_closed_port()}")}
    for mode in ("503", "slow", "hang"):
        with FakeCollector(mode, delay=6.0) as bad:  # type: ignore[arg-type]
            results[mode] = latency(bad.url)
            assert bad.requests >= 1  # the exporter really ran into it
    for provider in providers:
        stop_exporting(provider)
    print(f"median call: healthy {baseline * 1e3:.2f} ms,", {m: f"{v[0] * 1e3:.2f} ms" for m, v in results.items()})
    for mode, (median, longest) in results.items():
        assert median < baseline * 1.5 + 0.003, (mode, median, baseline)  # no systematic slow-down
        assert longest < 2.5, (mode, longest)  # and no call waited on an export (it would wait its 5 s timeout)


def test_full_export_queue_drops_and_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "16")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8")
    with FakeCollector("hang") as hanging:
        tc.configure(endpoint=hanging.url)
        provider = config._state.provider
        started = time.perf_counter()
        with tc.task("t") as t:
            for _ in range(200):
                t.record_llm_call("openai", "gpt-4o", input_tokens=10, output_tokens=1)
        assert time.perf_counter() - started < 0.5
        assert tc.export_stats().dropped > 100
        tc.shutdown(timeout_millis=200)
    stop_exporting(provider)  # once the collector stopped hanging


def test_beside_an_existing_tracer_provider(taskcost_spans: CapturedSpans) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    theirs = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(theirs))
    tracer = app_provider.get_tracer("app")
    with tracer.start_as_current_span("request") as request, tc.task("t"), tracer.start_as_current_span("app work"):
        tc.record_llm_call("openai", "gpt-4o", input_tokens=1, output_tokens=1)
    assert [s.name for s in theirs.get_finished_spans()] == ["app work", "request"]
    task_span = taskcost_spans.spans("task ")[0]
    assert task_span.context.trace_id == request.get_span_context().trace_id  # one trace across both
    assert len(taskcost_spans.spans()) == 2
