"""Pricing is a pure, time-aware function; expected values are computed here from published prices."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from taskcost.pricing import PROVIDER_IDS, TokenUsage, price_call, price_library_provider

AT = datetime(2026, 11, 1, tzinfo=UTC)
M = Decimal(1_000_000)


def test_openai_cached_input_is_priced_at_the_cache_rate() -> None:
    # gpt-4o: $2.50/M input, $1.25/M cached input, $10/M output
    p = price_call("openai", "gpt-4o", TokenUsage(input_tokens=10_000, output_tokens=500, cache_read_tokens=6_000), AT)
    expected = (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25") + 500 * Decimal(10)) / M
    assert p.cost_usd == expected
    assert p.input_cost_usd + p.output_cost_usd == p.cost_usd
    assert p.source is not None and p.source.startswith("genai-prices ")
    assert (p.provider_id, p.model_id, p.unpriced_reason) == ("openai", "gpt-4o", None)


def test_anthropic_cache_read_and_write() -> None:
    # claude-sonnet-4-5: $3/M input, $0.30/M cache read, $3.75/M cache write (5m), $15/M output
    u = TokenUsage(input_tokens=10_000, output_tokens=500, cache_read_tokens=6_000, cache_write_tokens=2_000)
    p = price_call("anthropic", "claude-sonnet-4-5", u, AT)
    expected = (2_000 * 3 + 6_000 * Decimal("0.30") + 2_000 * Decimal("3.75") + 500 * 15) / M
    assert p.cost_usd == expected == Decimal("0.0228")


def test_price_follows_the_call_time() -> None:
    # claude-opus-4-6 had a 200k-token long-context tier (double price) until 2026-03-13, flat after
    u = TokenUsage(input_tokens=300_000, output_tokens=10)
    before = price_call("anthropic", "claude-opus-4-6", u, datetime(2026, 3, 1, tzinfo=UTC))
    after = price_call("anthropic", "claude-opus-4-6", u, datetime(2026, 3, 20, tzinfo=UTC))
    assert after.cost_usd == (300_000 * 5 + 10 * 25) / M
    assert before.cost_usd == (300_000 * 10 + 10 * Decimal("37.5")) / M


@pytest.mark.parametrize(
    ("provider", "model", "reason"),
    [
        ("openai", "my-private-finetune", "unknown to the price data"),
        ("no-such-provider", "gpt-4o", "unknown to the price data"),
        ("openai", None, "no model"),
    ],
)
def test_unknown_is_unpriced_never_zero(provider: str, model: str | None, reason: str) -> None:
    p = price_call(provider, model, TokenUsage(input_tokens=100, output_tokens=10), AT)
    assert p.cost_usd is None and p.input_cost_usd is None
    assert p.unpriced_reason is not None and reason in p.unpriced_reason


def test_no_usage_and_self_hosted_are_unpriced() -> None:
    assert price_call("openai", "gpt-4o", None, AT).unpriced_reason == "no token usage on the span"
    p = price_call("openai", "gpt-4o", TokenUsage(100, 10), AT, deployment="self_hosted")
    assert p.cost_usd is None and "GPU-hour" in (p.unpriced_reason or "")


def test_inconsistent_usage_is_unpriced_with_the_reason() -> None:
    p = price_call("openai", "gpt-4o", TokenUsage(input_tokens=10, cache_read_tokens=50), AT)
    assert p.cost_usd is None and "exceed input" in (p.unpriced_reason or "")


def test_a_known_model_with_zero_tokens_costs_zero() -> None:
    p = price_call("openai", "gpt-4o", TokenUsage(), AT)
    assert p.cost_usd == Decimal(0) and p.unpriced_reason is None


@pytest.mark.parametrize(
    ("otel", "lib"),
    [
        ("azure.ai.openai", "openai"),
        ("x_ai", "x-ai"),
        ("gcp.gen_ai", "google"),
        ("aws.bedrock", "aws"),
        ("OpenAI", "openai"),
        ("anthropic", "anthropic"),
    ],
)
def test_provider_names_map_to_price_library_ids(otel: str, lib: str) -> None:
    assert price_library_provider(otel) == lib
    assert set(PROVIDER_IDS.values()) <= {"openai", "x-ai", "google", "aws", "mistral", "moonshotai", "azure"}
