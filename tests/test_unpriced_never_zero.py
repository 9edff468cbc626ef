"""Unpriced is never $0 (docs/analytics.md; taskcost/analytics/_cost_priced.py): a tool call or call attempt without
a price is counted, never added as $0, and every per-task dollar figure (``taskcost cost``'s cost per completed task
and its interval, a canary arm's) is over the fully priced tasks only, with the tasks left out counted beside it.

Rates of the builder (tests/builders/analytics.py), USD per million tokens, input / output: cheap-1 1 / 2. A call of
``mystery-9`` has no price anywhere; a self-hosted call without a clusters file is unpriced too.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from taskcost.analytics._canary import CanaryAnswer, CanaryOptions, canary
from taskcost.analytics._cost import CostAnswer, CostOptions, cost
from taskcost.analytics._filters import Filters
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet


def _ask(tmp_path: Path, fleet: Fleet, filters: Filters | None = None, **options: Any) -> CostAnswer:
    with DuckDBStore.open(tmp_path / "a.duckdb") as s:
        fleet.write(s)
        return cost(s, filters or Filters(), CostOptions(**options))


def _waste_row(answer: CostAnswer, kind: str) -> tuple[Any, ...]:
    [row] = answer.waste.filter(answer.waste["kind"] == kind).to_dicts()
    return tuple(row[c] for c in ("amount_usd", "tasks", "calls", "unpriced_calls"))


def _groups(answer: CostAnswer, key: str, *cols: str) -> dict[Any, tuple[Any, ...]]:
    assert answer.groups is not None
    return {r[key]: tuple(r[c] for c in cols) for r in answer.groups.iter_rows(named=True)}


# -- 1. tool calls without a price ---------------------------------------------------------------------------------
def _tools() -> Fleet:
    f = Fleet()
    f.task("a").call("cheap-1").tool(cost=None).tool(cost=None)  # review: LLM $0.0012, two tools without a price
    f.task("b", kind="fix").call("cheap-1").tool(cost=Decimal("0.01"))  # fix: $0.0012 + a tool at $0.01
    return f


def test_unpriced_tool_calls_are_counted_and_no_priced_tool_call_is_no_figure(tmp_path: Path) -> None:
    a = _ask(tmp_path, _tools(), by="kind")
    assert _waste_row(a, "tool_spend") == (Decimal("0.01"), None, 3, 2)  # amount, tasks, calls, unpriced calls
    s = a.summary()
    assert (s["tool_calls"], s["unpriced_tool_calls"], s["tool_spend_usd"]) == (3, 2, Decimal("0.01"))
    assert s["priced_share"] == pytest.approx(3 / 5)  # 2 call attempts and 3 tool calls, 2 of them unpriced
    # kind: tool spend, tool calls, unpriced tool calls, priced share
    assert _groups(a, "kind", "tool_spend_usd", "tool_calls", "unpriced_tool_calls", "priced_share") == {
        "review": (None, 2, 2, pytest.approx(1 / 3)),  # no tool call priced: no figure, not $0
        "fix": (Decimal("0.01"), 1, 0, 1.0),
    }
    assert "coverage, tools: 1 of 3 tool calls of finished tasks priced; 2 unpriced, not in the tool spend" in a.notes
    # a is not fully priced: the cost per completed task is b's, $0.0112, and a is counted beside it
    assert (s["cost_per_completed_task_usd"], s["unpriced_tasks"]) == (Decimal("0.0112"), 1)


def test_a_selection_whose_tool_calls_are_all_unpriced_has_no_tool_spend(tmp_path: Path) -> None:
    a = _ask(tmp_path, _tools(), Filters(kind="review"))
    assert _waste_row(a, "tool_spend") == (None, None, 2, 2)  # before: $0 and 0 unpriced
    s = a.summary()
    assert (s["tool_spend_usd"], s["tool_calls"], s["unpriced_tool_calls"]) == (None, 2, 2)
    assert any(n.endswith("(none is priced: no tool spend figure, not $0)") for n in a.notes)
    assert s["cost_per_completed_task_usd"] is None  # its only task has unpriced tool calls


# -- 2. an abandoned task without a price --------------------------------------------------------------------------
def _completed(f: Fleet) -> Fleet:
    for i, n in enumerate((1000, 2000, 3000, 6000)):  # completed: $0.001, $0.002, $0.003, $0.006
        f.task(f"c{i}", minute=i).call("cheap-1", input_tokens=n, output_tokens=0)
    return f


def test_abandoned_tasks_without_a_price_are_left_out_of_cost_per_completed_task(tmp_path: Path) -> None:
    f = _completed(Fleet())
    f.task("x", minute=10, outcome="abandoned", kind="lost").call("mystery-9")  # NULL cost: unknown, not $0
    f.task("y", minute=11, outcome="abandoned").call("cheap-1", output_tokens=0).call("mystery-9")  # $0.001 + unknown
    (tmp_path / "all").mkdir()
    (tmp_path / "priced").mkdir()
    a = _ask(tmp_path / "all", f)
    priced = _ask(tmp_path / "priced", _completed(Fleet()))  # the same without x and y
    s, p = a.summary(), priced.summary()
    # $0.012 over the 4 completed tasks, as without x and y (before: y's $0.001 in, x as $0: $0.00325)
    assert s["cost_per_completed_task_usd"] == p["cost_per_completed_task_usd"] == Decimal("0.003")
    assert (s["ci_method"], s["ci_low_usd"], s["ci_high_usd"]) == (p["ci_method"], p["ci_low_usd"], p["ci_high_usd"])
    assert (s["tasks"], s["abandoned"], s["unpriced_tasks"], s["unpriced_completed_tasks"]) == (6, 2, 2, 0)
    assert (s["priced_completed_tasks"], s["unpriced_calls"]) == (4, 2)
    assert s["spend_usd"] == Decimal("0.013")  # the total keeps y's priced part, its unpriced attempts beside it
    assert _waste_row(a, "abandoned_tasks") == (Decimal("0.001"), 2, 3, 2)
    assert any("the other 2 (2 unpriced call attempts and 0 unpriced tool calls in them) are left out of it, not "
               "counted as $0" in n for n in a.notes)  # fmt: skip


def test_abandoned_tasks_none_of_them_priced_have_no_dollar_figure(tmp_path: Path) -> None:
    f = _completed(Fleet())
    f.task("x", minute=10, outcome="abandoned", kind="lost").call("mystery-9")
    a = _ask(tmp_path, f, Filters(kind="lost"))
    assert _waste_row(a, "abandoned_tasks") == (None, 1, 1, 1)  # not $0
    s = a.summary()
    assert (s["spend_usd"], s["cost_per_completed_task_usd"], s["unpriced_tasks"]) == (None, None, 1)


# -- 4. the headline over fully priced tasks -----------------------------------------------------------------------
def test_cost_per_completed_task_is_over_the_fully_priced_tasks_when_most_calls_are_self_hosted(
    tmp_path: Path,
) -> None:
    f = Fleet()
    for i in range(2):  # on the API: 5,000 in + 700 out = $0.005 + $0.0014 = $0.0064 a task
        f.task(f"api{i}", minute=i).call("cheap-1", input_tokens=5000, output_tokens=700, deployment="api")
    for i in range(64):  # self-hosted without a clusters file: unpriced (64 of 66 calls, 97 %)
        f.task(f"sh{i}", minute=10 + i).call("llama-3-70b", deployment="self_hosted")
    a = _ask(tmp_path, f, by="deployment")
    s = a.summary()
    # before: $0.0128 / 66 completed tasks = $0.000194, as if the self-hosted tasks cost nothing
    assert s["cost_per_completed_task_usd"] == Decimal("0.0064")
    assert s["ci_low_usd"] is None or s["ci_low_usd"] <= Decimal("0.0064") <= s["ci_high_usd"]
    assert s["spend_usd"] == Decimal("0.0128")
    assert (s["completed"], s["priced_completed_tasks"], s["unpriced_completed_tasks"]) == (66, 2, 64)
    assert (s["unpriced_tasks"], s["unpriced_calls"], s["priced_tasks_spend_usd"]) == (64, 64, Decimal("0.0128"))
    assert (
        "cost per completed task is over the 2 of 66 finished tasks that are fully priced (2 of 66 completed): the "
        "other 64 (64 unpriced call attempts and 0 unpriced tool calls in them) are left out of it, not counted as $0"
    ) in a.notes
    assert _groups(a, "deployment", "cost_per_completed_task_usd", "spend_usd", "unpriced_tasks") == {
        "api": (Decimal("0.0064"), Decimal("0.0128"), 0),
        "self_hosted": (None, None, 64),  # nothing priced: no figure, not $0
    }


# -- 3. a canary arm whose calls are all unpriced ------------------------------------------------------------------
BASE, CAND = "0.6.0", "0.7.0"


def _canary(store: DuckDBStore) -> CanaryAnswer:
    return canary(
        store, Filters(), CanaryOptions(dimension="engine_version", baseline=BASE, candidate=CAND)
    )  # fmt: skip


def test_a_canary_arm_whose_calls_are_all_unpriced_has_no_cost_figure_and_is_not_compared(
    store: DuckDBStore,
) -> None:
    f = Fleet()
    for i in range(30):  # baseline: $0.0012 a task; candidate: a model without a price
        f.task(f"b{i}", minute=i).call("cheap-1", engine_version=BASE)
        f.task(f"c{i}", minute=i + 0.5).call("mystery-9", engine_version=CAND)
    f.write(store)
    answer = _canary(store)
    arms = {r["arm"]: r for r in answer.arms.to_dicts()}
    assert arms["baseline"]["cost_per_completed_task_usd"] == Decimal("0.0012")
    cand = arms["candidate"]
    assert (cand["cost_per_completed_task_usd"], cand["cost_usd"]) == (None, None)  # before: 0E-12 and $0
    assert (cand["unpriced_calls"], cand["unpriced_tasks"], cand["priced_completed_tasks"]) == (30, 30, 0)
    [row] = answer.metrics.filter(answer.metrics["metric"] == "cost_per_completed_task").to_dicts()
    assert (row["candidate"], row["effect"], row["outcome"], row["needed_n"]) == (None, None, "inconclusive", None)
    assert row["rule"] == (
        "not compared: candidate: no fully priced completed task (30 of 30 finished tasks unpriced, 30 of 30 call "
        "attempts)"
    )
    assert answer.verdict == "not_enough_data"  # cost is critical: never a silent pass
    assert "cost_per_completed_task" in answer.summary()["holding_verdict_metrics"]
    assert answer.to_json()["summary"]["candidate_cost_per_completed_task_usd"] is None
    assert not any("count $0" in n for n in answer.notes)
    assert (
        "coverage, candidate: 30 of 30 call attempts in its finished tasks are unpriced; the 30 of 30 finished tasks "
        "with any are left out of its cost per completed task (not counted as $0): none of its completed tasks is "
        "fully priced, so it has no cost figure and cost is not compared."
    ) in answer.notes


def test_a_canary_arm_leaves_its_tasks_with_unpriced_tool_calls_out_of_the_cost(store: DuckDBStore) -> None:
    f = Fleet()
    for i in range(30):
        f.task(f"b{i}", minute=i).call("cheap-1", engine_version=BASE)  # $0.0012
        c = f.task(f"c{i}", minute=i + 0.5).call("cheap-1", input_tokens=2000, engine_version=CAND)  # $0.0022
        if i < 10:
            c.tool(cost=None)  # these 10 are not fully priced: left out, not counted at $0.0022
    f.write(store)
    arms = {r["arm"]: r for r in _canary(store).arms.to_dicts()}
    cand = arms["candidate"]
    assert cand["cost_per_completed_task_usd"] == Decimal("0.0022")
    assert (cand["tool_calls"], cand["unpriced_tool_calls"], cand["unpriced_tasks"]) == (10, 10, 10)
    assert (cand["priced_completed_tasks"], cand["unpriced_calls"]) == (20, 0)
