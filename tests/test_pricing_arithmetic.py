"""taskcost does the token arithmetic itself (fast, and the explanation is the arithmetic); it must agree with
genai-prices to the last digit, for every set of rates in the bundled data, tiers and variants included."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from decimal import Decimal

from genai_prices.data import providers

from taskcost.pricing import TokenUsage, price_call
from taskcost.pricing._api import _fast, calc_with, library_usage, price_lines
from taskcost.pricing._data import check_providers, price_sets

M = Decimal(1_000_000)
NOV = datetime(2026, 11, 1, tzinfo=UTC)
USAGES = [
    TokenUsage(input_tokens=1_000, output_tokens=100),
    TokenUsage(input_tokens=150_000, cache_read_tokens=10_000, output_tokens=2_000, reasoning_tokens=500),
    TokenUsage(
        input_tokens=300_000,
        cache_read_tokens=100_000,
        cache_write_tokens=50_000,
        cache_write_1h_tokens=20_000,
        output_tokens=5_000,
        reasoning_tokens=1_000,
    ),
]


def test_the_bundled_data_passes_our_own_validation() -> None:
    assert check_providers(providers) == []


def test_our_arithmetic_equals_the_library_for_every_bundled_price() -> None:
    fast = slow = 0
    for provider in providers:
        for model in provider.models:
            for rates in price_sets(model):
                if not _fast(rates):
                    slow += 1
                    continue
                fast += 1
                for usage in USAGES:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        lib = rates.calc_price(library_usage(usage))
                    ours = calc_with(rates, usage)
                    assert (ours.input_usd, ours.output_usd, ours.other_usd) == (
                        lib["input_price"],
                        lib["output_price"],
                        lib["total_price"] - lib["input_price"] - lib["output_price"],
                    ), (provider.id, model.id)
                    assert sum(Decimal(x["usd"]) for x in ours.lines) == lib["total_price"]
    assert fast > 10 * slow  # nearly every price is plain tokens


def test_the_one_pass_lines_are_the_general_paths_lines_for_every_bundled_price() -> None:
    # calc_with works out a unit's tokens and its line in one pass; price_lines (the general path) does it in two
    usages = [*USAGES, TokenUsage(), TokenUsage(input_tokens=5, cache_write_tokens=5, cache_write_1h_tokens=5)]
    checked = 0
    for provider in providers:
        for model in provider.models:
            for rates in price_sets(model):
                if _fast(rates):
                    for usage in usages:
                        assert calc_with(rates, usage).lines == price_lines(rates, usage), (provider.id, model.id)
                        checked += 1
    assert checked > 1000


def test_a_per_request_price_is_a_fee_of_the_call() -> None:
    # Perplexity sonar: input $1, output $1 per million tokens, and $12 per thousand requests
    p = price_call("perplexity", "sonar", TokenUsage(input_tokens=1_000, output_tokens=100), NOV)
    assert p.fee_usd == Decimal(12) / 1000
    assert p.cost_usd == (1_000 * 1 + 100 * 1) / M + Decimal("0.012")
    assert p.input_cost_usd + p.output_cost_usd + p.fee_usd == p.cost_usd  # type: ignore[operator]
    assert p.detail is not None
    assert p.detail["lines"][-1]["unit"] == "per_request" and Decimal(p.detail["lines"][-1]["usd"]) == Decimal("0.012")
    for usage in USAGES:  # the lines always add up to what the library bills
        for provider in providers:
            for model in provider.models:
                for rates in price_sets(model):
                    if not _fast(rates):
                        calc = calc_with(rates, usage)
                        total = calc.input_usd + calc.output_usd + calc.other_usd
                        assert sum(Decimal(x["usd"]) for x in calc.lines) == total
