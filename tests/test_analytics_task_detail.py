"""Browsing tasks (``task_list``, ``task_detail``, ``explain_call``) and the facts the dashboards show beside the
answers (``data_extent``, ``demo_marks``), on a hand-built fleet whose figures are worked out below from the builder's
round rates (tests/builders/analytics.py; USD per million tokens, input / cache read / output: cheap-1 1 / 0.1 / 2,
pricey-1 10 / 1 / 20). Minute = the task's start after T0 (Monday 2026-11-02 09:00 UTC).

Project ``default``:

- a (0, completed, review): cheap-1 1,000 in + 100 out = $0.0012; call a-r attempt 1, error, 2,000 in = $0.002;
  attempt 2, 2,000 in all from the cache + 100 out = $0.0002 + $0.0002 = $0.0004; a tool at $0.01.
  Task: $0.0136; 2 calls, 3 attempts, 1 retry, 1 failed, 1 tool call.
- b (10, failed, fix): pricey-1 1,000 in + 50 out = $0.011.
- c (20, still running, review): cheap-1 5,000 in = $0.005.
- u (30, completed, triage): a model no price data knows (mystery-9): unpriced, cost NULL, 1 unpriced call.
- demo-1 (40, completed, triage): cheap-1 1,000 in + 100 out = $0.0012, sent as the demo sends (service
  ``taskcost-demo``).

Project ``other``: a (0, completed, review), another task with the same id: pricey-1 1,000 in = $0.01.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from taskcost.analytics import (
    Filters,
    UsageError,
    data_extent,
    demo_marks,
    explain_call,
    task_detail,
    task_list,
)
from taskcost.store import DuckDBStore, prepare_batch
from tests.builders.analytics import T0, Fleet, pricer

DEFAULT = Filters(project="default")
ALL = Filters.model_validate({})
CACHE_NONE = None  # no cache read reported: unknown, not 0


def _fleet() -> tuple[Fleet, Fleet]:
    f = Fleet()
    a = f.task("a", minute=0)
    a.call("cheap-1", input_tokens=1000, output_tokens=100)
    a.call("cheap-1", input_tokens=2000, output_tokens=0, call_id="a-r", attempt=1, status="error")
    a.call("cheap-1", input_tokens=2000, output_tokens=100, cache_read=2000, call_id="a-r", attempt=2)
    a.tool(cost=Decimal("0.01"))
    f.task("b", minute=10, outcome="failed", kind="fix").call("pricey-1", output_tokens=50)
    f.task("c", minute=20, outcome=None).call("cheap-1", input_tokens=5000, output_tokens=0)
    f.task("u", minute=30, kind="triage").call("mystery-9", provider="openai", output_tokens=10)
    f.task("a", project="other").call("pricey-1", output_tokens=0)
    demo = Fleet()
    demo.task("demo-1", minute=40, kind="triage").call("cheap-1", output_tokens=100, service_name="taskcost-demo")
    return f, demo


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    path: Path = tmp_path_factory.mktemp("task-detail") / "a.duckdb"
    fleet, demo = _fleet()
    with DuckDBStore.open(path) as s:
        fleet.write(s)
        batch = demo.tasks[0].records()
        batch.tasks = [dataclasses.replace(t, service_name="taskcost-demo") for t in batch.tasks]
        s.write(prepare_batch(batch, 1, project="default", pricer=pricer()))
        yield s


# -- task_list -----------------------------------------------------------------------------------------------------
def test_the_list_sorts_on_the_server_and_says_how_many_match(store: DuckDBStore) -> None:
    found = task_list(store, DEFAULT, sort="-cost")
    assert (found.total, found.more) == (5, False)
    # NULL (unpriced) last, whatever the direction
    assert list(found.rows["task_id"]) == ["a", "b", "c", "demo-1", "u"]
    costs = [Decimal("0.0136"), Decimal("0.011"), Decimal("0.005"), Decimal("0.0012"), None]
    assert list(found.rows["cost_usd"]) == costs
    assert list(task_list(store, DEFAULT, sort="cost").rows["task_id"]) == ["demo-1", "c", "b", "a", "u"]
    newest = task_list(store, DEFAULT)  # default: newest first
    assert list(newest.rows["task_id"]) == ["demo-1", "u", "c", "b", "a"]
    row = newest.rows.row(4, named=True)
    assert (row["attempts"], row["llm_calls"], row["retries"], row["failed_attempts"], row["tool_calls"]) == (
        3, 2, 1, 1, 1
    )  # fmt: skip
    assert row["start_time"] == T0.replace(tzinfo=None)
    running = newest.rows.row(2, named=True)
    assert (running["task_id"], running["outcome"]) == ("c", None)


def test_the_list_is_cut_at_the_limit_and_says_more_match(store: DuckDBStore) -> None:
    found = task_list(store, DEFAULT, sort="task", limit=2)
    assert list(found.rows["task_id"]) == ["a", "b"]
    assert (found.more, found.total) == (True, None)  # counting every match would be a second pass
    exact = task_list(store, DEFAULT, sort="task", limit=5)
    assert (exact.rows.height, exact.more, exact.total) == (5, False, 5)


def test_search_matches_id_kind_outcome_and_model_in_any_case(store: DuckDBStore) -> None:
    assert list(task_list(store, DEFAULT, search="TRIAGE", sort="task").rows["task_id"]) == ["demo-1", "u"]
    assert list(task_list(store, DEFAULT, search="fail").rows["task_id"]) == ["b"]
    assert list(task_list(store, DEFAULT, search="mystery").rows["task_id"]) == ["u"]
    assert list(task_list(store, DEFAULT, search="demo-").rows["task_id"]) == ["demo-1"]
    none = task_list(store, DEFAULT, search="no such thing")
    assert (none.rows.height, none.more, none.total) == (0, False, 0)
    assert list(task_list(store, DEFAULT, search="%").rows["task_id"]) == []  # a plain substring, not a pattern


def test_the_list_takes_every_filter(store: DuckDBStore) -> None:
    assert list(task_list(store, DEFAULT.narrowed(kind="fix")).rows["task_id"]) == ["b"]
    assert list(task_list(store, DEFAULT.narrowed(model="pricey-1")).rows["task_id"]) == ["b"]
    since = DEFAULT.narrowed(since=T0 + timedelta(minutes=15), until=T0 + timedelta(minutes=35))
    assert list(task_list(store, since).rows["task_id"]) == ["u", "c"]
    both = task_list(store, ALL, sort="task")
    assert (both.total, both.more) == (6, False)
    assert sorted((r["project"], r["task_id"]) for r in both.rows.iter_rows(named=True))[:2] == [
        ("default", "a"), ("default", "b")
    ]  # fmt: skip
    assert list(both.rows["task_id"]).count("a") == 2


def test_an_unknown_sort_is_a_usage_error(store: DuckDBStore) -> None:
    with pytest.raises(UsageError, match="unknown sort"):
        task_list(store, DEFAULT, sort="price; DROP TABLE tasks")
    with pytest.raises(UsageError):
        task_list(store, DEFAULT, limit=0)


# -- task_detail ---------------------------------------------------------------------------------------------------
def test_a_tasks_calls_and_tools_in_start_order(store: DuckDBStore) -> None:
    d = task_detail(store, "a", project="default")
    assert d is not None
    assert (d.project, d.task["kind"], d.task["outcome"], d.task["cost_usd"]) == (
        "default", "review", "completed", Decimal("0.0136")
    )  # fmt: skip
    calls = d.calls.to_dicts()
    assert [(c["call_id"] == "a-r", c["attempt"], c["status"], c["cost_usd"]) for c in calls] == [
        (False, 1, "ok", Decimal("0.0012")),
        (True, 1, "error", Decimal("0.002")),
        (True, 2, "ok", Decimal("0.0004")),
    ]
    assert [(c["input_tokens"], c["cache_read_tokens"], c["output_tokens"]) for c in calls] == [
        (1000, CACHE_NONE, 100), (2000, CACHE_NONE, 0), (2000, 2000, 100)
    ]  # fmt: skip
    starts = [c["start_time"] for c in calls]
    assert starts == sorted(starts) and starts[0] == T0.replace(tzinfo=None)
    assert [(t["tool_name"], t["cost_usd"]) for t in d.tools.to_dicts()] == [("search", Decimal("0.01"))]
    assert d.notes() == []


def test_an_unpriced_task_says_so(store: DuckDBStore) -> None:
    d = task_detail(store, "u", project="default")
    assert d is not None
    assert d.task["cost_usd"] is None and d.task["unpriced_calls"] == 1
    assert d.calls.to_dicts()[0]["unpriced_reason"]
    assert d.notes() == ["1 call attempts of this task are unpriced and not in its cost (explain one to see why)"]


def test_a_task_id_in_two_projects_needs_one(store: DuckDBStore) -> None:
    with pytest.raises(UsageError, match="several projects"):
        task_detail(store, "a")
    other = task_detail(store, "a", project="other")
    assert other is not None and other.calls.height == 1 and other.task["cost_usd"] == Decimal("0.01")
    assert task_detail(store, "b") is not None  # in one project: none needed
    assert task_detail(store, "nope") is None
    assert task_detail(store, "b", project="other") is None


def test_the_calls_shown_stop_at_the_limit_and_a_note_says_so(
    store: DuckDBStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskcost.analytics import _task_detail

    monkeypatch.setattr(_task_detail, "MAX_TASK_ROWS", 2)
    d = task_detail(store, "a", project="default")
    assert d is not None and d.calls.height == 2
    assert d.notes() == ["the first 2 of 3 call attempts are shown"]


# -- explain_call --------------------------------------------------------------------------------------------------
def test_explain_call_is_what_explain_cost_prints(store: DuckDBStore) -> None:
    d = task_detail(store, "a", project="default")
    assert d is not None
    first = d.calls.row(0, named=True)
    lines = explain_call(store, first["span_id"], first["trace_id"])
    assert lines[0].startswith(f"call {first['span_id']} (trace {first['trace_id']}), task a, attempt 1, ok")
    assert lines[-1] == "  input $0.001000000000 + output $0.000200000000 = total (cost_usd) $0.001200000000"
    tool = d.tools.row(0, named=True)
    assert explain_call(store, tool["span_id"]) == [
        f"tool call {tool['span_id']} (search), task a: cost $0.010000, from span"
    ]
    unpriced = task_detail(store, "u")
    assert unpriced is not None
    text = "\n".join(explain_call(store, unpriced.calls["span_id"][0]))
    assert "unpriced:" in text
    assert explain_call(store, "00000000deadbeef") == []


# -- facts ---------------------------------------------------------------------------------------------------------
def test_data_extent_is_the_first_and_last_start_of_the_selection(store: DuckDBStore) -> None:
    e = data_extent(store, DEFAULT)
    assert (e.tasks, e.first_start, e.last_start, e.last_call_start) == (
        5, T0.replace(tzinfo=None), (T0 + timedelta(minutes=40)).replace(tzinfo=None), None
    )  # fmt: skip
    fix = data_extent(store, DEFAULT.narrowed(kind="fix"), calls=True)
    at = (T0 + timedelta(minutes=10)).replace(tzinfo=None)
    assert (fix.tasks, fix.first_start, fix.last_start, fix.last_call_start) == (1, at, at, at)
    # a's calls run one after another, a second each: the last starts 2 s after the task
    a = data_extent(store, DEFAULT.narrowed(until=T0 + timedelta(minutes=5)), calls=True)
    assert a.last_call_start == (T0 + timedelta(seconds=2)).replace(tzinfo=None)
    empty = data_extent(store, DEFAULT.narrowed(kind="nothing"), calls=True)
    assert (empty.tasks, empty.first_start, empty.last_start, empty.last_call_start) == (0, None, None, None)


def test_demo_marks_count_the_tasks_the_demo_sent(store: DuckDBStore) -> None:
    marks = demo_marks(store)
    assert (marks.demo_tasks, marks.tasks, marks.any, marks.only) == (1, 6, True, False)
    assert demo_marks(store, project="other") == type(marks)(0, 1)
    assert not demo_marks(store, project="other").any


def test_a_running_demo_task_is_the_demos_by_its_calls(tmp_path: Path) -> None:
    # the demo's task span ends last: until it comes, the task has calls (of the demo's service) and no service
    demo = Fleet()
    demo.task("demo-2", minute=0, outcome=None).call("cheap-1", output_tokens=100, service_name="taskcost-demo")
    batch = demo.tasks[0].records()
    batch.tasks = []
    with DuckDBStore.open(tmp_path / "running.duckdb") as s:
        s.write(prepare_batch(batch, 1, project="default", pricer=pricer()))
        mine = Fleet()
        mine.task("demo-3", minute=1, outcome=None).call("cheap-1", output_tokens=100)  # a user's: not the demo's
        mine.write(s)
        marks = demo_marks(s)
        assert s.query("SELECT task_id, service_name FROM tasks ORDER BY 1").rows == [
            ("demo-2", None), ("demo-3", None)
        ]  # fmt: skip
        assert (marks.demo_tasks, marks.tasks, marks.only) == (1, 2, False)
        # the same on the ClickHouse store (its SQL has no correlated IN: the query must not need one)
        from bench.clickhouse import copy_rows
        from taskcost.store.clickhouse._store import ClickHouseStore

        with ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}") as ch:
            copy_rows(s, ch, everything=True)
            assert demo_marks(ch) == marks


def test_demo_marks_of_an_empty_store(tmp_path: Path) -> None:
    with DuckDBStore.open(tmp_path / "empty.duckdb") as s:
        marks = demo_marks(s)
        assert (marks.demo_tasks, marks.tasks, marks.any, marks.only) == (0, 0, False, False)
