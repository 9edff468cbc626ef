"""The money figures of a user's bug report: the cache question's ``missed_usd`` vs the cost question's
``cache_miss_usd`` (two names, two scopes, each answer saying so), and ``saved`` net of cache-write premiums. Rates
of tests/builders/analytics.py (USD per million tokens, input / cache read / cache write): cheap-1 1 / 0.1 / 1.25,
pricey-1 10 / 1 / 12.5."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from taskcost.analytics._cache import CacheOptions, cache_economics
from taskcost.analytics._cost import CostOptions, cost
from taskcost.analytics._filters import Filters
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet


def _fleet() -> Fleet:
    """ok (completed): cheap-1 1,000 in, then 1,500 in / 800 read: min(1000, 1500) - 800 = 200 missed.
    bad (failed): cheap-1 1,000 in, then 2,000 in / 0 read: 1,000 missed, all of it a failed task's (whole waste)."""
    f = Fleet()
    f.task("ok").call("cheap-1", input_tokens=1000).call("cheap-1", input_tokens=1500, cache_read=800)
    f.task("bad", minute=5, outcome="failed").call("cheap-1", input_tokens=1000).call("cheap-1", input_tokens=2000)
    return f


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    path: Path = tmp_path_factory.mktemp("cache_money") / "a.duckdb"
    with DuckDBStore.open(path) as s:
        _fleet().write(s)
        yield s


def test_missed_and_the_cost_questions_cache_misses_are_named_apart(store: DuckDBStore) -> None:
    c = cache_economics(store, Filters(), CacheOptions())
    w = cost(store, Filters(), CostOptions())
    # every call: 200 + 1,000 missed tokens x $0.9/M; the cost question's waste: the completed task's 200 only
    assert c.summary()["missed_usd"] == Decimal("0.00108")
    assert w.summary()["cache_miss_usd"] == Decimal("0.00018")
    assert any("missed counts every selected call attempt" in n and "cache_miss_usd" in n for n in c.notes)
    assert any("completed tasks' last attempts only" in n and "missed_usd" in n for n in w.notes)


def _writer() -> Fleet:
    """w (completed, kind write): cheap-1 writes 88,858 tokens to the cache (100,000 in) and never reads them back;
    pricey-1 reads 1,000 and writes 2,000 (4,000 in) in task r (kind read)."""
    f = Fleet()
    f.task("w", kind="write").call("cheap-1", input_tokens=100_000, cache_write=88_858)
    f.task("r", kind="read", minute=5).call("pricey-1", input_tokens=4000, cache_read=1000, cache_write=2000)
    return f


@pytest.mark.parametrize(
    "options",
    [
        {},  # read unfolded
        {"max_groups": 1},  # a model folded: the folded SQL
        {"max_groups": 1, "exact": True, "by": "kind"},  # by a task's value: the groups from the per-call query
        {"misses": False},
    ],
)
def test_saved_is_net_of_cache_write_premiums(tmp_path: Path, options: dict[str, Any]) -> None:
    with DuckDBStore.open(tmp_path / "a.duckdb") as s:
        _writer().write(s)
        a = cache_economics(s, Filters(), CacheOptions(**options))
    t = a.summary()
    # premiums: 88,858 x (1.25 - 1)/M = 0.0222145; 2,000 x (12.5 - 10)/M = 0.005 -> 0.0272145
    # saved: 1,000 x (10 - 1)/M = 0.009 read saving - 0.0272145 = -0.0182145
    assert t["write_premium_usd"] == Decimal("0.0272145")
    assert t["saved_usd"] == Decimal("-0.0182145")
    assert (t["cache_write_tokens"], t["unpriced_calls"]) == (90_858, 0)
    assert "net of $0.03 cache-write premium" in t["headline"]
    if options.get("by") == "kind":
        groups = {r["kind"]: r for r in a.groups.iter_rows(named=True)}
        assert (groups["write"]["saved_usd"], groups["write"]["write_premium_usd"]) == (
            Decimal("-0.0222145"),
            Decimal("0.0222145"),
        )
    models = {r["model"]: r for r in a.by_model.iter_rows(named=True)}
    if "cheap-1" in models:
        assert models["cheap-1"]["write_premium_usd"] == Decimal("0.0222145")
        assert models["cheap-1"]["saved_usd"] == Decimal("-0.0222145")
        assert models["cheap-1"]["cache_write_usd_per_mtok"] == Decimal("1.25")
    assert "write_premium_usd" in a.groups.columns


def test_over_completed_tasks_without_retries_both_figures_are_one(tmp_path: Path) -> None:
    """One completed task, cheap-1: c1 1,000 in (no fingerprint); c2 2,000 in, fingerprint 2,000 of 4,000 chars stable:
    repeated 1,000 -> 1,000 missed; c3 3,000 in / 500 read, no fingerprint: its previous call without a fingerprint is
    c1 (the cache question's rule, now the cost question's too): min(1000, 3000) - 500 = 500 missed. 1,500 x $0.9/M."""
    f = Fleet()
    t = f.task("t").call("cheap-1", input_tokens=1000)
    t.call("cheap-1", input_tokens=2000, prompt_chars=4000, stable_prefix_chars=2000)
    t.call("cheap-1", input_tokens=3000, cache_read=500)
    with DuckDBStore.open(tmp_path / "a.duckdb") as s:
        f.write(s)
        c = cache_economics(s, Filters(), CacheOptions()).summary()
        w = cost(s, Filters(), CostOptions(exact=True)).summary()
    assert c["missed_tokens"] == 1500 and c["missed_usd"] == Decimal("0.00135")
    assert w["cache_miss_usd"] == c["missed_usd"]
    assert (w["cache_miss_fingerprint_calls"], w["cache_miss_estimated_calls"]) == (1, 1)
