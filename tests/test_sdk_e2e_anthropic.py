"""End to end with the real ``anthropic`` client: cache-inclusive input tokens, the client's own retries,
an agent-level retry, streaming, the prompt-prefix fingerprint -- and the client's own OpenTelemetry span
never becoming a second costed call. Costs are worked out here by hand from Anthropic's published
claude-sonnet-4-5 prices."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import anthropic
import pytest
from opentelemetry import trace
from opentelemetry.util._once import Once

import taskcost_sdk as tc
from tests.conftest import Server
from tests.fake_llm import FakeLLM, Fault, Reply
from tests.fake_llm.fixtures import fake_llm, sdk_env, sql

__all__ = ["fake_llm", "sdk_env"]  # fixtures

M = Decimal(1_000_000)
# claude-sonnet-4-5, USD per million tokens: input 3.00, cache read 0.30, cache write (5 min) 3.75, output 15.00
IN, READ, WRITE, OUT = Decimal("3.00"), Decimal("0.30"), Decimal("3.75"), Decimal("15.00")

FIRST = 1_000 * IN / M + 6_000 * READ / M + 2_000 * WRITE / M + 700 * OUT / M  # 0.0228
RETRY = 1_500 * IN / M + 8_000 * READ / M + 800 * OUT / M  # 0.0189

SYSTEM = "You fix failing tests. Reply with a JSON patch."


@pytest.fixture
def sdk_is_global() -> Iterator[None]:
    """configure(set_global=True) installs the SDK's provider globally: the anthropic client then emits its
    own span for every call, into the SDK's pipeline. Afterwards the global provider is taken away again."""
    yield
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


def _agent(llm: FakeLLM) -> None:
    client = anthropic.Anthropic(base_url=llm.anthropic_url, api_key="k")
    llm.script(
        Fault(529),  # overloaded: the client retries on its own
        Reply(
            model="claude-sonnet-4-5-20250929",
            usage={
                "input_tokens": 1_000,  # Anthropic: exclusive of the cache
                "cache_read_input_tokens": 6_000,
                "cache_creation_input_tokens": 2_000,
                "output_tokens": 700,
            },
            text="not json",
        ),
        Reply(
            model="claude-sonnet-4-5-20250929",
            usage={
                "input_tokens": 1_500,
                "cache_read_input_tokens": 8_000,
                "cache_creation_input_tokens": 0,
                "output_tokens": 800,
            },
            text='{"patch": "..."}',
            first_token_delay=0.15,
        ),
    )
    messages = [{"role": "user", "content": "test_parse fails; fix it."}]
    with tc.task("bug_fix", "fix-1") as t:
        first = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, system=f"{SYSTEM} Now: 2025-06-01T10:00:00Z", messages=messages
        )
        assert first.content[0].text == "not json"  # type: ignore[union-attr]
        with (
            t.retry(reason="invalid_json"),
            client.messages.stream(
                model="claude-sonnet-4-5",
                max_tokens=1024,
                system=f"{SYSTEM} Now: 2025-06-01T10:00:09Z",
                messages=messages,
            ) as stream,
        ):
            assert stream.get_final_text() == '{"patch": "..."}'


def test_anthropic_calls_through_the_collector(
    server: Server, fake_llm: FakeLLM, sdk_env: None, sdk_is_global: None
) -> None:
    tc.configure(endpoint=server.url, service_name="fixer", set_global=True)
    _agent(fake_llm)
    suppressed = tc.export_stats().duplicates_suppressed
    tc.shutdown()
    assert suppressed == 2  # the client's own span of each of the two calls

    calls = sql(
        server.db,
        "SELECT call_id, attempt, model, status, error_type, input_tokens, cache_read_tokens, cache_write_tokens,"
        " output_tokens, ttft_s, cost_usd FROM llm_calls ORDER BY start_time",
    )
    assert [(c["attempt"], c["model"], c["status"], c["error_type"]) for c in calls] == [
        (1, "claude-sonnet-4-5-20250929", "error", "529"),  # the model that answered its call (it asked for the alias)
        (2, "claude-sonnet-4-5-20250929", "ok", None),
        (3, "claude-sonnet-4-5-20250929", "ok", None),  # the harness's retry continues the same call
    ]
    assert len({c["call_id"] for c in calls}) == 1
    assert [
        (c["input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["output_tokens"]) for c in calls
    ] == [
        (None, None, None, None),
        (9_000, 6_000, 2_000, 700),  # inclusive: 1,000 + 6,000 + 2,000
        (9_500, 8_000, 0, 800),
    ]
    assert [Decimal(c["cost_usd"]) for c in calls] == [0, FIRST, RETRY]
    assert calls[2]["ttft_s"] >= 0.15 and calls[1]["ttft_s"] is None

    [task] = sql(server.db, "SELECT * FROM tasks")
    assert (task["outcome"], task["llm_calls"], task["attempts"], task["retries"], task["failed_attempts"]) == (
        "completed",
        1,
        3,
        2,
        1,
    )
    assert Decimal(task["cost_usd"]) == FIRST + RETRY == Decimal("0.0417")

    # Nothing but the SDK's own spans arrived: the anthropic client's spans were not a second call.
    assert sql(server.db, "SELECT DISTINCT name FROM spans ORDER BY name") == [
        {"name": "chat claude-sonnet-4-5"},
        {"name": "task bug_fix"},
    ]
    # The prompt-prefix fingerprint: the timestamp at the front of the system prompt is flagged, and the
    # retry's prompt broke the cached prefix at block 0 (the system prompt).
    prompt = sql(
        server.db,
        "SELECT attributes->>'$.\"taskcost.prompt.cache_breakers\"' AS breakers,"
        " attributes->>'$.\"taskcost.prompt.prefix_break_block\"' AS broke_at,"
        " attributes->>'$.\"taskcost.call.retry_reason\"' AS reason"
        " FROM spans WHERE name LIKE 'chat %' ORDER BY start_ns",
    )
    offset = len(SYSTEM) + len(" Now: ")
    assert [p["breakers"] for p in prompt] == [f'["timestamp@0:{offset}"]'] * 3
    assert [p["broke_at"] for p in prompt] == [None, None, "0"]
    assert [p["reason"] for p in prompt] == [None, None, "invalid_json"]
