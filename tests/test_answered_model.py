"""A logical call's attempts share the model that answered it (else the task's): a failed attempt that carries only
the requested name ("gpt-4o") is counted under the dated model that answered ("gpt-4o-2024-08-06") in ``llm_calls``,
the hourly roll-up and every question grouped by model; the requested name stays in ``request_model``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taskcost.analytics import Filters
from taskcost.analytics._canary import CanaryOptions, canary
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet

DATED = "gpt-4o-2024-08-06"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore.open(tmp_path / "a.duckdb") as s:
        yield s


def _models(store: DuckDBStore) -> list[tuple[str, str, str, str | None]]:
    sql = "SELECT task_id, status, model, request_model FROM llm_calls ORDER BY task_id, start_time"
    return [tuple(r) for r in store.query(sql).rows]  # type: ignore[misc]


def _hours(store: DuckDBStore) -> dict[str, tuple[int, int]]:
    rows = store.query("SELECT model, sum(attempts), sum(errors) FROM llm_call_hours GROUP BY model").rows
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def test_a_failed_attempt_takes_the_model_that_answered_its_call_in_a_later_commit(store: DuckDBStore) -> None:
    first = Fleet()
    first.task("t1", minute=5).call("gpt-4o", call_id="c1", attempt=1, status="error", output_tokens=0)
    first.write(store)
    assert _models(store) == [("t1", "error", "gpt-4o", "gpt-4o")]  # nothing answered yet: the requested name
    later = Fleet()
    t = later.task("t1", minute=5)
    t.call("gpt-4o", call_id="c1", attempt=2, at_s=3, response_model=DATED)
    # a call of the same task that failed every attempt: the task's answered model
    t.call("gpt-4o", call_id="c2", attempt=1, at_s=9, status="error", output_tokens=0)
    later.write(store, received_ns=2)
    assert _models(store) == [
        ("t1", "error", DATED, "gpt-4o"),
        ("t1", "ok", DATED, "gpt-4o"),
        ("t1", "error", DATED, "gpt-4o"),
    ]
    # the roll-up moved the attempts: one model, its three attempts and two errors
    assert _hours(store) == {DATED: (3, 2)}


def test_an_answer_stored_first_is_found_by_the_failure_that_comes_after(store: DuckDBStore) -> None:
    first = Fleet()
    first.task("t1", minute=5).call("gpt-4o", call_id="c1", attempt=2, at_s=3, response_model=DATED)
    first.write(store)
    later = Fleet()
    later.task("t1", minute=5).call("gpt-4o", call_id="c1", attempt=1, status="error", output_tokens=0)
    later.write(store, received_ns=2)
    assert {m for _, _, m, _ in _models(store)} == {DATED} and _hours(store) == {DATED: (2, 1)}


def test_a_later_commit_with_no_failure_and_no_retry_still_answers_a_stored_failure(store: DuckDBStore) -> None:
    first = Fleet()
    first.task("t1", minute=5).call("gpt-4o", call_id="c1", attempt=1, status="error", output_tokens=0)
    first.write(store)
    later = Fleet()  # another call of the task answers, first time: the commit has no failure and no retry
    later.task("t1", minute=5).call("gpt-4o", call_id="c2", attempt=1, at_s=4, response_model=DATED)
    later.write(store, received_ns=2)
    # the failed call never answered: it takes the task's answered model, as a from-scratch reading gives it
    assert _models(store) == [("t1", "error", DATED, "gpt-4o"), ("t1", "ok", DATED, "gpt-4o")]
    assert _hours(store) == {DATED: (2, 1)}
    rows = store.admin_query("SELECT project, task_id FROM answer_open_tasks").rows
    assert [tuple(r) for r in rows] == [("default", "t1")]  # the task is listed once, whatever its commits


def test_a_canary_by_model_sees_the_failed_attempts_of_each_arm(store: DuckDBStore) -> None:
    fleet = Fleet()
    for i in range(12):  # baseline: every task's first attempt fails, its retry answers
        t = fleet.task(f"b{i}", minute=i)
        t.call("gpt-4o", call_id=f"b{i}", attempt=1, status="error", output_tokens=0)
        t.call("gpt-4o", call_id=f"b{i}", attempt=2, at_s=2, response_model=DATED)
        fleet.task(f"c{i}", minute=i).call(  # candidate: answers at once
            "gpt-4o-mini", call_id=f"c{i}", response_model="gpt-4o-mini-2024-07-18"
        )
    fleet.write(store)
    ans = canary(store, Filters(), CanaryOptions(dimension="model", baseline=DATED, candidate="gpt-4o-mini-2024-07-18"))
    errors = {r["metric"]: r for r in ans.metrics.iter_rows(named=True)}["error_rate"]
    assert float(errors["baseline"]) == pytest.approx(50) and float(errors["candidate"]) == 0  # percent
