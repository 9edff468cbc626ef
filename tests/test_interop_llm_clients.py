"""Unchanged agent code, real instrumentations, real client libraries, the real collector process.

The real `openai` and `anthropic` clients talk to a local OpenAI-/Anthropic-compatible HTTP server (the one fake: the
paid API) that reports prompt-cache hits. Each instrumentation runs in its own process with the real OTLP/HTTP
exporter pointed at `taskcost serve`. Every way of recording a call must land with the same tokens and the same cost
as the taskcost SDK records for the same responses, and once, however many spans describe it.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from taskcost.demo.fake_llm import FakeLLM
from tests.conftest import Server
from tests.interop.fake_llm import interop_llm
from tests.interop.runner import calls_by_service, priced, run_modes, sql

M = Decimal(1_000_000)
# list prices (USD per million tokens) as the providers publish them
# gpt-4o: input 2.50, cached input 1.25, output 10.00; 1,200 prompt tokens of which 1,000 cached, 300 out
GPT4O = (200 * Decimal("2.50") + 1_000 * Decimal("1.25") + 300 * Decimal("10.00")) / M
# claude-sonnet-4-5: input 3.00, cache read 0.30, cache write 3.75, output 15.00; the API says input 200
# (exclusive), 1,800 read, 500 written, 120 out
SONNET = (200 * Decimal("3.00") + 1_800 * Decimal("0.30") + 500 * Decimal("3.75") + 120 * Decimal("15.00")) / M


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with interop_llm() as llm:
        yield llm


def test_openai_through_openllmetry_and_openinference_costs_what_the_sdk_records(
    server: Server, fake_llm: FakeLLM
) -> None:
    modes = ["openai-sdk", "openai-openllmetry", "openai-openinference"]
    run_modes(modes, server.url, fake_llm.url)
    assert len(fake_llm.requests()) == 6  # two real calls per mode reached the API
    calls = calls_by_service(server.url)
    assert sorted(calls) == sorted(modes)
    expected = [(1200, 1000, None, 300, "openai", "gpt-4o", GPT4O)] * 2
    for mode in modes:
        assert [priced(c) for c in calls[mode]] == expected, mode
        assert {c["unpriced_reason"] for c in calls[mode]} == {None}
    # the response ids the API gave are on every row (OpenInference's come from its output.value)
    ids = {m: [c["response_id"] for c in calls[m]] for m in modes}
    assert all(len(set(v)) == 2 and all(i.startswith("chatcmpl-fake") for i in v) for v in ids.values()), ids
    # the foreign traces are tasks of their own, with an outcome
    tasks = sql(server.url, "SELECT service_name, outcome, llm_calls, cost_usd FROM tasks ORDER BY service_name")
    assert [(t["service_name"], t["outcome"], t["llm_calls"], Decimal(t["cost_usd"])) for t in tasks] == [
        (m, "completed", 2, 2 * GPT4O) for m in sorted(modes)
    ]


def test_anthropic_client_spans_beside_instrumentations_count_each_call_once(server: Server, fake_llm: FakeLLM) -> None:
    modes = [
        "anthropic-sdk",
        "anthropic-client",
        "anthropic-openllmetry",
        "anthropic-openinference",
        "anthropic-both",
    ]
    run_modes(modes, server.url, fake_llm.url)
    assert len(fake_llm.requests()) == 10
    calls = calls_by_service(server.url)
    assert sorted(calls) == sorted(modes)
    # input inclusive of cache: 200 + 1,800 + 500
    expected = [(2500, 1800, 500, 120, "anthropic", "claude-sonnet-4-5", SONNET)] * 2
    for mode in modes:
        assert [priced(c) for c in calls[mode]] == expected, mode
    # the duplicates were there on the wire: the client's own span beside or inside each instrumentation's
    spans = sql(
        server.url,
        "SELECT service_name, count(*) AS n FROM spans"
        " WHERE attributes->>'gen_ai.usage.input_tokens' IS NOT NULL"
        " OR attributes->>'llm.token_count.prompt' IS NOT NULL"
        " GROUP BY ALL ORDER BY ALL",
    )
    assert {s["service_name"]: s["n"] for s in spans} == {
        "anthropic-both": 6,
        "anthropic-client": 2,
        "anthropic-openinference": 4,
        "anthropic-openllmetry": 4,
        "anthropic-sdk": 2,
    }
    for mode in modes:  # one task per trace, priced once
        tasks = sql(server.url, "SELECT llm_calls, cost_usd FROM tasks WHERE service_name = ?", [mode])
        assert len(tasks) == 1, (mode, tasks)
        [task] = tasks
        assert (task["llm_calls"], Decimal(task["cost_usd"])) == (2, 2 * SONNET), mode
