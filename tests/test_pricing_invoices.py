"""Invoices computed by hand from the providers' published prices (USD per million tokens), checked against
what taskcost stores. Every expected value below is arithmetic on the published rates, written out."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from fastapi.testclient import TestClient

from taskcost.pricing import Pricer, TokenUsage, explain, price_call
from taskcost.store import DuckDBStore
from tests.builders.pricing import call, costs, ingest

M = Decimal(1_000_000)
NOV = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def assert_invoice(actual: Decimal | None, expected: Decimal) -> None:
    assert actual is not None
    assert abs(actual - expected) <= Decimal("1e-6")
    assert actual == expected  # in fact exact: prices are decimals, stored to 1e-12


def test_anthropic_cache_read_and_5_minute_write() -> None:
    # claude-haiku-4-5: input $1, cache read $0.10, cache write (5 min) $1.25, output $5
    # 20,000 input = 3,000 uncached + 12,000 cache read + 5,000 cache write; 800 output
    u = TokenUsage(input_tokens=20_000, cache_read_tokens=12_000, cache_write_tokens=5_000, output_tokens=800)
    p = price_call("anthropic", "claude-haiku-4-5", u, NOV)
    expected = (3_000 * Decimal(1) + 12_000 * Decimal("0.10") + 5_000 * Decimal("1.25") + 800 * Decimal(5)) / M
    assert expected == Decimal("0.01445")
    assert_invoice(p.cost_usd, expected)
    assert p.input_cost_usd == (3_000 + 1_200 + 6_250) / M and p.output_cost_usd == Decimal("0.004")


def test_anthropic_one_hour_cache_writes_cost_more() -> None:
    # of the 5,000 written, 2,000 with a 1-hour TTL: $2 instead of $1.25
    u = TokenUsage(20_000, 800, cache_read_tokens=12_000, cache_write_tokens=5_000, cache_write_1h_tokens=2_000)
    p = price_call("anthropic", "claude-haiku-4-5", u, NOV)
    expected = (3_000 * 1 + 12_000 * Decimal("0.10") + 3_000 * Decimal("1.25") + 2_000 * 2 + 800 * 5) / M
    assert_invoice(p.cost_usd, expected)  # $0.01595


def test_openai_cached_input() -> None:
    # gpt-4o: input $2.50, cached input $1.25, output $10; 50,000 input of which 30,720 cached, 1,234 output
    u = TokenUsage(input_tokens=50_000, cache_read_tokens=30_720, output_tokens=1_234)
    p = price_call("openai", "gpt-4o", u, NOV)
    expected = (19_280 * Decimal("2.50") + 30_720 * Decimal("1.25") + 1_234 * 10) / M
    assert expected == Decimal("0.09894")
    assert_invoice(p.cost_usd, expected)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # up to 200k input tokens: input $1.25, cache read $0.125, output $10
        (TokenUsage(input_tokens=150_000, output_tokens=2_000), (150_000 * Decimal("1.25") + 2_000 * 10) / M),
        (TokenUsage(input_tokens=200_000, output_tokens=2_000), (200_000 * Decimal("1.25") + 2_000 * 10) / M),
        # above 200k: input $2.50, cache read $0.25, output $15 -- for *all* tokens of the request
        (
            TokenUsage(input_tokens=250_000, cache_read_tokens=50_000, output_tokens=2_000),
            (200_000 * Decimal("2.50") + 50_000 * Decimal("0.25") + 2_000 * 15) / M,
        ),
    ],
)
def test_gemini_long_context_tier(usage: TokenUsage, expected: Decimal) -> None:
    p = price_call("gcp.gemini", "gemini-2.5-pro", usage, NOV)
    assert_invoice(p.cost_usd, expected)
    assert p.provider_id == "google"


def test_batch_call_at_batch_rates() -> None:
    # Anthropic Message Batches: 50% of every rate: input $0.50, read $0.05, write $0.625, output $2.50
    u = TokenUsage(input_tokens=20_000, cache_read_tokens=12_000, cache_write_tokens=5_000, output_tokens=800)
    p = price_call("anthropic", "claude-haiku-4-5", u, NOV, context={"processing": "batch"})
    expected = (
        3_000 * Decimal("0.50") + 12_000 * Decimal("0.05") + 5_000 * Decimal("0.625") + 800 * Decimal("2.5")
    ) / M
    assert expected == Decimal("0.007225")
    assert_invoice(p.cost_usd, expected)
    assert p.detail is not None and p.detail["context"] == {"processing": "batch"}


def test_priority_service_tier() -> None:
    # OpenAI priority processing for gpt-4o: input $4.25, cached $2.125, output $17
    u = TokenUsage(input_tokens=10_000, cache_read_tokens=6_000, output_tokens=500)
    p = price_call("openai", "gpt-4o", u, NOV, context={"service_tier": "priority"})
    assert_invoice(p.cost_usd, (4_000 * Decimal("4.25") + 6_000 * Decimal("2.125") + 500 * 17) / M)


def test_a_call_before_and_after_a_price_change() -> None:
    # OpenAI cut o3 from $10 / $40 to $2 / $8 on 2025-06-10 (UTC)
    u = TokenUsage(input_tokens=10_000, output_tokens=2_000)
    before = price_call("openai", "o3", u, datetime(2025, 6, 9, 23, 59, 59, tzinfo=UTC))
    after = price_call("openai", "o3", u, datetime(2025, 6, 10, 0, 0, 0, tzinfo=UTC))
    assert_invoice(before.cost_usd, (10_000 * 10 + 2_000 * 40) / M)  # $0.18
    assert_invoice(after.cost_usd, (10_000 * 2 + 2_000 * 8) / M)  # $0.036


def test_time_of_day_price() -> None:
    # DeepSeek chat: 00:30-16:30 UTC input $0.27, cached $0.07, output $1.10; the rest of the day half that
    u = TokenUsage(input_tokens=100_000, cache_read_tokens=40_000, output_tokens=5_000)
    peak = price_call("deepseek", "deepseek-chat", u, datetime(2026, 11, 2, 10, 0, tzinfo=UTC))
    off = price_call("deepseek", "deepseek-chat", u, datetime(2026, 11, 2, 20, 0, tzinfo=UTC))
    assert_invoice(peak.cost_usd, (60_000 * Decimal("0.27") + 40_000 * Decimal("0.07") + 5_000 * Decimal("1.10")) / M)
    assert_invoice(off.cost_usd, (60_000 * Decimal("0.135") + 40_000 * Decimal("0.035") + 5_000 * Decimal("0.55")) / M)


def test_the_stored_arithmetic_adds_up_to_the_cost() -> None:
    u = TokenUsage(input_tokens=250_000, cache_read_tokens=50_000, output_tokens=2_000)
    p = price_call("google", "gemini-2.5-pro", u, NOV)
    assert p.detail is not None
    lines = {x["unit"]: x for x in p.detail["lines"]}
    assert (lines["input"]["tokens"], lines["input"]["usd_per_mtok"]) == (200_000, "2.5")
    assert (lines["cache_read"]["tokens"], lines["cache_read"]["usd_per_mtok"]) == (50_000, "0.25")
    assert sum(Decimal(x["usd"]) for x in p.detail["lines"]) == p.cost_usd
    text = "\n".join(
        explain(
            {
                "span_id": "s",
                "cost_usd": p.cost_usd,
                "input_cost_usd": p.input_cost_usd,
                "output_cost_usd": p.output_cost_usd,
                "price_source": p.source,
                "price_detail": p.detail,
            }
        )
    )
    assert "200,000 input" in text and "$2.5/M" in text and "= total (cost_usd) $0.542500000000" in text


def test_ingest_reads_the_service_tier_and_a_configured_batch_attribute(store: DuckDBStore) -> None:
    pricer = Pricer(
        attributes=(("openai.response.service_tier", "service_tier"), ("acme.batch", "processing")),
    )
    u = {"input_tokens": 10_000, "cache_read": 6_000, "output_tokens": 500}
    ingest(
        store,
        [
            call("a1", NOV, **u, attributes={"openai.response.service_tier": "priority"}),
            call("a2", NOV, **u, attributes={"openai.response.service_tier": "auto"}),
            call("a3", NOV, **u, attributes={"acme.batch": True}),
            call("a4", NOV, **u),
        ],
        pricer,
    )
    standard = (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25") + 500 * 10) / M
    assert costs(store) == {
        "a1": (4_000 * Decimal("4.25") + 6_000 * Decimal("2.125") + 500 * 17) / M,
        "a2": standard,  # "auto" says nothing about the tier that served it
        # OpenAI batch: input $1.25, output $5; the price data has no batch cached-input rate, so $1.25 stays
        "a3": (4_000 * Decimal("1.25") + 6_000 * Decimal("1.25") + 500 * 5) / M,
        "a4": standard,
    }
    row = store.query("SELECT price_source, price_detail, priced_at FROM llm_calls WHERE span_id = 'a1'").dicts()[0]
    assert row["price_source"].startswith("genai-prices ") and '"service_tier":"priority"' in row["price_detail"]
    assert row["priced_at"] is not None


def test_through_otlp_intake_the_span_attribute_selects_the_tier(client: TestClient, store: DuckDBStore) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mem))
    start = int(NOV.timestamp()) * 1_000_000_000
    for tier in ("priority", "default"):
        span = provider.get_tracer("t").start_span(
            f"chat gpt-4o {tier}",
            start_time=start,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 10_000,
                "gen_ai.usage.cache_read.input_tokens": 6_000,
                "gen_ai.usage.output_tokens": 500,
                "openai.response.service_tier": tier,
            },
        )
        span.end(end_time=start + 1_000_000_000)
    body = encode_spans(mem.get_finished_spans()).SerializeToString()
    resp = client.post("/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
    assert resp.status_code == 200
    got = sorted(r[0] for r in store.query("SELECT cost_usd FROM llm_calls").rows)
    assert got == [
        (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25") + 500 * 10) / M,
        (4_000 * Decimal("4.25") + 6_000 * Decimal("2.125") + 500 * 17) / M,
    ]
