"""End to end, real parts only: the real ``openai`` client against a real local HTTP server speaking the
OpenAI wire format, auto-instrumented by taskcost_sdk, spans through the real OTLP exporter into the real
``taskcost serve`` process, read back with ``taskcost sql``. Costs are worked out here by hand from
OpenAI's published gpt-4o prices."""

from __future__ import annotations

from decimal import Decimal

import openai
import pytest

import taskcost_sdk as tc
from tests.conftest import Server
from tests.fake_llm import FakeLLM, Fault, Reply
from tests.fake_llm.fixtures import fake_llm, sdk_env, sql

__all__ = ["fake_llm", "sdk_env"]  # fixtures

M = Decimal(1_000_000)
# OpenAI gpt-4o list prices, USD per million tokens: input 2.50, cached input 1.25, output 10.00.
IN, CACHED, OUT = Decimal("2.50"), Decimal("1.25"), Decimal("10.00")

REVIEW = (12_000 - 8_000) * IN / M + 8_000 * CACHED / M + 600 * OUT / M  # 0.026
STREAMED = 5_000 * IN / M + 300 * OUT / M  # 0.0155
RESPONSE = (3_000 - 1_024) * IN / M + 1_024 * CACHED / M + 500 * OUT / M  # 0.01122 (reasoning is output)
SEARCH = Decimal("0.005")

MESSAGES = [{"role": "system", "content": "You review code."}, {"role": "user", "content": "Review the diff."}]


def _agent(llm: FakeLLM) -> None:
    api = openai.OpenAI(base_url=llm.openai_url, api_key="k")
    self_hosted = openai.OpenAI(base_url=f"{llm.url}/vllm/v1", api_key="k")
    llm.script(
        Fault(429),  # the client's own retries: two failed attempts, then the answer
        Fault(500),
        Reply(
            model="gpt-4o-2024-08-06",
            usage={
                "prompt_tokens": 12_000,
                "completion_tokens": 600,
                "total_tokens": 12_600,
                "prompt_tokens_details": {"cached_tokens": 8_000},
            },
        ),
        Reply(usage={"prompt_tokens": 5_000, "completion_tokens": 300, "total_tokens": 5_300}, first_token_delay=0.2),
        Reply(
            model="gpt-4o-2024-08-06",
            usage={
                "input_tokens": 3_000,
                "input_tokens_details": {"cached_tokens": 1_024},
                "output_tokens": 500,
                "output_tokens_details": {"reasoning_tokens": 300},
                "total_tokens": 3_500,
            },
        ),
        Reply(usage={"prompt_tokens": 2_000, "completion_tokens": 100, "total_tokens": 2_100}),
    )
    with tc.task("code_review", "review-7", agent_name="reviewer") as t:
        api.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        stream = api.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
        assert all(chunk.choices for chunk in stream)  # the usage chunk the SDK asked for stays hidden
        api.responses.create(model="gpt-4o", instructions="Summarise.", input="The review so far.")
        self_hosted.chat.completions.create(model="llama-3.1-70b", messages=MESSAGES)
        with t.tool("web_search", cost_usd="0.005"):
            pass


def test_openai_calls_attempts_and_costs_through_the_collector(
    server: Server, fake_llm: FakeLLM, sdk_env: None
) -> None:
    tc.configure(
        endpoint=server.url,
        service_name="review-bot",
        infra_profiles={
            f"{fake_llm.url}/vllm/v1": {
                "provider": "vllm",
                "engine": "vllm",
                "gpu_type": "H100-SXM",
                "gpu_count": 8,
                "deployment": "self_hosted",
            }
        },
    )
    _agent(fake_llm)
    tc.shutdown()  # returns once the collector has answered (and committed)

    calls = sql(
        server.db,
        "SELECT call_id, attempt, provider, model, status, error_type, input_tokens, cache_read_tokens,"
        " output_tokens, reasoning_tokens, ttft_s, cost_usd, unpriced_reason, engine, gpu_type, gpu_count,"
        " deployment, server_address, agent_name FROM llm_calls ORDER BY start_time",
    )
    assert [(c["provider"], c["model"], c["attempt"], c["status"], c["error_type"]) for c in calls] == [
        # the failed attempts are counted under the model that answered their call (they asked for gpt-4o)
        ("openai", "gpt-4o-2024-08-06", 1, "error", "429"),
        ("openai", "gpt-4o-2024-08-06", 2, "error", "500"),
        ("openai", "gpt-4o-2024-08-06", 3, "ok", None),
        ("openai", "gpt-4o", 1, "ok", None),
        ("openai", "gpt-4o-2024-08-06", 1, "ok", None),
        ("vllm", "llama-3.1-70b", 1, "ok", None),
    ]
    assert calls[0]["call_id"] == calls[1]["call_id"] == calls[2]["call_id"]
    assert len({c["call_id"] for c in calls}) == 4
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"]) for c in calls] == [
        (None, None, None),  # a 429 or 500 reports (and bills) no tokens
        (None, None, None),
        (12_000, 8_000, 600),
        (5_000, None, 300),
        (3_000, 1_024, 500),
        (2_000, None, 100),
    ]
    assert calls[4]["reasoning_tokens"] == 300
    assert [Decimal(c["cost_usd"]) for c in calls[:5]] == [0, 0, REVIEW, STREAMED, RESPONSE]
    assert calls[5]["cost_usd"] is None and "self_hosted" in calls[5]["unpriced_reason"]
    assert (calls[5]["engine"], calls[5]["gpu_type"], calls[5]["gpu_count"]) == ("vllm", "H100-SXM", 8)
    assert {c["deployment"] for c in calls[:5]} == {None}
    assert {c["server_address"] for c in calls} == {"127.0.0.1"}
    assert {c["agent_name"] for c in calls} == {"reviewer"}
    assert calls[3]["ttft_s"] == pytest.approx(0.2, abs=0.15) and calls[3]["ttft_s"] >= 0.2
    assert [c["ttft_s"] is None for c in calls] == [True, True, True, False, True, True]  # only streams have one

    [task] = sql(server.db, "SELECT * FROM tasks")
    assert (task["task_id"], task["outcome"], task["llm_calls"], task["attempts"]) == ("review-7", "completed", 4, 6)
    assert (task["retries"], task["failed_attempts"], task["unpriced_calls"]) == (2, 2, 1)
    assert Decimal(task["tool_cost_usd"]) == SEARCH
    assert Decimal(task["llm_cost_usd"]) == REVIEW + STREAMED + RESPONSE
    assert Decimal(task["cost_usd"]) == REVIEW + STREAMED + RESPONSE + SEARCH == Decimal("0.05772")
