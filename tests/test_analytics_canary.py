"""`taskcost canary`: baseline vs candidate with a verdict (taskcost/analytics/_canary.py), on hand-built fleets whose
expected figures are worked out by hand in the comments. Durations are whole seconds (exact in nanoseconds), so the
quantiles are exact; the price book's round rates make the money exact."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from taskcost.analytics import Filters, UsageError
from taskcost.analytics._canary import QUESTION, CanaryAnswer, CanaryOptions, canary
from taskcost.analytics._canary_stats import Effect, judge, quantile_ratio_cis, ratio_of_ratios_cis
from taskcost.analytics._stats import Interval
from taskcost.cli import app
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet

BASE, CAND = "0.6.0", "0.7.0"


def options(**kw: Any) -> CanaryOptions:
    return CanaryOptions(**{"dimension": "engine_version", "baseline": BASE, "candidate": CAND, **kw})


def arm(
    fleet: Fleet,
    version: str,
    durations: Iterable[float],
    *,
    tasks: int,
    prefix: str,
    minute: float = 0,
    model: str = "cheap-1",
    **task: Any,
) -> None:
    """``tasks`` tasks of the arm, the durations dealt out in order, the same number of calls to each task."""
    values = list(durations)
    per_task = len(values) // tasks
    for i in range(tasks):
        t = fleet.task(f"{prefix}{i}", minute=minute + i, **task)
        for d in values[i * per_task : (i + 1) * per_task]:
            t.call(model, duration_s=d, engine_version=version)


def ask(store: DuckDBStore, filters: Filters | None = None, **kw: Any) -> CanaryAnswer:
    answer = canary(store, filters or Filters(), options(**kw))
    json.dumps(answer.to_json(), allow_nan=False)  # always valid JSON (no NaN)
    return answer


def metric(answer: CanaryAnswer, name: str) -> dict[str, Any]:
    [row] = answer.metrics.filter(answer.metrics["metric"] == name).to_dicts()
    return row


def arms(answer: CanaryAnswer) -> dict[str, dict[str, Any]]:
    return {r["arm"]: r for r in answer.arms.to_dicts()}


def p95_regression(fleet: Fleet) -> None:
    """300 calls per arm (30 tasks of 10). Baseline: 1, 2, ..., 300 s. Candidate: the same, but the slowest 30 calls
    (271..300 s) take 3x as long (813..900 s)."""
    arm(fleet, BASE, range(1, 301), tasks=30, prefix="b")
    arm(fleet, CAND, [k if k <= 270 else 3 * k for k in range(1, 301)], tasks=30, prefix="c", minute=0.5)


# -- the verdicts -------------------------------------------------------------------------------------------------
def test_a_slower_p95_fails_the_canary_with_exit_code_1(store: DuckDBStore) -> None:
    fleet = Fleet()
    p95_regression(fleet)
    fleet.write(store)
    answer = ask(store)
    p95 = metric(answer, "latency_p95")
    # p95 = the value at rank ceil(0.95 * 300) = 285: baseline 285 s; candidate 3 * 285 = 855 s; ratio 3.0
    assert (p95["baseline"], p95["candidate"], p95["effect"]) == ("285", "855", 3.0)
    assert (p95["n_baseline"], p95["n_candidate"], p95["margin"]) == (300, 300, 1.1)
    assert (p95["decision"], p95["outcome"]) == ("fail", "worse")
    assert p95["ci_low"] > 1 and p95["rule"].endswith("> margin 1.1")
    # p99 (rank 297: 297 s vs 891 s) has too few calls to be judged: 300 < 1,000
    p99 = metric(answer, "latency_p99")
    assert (p99["baseline"], p99["candidate"], p99["decision"]) == ("297", "891", "not_enough_data")
    assert (
        p99["rule"] == "300 calls < minimum 1000 (p99 from 300 calls has only 3 of them above it)"
        and p99["needed_n"] >= 1000
    )
    # p50 (rank 150) is the same in both arms
    assert (metric(answer, "latency_p50")["baseline"], metric(answer, "latency_p50")["effect"]) == ("150", 1.0)
    doc = answer.to_json()
    assert doc["summary"]["verdict"] == "fail" and doc["summary"]["worse_metrics"] == "latency_p95"
    assert QUESTION.exit_code(doc) == 1
    assert answer.notes[0] == "verdict fail: worse: latency_p95."


def test_a_non_critical_regression_only_warns_when_asked_unless_it_is_critical(store: DuckDBStore) -> None:
    fleet = Fleet()
    p95_regression(fleet)
    fleet.write(store)
    warned = ask(store, non_critical_fail="warn")
    # no fail; the error rate (0 of 300 in both arms: interval up to +1.26 pp > 1 pp) and the task metrics (30 tasks)
    # are inconclusive
    assert warned.verdict == "not_enough_data"
    assert QUESTION.exit_code(warned.to_json()) == 3
    critical = ask(store, non_critical_fail="warn", critical="latency_p95,error_rate")
    assert critical.verdict == "fail" and critical.notes[0] == "verdict fail: critical metric worse: latency_p95."


def test_a_faster_candidate_with_enough_data_passes_with_exit_code_0(store: DuckDBStore) -> None:
    # 1,000 calls per arm in 200 tasks of 5, all completed, no errors, no TTFT reported (the calls do not stream).
    # Baseline 1..1000 s; candidate half that (0.5..500 s).
    fleet = Fleet()
    arm(fleet, BASE, range(1, 1001), tasks=200, prefix="b")
    arm(fleet, CAND, [k / 2 for k in range(1, 1001)], tasks=200, prefix="c", minute=0.5)
    fleet.write(store)
    answer = ask(store)
    for name, base, cand in (
        ("latency_p50", "500", "250"),
        ("latency_p95", "950", "475"),
        ("latency_p99", "990", "495"),
    ):
        row = metric(answer, name)
        # ratio 0.5 and its whole interval below 1: better
        assert (row["baseline"], row["candidate"], row["effect"], row["outcome"]) == (base, cand, 0.5, "better")
        assert row["ci_high"] < 1
    # error rate 0/1000 vs 0/1000: Newcombe upper end = Wilson upper of 0/1000 = 1.96^2 / (1000 + 1.96^2) = 0.383 pp
    error = metric(answer, "error_rate")
    assert (error["effect"], error["outcome"]) == (0.0, "within_margin")
    assert error["ci_high"] == pytest.approx(100 * 3.841459 / 1003.841459, rel=1e-5)
    # success 200/200 vs 200/200: lower end = -(1.96^2 / (200 + 1.96^2)) = -1.885 pp, within -2 pp
    success = metric(answer, "task_success_rate")
    assert (success["baseline"], success["outcome"], success["margin"]) == ("100", "within_margin", -2.0)
    assert success["ci_low"] == pytest.approx(-100 * 3.841459 / 203.841459, rel=1e-5)
    # each task: 5 calls of 1,000 input + 100 output tokens at $1 / $2 per M = 5 x $0.0012 = $0.006, in both arms
    cost = metric(answer, "cost_per_completed_task")
    assert (cost["baseline"], cost["candidate"], cost["effect"]) == ("0.006000000000", "0.006000000000", 1.0)
    assert (cost["ci_low"], cost["ci_high"], cost["outcome"]) == (1.0, 1.0, "within_margin")
    assert metric(answer, "tokens_per_task")["baseline"] == "5500"  # 5 x 1,100
    # TTFT: recorded in neither arm, not critical: inconclusive but left out of the verdict
    ttft = metric(answer, "ttft_p95")
    assert (ttft["rule"], ttft["holds_verdict"]) == ("no data in either arm", False)
    doc = answer.to_json()
    assert doc["summary"]["verdict"] == "pass" and QUESTION.exit_code(doc) == 0
    counts = {k: doc["summary"][f"metrics_{k}"] for k in ("better", "within_margin", "worse", "inconclusive")}
    assert counts == {"better": 3, "within_margin": 4, "worse": 0, "inconclusive": 3}
    assert doc["summary"]["baseline_cost_per_completed_task_usd"] == "0.006000000000"
    assert doc["summary"]["needed_calls_per_arm"] is None


def test_too_little_data_is_not_enough_data_with_exit_code_3_and_the_sample_it_needs(store: DuckDBStore) -> None:
    # 20 calls per arm (4 tasks of 5), every one 1 s, all completed: identical arms, far below every minimum
    fleet = Fleet()
    arm(fleet, BASE, [1] * 20, tasks=4, prefix="b")
    arm(fleet, CAND, [1] * 20, tasks=4, prefix="c", minute=0.5)
    fleet.write(store)
    answer = ask(store)
    doc = answer.to_json()
    assert doc["summary"]["verdict"] == "not_enough_data" and QUESTION.exit_code(doc) == 3
    # the summary's inconclusive metrics are the table's (it listed only those holding the verdict back: 3 said, 10
    # shown); those holding it back are named apart, and are among them
    table = [r["metric"] for r in answer.metrics.to_dicts() if r["outcome"] == "inconclusive"]
    assert doc["summary"]["inconclusive_metrics"].split(", ") == table
    assert set(doc["summary"]["holding_verdict_metrics"].split(", ")) <= set(table)
    # identical constant latencies: a zero-width interval, so each quantile needs just its minimum
    needed = {r["metric"]: r["needed_n"] for r in answer.metrics.to_dicts()}
    assert (needed["latency_p50"], needed["latency_p95"], needed["latency_p99"]) == (100, 200, 1000)
    # error rate 0 vs 0: the upper end at z' = 1.959964 + 0.841621 = 2.801585 (80 % power) is z'^2 / (n + z'^2);
    # <= 1 pp needs n >= 99 z'^2 = 99 x 7.848879 = 777.04 -> 778 calls, rounded up to 2 significant digits: 780
    assert needed["error_rate"] == 780
    # success 100 % vs 100 %: the lower end -z'^2 / (n + z'^2) >= -2 pp needs n >= 49 z'^2 = 384.6 -> 385 tasks
    assert needed["task_success_rate"] == 390  # 385, to 2 significant digits
    assert (needed["cost_per_completed_task"], needed["tokens_per_task"]) == (30, 30)
    assert metric(answer, "error_rate")["rule"] == "20 calls < minimum 100"
    assert (doc["summary"]["needed_calls_per_arm"], doc["summary"]["needed_tasks_per_arm"]) == (1000, 390)
    assert "to decide, about 1,000 calls and 390 finished tasks per arm would be needed" in " ".join(answer.notes)


def test_a_costlier_candidate_fails_on_a_critical_metric_with_exact_money_and_coverage(store: DuckDBStore) -> None:
    fleet = Fleet()
    # baseline: 30 completed + 1 failed task, one cheap-1 call each (1,000 in / 100 out = $0.001 + $0.0002)
    arm(fleet, BASE, [1] * 30, tasks=30, prefix="b")
    fleet.task("b-failed", outcome="failed", minute=40).call("cheap-1", engine_version=BASE)
    # candidate: 30 completed tasks, one pricey-1 call each ($0.01 + $0.002 = $0.012), and a 31st that also has a call
    # of a model without a price (unpriced: coverage, not $0)
    arm(fleet, CAND, [1] * 30, tasks=30, prefix="c", minute=0.5, model="pricey-1")
    fleet.task("c-unpriced", minute=40.5).call("pricey-1", engine_version=CAND).call("mystery-9", engine_version=CAND)
    fleet.write(store)
    answer = ask(store)
    by_arm = arms(answer)
    # baseline: 31 x $0.0012 = $0.0372 over 30 completed = $0.00124; candidate: the task with an unpriced call is left
    # out of its cost per completed task (not counted as $0): 30 x $0.012 / 30 = $0.012
    assert by_arm["baseline"]["cost_usd"] == Decimal("0.0372")
    assert by_arm["baseline"]["cost_per_completed_task_usd"] == Decimal("0.00124")
    assert by_arm["candidate"]["cost_per_completed_task_usd"] == Decimal("0.012")
    assert (by_arm["candidate"]["unpriced_calls"], by_arm["candidate"]["attempts"]) == (1, 32)
    assert (by_arm["candidate"]["unpriced_tasks"], by_arm["candidate"]["priced_completed_tasks"]) == (1, 30)
    cost = metric(answer, "cost_per_completed_task")
    # 0.012 / 0.00124 = 9.677..., over the fully priced completed tasks
    assert cost["effect"] == pytest.approx(0.012 / 0.00124) and (cost["n_baseline"], cost["n_candidate"]) == (30, 30)
    assert (cost["critical"], cost["decision"], cost["outcome"]) == (True, "fail", "worse")
    assert answer.verdict == "fail"
    assert answer.notes[0] == "verdict fail: critical metric worse: cost_per_completed_task."
    assert any("coverage, candidate: 1 of 32 call attempts" in n for n in answer.notes)
    assert answer.to_json()["summary"]["candidate_cost_per_completed_task_usd"] == "0.012000000000"


def test_big_arms_are_sampled_the_same_way_every_time(store: DuckDBStore) -> None:
    # 2,500 successful calls per arm (250 tasks of 10): 1, 2, ..., 2500 s in both arms. With --call-sample 1000,
    # each arm keeps the calls whose start time hashes under 1000/2500 of the range: about 1,000 (sd ~25).
    fleet = Fleet()
    arm(fleet, BASE, range(1, 2501), tasks=250, prefix="b")
    arm(fleet, CAND, range(1, 2501), tasks=250, prefix="c", minute=0.5)
    fleet.write(store)
    first, again = ask(store, call_sample=1000), ask(store, call_sample=1000)
    assert first.metrics.equals(again.metrics)
    by_arm = arms(first)
    for name in ("baseline", "candidate"):
        assert by_arm[name]["calls"] == 2500  # counts and the error rate use every call
        assert 900 <= by_arm[name]["sampled_calls"] <= 1100
    p50 = metric(first, "latency_p50")
    assert (p50["n_baseline"], p50["n_candidate"]) == (
        by_arm["baseline"]["sampled_calls"],
        by_arm["candidate"]["sampled_calls"],
    )
    assert 1100 <= float(p50["baseline"]) <= 1400  # the sample's median of 1..2500 s
    assert metric(first, "error_rate")["n_baseline"] == 2500
    assert any("of 2,500" in n for n in first.notes)


def test_more_errors_fail_on_a_critical_metric_and_failed_calls_have_no_latency(store: DuckDBStore) -> None:
    # 200 calls per arm (20 tasks of 10), all 1 s; 20 of the candidate's fail (the first call of each task)
    fleet = Fleet()
    arm(fleet, BASE, [1] * 200, tasks=20, prefix="b")
    for i in range(20):
        t = fleet.task(f"c{i}", minute=i + 0.5).call(engine_version=CAND, status="error")
        for _ in range(9):
            t.call(engine_version=CAND)
    fleet.write(store)
    answer = ask(store)
    error = metric(answer, "error_rate")
    # 0 / 200 = 0 % vs 20 / 200 = 10 %: +10 pp; the interval's low end is about +6.1 pp (Wilson 20/200 from 6.6 %)
    assert (error["baseline"], error["candidate"], error["effect"]) == ("0", "10", 10.0)
    assert error["ci_low"] > 5 and (error["decision"], error["critical"]) == ("fail", True)
    assert answer.notes[0] == "verdict fail: critical metric worse: error_rate."
    assert metric(answer, "latency_p50")["n_candidate"] == 180  # the 20 failed attempts have no latency
    assert arms(answer)["candidate"]["errors"] == 20


# -- which calls and tasks make an arm ------------------------------------------------------------------------------
def small_fleet(fleet: Fleet, project: str = "default") -> None:
    """Baseline: golden g1, g2 (2 calls each), n1 (3 calls). Candidate: golden g3 (2 calls), n2, n3 (3 calls each)."""
    p = project[0]
    for name, version, golden, calls in (
        ("g1", BASE, True, 2),
        ("g2", BASE, True, 2),
        ("n1", BASE, False, 3),
        ("g3", CAND, True, 2),
        ("n2", CAND, False, 3),
        ("n3", CAND, False, 3),
    ):
        t = fleet.task(f"{p}{name}", golden=golden, project=project, kind="review" if golden else "chore")
        for _ in range(calls):
            t.call("cheap-1", engine_version=version, gpu_type="H100" if golden else "A100")


def arm_sizes(answer: CanaryAnswer) -> tuple[int, int, int, int]:
    a = arms(answer)
    return (
        a["baseline"]["calls"],
        a["candidate"]["calls"],
        a["baseline"]["finished_tasks"],
        a["candidate"]["finished_tasks"],
    )


def test_golden_restricts_both_arms_to_the_fixed_task_set(store: DuckDBStore) -> None:
    fleet = Fleet()
    small_fleet(fleet)
    fleet.write(store)
    assert arm_sizes(ask(store)) == (7, 8, 3, 3)  # baseline 2+2+3 calls, candidate 2+3+3
    assert arm_sizes(ask(store, Filters(golden=True))) == (4, 2, 2, 1)  # g1, g2 vs g3


def test_a_second_projects_tasks_never_show_when_the_project_is_set(store: DuckDBStore) -> None:
    fleet = Fleet()
    small_fleet(fleet)
    small_fleet(fleet, project="other")
    fleet.write(store)
    assert arm_sizes(ask(store, Filters(project="default"))) == (7, 8, 3, 3)
    assert arm_sizes(ask(store, Filters(project="other"))) == (7, 8, 3, 3)
    assert arm_sizes(ask(store)) == (14, 16, 6, 6)  # both projects


@pytest.mark.parametrize(
    ("filters", "sizes"),
    [
        (Filters(kind="chore"), (3, 6, 1, 2)),  # a task dimension: n1 vs n2, n3
        (Filters(gpu_type="H100"), (4, 2, 2, 1)),  # a call dimension: the golden tasks' calls
        (Filters(model="pricey-1"), (0, 0, 0, 0)),
    ],
)
def test_every_other_filter_narrows_both_arms(store: DuckDBStore, filters: Filters, sizes: tuple[int, ...]) -> None:
    fleet = Fleet()
    small_fleet(fleet)
    fleet.write(store)
    answer = ask(store, filters)
    assert arm_sizes(answer) == sizes
    if sizes == (0, 0, 0, 0):  # nothing to compare is never a pass
        assert answer.verdict == "not_enough_data"
        assert any(n.startswith("no calls or tasks with engine_version=0.6.0") for n in answer.notes)


def test_the_time_window_narrows_both_arms(store: DuckDBStore) -> None:
    fleet = Fleet()
    arm(fleet, BASE, [1] * 6, tasks=3, prefix="b")  # tasks at minutes 0, 1, 2
    arm(fleet, CAND, [1] * 6, tasks=3, prefix="c", minute=0.5)  # 0.5, 1.5, 2.5
    fleet.write(store)
    t0 = fleet.tasks[0].start
    window = Filters(since=t0 + timedelta(minutes=1), until=t0 + timedelta(minutes=2))
    assert arm_sizes(ask(store, window)) == (2, 2, 1, 1)  # b1 (minute 1) and c1 (minute 1.5)


def test_a_task_joins_an_arm_only_when_its_calls_share_the_value(store: DuckDBStore) -> None:
    fleet = Fleet()
    fleet.task("both").call(engine_version=BASE).call(engine_version=CAND)  # mixed: in neither task arm
    fleet.task("untagged-call").call(engine_version=BASE).call()  # a call without a value does not disagree
    fleet.task("cand").call(engine_version=CAND)
    fleet.write(store)
    # calls: baseline = both's first + untagged-call's first; candidate = both's second + cand's
    assert arm_sizes(ask(store)) == (2, 2, 1, 1)


def test_a_task_dimension_compares_calls_through_their_task(store: DuckDBStore) -> None:
    fleet = Fleet()
    fleet.task("a", agent_version="1.0").call().call()
    fleet.task("b", agent_version="2.0").call()
    fleet.write(store)
    answer = canary(store, Filters(), CanaryOptions(dimension="agent_version", baseline="1.0", candidate="2.0"))
    assert arm_sizes(answer) == (2, 1, 1, 1)


def test_warmup_leaves_out_each_arms_first_seconds(store: DuckDBStore) -> None:
    fleet = Fleet()
    # baseline: calls 0, 30 and 90 s after its first; candidate: two calls 100 s after its first, starting 10 min on
    fleet.task("b").call(engine_version=BASE, at_s=0).call(engine_version=BASE, at_s=30).call(
        engine_version=BASE, at_s=90
    )
    fleet.task("c", minute=10).call(engine_version=CAND, at_s=0).call(engine_version=CAND, at_s=100)
    fleet.write(store)
    answer = ask(store, warmup_s=60)
    # from 60 s on: the baseline's call at 90 s, the candidate's at 100 s; both tasks started before: left out
    assert arm_sizes(answer) == (1, 1, 0, 0)
    assert any(n.startswith("warm-up: the first 60 s of each arm left out") for n in answer.notes)


# -- asked wrongly ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("filters", "kw", "message"),
    [
        (Filters(), {"dimension": None}, "--dimension is required"),
        (Filters(), {"candidate": None}, "--baseline and --candidate are both required"),
        (Filters(), {"candidate": BASE}, "nothing to compare"),
        (Filters(engine_version=BASE), {}, "--engine-version is set as a filter"),
        (Filters(), {"critical": "error_rate,latency_p90"}, "--critical: unknown metric latency_p90"),
        (Filters(), {"dimension": "deployment", "baseline": "api", "candidate": "gpu"}, "deployment is 'api' or"),
    ],
)
def test_a_question_asked_wrongly_is_a_usage_error(
    store: DuckDBStore, filters: Filters, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        canary(store, filters, options(**kw))


# -- the command line ----------------------------------------------------------------------------------------------
def test_the_cli_exits_1_on_fail_and_2_on_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("TASKCOST_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.duckdb"
    with DuckDBStore.open(path) as s:
        fleet = Fleet()
        p95_regression(fleet)
        fleet.write(s)
    runner = CliRunner()
    args = ["canary", "--db", str(path), "--dimension", "engine_version", "--baseline", BASE, "--candidate", CAND]
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["summary"]["verdict"] == "fail"
    assert runner.invoke(app, args[:-2]).exit_code == 2  # no candidate
    assert runner.invoke(app, [*args, "--latency-p95-margin", "0.9"]).exit_code == 2  # a margin must be > 1


# -- the statistics ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("effect", "decision", "outcome"),
    [
        (Effect(1.25, Interval(1.12, 1.40, "t"), 1.10, "ratio", "increase"), "fail", "worse"),  # low > 1, 1.25 > 1.1
        (Effect(1.05, Interval(1.01, 1.20, "t"), 1.10, "ratio", "increase"), "not_enough_data", "inconclusive"),
        (Effect(1.15, Interval(0.98, 1.30, "t"), 1.10, "ratio", "increase"), "not_enough_data", "inconclusive"),
        (Effect(1.05, Interval(0.98, 1.09, "t"), 1.10, "ratio", "increase"), "pass", "within_margin"),  # 1.09 <= 1.1
        (Effect(0.90, Interval(0.85, 0.95, "t"), 1.10, "ratio", "increase"), "pass", "better"),  # high < 1
        # worse for sure (low 0.2 > 0) but perhaps not by more than the margin (0.8 <= 1, high 1.5 > 1)
        (Effect(0.8, Interval(0.2, 1.5, "t"), 1.0, "pp", "increase"), "not_enough_data", "inconclusive"),
        (Effect(1.5, Interval(0.2, 3.0, "t"), 1.0, "pp", "increase"), "fail", "worse"),  # low 0.2 > 0, 1.5 > 1
        (Effect(-3.0, Interval(-5.0, -1.0, "t"), 2.0, "pp", "decrease"), "fail", "worse"),  # high < 0, -3 < -2
        (Effect(-1.0, Interval(-1.9, 0.5, "t"), 2.0, "pp", "decrease"), "pass", "within_margin"),  # low >= -2
        (Effect(1.0, Interval(0.5, 1.5, "t"), 2.0, "pp", "decrease"), "pass", "better"),  # low > 0
    ],
)
def test_the_three_outcome_rule(effect: Effect, decision: str, outcome: str) -> None:
    j = judge(effect)
    assert (j.decision, j.outcome) == (decision, outcome)


def test_the_quantile_bootstrap_matches_resampling_the_calls() -> None:
    """The order-statistic shortcut against scipy.stats.bootstrap resampling every call (both seeded, B = 2,000: the
    ends agree within Monte Carlo noise)."""
    rng = np.random.default_rng(7)
    base, cand = rng.lognormal(0, 0.6, 400), 1.2 * rng.lognormal(0, 0.6, 400)
    [(point, ci)] = quantile_ratio_cis(base, cand, [0.95])

    def ratio(b: np.ndarray, c: np.ndarray, axis: int = -1) -> Any:
        return np.quantile(c, 0.95, axis=axis, method="inverted_cdf") / np.quantile(
            b, 0.95, axis=axis, method="inverted_cdf"
        )

    ref = stats.bootstrap(
        (base, cand), ratio, n_resamples=2000, method="percentile", random_state=np.random.default_rng(1)
    )
    assert point == pytest.approx(float(ratio(base, cand)))
    assert ci.low == pytest.approx(ref.confidence_interval.low, rel=0.03)
    assert ci.high == pytest.approx(ref.confidence_interval.high, rel=0.03)


def test_the_task_ratio_interval_above_the_bootstrap_size_matches_a_bootstrap() -> None:
    """Above 500 tasks per arm the cost ratio's interval is the delta method: it agrees with scipy's bootstrap."""
    rng = np.random.default_rng(3)
    n = 600
    cost_b, cost_c = rng.lognormal(0, 1, n), 1.1 * rng.lognormal(0, 1, n)
    done_b, done_c = (rng.random(n) < 0.85).astype(float), (rng.random(n) < 0.80).astype(float)
    [ci] = ratio_of_ratios_cis([(cost_b, done_b)], [(cost_c, done_c)])

    def ratio(ib: np.ndarray, ic: np.ndarray, axis: int = -1) -> Any:
        rb = cost_b[ib].sum(axis=axis) / done_b[ib].sum(axis=axis)
        return cost_c[ic].sum(axis=axis) / done_c[ic].sum(axis=axis) / rb

    ref = stats.bootstrap(
        (np.arange(n), np.arange(n)), ratio, n_resamples=4000, method="percentile", random_state=rng
    ).confidence_interval
    assert ci.method == "delta"
    assert (ci.low, ci.high) == (pytest.approx(ref.low, rel=0.03), pytest.approx(ref.high, rel=0.03))


def test_the_power_z_written_out_is_scipys() -> None:
    from scipy.stats import norm

    from taskcost.analytics._canary_stats import POWER_Z

    assert float(norm.ppf(0.80)) == POWER_Z


def test_a_quantile_from_too_few_calls_says_so_and_needed_figures_have_two_significant_digits(
    store: DuckDBStore,
) -> None:
    # 31 calls per arm: the p99 (rank ceil(0.99 x 31) = 31) is the slowest call of each arm, nothing more
    fleet = Fleet()
    arm(fleet, BASE, range(1, 32), tasks=31, prefix="b")
    arm(fleet, CAND, [2 * k for k in range(1, 32)], tasks=31, prefix="c", minute=0.5)
    fleet.write(store)
    answer = ask(store)
    p99 = metric(answer, "latency_p99")
    assert (p99["baseline"], p99["candidate"]) == ("31", "62")
    assert "p99 from 31 calls is the largest one seen" in p99["rule"]
    notes = " ".join(answer.notes)
    assert "latency_p99, baseline: p99 from 31 calls is the largest one seen" in notes
    assert "takes at least 1,000 calls" in notes
    # p95 (rank 30 of 31): one call above it
    assert "p95 from 31 calls has only 1 of them above it" in metric(answer, "latency_p95")["rule"]
    for row in answer.metrics.to_dicts():
        n = row["needed_n"]
        assert n is None or n < 100 or len(str(n).rstrip("0")) <= 2, (row["metric"], n)
    for n in (answer.needed_calls_per_arm, answer.needed_tasks_per_arm):
        assert n is None or n < 100 or len(str(n).rstrip("0")) <= 2


def test_needed_figures_round_up_to_two_significant_digits() -> None:
    from taskcost.analytics._canary_stats import rounded_needed

    assert [rounded_needed(n) for n in (None, 7, 99, 100, 385, 778, 1000, 12_345, 99_001)] == [
        None, 7, 99, 100, 390, 780, 1000, 13_000, 100_000,
    ]  # fmt: skip
