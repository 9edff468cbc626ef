"""The bound on an answer's groups (taskcost/analytics/_groups.py): every question that groups by a dimension shows
the ``max_groups`` values with the most spend and adds up the rest in one row, ``other``, ranked and folded in SQL.
Each expected figure is computed here on its own, from the ``tasks`` and ``llm_calls`` views and the builders' round
rates, never from the answer."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from taskcost.analytics import QUESTIONS, Filters, UsageError
from taskcost.analytics import _cost_intervals as cost_intervals
from taskcost.analytics._breakeven import BreakevenOptions, breakeven
from taskcost.analytics._cache import CacheOptions, cache_economics
from taskcost.analytics._changes import ChangesOptions, changes
from taskcost.analytics._cost import CostOptions, cost
from taskcost.analytics._per_token import PerTokenOptions, per_token
from taskcost.store import DuckDBStore
from tests.builders.analytics import RATES, T0, Fleet

MICRO = Decimal("0.000001")
ALL = Filters()


def _sql(store: DuckDBStore, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    return store.query(sql, params or []).dicts()


def _rows(table: Any) -> list[dict[str, Any]]:
    return list(table.iter_rows(named=True))


@pytest.fixture
def kinds(store: DuckDBStore) -> DuckDBStore:
    """12 task kinds (k00 .. k10, and one named ``other``) of 3 finished tasks each, spend growing with the kind's
    number (``other`` the dearest); a third of the tasks failed, one abandoned; a tool call on some."""
    f = Fleet()
    names = [f"k{i:02d}" for i in range(11)] + ["other"]
    for i, kind in enumerate(names):
        for j in range(3):
            outcome = ("completed", "failed", "completed")[j] if i % 4 else ("completed", "abandoned", "failed")[j]
            t = f.task(f"{kind}-{j}", kind=kind, outcome=outcome, minute=i * 3 + j)
            t.call("cheap-1", input_tokens=1000 * (i + 1) + 10 * j, output_tokens=100, cache_read=100 * j)
            t.call("pricey-1", input_tokens=500 + i, output_tokens=50 * (j + 1))
            if j == 2:
                t.tool(Decimal("0.001"))
    f.write(store)
    return store


def test_cost_by_kind_shows_the_top_groups_and_adds_up_the_rest_exactly(kinds: DuckDBStore) -> None:
    store = kinds
    ans = cost(store, ALL, CostOptions(by="kind", max_groups=5))
    assert ans.groups is not None
    groups = _rows(ans.groups)
    # the ranking, independently: the finished tasks' spend per kind; a value named "other" is folded when a fold is
    spend = _sql(
        store,
        "SELECT kind, sum(cost_usd) AS spend, count(*) AS tasks, count(*) FILTER (WHERE outcome = 'completed') "
        "AS completed FROM tasks WHERE outcome IS NOT NULL GROUP BY kind ORDER BY spend DESC, kind",
    )
    top = [r for r in spend if r["kind"] != "other"][:5]
    assert [g["kind"] for g in groups] == [r["kind"] for r in top] + ["other"]
    for g, r in zip(groups, top, strict=False):
        assert (g["spend_usd"], g["tasks"], g["completed"]) == (r["spend"], r["tasks"], r["completed"])
    [total] = _sql(
        store,
        "SELECT sum(cost_usd) AS spend, count(*) AS tasks, count(*) FILTER (WHERE outcome = 'completed') AS completed "
        "FROM tasks WHERE outcome IS NOT NULL",
    )
    other = groups[-1]
    assert other["spend_usd"] == total["spend"] - sum(r["spend"] for r in top)
    assert other["tasks"] == total["tasks"] - sum(r["tasks"] for r in top) == 7 * 3
    assert other["completed"] == total["completed"] - sum(r["completed"] for r in top)
    cpct = (other["spend_usd"] / other["completed"]).quantize(MICRO, rounding=ROUND_HALF_EVEN)
    assert other["cost_per_completed_task_usd"] == cpct
    assert other["ci_method"] == "bootstrap" and other["ci_low_usd"] <= cpct <= other["ci_high_usd"]
    # the whole selection is the same as without the fold, and the fold is said
    whole = cost(store, ALL, CostOptions(by="kind", max_groups=100))
    assert whole.groups is not None and whole.groups.height == 12
    assert "other" in whole.groups["kind"].to_list()  # no fold: the value named "other" is its own row
    assert ans.summary() | {"groups": 0, "folded_groups": 0} == whole.summary() | {"groups": 0, "folded_groups": 0}
    assert ans.summary()["folded_groups"] == 7 and whole.summary()["folded_groups"] == 0
    assert ans.spend_usd == total["spend"]
    assert any("7 of 12 values of kind" in n and "--kind VALUE" in n and "max_groups" in n for n in ans.notes)


def test_cost_no_fold_when_one_group_would_be_folded(kinds: DuckDBStore) -> None:
    ans = cost(kinds, ALL, CostOptions(by="kind", max_groups=11))
    assert ans.groups is not None and ans.groups.height == 12 and ans.summary()["folded_groups"] == 0


def test_cost_reads_at_most_max_groups_plus_one_groups_and_bootstraps_no_more(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = Fleet()
    for i in range(60):
        f.task(f"t{i}", kind=f"kind-{i}", minute=i, outcome="failed" if i % 3 == 0 else "completed").call(
            "cheap-1", input_tokens=1000 + i
        )
    f.write(store)
    results: list[pa.Table] = []
    arrow = store.arrow

    def recorded(*args: Any, **kwargs: Any) -> pa.Table:
        table = arrow(*args, **kwargs)
        results.append(table)
        return table

    bootstraps: list[int] = []
    interval = cost_intervals.interval

    def counted(units: Any, confidence: float) -> Any:
        bootstraps.append(len(units))
        return interval(units, confidence)

    monkeypatch.setattr(store, "arrow", recorded)
    monkeypatch.setattr(cost_intervals, "interval", counted)
    ans = cost(store, ALL, CostOptions(by="kind", max_groups=4))
    assert ans.groups is not None and ans.groups.height == 5 and ans.summary()["folded_groups"] == 56
    # every per-group aggregate the store returned: at most 4 + 1 groups (the parts: per group and outcome)
    parts = [t for t in results if {"grp", "outcome", "n"} <= set(t.column_names)]
    assert parts and all(len(set(t.column("grp").to_pylist())) <= 5 and t.num_rows <= 5 * 4 for t in parts)
    assert len(bootstraps) <= 5 and sum(bootstraps[:-1]) <= 60  # one bootstrap per group shown, at most


def test_per_token_folds_the_models_past_max_groups_and_never_ranks_them(store: DuckDBStore) -> None:
    f = Fleet()
    plan = [("pricey-1", 4000), ("claude-x", 3000), ("cheap-1", 2000), ("m-1", 1000), ("m-2", 1000), ("m-3", 500)]
    for i, (model, tokens) in enumerate(plan):
        for j in range(2):
            f.task(f"{model}-{j}", minute=2 * i + j, outcome=("completed", "failed")[j]).call(
                model, provider="openai" if model.startswith("m-") else None, input_tokens=tokens, output_tokens=100
            )
    f.write(store)
    ans = per_token(store, ALL, PerTokenOptions(max_groups=2))
    rows = {r["model"]: r for r in _rows(ans.detail.join(ans.ranking, on="model"))}
    assert set(rows) == {"pricey-1", "claude-x", "other"}
    other = rows["other"]
    calls = _sql(
        store,
        "SELECT model, count(*) AS n, sum(cost_usd) AS usd, sum(input_tokens + output_tokens) FILTER "
        "(WHERE cost_usd IS NOT NULL) AS tokens FROM llm_calls GROUP BY model",
    )
    folded = [c for c in calls if c["model"] not in ("pricey-1", "claude-x")]
    spend = sum((c["usd"] for c in folded if c["usd"] is not None), Decimal(0))
    tokens = sum(c["tokens"] or 0 for c in folded)
    assert other["call_attempts"] == sum(c["n"] for c in folded) == 8
    assert other["call_spend_usd"] == spend
    assert other["per_mtok_usd"] == (spend * 1_000_000 / tokens).quantize(MICRO, rounding=ROUND_HALF_EVEN)
    assert other["completed_tasks"] == 4 and other["finished_tasks"] == 8
    assert other["per_token_rank"] is None and "4 models added up" in other["unranked_because"]
    assert ans.summary()["folded_groups"] == 4
    assert ans.summary()["call_attempts"] == 12  # the totals cover everything
    assert any("4 of 6 models" in n for n in ans.notes)


@pytest.fixture
def gpus(store: DuckDBStore) -> DuckDBStore:
    """10 GPU types (g0 .. g9), spend growing with the number; each task a cheap-1, a pricey-1 and a claude-x call
    that read from the cache (pricey-1 spends the most)."""
    f = Fleet()
    for i in range(10):
        t = f.task(f"t{i}", kind=f"kind-{i}", minute=i)
        t.call("cheap-1", input_tokens=2000 + 100 * i, cache_read=500 + i, gpu_type=f"g{i}")
        t.call("pricey-1", input_tokens=1000 + 100 * i, cache_read=200 + i, gpu_type=f"g{i}")
        t.call("claude-x", input_tokens=500 + 10 * i, cache_read=100 + i, gpu_type=f"g{i}")
    f.write(store)
    return store


def _saved(rows: list[dict[str, Any]]) -> Decimal:
    """What the cache reads saved, by hand: each model's read tokens x (input rate - cache-read rate)."""
    return sum(
        (Decimal(r["read"]) * (RATES[r["model"]][0] - RATES[r["model"]][1]) / 1_000_000 for r in rows), Decimal(0)
    )


def test_cache_folds_groups_and_models_and_prices_the_rest_at_each_models_rates(gpus: DuckDBStore) -> None:
    store = gpus
    per = _sql(
        store,
        "SELECT gpu_type, model, sum(cache_read_tokens) AS read, sum(cost_usd) AS usd FROM llm_calls GROUP BY ALL",
    )
    ranked = sorted({r["gpu_type"] for r in per}, key=lambda g: -sum(r["usd"] for r in per if r["gpu_type"] == g))
    ans = cache_economics(store, ALL, CacheOptions(by="gpu_type", max_groups=3))
    groups = {r["gpu_type"]: r for r in _rows(ans.groups)}
    assert set(groups) == {*ranked[:3], "other"}
    rest = [r for r in per if r["gpu_type"] not in ranked[:3]]
    assert groups["other"]["cache_read_tokens"] == sum(r["read"] for r in rest)
    assert groups["other"]["saved_usd"] == _saved(rest)
    assert ans.summary()["saved_usd"] == _saved(per) and ans.summary()["folded_groups"] == 7
    # one model kept (pricey-1 spends the most), the two others each priced at its own rates in "other"
    one = cache_economics(store, ALL, CacheOptions(max_groups=1))
    by_model = {r["model"]: r for r in _rows(one.by_model)}
    assert set(by_model) == {"pricey-1", "other"}
    rest = [r for r in per if r["model"] != "pricey-1"]
    assert by_model["other"]["saved_usd"] == _saved(rest) and by_model["other"]["provider"] is None
    assert by_model["other"]["input_usd_per_mtok"] is None  # several models: no one rate
    assert by_model["other"]["unpriced_calls"] == 0
    assert one.summary()["saved_usd"] == _saved(per)
    assert any("2 of 3 models" in n for n in one.notes)


def test_cache_prefix_report_folds_task_kinds_and_breaks(store: DuckDBStore) -> None:
    f = Fleet()
    for i in range(8):
        t = f.task(f"t{i}", kind=f"kind-{i}", minute=i)
        t.call("claude-x", input_tokens=1000 * (i + 1), cache_read=100, prompt_chars=4000)
        t.call(
            "claude-x", input_tokens=2000 * (i + 1), cache_read=0, prompt_chars=8000, stable_prefix_chars=2000,
            prefix_break_block=i, prefix_break_kind=f"block-{i}",
        )  # fmt: skip
    f.write(store)
    ans = cache_economics(store, ALL, CacheOptions(max_groups=2, exact=True))
    stability = {r["kind"]: r for r in _rows(ans.prefix_stability)}
    assert len(stability) == 3 and "other" in stability
    assert sum(r["breaks"] for r in stability.values()) == 8 and stability["other"]["breaks"] == 6
    breakers = _rows(ans.prefix_breakers)
    assert len(breakers) <= 3 * 3 and sum(r["breaks"] for r in breakers) == 8
    # two breaks keep theirs (one call each: the first by block kind), the other six are block kind "other", -1
    pairs = {(r["break_kind"], r["break_block"]) for r in breakers}
    assert ("other", -1) in pairs and pairs <= {("block-0", 0), ("block-1", 1), ("other", -1)}
    # each break's after-break tokens: input - round(2000 x input / 8000), all of them, priced like a saving at
    # claude-x's rates (input - cache read)
    after = sum(2000 * (i + 1) - round(2000 * 2000 * (i + 1) / 8000) for i in range(8))
    assert sum(r["after_break_tokens"] for r in breakers) == after
    discount = (RATES["claude-x"][0] - RATES["claude-x"][1]) / 1_000_000
    assert sum(r["after_break_usd"] for r in breakers) == Decimal(after) * discount


def test_changes_folds_each_fields_values_and_compares_other_as_one_value(store: DuckDBStore) -> None:
    f = Fleet()
    for i in range(4):  # the baseline hour: one engine version
        f.task(f"b{i}", minute=i).call(engine_version="v0", duration_s=1.0)
    for i in range(30):  # the current hour: ten versions, v1 on most calls
        version = "v1" if i < 12 else f"v{2 + i % 9}"
        f.task(f"c{i}", minute=60 + i).call(engine_version=version, duration_s=1.0 + i / 10)
    f.write(store)
    since, until = (T0 + timedelta(hours=1)).isoformat(), (T0 + timedelta(hours=2)).isoformat()
    ans = changes(store, Filters.model_validate({"since": since, "until": until}), ChangesOptions(max_groups=3))
    summary = ans.summary()
    fingerprint = [r for r in _rows(ans.tables()[1].frame) if r["field"] == "engine_version"]
    assert len(fingerprint) == 4  # v1, v0 (the most calls) and v10 (the first of the ties) kept; 8 added up
    current = _sql(
        store,
        "SELECT engine_version AS v, count(*) AS n, list(duration_s) AS d FROM llm_calls "
        "WHERE start_time >= CAST(? AS TIMESTAMP) AND start_time < CAST(? AS TIMESTAMP) GROUP BY 1",
        [since, until],
    )
    kept = {r["value"] for r in fingerprint} - {"other"}
    assert "v0" in kept and "v1" in kept
    rest = [r for r in current if r["v"] not in kept]
    other = next(r for r in fingerprint if r["value"] == "other")
    assert other["calls_current"] == sum(r["n"] for r in rest) and other["status"] == "appeared"
    assert other["share_current"] == pytest.approx(other["calls_current"] / summary["current_calls"])
    # as a change, "other" is compared like any value: its p95 is that of the folded values' calls
    row = next(r for r in _rows(ans.tables()[0].frame) if r["field"] == "engine_version" and r["value"] == "other")
    durations = [d for r in rest for d in r["d"]]
    assert row["p95_with_s"] == pytest.approx(float(np.percentile(durations, 95)))
    others = [d for r in current if r["v"] in kept for d in r["d"]]
    assert row["p95_without_s"] == pytest.approx(float(np.percentile(others, 95)))
    assert any("engine_version 8 of 11" in n for n in ans.notes)


def test_breakeven_prices_the_folded_models_each_at_its_own_rates(store: DuckDBStore) -> None:
    f = Fleet()
    for i, model in enumerate(("pricey-1", "claude-x", "cheap-1")):
        for h in range(3):
            f.task(f"{model}-{h}", minute=60 * h + i).call(
                model, input_tokens=10_000 * (3 - i), output_tokens=1000, cache_read=1000 * h
            )
    f.write(store)
    asked = {"usd_per_gpu_hour": Decimal("2"), "tokens_per_s": 1000.0}
    whole = breakeven(store, ALL, BreakevenOptions(**asked)).to_json()
    folded = breakeven(store, ALL, BreakevenOptions(**asked, max_groups=1)).to_json()
    traffic = {r[1]: dict(zip(folded["tables"]["traffic"]["columns"], r, strict=True))
               for r in folded["tables"]["traffic"]["rows"]}  # fmt: skip
    assert set(traffic) == {"pricey-1", "other"}
    assert traffic["other"]["priced_at"] == "each at its own model's rates"
    rows = {r[1]: dict(zip(whole["tables"]["traffic"]["columns"], r, strict=True))
            for r in whole["tables"]["traffic"]["rows"]}  # fmt: skip
    other_monthly = Decimal(rows["claude-x"]["api_monthly_usd"]) + Decimal(rows["cheap-1"]["api_monthly_usd"])
    assert Decimal(traffic["other"]["api_monthly_usd"]) == other_monthly
    assert traffic["other"]["calls"] == 6 and traffic["other"]["input_tokens"] == 3 * (20_000 + 10_000)
    for key in ("api_monthly_usd", "tokens_per_hour", "rent_always_on_usd", "breakeven_tokens_per_hour", "calls"):
        assert folded["summary"][key] == whole["summary"][key], key
    assert any("2 of 3 models" in n for n in folded["notes"])


@pytest.fixture
def wide(store: DuckDBStore) -> Iterator[DuckDBStore]:
    """300 tasks, each of its own kind, harness, engine version, GPU type and cluster (a tenant's own data)."""
    f = Fleet()
    for i in range(300):
        f.task(f"t{i}", kind=f"kind-{i}", harness_version=f"h{i}", minute=i / 10).call(
            "cheap-1", input_tokens=1000 + i, cache_read=i, engine=f"e{i}", engine_version=f"v{i}", gpu_type=f"g{i}",
            cluster_id=f"c{i}", prompt_chars=4000, stable_prefix_chars=1000, prefix_break_block=i,
        )  # fmt: skip
    f.write(store)
    yield store


@pytest.mark.parametrize(
    "name, options, tables",
    [
        ("cost", {"by": "kind"}, ["groups"]),
        ("cost", {"by": "engine_version", "bucket": "hour"}, ["groups"]),
        ("per-token", {"by": "engine"}, ["ranking", "detail"]),
        ("cache", {"by": "gpu_type", "exact": True}, ["groups", "by_model", "prefix_stability", "prefix_breakers"]),
        ("cache", {"by": "harness_version"}, ["groups", "prefix_stability"]),
        ("changes", {}, ["fingerprint"]),
    ],
)
def test_every_grouped_answer_has_at_most_max_groups_plus_one_rows_per_grouping(
    wide: DuckDBStore, name: str, options: dict[str, Any], tables: list[str]
) -> None:
    q = QUESTIONS[name]
    doc = q.run(wide, ALL, q.options.model_validate({**options, "max_groups": 5})).to_json()
    for table in tables:
        rows = doc["tables"][table]["rows"]
        bound = 12 * 6 if name == "changes" else 6 * 6 if table == "prefix_breakers" else 6
        bound *= 24 if options.get("bucket") else 1
        assert 0 < len(rows) <= bound, (table, len(rows))
    assert any("other" in n and "max_groups" in n for n in doc["notes"]), doc["notes"]


def test_a_time_series_has_at_most_max_buckets(store: DuckDBStore) -> None:
    # a tenant's own span times, 20 years apart: 175,000 hours, far more than a series may have
    f = Fleet()
    f.task("old", start=T0 - timedelta(days=365 * 20)).call("cheap-1")
    f.task("new").call("cheap-1")
    f.write(store)
    for name in ("cost", "cache"):
        q = QUESTIONS[name]
        with pytest.raises(UsageError, match=r"bucket=hour: the selection spans 175,\d+ hours, more than 100,000"):
            q.run(store, ALL, q.options(bucket="hour"))
        doc = q.run(store, ALL, q.options(bucket="day")).to_json()  # 7,300 days: an answer
        assert doc["summary"]["calls" if name == "cache" else "tasks"] == 2
