"""What changed (taskcost/analytics/_changes.py): a task's and a window's infra fingerprint, and two windows compared,
the changed values ranked by how much cost per completed task or p95 moved with them. Every expected figure is
worked out by hand in the comments (price book: cheap-1 input $1 per million tokens, so 1,000 input tokens and no
output cost $0.001; p95 is linear interpolation at position (n - 1) x 0.95 of the sorted durations)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import polars as pl
import pytest

from taskcost.analytics import QUESTIONS, Filters, UsageError, _changes
from taskcost.analytics._changes import ChangesOptions, Comparison, Fingerprint, changes
from taskcost.store import DuckDBStore
from tests.builders.analytics import T0, Fleet

HOUR = timedelta(hours=1)
CURRENT = Filters(since=T0 + HOUR, until=T0 + 2 * HOUR)  # 10:00 .. 11:00; the default baseline is 09:00 .. 10:00


def _rollout(fleet: Fleet, project: str = "default") -> Fleet:
    """09:00-10:00, the baseline: four completed tasks, one call each on engine_version 0.6.0, $0.001 each
    (1,000 input tokens), durations 1, 2, 3, 4 s.
    10:00-11:00, the current window: 0.7.0 on five calls (four completed tasks and one failed, 500 input tokens =
    $0.0005 each, durations 4, 4, 4, 8 and 4 s), 0.6.0 left on one completed task (800 tokens = $0.0008, 2 s)."""
    for i, dur in enumerate([1, 2, 3, 4]):
        fleet.task(f"b{i}", minute=10 * i, project=project).call(
            input_tokens=1000, output_tokens=0, duration_s=dur, engine="vllm", engine_version="0.6.0"
        )
    for i, dur in enumerate([4, 4, 4, 8]):
        fleet.task(f"c{i}", minute=60 + 10 * i, project=project).call(
            input_tokens=500, output_tokens=0, duration_s=dur, engine="vllm", engine_version="0.7.0"
        )
    fleet.task("c5", minute=100, project=project).call(
        input_tokens=800, output_tokens=0, duration_s=2, engine="vllm", engine_version="0.6.0"
    )
    fleet.task("c6", minute=110, outcome="failed", project=project).call(
        input_tokens=500, output_tokens=0, duration_s=4, engine="vllm", engine_version="0.7.0"
    )
    return fleet


def _compare(store: DuckDBStore, filters: Filters = CURRENT, **options: Any) -> Comparison:
    answer = changes(store, filters, ChangesOptions(**options))
    assert isinstance(answer, Comparison)
    return answer


def _rows(df: pl.DataFrame) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(r["field"], r["value"]): r for r in df.iter_rows(named=True)}


def test_an_engine_version_that_raised_p95_is_ranked_first(store: DuckDBStore) -> None:
    _rollout(Fleet()).write(store)
    a = _compare(store)
    s = a.summary()
    assert (s["baseline_since"], s["baseline_until"]) == (T0, T0 + HOUR)  # default: as long, just before
    assert (s["baseline_calls"], s["current_calls"]) == (4, 6)
    # baseline p95 of [1, 2, 3, 4]: position 3 x 0.95 = 2.85 -> 3 + 0.85 x (4 - 3) = 3.85
    assert s["baseline_p95_s"] == pytest.approx(3.85)
    # current p95 of [2, 4, 4, 4, 4, 8]: position 5 x 0.95 = 4.75 -> 4 + 0.75 x (8 - 4) = 7.0
    assert s["current_p95_s"] == pytest.approx(7.0)
    # baseline: 4 x $0.001 / 4 completed = $0.001
    assert s["baseline_cost_per_completed_task_usd"] == Decimal("0.001")
    # current: (5 x $0.0005 + $0.0008) / 5 completed (the failed task's spend counts) = $0.0033 / 5 = $0.00066
    assert s["current_cost_per_completed_task_usd"] == Decimal("0.00066")
    assert (s["current_completed_tasks"], s["current_finished_tasks"], s["current_unpriced_calls"]) == (5, 6, 0)

    fp = _rows(a.fingerprint)
    assert fp[("engine_version", "0.7.0")]["status"] == "appeared"
    assert fp[("engine_version", "0.7.0")]["share_current"] == pytest.approx(5 / 6)
    assert fp[("engine_version", "0.6.0")]["status"] == "share_down"  # 100% -> 1/6
    assert (fp[("engine_version", "0.6.0")]["calls_baseline"], fp[("engine_version", "0.6.0")]["calls_current"]) == (
        4,
        1,
    )
    assert fp[("engine", "vllm")]["status"] == "unchanged"
    assert fp[("model", "cheap-1")]["status"] == "unchanged"

    assert a.changes["rank"].to_list() == [1, 2]
    top, second = a.changes.iter_rows(named=True)
    assert (top["field"], top["value"], top["status"], top["calls"]) == ("engine_version", "0.7.0", "appeared", 5)
    assert top["compared_with"] == "rest of current window"  # 0.6.0 is still on one call
    # p95 with 0.7.0: [4, 4, 4, 4, 8]: position 3.8 -> 4 + 0.8 x 4 = 7.2; without: [2] -> 2.0
    assert top["p95_with_s"] == pytest.approx(7.2)
    assert top["p95_without_s"] == pytest.approx(2.0)
    assert top["p95_delta_s"] == pytest.approx(5.2)
    assert top["p95_change"] == pytest.approx(2.6)  # 7.2 / 2 - 1
    # cost with 0.7.0: 5 x $0.0005 over 4 completed = $0.000625; without: $0.0008 over 1 = $0.0008
    assert top["cost_per_completed_task_with_usd"] == Decimal("0.000625")
    assert top["cost_per_completed_task_without_usd"] == Decimal("0.0008")
    assert top["cost_per_completed_task_delta_usd"] == Decimal("-0.000175")
    assert top["cost_change"] == pytest.approx(-0.21875)  # 0.000625 / 0.0008 - 1
    assert (top["completed_tasks_with"], top["completed_tasks_without"]) == (4, 1)
    assert top["p95_baseline_s"] == pytest.approx(3.85)
    # the mirror: 0.6.0, p95 2 / 7.2 - 1 = -72%, cost 0.0008 / 0.000625 - 1 = +28%: moved less
    assert (second["value"], second["p95_change"], second["cost_change"]) == ("0.6.0", pytest.approx(-13 / 18), 0.28)
    assert s["top_change"] == (
        "engine_version 0.6.0 → 0.7.0 on 83% of calls; p95 +260%, cost per completed task -22% "
        "(against the rest of current window)"
    )
    assert s["changed_values"] == 2
    assert any("not causation" in n for n in a.notes)
    # the JSON shape: money as decimal strings
    doc = a.to_json()
    assert doc["tables"]["changes"]["rows"][0][doc["tables"]["changes"]["columns"].index("value")] == "0.7.0"
    assert doc["summary"]["current_cost_per_completed_task_usd"] == "0.000660000000"


def test_a_value_on_every_call_is_compared_with_the_baseline_window(store: DuckDBStore) -> None:
    fleet = _rollout(Fleet())
    # without the last 0.6.0 task, 0.7.0 is on every current call: nothing in the window to compare it with
    fleet.tasks = [t for t in fleet.tasks if t.task_id != "c5"]
    fleet.write(store)
    [top, gone] = _compare(store).changes.iter_rows(named=True)
    assert (top["value"], top["compared_with"], gone["value"], gone["status"]) == (
        "0.7.0", "baseline window", "0.6.0", "disappeared"
    )  # fmt: skip
    # p95 with 0.7.0: [4, 4, 4, 4, 8] -> 7.2 against the baseline's 3.85: 7.2 / 3.85 - 1 = 0.87013
    assert top["p95_change"] == pytest.approx(7.2 / 3.85 - 1)
    assert top["p95_without_s"] is None
    # cost: $0.0025 / 4 = $0.000625 against the baseline's $0.001: -37.5%
    assert top["cost_per_completed_task_delta_usd"] == Decimal("-0.000375")
    assert top["cost_change"] == pytest.approx(-0.375)
    assert gone["calls"] == 0 and gone["p95_change"] is None and gone["rank"] == 2


def test_an_explicit_baseline_window(store: DuckDBStore) -> None:
    _rollout(Fleet()).write(store)
    # baseline 09:25 .. 10:00 holds b3 only (started 09:30, 4 s): p95 of [4] = 4.0, $0.001 per completed task
    a = _compare(store, baseline_since=T0 + timedelta(minutes=25), baseline_until=T0 + HOUR)
    s = a.summary()
    assert (s["baseline_calls"], s["baseline_p95_s"], s["baseline_completed_tasks"]) == (1, 4.0, 1)
    # only baseline_since: as long as the current window (1 h) from there: 08:00 .. 09:00 holds nothing
    a = _compare(store, baseline_since=T0 - HOUR)
    assert (a.baseline.since, a.baseline.until) == (T0 - HOUR, T0)
    assert a.summary()["baseline_calls"] == 0
    assert a.summary()["baseline_cost_per_completed_task_usd"] is None
    assert any("baseline window has no call attempts" in n for n in a.notes)
    assert set(a.changes["status"]) == {"appeared"}  # 0.7.0 and 0.6.0, and every other field's value


def test_a_task_whose_calls_mix_the_value_with_others_is_in_neither_cost_group(store: DuckDBStore) -> None:
    fleet = _rollout(Fleet())
    # m1 (10:55, completed): one call on 0.7.0 and one on 0.6.0, 1 s each, $0.0012 each (1,000 in + 100 out)
    fleet.task("m1", minute=115).call(engine="vllm", engine_version="0.7.0").call(engine="vllm", engine_version="0.6.0")
    fleet.write(store)
    a = _compare(store)
    # all of the window's spend counts: ($0.0033 + $0.0024) / 6 completed = $0.00095
    assert a.summary()["current_cost_per_completed_task_usd"] == Decimal("0.00095")
    top = _rows(a.changes)[("engine_version", "0.7.0")]
    assert top["mixed_tasks"] == 1
    # with: c0..c3 and the failed c6, $0.0025 / 4 = $0.000625; without: c5, $0.0008 / 1 (m1 in neither)
    assert (top["cost_per_completed_task_with_usd"], top["cost_per_completed_task_without_usd"]) == (
        Decimal("0.000625"), Decimal("0.0008")
    )  # fmt: skip
    assert (top["completed_tasks_with"], top["completed_tasks_without"]) == (4, 1)
    # calls are calls: with 0.7.0 [1, 4, 4, 4, 4, 8]: position 4.75 -> 4 + 0.75 x 4 = 7.0; without [1, 2]: 1.95
    assert (top["p95_with_s"], top["p95_without_s"]) == (pytest.approx(7.0), pytest.approx(1.95))


def test_calls_between_two_windows_that_do_not_touch_count_in_neither(store: DuckDBStore) -> None:
    _rollout(Fleet()).write(store)
    # baseline 09:00 .. 09:25: b0, b1, b2 (1, 2, 3 s); b3 (09:30) lies between the windows
    a = _compare(store, baseline_since=T0, baseline_until=T0 + timedelta(minutes=25))
    s = a.summary()
    assert (s["baseline_calls"], s["baseline_completed_tasks"], s["current_calls"]) == (3, 3, 6)
    assert s["baseline_p95_s"] == pytest.approx(2.9)  # [1, 2, 3]: position 1.9 -> 2 + 0.9 x 1
    assert _rows(a.fingerprint)[("engine_version", "0.6.0")]["calls_baseline"] == 3


def test_p95_is_of_successful_attempts_and_of_calls_whose_task_started_earlier(store: DuckDBStore) -> None:
    fleet = _rollout(Fleet())
    # a task started at 09:50 (a baseline task) whose 0.7.0 calls run at 10:05: a failed attempt of 100 s (not in
    # any p95: a failure is not a latency) and a successful one of 9 s
    late = fleet.task("late", minute=50)
    late.call(engine="vllm", engine_version="0.7.0", at_s=900, duration_s=100, status="error", call_id="x")
    late.call(engine="vllm", engine_version="0.7.0", at_s=1000, duration_s=9, call_id="x", attempt=2)
    fleet.write(store)
    a = _compare(store)
    s = a.summary()
    assert (s["current_calls"], s["baseline_calls"]) == (8, 4)  # every attempt counts in the shares
    # current p95 of the successful attempts [2, 4, 4, 4, 4, 8, 9]: position 6 x 0.95 = 5.7 -> 8 + 0.7 x 1 = 8.7
    assert s["current_p95_s"] == pytest.approx(8.7)
    top = _rows(a.changes)[("engine_version", "0.7.0")]
    # with 0.7.0: [4, 4, 4, 4, 8, 9]: position 4.75 -> 8 + 0.75 x 1 = 8.75; without: [2]
    assert (top["p95_with_s"], top["p95_without_s"]) == (pytest.approx(8.75), pytest.approx(2.0))
    # the late task started in the baseline window: its spend is the baseline's, not the current one's
    assert (s["baseline_completed_tasks"], s["current_completed_tasks"]) == (5, 5)
    assert top["completed_tasks_with"] == 4


def test_a_tasks_fingerprint_call_by_call(store: DuckDBStore) -> None:
    fleet = Fleet()
    # two calls on 0.6.0 / H100, then one on 0.7.0 / A100: $0.001 each
    t = fleet.task("t1", harness_version="h1")
    t.call(input_tokens=1000, output_tokens=0, engine_version="0.6.0", gpu_type="H100", duration_s=1)
    t.call(input_tokens=1000, output_tokens=0, engine_version="0.6.0", gpu_type="H100", duration_s=3)
    t.call(input_tokens=1000, output_tokens=0, engine_version="0.7.0", gpu_type="A100", duration_s=5)
    fleet.task("t2").call(engine_version="9.9")  # another task: never in t1's fingerprint
    fleet.write(store)
    a = changes(store, Filters(), ChangesOptions(task="t1"))
    assert isinstance(a, Fingerprint)
    s = a.summary()
    assert (s["mode"], s["task"], s["outcome"], s["calls"]) == ("task", "t1", "completed", 3)
    assert s["cost_usd"] == Decimal("0.003")
    assert s["p95_s"] == pytest.approx(4.8)  # [1, 3, 5]: position 1.9 -> 3 + 0.9 x 2
    fp = _rows(a.fingerprint)
    assert (fp[("engine_version", "0.6.0")]["calls"], fp[("engine_version", "0.7.0")]["calls"]) == (2, 1)
    assert fp[("engine_version", "0.6.0")]["share"] == pytest.approx(2 / 3)
    assert fp[("gpu_type", "A100")]["share"] == pytest.approx(1 / 3)
    assert fp[("harness_version", "h1")]["share"] == 1.0
    assert ("engine_version", "9.9") not in fp
    assert a.calls is not None
    assert fp[("price_source", a.calls["price_source"][0])]["calls"] == 3
    assert a.calls["price_source"][0].startswith("price book analytics-tests")
    assert a.calls["engine_version"].to_list() == ["0.6.0", "0.6.0", "0.7.0"]
    assert a.calls["gpu_type"].to_list() == ["H100", "H100", "A100"]
    assert [t.name for t in a.tables()] == ["fingerprint", "calls"]
    missing = changes(store, Filters(), ChangesOptions(task="nope"))
    assert missing.summary()["calls"] == 0 and any("no call attempts" in n for n in missing.notes)


def test_unpriced_attempts_are_counted_beside_the_money(store: DuckDBStore) -> None:
    fleet = Fleet()
    fleet.task("t1").call(input_tokens=1000, output_tokens=0).call("mystery-model", input_tokens=1000)
    fleet.write(store)
    a = changes(store, Filters(), ChangesOptions())
    assert isinstance(a, Fingerprint)
    s = a.summary()
    # the priced call's $0.001 over 1 completed task; the mystery call is not $0, it is counted as unpriced
    assert (s["mode"], s["cost_per_completed_task_usd"], s["unpriced_calls"]) == ("window", Decimal("0.001"), 1)
    assert any("1 call attempts in the finished tasks are unpriced" in n for n in a.notes)
    assert _rows(a.fingerprint)[("price_source", None)]["calls"] == 1


# -- filters narrow, projects are apart --------------------------------------------------------------------------
def _two_kinds(fleet: Fleet) -> None:
    t1 = fleet.task("t1", kind="review", agent_version="a1", harness_version="h1", golden=True)
    t1.call("cheap-1", engine="vllm", engine_version="0.6.0", quantization="fp8", gpu_type="H100", cluster_id="c1")
    t2 = fleet.task("t2", kind="triage", agent_version="a2", harness_version="h2", minute=5)
    t2.call("claude-x", engine="sglang", engine_version="0.7.0", quantization="bf16", gpu_type="A100", cluster_id="c2")
    t2.call("claude-x", deployment="api", engine="sglang", engine_version="0.7.0", quantization="bf16")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("kind", "review"),
        ("agent_version", "a1"),
        ("harness_version", "h1"),
        ("golden", True),
        ("model", "cheap-1"),
        ("provider", "openai"),
        ("engine", "vllm"),
        ("engine_version", "0.6.0"),
        ("quantization", "fp8"),
        ("gpu_type", "H100"),
        ("cluster", "c1"),
    ],
)
def test_each_filter_narrows_to_t1(store: DuckDBStore, name: str, value: Any) -> None:
    fleet = Fleet()
    _two_kinds(fleet)
    fleet.write(store)
    everything = changes(store, Filters(), ChangesOptions())
    assert everything.summary()["calls"] == 3
    a = changes(store, Filters(**{name: value}), ChangesOptions())
    assert a.summary()["calls"] == 1  # t1's one call
    fp = _rows(a.fingerprint)
    assert {k[1] for k in fp if k[0] == "engine_version"} == {"0.6.0"}
    assert {k[1] for k in fp if k[0] == "model"} == {"cheap-1"}


def test_the_deployment_filter_narrows_calls(store: DuckDBStore) -> None:
    fleet = Fleet()
    _two_kinds(fleet)
    fleet.write(store)
    a = changes(store, Filters(deployment="api"), ChangesOptions())
    assert a.summary()["calls"] == 1  # t2's second call is the only one tagged api
    assert _rows(a.fingerprint)[("gpu_type", None)]["calls"] == 1


def test_a_filter_narrows_a_comparison(store: DuckDBStore) -> None:
    fleet = _rollout(Fleet())
    fleet.task("x1", kind="triage", minute=70).call(input_tokens=1000, duration_s=30, engine_version="2.0")
    fleet.write(store)
    assert ("engine_version", "2.0") in _rows(_compare(store).changes)
    a = _compare(store, CURRENT.narrowed(kind="review"))
    assert ("engine_version", "2.0") not in _rows(a.changes)
    assert a.summary()["current_p95_s"] == pytest.approx(7.0)  # as in the first test: x1's 30 s call is out


def test_a_project_sees_only_its_own(store: DuckDBStore) -> None:
    fleet = _rollout(Fleet())
    other = fleet.task("o1", project="other", minute=65)
    other.call(input_tokens=10_000, duration_s=60, engine="trt", engine_version="9.9")
    fleet.write(store)
    mine = _compare(store, CURRENT.narrowed(project="default"))
    assert mine.summary()["current_calls"] == 6
    assert mine.summary()["current_p95_s"] == pytest.approx(7.0)
    assert mine.summary()["current_cost_per_completed_task_usd"] == Decimal("0.00066")
    assert ("engine_version", "9.9") not in _rows(mine.fingerprint)
    assert ("engine", "trt") not in _rows(mine.fingerprint)
    theirs = _compare(store, CURRENT.narrowed(project="other"))
    assert theirs.summary()["current_calls"] == 1
    assert {k[1] for k in _rows(theirs.fingerprint) if k[0] == "engine_version"} == {"9.9"}
    # o1's task and calls are in "default"'s tables under no name either: a task id of another project
    assert changes(store, Filters(project="default"), ChangesOptions(task="o1")).summary()["calls"] == 0


@pytest.mark.parametrize(
    ("filters", "options", "message"),
    [
        (Filters(since=T0), {"baseline_since": T0 - HOUR}, "needs the current window"),
        (Filters(), {"baseline_until": T0}, "needs the current window"),
        (CURRENT, {"task": "t1", "baseline_since": T0}, "no baseline window"),
        (Filters(since=T0 + HOUR, until=T0), {}, "--since must be before --until"),
        (CURRENT, {"baseline_since": T0 + 90 * timedelta(minutes=1)}, "overlaps"),
        (CURRENT, {"baseline_since": T0, "baseline_until": T0}, "--baseline-since must be before"),
    ],
)
def test_usage_errors(store: DuckDBStore, filters: Filters, options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        changes(store, filters, ChangesOptions(**options))


def test_the_registered_question_answers(store: DuckDBStore) -> None:
    _rollout(Fleet()).write(store)
    q = QUESTIONS["changes"]
    assert q.options is ChangesOptions
    doc = q.run(store, CURRENT, ChangesOptions()).to_json()
    assert doc["question"] == "changes"
    assert list(doc["tables"]) == ["changes", "fingerprint"]


def test_above_the_sample_size_p95_comes_from_a_deterministic_sample(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = Fleet()
    for i in range(40):  # durations 1 .. 40 s, one call each
        fleet.task(f"t{i}", minute=i).call(duration_s=i + 1)
    fleet.write(store)
    exact = changes(store, Filters(), ChangesOptions()).summary()["p95_s"]
    assert exact == pytest.approx(38.05)  # position 39 x 0.95 = 37.05 -> 38 + 0.05 x 1
    monkeypatch.setattr(_changes, "P95_SAMPLE", 10)
    sampled = [changes(store, Filters(), ChangesOptions()).summary() for _ in range(2)]
    assert sampled[0]["p95_s"] == sampled[1]["p95_s"]  # the same data, the same sample
    assert 1 <= sampled[0]["p95_s"] <= 40 and sampled[0]["p95_s"] != exact  # about 10 of the 40 calls
    assert sampled[0]["calls"] == 40  # counts never sampled


def test_a_mix_shift_between_two_present_values_is_not_worded_as_a_migration(store: DuckDBStore) -> None:
    # baseline: agent v3 on 3 of 4 tasks (1 s each), v1 on 1; current: v1 on 3 of 4 (4 s each), v3 on 1 (1 s):
    # both values in both windows, only their shares moved (v1 25% -> 75%, v3 75% -> 25%)
    fleet = Fleet()
    for i, version in enumerate(["v3", "v3", "v3", "v1"]):
        fleet.task(f"b{i}", minute=10 * i, agent_version=version).call(input_tokens=1000, output_tokens=0)
    for i, version in enumerate(["v1", "v1", "v1", "v3"]):
        fleet.task(f"c{i}", minute=60 + 10 * i, agent_version=version).call(
            input_tokens=1000, output_tokens=0, duration_s=4 if version == "v1" else 1
        )
    fleet.write(store)
    top = _compare(store).summary()["top_change"]
    assert top is not None and top.startswith("agent_version mix shifted: v1 25% → 75% of calls, v3 75% → 25%; ")
    assert "v3 → v1" not in top
