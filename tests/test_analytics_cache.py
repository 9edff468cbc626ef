"""Cache economics (taskcost/analytics/_cache.py): hit rate, dollars saved and missed (both estimates of the repeated
prefix), TTFT by hit-rate band and input size, and the prefix-stability report. Every expected figure is worked out
by hand in the comments, from the price book's round rates (USD per million tokens, input / cache read):
cheap-1 1 / 0.1 (a read saves $0.9 per million tokens), pricey-1 10 / 1 (saves $9), claude-x 3 / 0.3 (saves $2.7)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import polars as pl
import pytest

from taskcost.analytics import QUESTIONS, Filters, UsageError, _cache
from taskcost.analytics._cache import CacheAnswer, CacheOptions, cache_economics
from taskcost.store import DuckDBStore
from tests.builders.analytics import T0, Fleet


def _fleet(project: str = "default") -> Fleet:
    """Four task kinds, 14 calls.

    review (t1, API): cheap-1 c1 1,000 in / 0 read; c2 1,500 / 800; c3 2,000 / 1,500; pricey-1 p1 3,000 / 0;
      p2 4,000 / 1,000. No fingerprint: repeats estimated as min(previous input, this input) per model:
      c2 min(1000, 1500) - 800 = 200 missed; c3 min(1500, 2000) - 1500 = 0; p2 min(3000, 4000) - 1000 = 2,000.
    ops (t3, self-hosted cheap-1): s1 5,000 / 0; s2 6,000 / 4,000 -> min(5000, 6000) - 4000 = 1,000 missed, no price.
    fix (t2, claude-x, SDK fingerprint: prompt chars, stable prefix chars, break):
      x1 2,000 / 0, 8,000 chars, first call;
      x2 3,000 / 1,000, 12,000 chars, stable 8,000: repeated 8000 x 3000 / 12000 = 2,000 -> 1,000 missed;
      x3 4,000 / 500, 16,000 chars, stable 4,000, breaks at block 2 (user): repeated 1,000 -> 500 missed,
         3,000 tokens after the break;
      x4 1,000 / 0, 4,000 chars, stable 1,000, breaks at block 1 (system): repeated 250 -> 250 missed, 750 after;
      x5 2,000 / 0, 8,000 chars, stable 4,000, breaks at block 2 (user): repeated 1,000 -> 1,000 missed, 1,000 after.
    plan (t5, the next day, claude-x): y1 1,000 / 0, 4,000 chars, first; y2 2,000 / 0, 8,000 chars, stable 2,000,
      breaks at block 1 (system): repeated 500 -> 500 missed, 1,500 after."""
    f = Fleet()
    (
        f.task("t1", kind="review", project=project)
        .call("cheap-1", input_tokens=1000, cache_read=0, ttft_s=0.8)
        .call("cheap-1", input_tokens=1500, cache_read=800, ttft_s=0.4)
        .call("cheap-1", input_tokens=2000, cache_read=1500, ttft_s=0.3)
        .call("pricey-1", input_tokens=3000, cache_read=0, ttft_s=1.2)
        .call("pricey-1", input_tokens=4000, cache_read=1000, ttft_s=0.6)
    )
    (
        f.task("t3", kind="ops", minute=5, project=project)
        .call("cheap-1", input_tokens=5000, cache_read=0, ttft_s=2.0, deployment="self_hosted")
        .call("cheap-1", input_tokens=6000, cache_read=4000, ttft_s=0.2, deployment="self_hosted")
    )
    (
        f.task("t2", kind="fix", minute=10, project=project)
        .call("claude-x", input_tokens=2000, cache_read=0, ttft_s=1.0, prompt_chars=8000)
        .call("claude-x", input_tokens=3000, cache_read=1000, ttft_s=0.5, prompt_chars=12000, stable_prefix_chars=8000)
        .call(
            "claude-x",
            input_tokens=4000,
            cache_read=500,
            ttft_s=0.7,
            prompt_chars=16000,
            stable_prefix_chars=4000,
            prefix_break_block=2,
            prefix_break_kind="user",
        )
        .call(
            "claude-x",
            input_tokens=1000,
            cache_read=0,
            prompt_chars=4000,
            stable_prefix_chars=1000,
            prefix_break_block=1,
            prefix_break_kind="system",
        )
        .call(
            "claude-x",
            input_tokens=2000,
            cache_read=0,
            prompt_chars=8000,
            stable_prefix_chars=4000,
            prefix_break_block=2,
            prefix_break_kind="user",
        )
    )
    (
        f.task("t5", kind="plan", start=T0 + timedelta(days=1), project=project)
        .call("claude-x", input_tokens=1000, cache_read=0, prompt_chars=4000)
        .call(
            "claude-x",
            input_tokens=2000,
            cache_read=0,
            prompt_chars=8000,
            stable_prefix_chars=2000,
            prefix_break_block=1,
            prefix_break_kind="system",
        )
    )
    return f


def _ask(store: DuckDBStore, filters: Filters | None = None, **options: Any) -> CacheAnswer:
    return cache_economics(store, filters or Filters(), CacheOptions(**options))


def _rows(df: pl.DataFrame, key: str | list[str]) -> dict[Any, dict[str, Any]]:
    keys = [key] if isinstance(key, str) else key
    return {(r[keys[0]] if len(keys) == 1 else tuple(r[k] for k in keys)): r for r in df.iter_rows(named=True)}


def test_hit_rate_savings_and_misses_by_hand(store: DuckDBStore) -> None:
    _fleet().write(store)
    a = _ask(store)
    s = a.summary()
    # 14 calls; input 4,500 (cheap-1 API) + 7,000 (pricey-1) + 15,000 (claude-x) + 11,000 (self-hosted) = 37,500;
    # read 2,300 + 1,000 + 1,500 + 4,000 = 8,800
    assert (s["calls"], s["input_tokens"], s["cache_read_tokens"]) == (14, 37500, 8800)
    assert s["hit_rate"] == pytest.approx(8800 / 37500)
    # saved: 2,300 x $0.9/M = 0.00207; 1,000 x $9/M = 0.009; 1,500 x $2.7/M = 0.00405 (self-hosted: no dollars)
    assert s["saved_usd"] == Decimal("0.01512")
    # missed: 200 (cheap-1) + 2,000 (pricey-1) + 3,250 (claude-x: 1000 + 500 + 250 + 1000 + 500) + 1,000 (self-hosted)
    assert s["missed_tokens"] == 6450
    # 200 x 0.9/M = 0.00018; 2,000 x 9/M = 0.018; 3,250 x 2.7/M = 0.008775
    assert s["missed_usd"] == Decimal("0.026955")
    # the fingerprint measured x2..x5 and y2; the size estimate c2, c3, p2 and s2
    assert (s["fingerprint_calls"], s["size_estimate_calls"]) == (5, 4)
    # the two self-hosted calls: tokens without dollars
    assert (s["unpriced_calls"], s["unpriced_cache_read_tokens"], s["unpriced_missed_tokens"]) == (2, 4000, 1000)
    assert any("self-hosted" in n and "4,000 cache-read and 1,000 missed" in n for n in a.notes)
    assert any("5 repeat call(s) measured" in n and "4 estimated" in n for n in a.notes)
    j = a.to_json()
    assert j["summary"]["saved_usd"] == "0.015120000000"  # money as a decimal string


def test_without_misses_hit_rate_and_savings_are_the_same_and_misses_unknown(store: DuckDBStore) -> None:
    _fleet().write(store)
    a = _ask(store, misses=False, bucket="day", by="model")
    s = a.summary()
    # the same hand-computed figures as above, from the one pass over the calls
    assert (s["calls"], s["input_tokens"], s["cache_read_tokens"], s["saved_usd"]) == (
        14,
        37500,
        8800,
        Decimal("0.01512"),
    )
    assert s["headline"] == (
        "hit rate 23.5% of 37,500 input tokens; saved $0.02 (2 of 14 calls without a per-token price: tokens only)"
    )
    # what was not measured is unknown, not zero
    for key in ("missed_tokens", "missed_usd", "fingerprint_calls", "size_estimate_calls", "prefix_break_rate"):
        assert s[key] is None, key
    assert s["measured_calls"] == 0
    assert a.groups["missed_usd"].null_count() == a.groups.height > 0
    assert a.over_time["missed_tokens"].null_count() == a.over_time.height > 0
    assert {t.name for t in a.tables()} == {"groups", "by_model", "over_time"}
    full = _ask(store, bucket="day", by="model")
    cols = ["model", "calls", "input_tokens", "cache_read_tokens", "hit_rate", "saved_usd", "unpriced_calls"]
    assert a.groups.select(cols).sort("model").equals(full.groups.select(cols).sort("model"))
    assert any("4,000 cache-read tokens are counted without dollars" in n for n in a.notes)
    assert not any("missed tokens" in n for n in a.notes)


def test_groups_by_a_task_dimension_and_by_model(store: DuckDBStore) -> None:
    _fleet().write(store)
    kinds = _rows(_ask(store, by="kind").groups, "kind")
    assert set(kinds) == {"review", "ops", "fix", "plan"}
    review = kinds["review"]
    # c1..c3 and p1, p2: input 4,500 + 7,000; read 2,300 + 1,000; saved 0.00207 + 0.009; missed 200 + 2,000 tokens
    # = 0.00018 + 0.018
    assert (review["calls"], review["input_tokens"], review["cache_read_tokens"]) == (5, 11500, 3300)
    assert review["hit_rate"] == pytest.approx(3300 / 11500)
    assert (review["saved_usd"], review["missed_tokens"], review["missed_usd"]) == (
        Decimal("0.01107"),
        2200,
        Decimal("0.01818"),
    )
    assert (review["fingerprint_calls"], review["size_estimate_calls"], review["unpriced_calls"]) == (0, 3, 0)
    # plan never read the cache: $0 saved (its rate is known: claude-x read the cache in fix), 500 missed x 2.7/M
    plan = kinds["plan"]
    assert (plan["saved_usd"], plan["missed_tokens"], plan["missed_usd"]) == (Decimal(0), 500, Decimal("0.00135"))
    # ops is self-hosted: tokens, no dollars (null, not $0), and says how many calls it could not price
    ops = kinds["ops"]
    assert (ops["saved_usd"], ops["missed_usd"], ops["missed_tokens"], ops["unpriced_calls"]) == (None, None, 1000, 2)

    models = _rows(_ask(store, by="model").groups, "model")
    cheap = models["cheap-1"]  # API and self-hosted calls of the same model: only the API ones are priced
    assert (cheap["calls"], cheap["input_tokens"], cheap["cache_read_tokens"]) == (5, 15500, 6300)
    assert (cheap["saved_usd"], cheap["missed_tokens"], cheap["missed_usd"]) == (
        Decimal("0.00207"),
        1200,
        Decimal("0.00018"),
    )
    assert (cheap["unpriced_calls"], cheap["unpriced_cache_read_tokens"], cheap["unpriced_missed_tokens"]) == (
        2,
        4000,
        1000,
    )

    by_model = _rows(_ask(store).by_model, ["model", "self_hosted"])
    assert by_model[("claude-x", False)]["input_usd_per_mtok"] == Decimal(3)
    assert by_model[("claude-x", False)]["cache_read_usd_per_mtok"] == Decimal("0.3")
    assert by_model[("cheap-1", True)]["input_usd_per_mtok"] is None  # self-hosted: no per-token rate


def test_time_series_by_day(store: DuckDBStore) -> None:
    _fleet().write(store)
    a = _ask(store, bucket="day", by="kind")
    days = _rows(a.over_time, ["bucket", "kind"])
    day1, day2 = T0.replace(hour=0, tzinfo=None), T0.replace(hour=0, tzinfo=None) + timedelta(days=1)
    assert sorted({b for b, _ in days}) == [day1, day2]
    assert {k for b, k in days if b == day2} == {"plan"}  # t5 started the next day
    assert days[(day1, "fix")]["cache_read_tokens"] == 1500
    assert days[(day2, "plan")]["missed_usd"] == Decimal("0.00135")
    assert "over_time" in {t.name for t in a.tables()}
    assert "over_time" not in {t.name for t in _ask(store).tables()}


def test_time_series_by_minute(store: DuckDBStore) -> None:
    _fleet().write(store)
    a = _ask(store, bucket="minute")
    minutes = _rows(a.over_time, "bucket")
    assert all(b.second == 0 and b.microsecond == 0 for b in minutes)
    # the minute rows add up to the whole, each call counted once
    assert sum(r["calls"] for r in minutes.values()) == a.summary()["calls"] == 14
    assert sum(r["cache_read_tokens"] for r in minutes.values()) == 8800
    day = _ask(store, bucket="day")
    assert len(minutes) > len(day.over_time)


def test_ttft_by_hit_rate_band_and_input_size(store: DuckDBStore) -> None:
    _fleet().write(store)
    a = _ask(store)
    bands = _rows(a.ttft_by_hit_rate, "hit_rate_band")
    # each call's own hit rate: 0% c1 p1 x1 x4 x5 y1 y2 s1 (ttft 0.8, 1.2, 1.0, -, -, -, -, 2.0);
    # (0, 25%] p2 (1000/4000, on the edge) x3 (500/4000): 0.6, 0.7; (25, 50%] x2 (1000/3000): 0.5;
    # (50, 75%] c2 (800/1500) c3 (1500/2000, on the edge) s2 (4000/6000): 0.4, 0.3, 0.2; nothing above 75%
    assert list(bands) == ["0%", "(0, 25%]", "(25, 50%]", "(50, 75%]"]
    zero = bands["0%"]
    assert (zero["calls"], zero["ttft_calls"]) == (8, 4)
    # sorted 0.8, 1.0, 1.2, 2.0: median (1.0 + 1.2) / 2 = 1.1; p95 at position 3 x 0.95 = 2.85: 1.2 + 0.85 x 0.8
    assert zero["median_ttft_s"] == pytest.approx(1.1)
    assert zero["p95_ttft_s"] == pytest.approx(1.88)
    assert zero["hit_rate"] == 0
    assert bands["(0, 25%]"]["median_ttft_s"] == pytest.approx(0.65)
    assert bands["(0, 25%]"]["p95_ttft_s"] == pytest.approx(0.695)  # 0.6 + 0.95 x 0.1
    # 0.2, 0.3, 0.4: median 0.3, p95 at 1.9: 0.3 + 0.9 x 0.1; token-weighted hit rate (800+1500+4000) / 9500
    mid = bands["(50, 75%]"]
    assert (mid["calls"], mid["median_ttft_s"]) == (3, pytest.approx(0.3))
    assert mid["p95_ttft_s"] == pytest.approx(0.39)
    assert mid["hit_rate"] == pytest.approx(6300 / 9500)

    cells = _rows(a.ttft_by_input_size, ["input_size_band", "hit_rate_band"])
    # under 1,024 tokens: c1 (0.8), x4 and y1 (no ttft), all at 0%
    assert (cells[("< 1k", "0%")]["calls"], cells[("< 1k", "0%")]["median_ttft_s"]) == (3, pytest.approx(0.8))
    # 1k-4k at 0%: p1 1.2, x1 1.0, x5 and y2 without ttft -> 1.1; at (50, 75%]: c2 0.4, c3 0.3 -> 0.35
    assert cells[("1k-4k", "0%")]["median_ttft_s"] == pytest.approx(1.1)
    assert cells[("1k-4k", "(50, 75%]")]["median_ttft_s"] == pytest.approx(0.35)
    # 4k-16k: s1 (5,000, 2.0 s) at 0% against s2 (6,000, 0.2 s) at (50, 75%]
    assert cells[("4k-16k", "0%")]["median_ttft_s"] == pytest.approx(2.0)
    assert cells[("4k-16k", "(50, 75%]")]["median_ttft_s"] == pytest.approx(0.2)
    assert len(cells) == 7  # < 1k: one cell; 1k-4k: four; 4k-16k: two


def test_prefix_stability_by_kind_and_breakers(store: DuckDBStore) -> None:
    _fleet().write(store)
    a = _ask(store)
    kinds = _rows(a.prefix_stability, "kind")
    assert set(kinds) == {"fix", "plan"}  # review and ops have no fingerprint
    fix = kinds["fix"]
    # x1..x5 fingerprinted, x2..x5 compared with a previous call, x3 x4 x5 broke: 3 / 4
    assert (fix["fingerprinted_calls"], fix["compared_calls"], fix["breaks"]) == (5, 4, 3)
    assert fix["break_rate"] == pytest.approx(0.75)
    # most breaks at block 2 (user): x3 and x5
    assert (fix["top_break_kind"], fix["top_break_block"], fix["top_break_calls"]) == ("user", 2, 2)
    # stable shares 8000/12000, 4000/16000, 1000/4000, 4000/8000: mean (2/3 + 1/4 + 1/4 + 1/2) / 4
    assert fix["mean_stable_share"] == pytest.approx((2 / 3 + 0.25 + 0.25 + 0.5) / 4)
    # after the break: x3 3,000 + x4 750 + x5 1,000 = 4,750 tokens, x 2.7/M = 0.012825
    assert (fix["after_break_tokens"], fix["after_break_usd"]) == (4750, Decimal("0.012825"))
    # the kind's missed tokens: 1000 + 500 + 250 + 1000
    assert (fix["missed_tokens"], fix["missed_usd"]) == (2750, Decimal("0.007425"))
    plan = kinds["plan"]
    assert (plan["fingerprinted_calls"], plan["compared_calls"], plan["breaks"], plan["break_rate"]) == (2, 1, 1, 1.0)
    assert plan["mean_stable_share"] == pytest.approx(0.25)
    assert list(kinds) == ["fix", "plan"]  # most breaks first

    breakers = a.prefix_breakers.rows(named=True)
    # ranked by tokens after the break: fix user@2 (3,000 + 1,000), plan system@1 (1,500), fix system@1 (750)
    assert [(b["kind"], b["break_kind"], b["break_block"], b["breaks"]) for b in breakers] == [
        ("fix", "user", 2, 2),
        ("plan", "system", 1, 1),
        ("fix", "system", 1, 1),
    ]
    top = breakers[0]
    assert (top["after_break_tokens"], top["after_break_usd"]) == (4000, Decimal("0.0108"))  # 4,000 x 2.7/M
    assert (top["missed_tokens"], top["missed_usd"]) == (1500, Decimal("0.00405"))  # x3 500 + x5 1,000
    assert top["share_of_breaks"] == pytest.approx(2 / 3)
    s = a.summary()
    assert (s["prefix_compared_calls"], s["prefix_breaks"]) == (5, 4)
    assert s["prefix_break_rate"] == pytest.approx(0.8)


def test_a_model_whose_cache_read_rate_is_unknown_keeps_its_tokens_unpriced(store: DuckDBStore) -> None:
    # cheap-1 never read from the cache: its input rate is known, its cache-read rate is not; 1,000 tokens repeated
    f = Fleet()
    f.task("u1").call("cheap-1", input_tokens=1000, cache_read=0).call("cheap-1", input_tokens=1500, cache_read=0)
    f.write(store)
    s = (a := _ask(store)).summary()
    # nothing was read from the cache: saved is $0 at any rate; the missed tokens' dollars are unknown
    assert (s["missed_tokens"], s["missed_usd"], s["saved_usd"]) == (1000, None, Decimal(0))
    assert (s["unpriced_calls"], s["unpriced_missed_tokens"]) == (2, 1000)
    assert any("openai/cheap-1" in n and "cache-read rate is unknown" in n for n in a.notes)


def test_a_model_that_neither_read_nor_missed_has_nothing_unpriced(store: DuckDBStore) -> None:
    # cheap-1 again with an unknown cache-read rate, but no prompt repeats (one call a task, no fingerprint): no token
    # to price, so $0 saved and $0 missed, exactly, and no call counted as unpriced; an unanswered attempt neither
    f = Fleet()
    f.task("n1").call("cheap-1", input_tokens=1000, cache_read=0)
    f.task("n2").call("cheap-1", input_tokens=0, output_tokens=0, status="error", cache_read=0)
    f.write(store)
    s = (a := _ask(store)).summary()
    assert (s["missed_tokens"], s["missed_usd"], s["saved_usd"], s["unpriced_calls"]) == (0, 0, 0, 0)
    assert not [n for n in a.notes if "openai/cheap-1" in n]


@pytest.mark.parametrize("bucket", ["minute", "hour", None])
def test_every_self_hosted_call_is_unpriced_whatever_its_rows(store: DuckDBStore, bucket: str | None) -> None:
    # a self-hosted model's unanswered attempt (no tokens) alone in its minute: the count of calls without a per-token
    # price is every self-hosted call, however the calls fall into rows, and their saving is unknown, never $0
    f = Fleet()
    t = f.task("h1").call("cheap-1", input_tokens=2000, cache_read=500, deployment="self_hosted")
    t.call("cheap-1", input_tokens=0, output_tokens=0, status="error", at_s=300, deployment="self_hosted")
    f.task("h2", kind="probe").call(
        "cheap-1", input_tokens=0, output_tokens=0, status="error", deployment="self_hosted"
    )
    f.write(store)
    s = _ask(store, Filters(deployment="self_hosted"), bucket=bucket, by="model").summary()
    assert (s["calls"], s["unpriced_calls"], s["unpriced_cache_read_tokens"]) == (3, 3, 500)
    assert s["saved_usd"] is None
    assert "3 of 3 calls without a per-token price" in s["headline"]
    # the unanswered attempt alone: nothing was read from the cache, and nothing is said to be saved
    only = _ask(store, Filters(deployment="self_hosted", kind="probe"), bucket=bucket).summary()
    assert (only["calls"], only["unpriced_calls"], only["saved_usd"]) == (1, 1, None)


def test_each_filter_narrows(store: DuckDBStore) -> None:
    _fleet().write(store)
    fix = _ask(store, Filters(kind="fix")).summary()
    # x1..x5: input 12,000, read 1,500 -> saved 0.00405; missed 2,750 -> 0.007425
    assert (fix["calls"], fix["input_tokens"], fix["saved_usd"], fix["missed_usd"]) == (
        5,
        12000,
        Decimal("0.00405"),
        Decimal("0.007425"),
    )
    # plan alone: its model's cache-read rate is still known (learned from the project's calls, not only plan's)
    assert _ask(store, Filters(kind="plan")).summary()["missed_usd"] == Decimal("0.00135")
    pricey = _ask(store, Filters(model="pricey-1")).summary()
    assert (pricey["calls"], pricey["input_tokens"], pricey["missed_tokens"]) == (2, 7000, 2000)
    hosted = _ask(store, Filters(deployment="self_hosted")).summary()
    assert (hosted["calls"], hosted["saved_usd"], hosted["missed_tokens"], hosted["unpriced_calls"]) == (
        2,
        None,
        1000,
        2,
    )
    anthropic = _ask(store, Filters(provider="anthropic")).summary()
    assert (anthropic["calls"], anthropic["cache_read_tokens"]) == (7, 1500)
    # the second day holds only t5 (plan)
    late = _ask(store, Filters(since=T0 + timedelta(hours=12))).summary()
    assert (late["calls"], late["input_tokens"], late["missed_tokens"]) == (2, 3000, 500)
    early = _ask(store, Filters(until=T0 + timedelta(hours=12)))
    assert early.summary()["calls"] == 12
    assert set(_rows(early.prefix_stability, "kind")) == {"fix"}


def test_project_isolation(store: DuckDBStore) -> None:
    _fleet().write(store)
    other = Fleet()
    other.task("o1", kind="review", project="other").call("pricey-1", input_tokens=100_000, cache_read=0).call(
        "pricey-1", input_tokens=100_000, cache_read=90_000, ttft_s=9.0
    )
    other.write(store)
    mine = _ask(store, Filters(project="default"), by="kind")
    assert mine.summary()["input_tokens"] == 37500
    assert _rows(mine.groups, "kind")["review"]["input_tokens"] == 11500
    assert mine.ttft_by_hit_rate["ttft_calls"].sum() == 10  # not o1's 9 s call
    theirs = _ask(store, Filters(project="other")).summary()
    # o2 read 90,000 of 100,000: saved 90,000 x 9/M = 0.81; missed min(100000, 100000) - 90000 = 10,000 x 9/M
    assert (theirs["calls"], theirs["cache_read_tokens"], theirs["saved_usd"]) == (2, 90000, Decimal("0.81"))
    assert theirs["missed_usd"] == Decimal("0.09")
    assert _ask(store, by="project").groups.height == 2


def test_an_unknown_dimension_is_a_usage_error_and_an_empty_selection_answers(store: DuckDBStore) -> None:
    with pytest.raises(UsageError, match="unknown dimension"):
        _ask(store, by="colour")
    s = _ask(store).summary()
    assert (s["calls"], s["hit_rate"], s["saved_usd"], s["missed_usd"]) == (0, None, None, None)
    assert QUESTIONS["cache"].options is CacheOptions


def test_above_the_sample_size_misses_are_measured_on_whole_tasks_and_scaled(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 identical tasks (kinds a and b): cheap-1 1,000 in / 0 read (ttft 0.9), then 1,500 / 800 (ttft 0.3):
    # 200 missed tokens per task (min(1000, 1500) - 800); 80 calls, 100,000 input, 32,000 read
    f = Fleet()
    for i in range(40):
        t = f.task(f"s{i}", kind="ab"[i % 2], minute=i)
        t.call("cheap-1", input_tokens=1000, cache_read=0, ttft_s=0.9).call(
            "cheap-1", input_tokens=1500, cache_read=800, ttft_s=0.3
        )
    f.write(store)
    monkeypatch.setattr(_cache, "SAMPLE_CALLS", 20)  # a quarter of the calls' tasks
    a = _ask(store, by="kind")
    s = a.summary()
    assert 0 < s["measured_calls"] < 80 and s["measured_calls"] % 2 == 0  # whole tasks
    # exact whatever the sample: calls, tokens, hit rate, savings (32,000 x $0.9/M)
    assert (s["calls"], s["input_tokens"], s["cache_read_tokens"]) == (80, 100000, 32000)
    assert s["saved_usd"] == Decimal("0.0288")
    # every task misses 200 tokens: the sample's misses x 80 / measured calls = 40 x 200, x $0.9/M
    assert (s["missed_tokens"], s["missed_usd"]) == (8000, Decimal("0.0072"))
    assert any("sample of tasks" in n for n in a.notes)
    # by kind (a task's value, read with the sample): each kind's hit rate is every task's, 800 / 2,500
    assert [r["hit_rate"] for r in a.groups.rows(named=True)] == [pytest.approx(0.32)] * 2
    assert a.ttft_by_hit_rate["median_ttft_s"].to_list() == [pytest.approx(0.9), pytest.approx(0.3)]
    exact = _ask(store, exact=True).summary()
    assert (exact["measured_calls"], exact["missed_tokens"]) == (80, 8000)


@pytest.mark.parametrize(
    "field, value",
    [
        ("engine", "vllm"),
        ("engine_version", "0.6.0"),
        ("gpu_type", "H100"),
        ("cluster", "c1"),
        ("quantization", "fp8"),
        ("agent_version", "v1"),
        ("harness_version", "h1"),
        ("golden", True),
    ],
)
def test_every_other_dimension_narrows(store: DuckDBStore, field: str, value: Any) -> None:
    # two tasks that differ in every dimension: a (1,000 + 2,000 input, 500 read) and b (5,000 input, none read)
    f = Fleet()
    infra_a = {
        "engine": "vllm",
        "engine_version": "0.6.0",
        "gpu_type": "H100",
        "cluster_id": "c1",
        "quantization": "fp8",
    }
    infra_b = {
        "engine": "sglang",
        "engine_version": "0.7.0",
        "gpu_type": "A100",
        "cluster_id": "c2",
        "quantization": "bf16",
    }
    f.task("a", agent_version="v1", harness_version="h1", golden=True).call(
        input_tokens=1000, cache_read=0, **infra_a
    ).call(input_tokens=2000, cache_read=500, **infra_a)
    f.task("b", agent_version="v2", harness_version="h2", minute=1).call(input_tokens=5000, cache_read=0, **infra_b)
    f.write(store)
    assert _ask(store).summary()["input_tokens"] == 8000
    s = _ask(store, Filters.model_validate({field: value})).summary()
    # a alone: 3,000 input, 500 read; its second call repeats min(1000, 2000) - 500 = 500 tokens
    assert (s["calls"], s["input_tokens"], s["cache_read_tokens"], s["missed_tokens"]) == (2, 3000, 500, 500)
