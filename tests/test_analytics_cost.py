"""``taskcost cost``: cost per completed task, success rate and the waste breakdown, on a hand-built fleet whose every
figure is worked out below from the builder's round rates (tests/builders/analytics.py): USD per million tokens,
input / cache read / output: cheap-1 1 / 0.1 / 2, pricey-1 10 / 1 / 20. A cache miss costs input - cache read:
cheap-1 $0.9/M, pricey-1 $9/M.

Project ``default`` (minute = the task's start after T0, Monday 2026-11-02 09:00 UTC):

- a (0, completed, review, agent 1.0), cheap-1, and a tool at $0.01:
    a1 1,000 in + 100 out                          = $0.001 + $0.0002                       = $0.0012
    a2 3,000 in (500 from cache) + 100 out          = $0.0025 + $0.00005 + $0.0002           = $0.00275
       repeats a1: min(1,000, 3,000) - 500 read = 500 missed x $0.9/M                      -> miss $0.00045 (estimate)
    a3 call a-r, attempt 1, error: 2,000 in         = $0.002       -> superseded, failed (2,000 tokens re-sent)
    a4 call a-r, attempt 2: 2,000 in (all 2,000 from cache) + 100 out = $0.0002 + $0.0002 = $0.0004
       repeats a3: min(2,000, 2,000) - 2,000 read = 0 missed                              (estimate)
    task: $0.0012 + $0.00275 + $0.002 + $0.0004 + $0.01 tool = $0.01635; 4 attempts
- b (10, completed, review, agent 2.0), pricey-1, engine vllm:
    b1 call b-x, attempt 1, ok: 1,000 in + 50 out    = $0.01 + $0.001 = $0.011 -> superseded, retried (1,000 re-sent)
    b2 call b-x, attempt 2: 1,000 in (800 from cache) + 50 out = $0.002 + $0.0008 + $0.001 = $0.0038
       repeats b1: min(1,000, 1,000) - 800 = 200 missed x $9/M                            -> miss $0.0018 (estimate)
    b3 2,000 in (1,000 from cache) + 50 out, fingerprint: 3,000 of 4,000 prompt chars stable
                                                     = $0.01 + $0.001 + $0.001                = $0.012
       repeated prefix 3,000 / 4,000 x 2,000 = 1,500; - 1,000 read = 500 missed x $9/M    -> miss $0.0045 (fingerprint)
    task: $0.011 + $0.0038 + $0.012 = $0.0268; 3 attempts
- c (20, failed, fix): cheap-1 1,000 in + 100 out = $0.0012, and a tool at $0.005 = $0.0062
- d (30, abandoned, fix, golden): pricey-1 1,000 in + 50 out = $0.011
- e (40, still running): cheap-1 5,000 in = $0.005
- m (50, completed, triage, harness h2): cheap-1 1,000 in + 100 out ($0.0012) + pricey-1 1,000 in + 50 out ($0.011)
    on the API = $0.0122: its calls disagree on the model, so its model is ``mixed``

Finished: a, b, c, d, m (5); completed a, b, m (3): spend $0.01635 + $0.0268 + $0.0062 + $0.011 + $0.0122 = $0.07255;
per completed task $0.07255 / 3. Waste: failed task $0.0062 + abandoned task $0.011 + failed attempt $0.002 + retried
attempt $0.011 + cache misses ($0.00045 + $0.0018 + $0.0045 = $0.00675) = $0.03695. Tools: $0.015.

Project ``other``: o (0, completed): pricey-1 call o-x tried 3 times (2 errors), 10,000 in each = $0.1 each.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from taskcost.analytics import _cost, _cost_intervals, _waste
from taskcost.analytics._cost import QUESTION, CostAnswer, CostOptions, cost
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import UsageError
from taskcost.store import DuckDBStore
from tests.builders.analytics import T0, Fleet

DEFAULT = Filters(project="default")


def _fleet() -> Fleet:
    f = Fleet()
    a = f.task("a", minute=0, agent_version="1.0", harness_version="h1")
    a.call("cheap-1", input_tokens=1000, output_tokens=100)
    a.call("cheap-1", input_tokens=3000, output_tokens=100, cache_read=500)
    a.call("cheap-1", input_tokens=2000, output_tokens=0, call_id="a-r", attempt=1, status="error")
    a.call("cheap-1", input_tokens=2000, output_tokens=100, cache_read=2000, call_id="a-r", attempt=2)
    a.tool(cost=Decimal("0.01"))
    b = f.task("b", minute=10, agent_version="2.0", harness_version="h1")
    b.call("pricey-1", input_tokens=1000, output_tokens=50, call_id="b-x", attempt=1, engine="vllm")
    b.call("pricey-1", input_tokens=1000, output_tokens=50, cache_read=800, call_id="b-x", attempt=2, engine="vllm")
    b.call(
        "pricey-1", input_tokens=2000, output_tokens=50, cache_read=1000, prompt_chars=4000, stable_prefix_chars=3000,
        engine="vllm",
    )  # fmt: skip
    f.task("c", minute=20, outcome="failed", kind="fix").call("cheap-1", output_tokens=100).tool(cost=Decimal("0.005"))
    f.task("d", minute=30, outcome="abandoned", kind="fix", golden=True).call("pricey-1", output_tokens=50)
    f.task("e", minute=40, outcome=None).call("cheap-1", input_tokens=5000, output_tokens=0)
    m = f.task("m", minute=50, kind="triage", harness_version="h2")
    m.call("cheap-1", output_tokens=100, deployment="api").call("pricey-1", output_tokens=50, deployment="api")
    o = f.task("o", project="other")
    for attempt in (1, 2, 3):
        o.call("pricey-1", input_tokens=10_000, output_tokens=0, call_id="o-x", attempt=attempt,
               status="error" if attempt < 3 else "ok")  # fmt: skip
    return f


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    path: Path = tmp_path_factory.mktemp("cost") / "a.duckdb"
    with DuckDBStore.open(path) as s:
        _fleet().write(s)
        yield s


def _ask(store: DuckDBStore, filters: Filters = DEFAULT, **options: Any) -> CostAnswer:
    return cost(store, filters, CostOptions(**options))


def _waste_rows(answer: CostAnswer) -> dict[str, tuple[Any, ...]]:
    cols = ("amount_usd", "tasks", "calls", "tokens", "unpriced_calls", "unpriced_tokens", "is_waste")
    return {r["kind"]: tuple(r[c] for c in cols) for r in answer.waste.iter_rows(named=True)}


def _groups(answer: CostAnswer, key: str, *cols: str) -> dict[Any, tuple[Any, ...]]:
    assert answer.groups is not None
    return {r[key]: tuple(r[c] for c in cols) for r in answer.groups.iter_rows(named=True)}


# -- the waste fixture: every kind of waste, worked out by hand ------------------------------------------------
def test_every_kind_of_waste_in_dollars_and_share(store: DuckDBStore) -> None:
    a = _ask(store)
    assert _waste_rows(a) == {
        # kind: amount_usd, tasks, calls (attempts), tokens, unpriced calls, unpriced tokens, is waste
        "failed_tasks": (Decimal("0.0062"), 1, 1, None, 0, None, True),  # c, LLM $0.0012 + tool $0.005
        "abandoned_tasks": (Decimal("0.011"), 1, 1, None, 0, None, True),  # d
        "failed_attempts": (Decimal("0.002"), None, 1, 2000, 0, None, True),  # a3, its 2,000 uncached tokens re-sent
        "retried_attempts": (Decimal("0.011"), None, 1, 1000, 0, None, True),  # b1
        # a2 500 x $0.9/M + b2 200 x $9/M + b3 500 x $9/M = $0.00045 + $0.0018 + $0.0045; 1,200 tokens in 3 calls
        "cache_misses": (Decimal("0.00675"), None, 3, 1200, 0, 0, True),
        # $0.0062 + $0.011 + $0.002 + $0.011 + $0.00675; c and d
        "total_waste": (Decimal("0.03695"), 2, None, None, 0, 0, True),
        "tool_spend": (Decimal("0.015"), None, 2, None, 0, None, False),  # a $0.01 + c $0.005: beside waste, not in it
        "gpu_idle": (Decimal(0), None, None, None, 0, None, False),  # no cluster bill in range: idle is $0, known
    }
    shares = dict(zip(a.waste["kind"], a.waste["share_of_spend"], strict=True))
    assert shares["total_waste"] == pytest.approx(0.03695 / 0.07255)
    assert shares["cache_misses"] == pytest.approx(0.00675 / 0.07255)
    s = a.summary()
    assert (s["waste_usd"], s["failed_tasks_usd"], s["superseded_attempts_usd"], s["cache_miss_usd"]) == (
        Decimal("0.03695"),
        Decimal("0.0172"),  # $0.0062 + $0.011
        Decimal("0.013"),  # $0.002 + $0.011
        Decimal("0.00675"),
    )
    assert s["waste_share"] == pytest.approx(0.03695 / 0.07255)
    assert (s["cache_miss_fingerprint_calls"], s["cache_miss_estimated_calls"]) == (1, 3)  # b3; a2, a4, b2
    assert "1 repeat calls measured by the SDK's prompt fingerprint, 3 estimated" in " ".join(a.notes)
    assert (s["waste_sampled"], s["waste_measured_tasks"]) == (False, 3)


def test_the_calls_are_read_in_time_windows_that_cover_every_task(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a, b and m start 0, 10 and 50 minutes in and last seconds: with a minute either side, three windows
    monkeypatch.setattr(_waste, "MAX_WINDOWS", 2)  # the smallest gap (a to b) is closed: the same calls, the same waste
    assert _ask(store).summary()["waste_usd"] == Decimal("0.03695")
    monkeypatch.setattr(_waste, "MARGIN", timedelta(0))
    monkeypatch.setattr(_waste, "MAX_WINDOWS", 16)
    assert _ask(store).summary()["waste_usd"] == Decimal("0.03695")


def test_cost_per_completed_task_success_rate_and_round_trips(store: DuckDBStore) -> None:
    a = _ask(store)
    assert (a.spend_usd, a.cost_per_completed_task_usd, a.waste_usd) == (
        Decimal("0.07255"),
        Decimal("0.024183"),
        Decimal("0.03695"),
    )
    s = a.summary()
    assert (s["tasks"], s["completed"], s["failed"], s["abandoned"]) == (5, 3, 1, 1)
    assert s["spend_usd"] == Decimal("0.07255")
    assert s["cost_per_completed_task_usd"] == Decimal("0.024183")  # $0.07255 / 3 = $0.0241833.., to micro-dollars
    assert s["success_rate"] == 0.6  # 3 of 5 finished
    assert s["success_ci_low"] < 0.6 < s["success_ci_high"]
    assert s["tool_spend_usd"] == Decimal("0.015")
    # attempts of finished tasks: a 4 + b 3 + c 1 + d 1 + m 2 = 11, over 3 completed
    assert (s["attempts"], s["attempts_per_completed_task"]) == (11, pytest.approx(11 / 3))
    # re-sent uncached input: a3 2,000 + b1 1,000 = 3,000, over 3 completed
    assert (s["superseded_attempts"], s["resent_uncached_tokens"]) == (2, 3000)
    assert s["resent_uncached_tokens_per_completed_task"] == 1000.0
    assert (s["unpriced_calls"], s["priced_share"]) == (0, 1.0)


def test_in_progress_tasks_are_left_out_and_counted(store: DuckDBStore) -> None:
    a = _ask(store)
    s = a.summary()
    assert (s["in_progress_tasks"], s["in_progress_spend_usd"]) == (1, Decimal("0.005"))  # e: 5,000 x $1/M
    assert s["tasks"] == 5 and s["spend_usd"] == Decimal("0.07255")  # not in the finished tasks or their spend
    assert "1 tasks still running (no outcome yet) are left out; they spent $0.005000 so far (0 unpriced attempts)" \
        in a.notes  # fmt: skip


def test_by_a_task_dimension(store: DuckDBStore) -> None:
    a = _ask(store, by="kind")
    cols = ("tasks", "completed", "in_progress", "spend_usd", "cost_per_completed_task_usd", "waste_usd")
    assert _groups(a, "kind", *cols) == {
        # a + b = $0.04315 for 2; waste: a3 $0.002 + b1 $0.011 + misses $0.00675 = $0.01975
        "review": (2, 2, 0, Decimal("0.04315"), Decimal("0.021575"), Decimal("0.01975")),
        # c + d = $0.0172, nothing completed: no cost per completed task; all of it waste
        "fix": (2, 0, 0, Decimal("0.0172"), None, Decimal("0.0172")),
        "triage": (1, 1, 0, Decimal("0.0122"), Decimal("0.0122"), Decimal(0)),
        None: (0, 0, 1, None, None, Decimal(0)),  # e: no task span yet, so no kind either; counted, not priced in
    }
    assert a.groups is not None and a.groups["kind"].to_list() == ["review", "fix", "triage", None]  # by spend
    assert a.summary()["groups"] == 4


def test_by_a_call_dimension_with_a_mixed_task(store: DuckDBStore) -> None:
    a = _ask(store, by="model")
    cols = ("tasks", "completed", "spend_usd", "cost_per_completed_task_usd", "waste_usd", "cache_miss_usd")
    assert _groups(a, "model", *cols) == {
        # b + d = $0.0268 + $0.011; waste: d $0.011 + b1 $0.011 + b2, b3 misses $0.0063 = $0.0283
        "pricey-1": (2, 1, Decimal("0.0378"), Decimal("0.0378"), Decimal("0.0283"), Decimal("0.0063")),
        # a + c = $0.01635 + $0.0062; waste: c $0.0062 + a3 $0.002 + a2's miss $0.00045 = $0.00865 (e runs)
        "cheap-1": (2, 1, Decimal("0.02255"), Decimal("0.02255"), Decimal("0.00865"), Decimal("0.00045")),
        "mixed": (1, 1, Decimal("0.0122"), Decimal("0.0122"), Decimal(0), Decimal(0)),  # m: cheap-1 and pricey-1
    }
    assert a.groups is not None and a.groups["model"].to_list() == ["pricey-1", "cheap-1", "mixed"]


def test_an_unknown_dimension_is_a_usage_error(store: DuckDBStore) -> None:
    with pytest.raises(UsageError, match="colour"):
        _ask(store, by="colour")


@pytest.mark.parametrize(
    ("filters", "tasks", "completed", "spend", "waste"),
    [
        (DEFAULT.narrowed(kind="fix"), 2, 0, "0.0172", "0.0172"),  # c + d
        (DEFAULT.narrowed(agent_version="2.0"), 1, 1, "0.0268", "0.0173"),  # b: b1 $0.011 + misses $0.0063
        (DEFAULT.narrowed(harness_version="h2"), 1, 1, "0.0122", "0"),  # m
        (DEFAULT.narrowed(golden=True), 1, 0, "0.011", "0.011"),  # d
        (DEFAULT.narrowed(since=T0 + timedelta(minutes=25)), 2, 1, "0.0232", "0.011"),  # d, m (e runs)
        (DEFAULT.narrowed(until=T0 + timedelta(minutes=15)), 2, 2, "0.04315", "0.01975"),  # a, b
        (DEFAULT.narrowed(model="cheap-1"), 2, 1, "0.02255", "0.00865"),  # a, c (e runs)
        (DEFAULT.narrowed(provider="openai"), 5, 3, "0.07255", "0.03695"),  # every call is openai's
        (DEFAULT.narrowed(engine="vllm"), 1, 1, "0.0268", "0.0173"),  # b
        (DEFAULT.narrowed(deployment="api"), 1, 1, "0.0122", "0"),  # m
    ],
)
def test_each_filter_dimension_narrows(
    store: DuckDBStore, filters: Filters, tasks: int, completed: int, spend: str, waste: str
) -> None:
    s = _ask(store, filters).summary()
    assert (s["tasks"], s["completed"], s["spend_usd"], s["waste_usd"]) == (
        tasks,
        completed,
        Decimal(spend),
        Decimal(waste),
    )


def test_a_project_sees_only_its_own_tasks(store: DuckDBStore) -> None:
    a = _ask(store, Filters(project="other"))
    s = a.summary()
    assert (s["tasks"], s["completed"], s["spend_usd"]) == (1, 1, Decimal("0.3"))  # 3 attempts x $0.1
    w = _waste_rows(a)
    assert w["failed_attempts"][:4] == (Decimal("0.2"), None, 2, 20_000)  # attempts 1 and 2 of o-x
    # attempt 3 repeats attempt 2's 10,000 tokens, none read from the cache: 10,000 missed; in project "other" no call
    # of pricey-1 ever read the cache, so its cache-read rate is unknown there: unpriced, not $0
    assert w["cache_misses"] == (Decimal(0), None, 1, 10_000, 0, 10_000, True)
    assert any("10,000 missed cache tokens are not priced" in n and "openai/pricey-1" in n for n in a.notes)
    # and project "default" never sees o's $0.3
    assert _ask(store).summary()["spend_usd"] == Decimal("0.07255")
    assert _ask(store, Filters()).summary()["spend_usd"] == Decimal("0.37255")  # both projects: $0.07255 + $0.3


def test_groups_are_capped_by_spend_and_say_so(store: DuckDBStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cost, "MAX_GROUPS", 2)
    a = _ask(store, by="kind")
    assert a.groups is not None and a.groups["kind"].to_list() == ["review", "fix"]  # triage ($0.0122) cut, and e's
    assert "showing 2 of 4 groups (the costliest); the summary covers all" in a.notes
    assert a.summary()["spend_usd"] == Decimal("0.07255")


# -- other fleets ------------------------------------------------------------------------------------------------
def _store(tmp_path: Path, fleet: Fleet) -> DuckDBStore:
    s = DuckDBStore.open(tmp_path / "a.duckdb")
    fleet.write(s)
    return s


def test_bucketing_by_day_and_week(tmp_path: Path) -> None:
    f = Fleet()
    f.task("d1a", minute=0).call("cheap-1", output_tokens=0)  # Monday 09:00: $0.001
    f.task("d1b", minute=60, outcome="failed").call("cheap-1", input_tokens=2000, output_tokens=0)  # 10:00: $0.002
    f.task("d2a", minute=24 * 60).call("cheap-1", input_tokens=4000, output_tokens=0)  # Tuesday 09:00: $0.004
    with _store(tmp_path, f) as s:
        a = cost(s, Filters(), CostOptions(bucket="day"))
        assert a.groups is not None
        day = T0.replace(hour=0, tzinfo=None)
        assert [(r["bucket"], r["tasks"], r["completed"], r["spend_usd"], r["cost_per_completed_task_usd"])
                for r in a.groups.iter_rows(named=True)] == [
            (day, 2, 1, Decimal("0.003"), Decimal("0.003")),  # $0.001 + $0.002 for 1 completed
            (day + timedelta(days=1), 1, 1, Decimal("0.004"), Decimal("0.004")),
        ]  # fmt: skip
        week = cost(s, Filters(), CostOptions(bucket="week")).groups
        assert week is not None and week.select("bucket", "tasks", "spend_usd").rows() == [(day, 3, Decimal("0.007"))]
        hours = cost(s, Filters(), CostOptions(bucket="hour", by="kind")).groups
        assert hours is not None and hours.select("kind", "bucket", "tasks").rows() == [
            ("review", T0.replace(tzinfo=None), 1),
            ("review", T0.replace(tzinfo=None) + timedelta(hours=1), 1),
            ("review", T0.replace(tzinfo=None) + timedelta(days=1), 1),
        ]


def test_bucketing_by_minute(tmp_path: Path) -> None:
    """A demo run or a fresh deployment has minutes of data: a minute bucket gives it a trend."""
    f = Fleet()
    f.task("m0", minute=0).call("cheap-1", output_tokens=0)  # 09:00:00: $0.001
    f.task("m0b", minute=0.5).call("cheap-1", input_tokens=2000, output_tokens=0)  # 09:00:30: $0.002
    f.task("m2", minute=2).call("cheap-1", input_tokens=4000, output_tokens=0)  # 09:02:00: $0.004
    with _store(tmp_path, f) as s:
        groups = cost(s, Filters(), CostOptions(bucket="minute")).groups
        t0 = T0.replace(tzinfo=None)
        assert groups is not None
        columns = ("bucket", "tasks", "spend_usd", "cost_per_completed_task_usd")
        assert groups.select(columns).rows() == [
            (t0, 2, Decimal("0.003"), Decimal("0.0015")),
            (t0 + timedelta(minutes=2), 1, Decimal("0.004"), Decimal("0.004")),
        ]


def test_minutes_over_more_than_a_week_are_a_usage_error(tmp_path: Path) -> None:
    from taskcost.analytics import QUESTIONS
    from taskcost.analytics._question import UsageError

    f = Fleet()
    f.task("w0", minute=0).call("cheap-1", output_tokens=0)
    f.task("w8", minute=8 * 24 * 60).call("cheap-1", output_tokens=0)  # 8 days later
    with _store(tmp_path, f) as s:
        for name in ("cost", "cache"):
            q = QUESTIONS[name]
            with pytest.raises(UsageError, match="spans 8 days, more than 7 days of minutes"):
                q.run(s, Filters(), q.options(bucket="minute"))
            day = Filters(since=T0, until=T0 + timedelta(days=1))  # one day of it: 1,440 minutes at most
            assert q.run(s, day, q.options(bucket="minute")).summary()
            assert q.run(s, Filters(), q.options(bucket="hour")).summary()


def test_unpriced_attempts_are_counted_beside_every_figure(tmp_path: Path) -> None:
    f = Fleet()
    u = f.task("u", minute=0)
    u.call("cheap-1", output_tokens=100)  # $0.0012
    u.call("mystery-9", input_tokens=1000, output_tokens=10)  # no price anywhere
    u.call("mystery-9", input_tokens=1500, output_tokens=10)  # repeats the first: min(1,000, 1,500) = 1,000 missed
    with _store(tmp_path, f) as s:
        a = cost(s, Filters(), CostOptions(by="model"))
        summary = a.summary()
        assert (summary["spend_usd"], summary["unpriced_calls"]) == (Decimal("0.0012"), 2)
        assert summary["priced_share"] == pytest.approx(1 / 3)
        assert _groups(a, "model", "spend_usd", "unpriced_calls", "priced_share") == {
            "mixed": (Decimal("0.0012"), 2, pytest.approx(1 / 3))
        }
        assert _waste_rows(a)["cache_misses"] == (Decimal(0), None, 1, 1000, 1, 1000, True)
        assert summary["cache_miss_unpriced_tokens"] == 1000
        assert "coverage: 1 of 3 call attempts of finished tasks priced; 2 unpriced, excluded from every dollar " \
            "figure" in a.notes  # fmt: skip
        assert "1,000 missed cache tokens are not priced (1,000 of them in unpriced or self-hosted calls): not in " \
            "the cache-miss dollars" in a.notes  # fmt: skip


def test_a_model_that_never_read_the_cache_has_its_misses_priced_at_list_rates(tmp_path: Path) -> None:
    f = Fleet()
    g = f.task("g", minute=0)  # gpt-4o is in the bundled price data: $2.50/M input, $1.25/M cached input
    g.call("gpt-4o", input_tokens=1000, output_tokens=0).call("gpt-4o", input_tokens=1000, output_tokens=0)
    with _store(tmp_path, f) as s:
        a = cost(s, Filters(), CostOptions())
        # no stored gpt-4o call read the cache, so its cost shows no cache-read rate: the list's discount, $1.25/M,
        # prices the second call's 1,000 repeated, uncached tokens: $0.00125
        assert _waste_rows(a)["cache_misses"] == (Decimal("0.00125"), None, 1, 1000, 0, 0, True)
        assert any(n.startswith("cache misses of openai/gpt-4o are priced at the price data's list rates")
                   for n in a.notes)  # fmt: skip


def test_cost_interval_resamples_tasks(tmp_path: Path) -> None:
    f = Fleet()
    for i in range(30):  # $0.001 to $0.030, all completed: $0.465 / 30 = $0.0155
        f.task(f"t{i}", minute=i).call("cheap-1", input_tokens=1000 * (i + 1), output_tokens=0)
    with _store(tmp_path, f) as s:
        summary = cost(s, Filters(), CostOptions()).summary()
        assert summary["cost_per_completed_task_usd"] == Decimal("0.0155")
        assert summary["ci_method"] == "bootstrap"
        assert Decimal("0.001") < summary["ci_low_usd"] < Decimal("0.0155") < summary["ci_high_usd"] < Decimal("0.03")
        wider = cost(s, Filters(), CostOptions(confidence=0.99)).summary()
        assert wider["ci_low_usd"] < summary["ci_low_usd"] and wider["ci_high_usd"] > summary["ci_high_usd"]


def test_large_groups_get_the_delta_interval_small_ones_the_bootstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups above the bootstrap's size get the delta method, worked out here with numpy on the tasks' spends and
    completions (a ratio of means: var = (s_x^2 - 2 r s_xy + r^2 s_y^2) / (n mean_y^2)); smaller groups in the same
    answer are bootstrapped."""
    import numpy as np
    from scipy import stats

    monkeypatch.setattr(_cost_intervals, "BOOTSTRAP_MAX_UNITS", 5)
    f = Fleet()
    spends = {"cheap-1": [1000 * (i + 1) for i in range(8)], "pricey-1": [1000, 2000, 4000, 1000, 3000]}
    outcomes = ["completed", "failed", "completed", "completed", "abandoned", "completed", "completed", "failed"]
    for model, tokens in spends.items():
        for i, n in enumerate(tokens):  # cheap-1: $0.001 per 1,000 input tokens; pricey-1 (all completed): $0.01
            outcome = outcomes[i] if model == "cheap-1" else "completed"
            f.task(f"{model}-{i}", minute=i, outcome=outcome).call(model, input_tokens=n, output_tokens=0)
    with _store(tmp_path, f) as s:
        groups = cost(s, Filters(), CostOptions(by="model")).groups
        assert groups is not None
        rows = {r["model"]: r for r in groups.to_dicts()}
    x = np.array([n * 1.0 for n in spends["cheap-1"]])  # micro-dollars: 1,000 tokens at $1/M = 1,000 micro-dollars
    y = np.array([1.0 if o == "completed" else 0.0 for o in outcomes])
    r = x.mean() / y.mean()
    cov = np.cov(x, y, ddof=1)
    half = stats.norm.ppf(0.975) * np.sqrt((cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1]) / (8 * y.mean() ** 2))
    cheap = rows["cheap-1"]
    assert cheap["ci_method"] == "delta"
    assert float(cheap["ci_low_usd"]) == pytest.approx((r - half) / 1e6, abs=1e-6)
    assert float(cheap["ci_high_usd"]) == pytest.approx((r + half) / 1e6, abs=1e-6)
    assert rows["pricey-1"]["ci_method"] == "bootstrap"


def _retrying_fleet() -> Fleet:
    """20 identical completed tasks, 10 minutes apart: call x fails once (1,000 in: $0.001) and then succeeds
    ($0.001): $0.002 a task, half of it a superseded attempt, and the retry repeats the 1,000 tokens uncached."""
    f = Fleet()
    for i in range(20):
        t = f.task(f"r{i}", minute=10 * i)
        t.call("cheap-1", output_tokens=0, call_id="x", attempt=1, status="error").call(
            "cheap-1", output_tokens=0, call_id="x", attempt=2
        )
    return f


def test_many_attempts_are_measured_on_time_slices_and_scaled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_waste, "SAMPLE_ATTEMPTS", 10)  # 40 attempts: sampled
    monkeypatch.setattr(_waste, "SLICES", 2)
    with _store(tmp_path, _retrying_fleet()) as s:
        a = cost(s, Filters(), CostOptions())
        summary = a.summary()
        # starts span 0..190 minutes; 2 slices of 190 x (10 / 40) / 2 = 23.75 minutes centred on 47.5 and 142.5:
        # tasks at 40, 50 and 140, 150 minutes; 4 of 20, scaled by spend $0.04 / $0.008 = 5
        assert (summary["waste_sampled"], summary["waste_measured_tasks"], summary["completed"]) == (True, 4, 20)
        assert summary["superseded_attempts_usd"] == Decimal("0.02")  # 20 x $0.001, as if measured
        assert summary["superseded_attempts"] == 20
        # cheap-1 never read the cache here: its cache-read rate is unknown, the 20 x 1,000 missed tokens unpriced
        assert _waste_rows(a)["cache_misses"] == (Decimal(0), None, 20, 20_000, 0, 20_000, True)
        assert any("measured on the 4 of 20 completed tasks that started in 2 evenly spaced time slices" in n
                   for n in a.notes)  # fmt: skip
        exact = cost(s, Filters(), CostOptions(exact=True)).summary()
        assert (exact["waste_sampled"], exact["waste_measured_tasks"]) == (False, 20)
        assert (exact["superseded_attempts_usd"], exact["superseded_attempts"]) == (Decimal("0.02"), 20)


def test_each_time_bucket_gets_its_own_slice_of_the_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_waste, "SAMPLE_ATTEMPTS", 8)
    monkeypatch.setattr(_waste, "SLICES", 4)
    f = Fleet()
    for day in (0, 1):
        for i in range(10):  # 10 minutes apart from 09:00, each $0.002 of which $0.001 superseded
            t = f.task(f"d{day}-{i}", minute=day * 24 * 60 + 10 * i)
            t.call("cheap-1", output_tokens=0, call_id="x", attempt=1, status="error")
            t.call("cheap-1", output_tokens=0, call_id="x", attempt=2)
    with _store(tmp_path, f) as s:
        a = cost(s, Filters(), CostOptions(bucket="day"))
        # 2 days = 2 strata of 4 attempts each, 4 // 2 = 2 slices a day, each 90 x (4 / 20) / 2 = 9 minutes wide,
        # centred on 22.5 and 67.5 minutes: the tasks at 20 and 70 minutes of each day; scaled by $0.02 / $0.004
        assert a.groups is not None
        assert a.groups.select("tasks", "superseded_attempts_usd", "waste_usd").rows() == [
            (10, Decimal("0.01"), Decimal("0.01")),
            (10, Decimal("0.01"), Decimal("0.01")),
        ]
        assert (a.summary()["waste_measured_tasks"], a.summary()["superseded_attempts_usd"]) == (4, Decimal("0.02"))


def test_a_group_without_a_sampled_task_has_no_waste_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_waste, "SAMPLE_ATTEMPTS", 10)
    monkeypatch.setattr(_waste, "SLICES", 2)
    f = _retrying_fleet()
    f.task("late", minute=5, kind="triage").call("cheap-1", output_tokens=0)  # $0.001, outside both slices
    with _store(tmp_path, f) as s:
        a = cost(s, Filters(), CostOptions(by="kind"))
        assert _groups(a, "kind", "spend_usd", "waste_usd") == {
            "review": (Decimal("0.04"), Decimal("0.02")),
            "triage": (Decimal("0.001"), None),  # not measured: unknown, not $0
        }
        assert any(n.startswith("1 groups had no completed task in the sample") for n in a.notes)
        # the summary scales the whole sample instead: 4 tasks' $0.004 superseded x completed LLM spend $0.041 / the
        # sample's $0.008 = $0.0205 (an estimate: the triage task's spend counts as if it wasted the same share)
        assert a.summary()["superseded_attempts_usd"] == Decimal("0.0205")


def test_the_answer_as_json_and_the_registry_entry(store: DuckDBStore) -> None:
    doc = _ask(store, by="kind").to_json()
    assert doc["question"] == "cost" and QUESTION.name == "cost" and QUESTION.options is CostOptions
    assert doc["summary"]["spend_usd"] == "0.072550000000"  # money as a decimal string
    assert list(doc["tables"]) == ["groups", "waste"]
    assert doc["tables"]["groups"]["columns"][:3] == ["kind", "tasks", "completed"]
    assert isinstance(QUESTION.run(store, DEFAULT, CostOptions()), CostAnswer)


def test_an_empty_selection_answers_with_zeros(store: DuckDBStore) -> None:
    a = _ask(store, DEFAULT.narrowed(kind="nothing-like-this"), by="model")
    s = a.summary()
    assert (s["tasks"], s["completed"], s["spend_usd"], s["cost_per_completed_task_usd"], s["waste_usd"]) == (
        0,
        0,
        None,
        None,
        Decimal(0),
    )
    assert a.groups is None and isinstance(a.waste, pl.DataFrame)
