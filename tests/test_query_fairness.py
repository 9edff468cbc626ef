"""The query slots are shared fairly between projects: one project's slow queries hold at most its share of the
running slots and waiting places, so another project's query is admitted and answered. The real gate with real
threads, and the real app in-process with real slow queries on a real DuckDB file."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.collector import QueryGate, QueryGateFull
from taskcost.settings import Settings
from taskcost.store import DuckDBStore


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_one_project_cannot_take_every_slot_and_place() -> None:
    gate = QueryGate(concurrent=2, queued=2)
    release = threading.Event()
    started: list[str] = []
    outcomes: list[str] = []

    def slow(name: str) -> str:
        started.append(name)
        assert release.wait(30)
        return name

    def alpha(i: int) -> None:
        try:
            outcomes.append(gate.run("alpha", slow, f"alpha-{i}"))
        except QueryGateFull as exc:
            outcomes.append(f"refused: {exc}")

    threads = [threading.Thread(target=alpha, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    _wait_for(lambda: len(started) == 1 and len(outcomes) == 2)  # one runs, one waits, two are refused
    assert all(o.startswith("refused: too many SQL queries at once from one project") for o in outcomes)
    # another project is admitted and answered at once, while alpha's queries hold their slot and place
    before = time.monotonic()
    assert gate.run("beta", lambda: "beta") == "beta"
    assert gate.run(None, lambda: "admin") == "admin"  # the admin token (or no auth) is a project of its own
    assert time.monotonic() - before < 1 and len(started) == 1
    release.set()
    for t in threads:
        t.join(30)
    answered = [o for o in outcomes if not o.startswith("refused")]
    assert len(answered) == 2 and set(answered) == set(started)  # the one that waited ran once the slot was free


def test_a_freed_slot_goes_to_the_project_served_longest_ago() -> None:
    gate = QueryGate(concurrent=1, queued=4)  # alpha: 1 running and 2 waiting at most
    events = {name: threading.Event() for name in ("a0", "a1", "a2", "b0")}
    order: list[str] = []

    def hold(name: str) -> str:
        order.append(name)
        assert events[name].wait(30)
        return name

    pool = ThreadPoolExecutor(4)
    futures = [pool.submit(gate.run, "alpha", hold, "a0")]
    _wait_for(lambda: order == ["a0"])
    futures += [pool.submit(gate.run, "alpha", hold, name) for name in ("a1", "a2")]
    time.sleep(0.2)  # alpha's two wait first
    futures.append(pool.submit(gate.run, "beta", hold, "b0"))
    time.sleep(0.2)
    with pytest.raises(QueryGateFull):
        gate.run("alpha", hold, "a3")  # alpha's share of the places is taken
    for name in ("a0", "b0", "a1", "a2"):
        events[name].set()
    assert [f.result(30) for f in futures] == ["a0", "a1", "a2", "b0"]
    pool.shutdown()
    assert order == ["a0", "b0", "a1", "a2"]  # beta's query went before alpha's that waited longer


SLOW = "SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 1"  # interrupted by sql_timeout_s


def test_another_projects_query_is_answered_while_one_project_floods_the_api(tmp_path: Path) -> None:
    settings = Settings(
        db=tmp_path / "f.duckdb", decode_workers=0, sql_max_concurrent=2, sql_max_queued=2, sql_timeout_s=4
    )
    with DuckDBStore.open(settings.db) as store:
        _, alpha = store.create_key("alpha", "read")
        _, beta = store.create_key("beta", "read")
        with TestClient(create_app(settings, store, dashboards=False)) as client:

            def sql(key: str, query: str) -> httpx.Response:
                return client.post("/api/sql", json={"sql": query}, headers={"Authorization": f"Bearer {key}"})

            with ThreadPoolExecutor(6) as pool:
                flood = [pool.submit(sql, alpha, SLOW) for _ in range(6)]
                time.sleep(1.0)  # alpha's queries are running or waiting, or were refused
                before = time.monotonic()
                answer = sql(beta, "SELECT 42 AS n")
                took = time.monotonic() - before
                statuses = sorted(f.result(60).status_code for f in flood)
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [[42]]
    assert took < 3, took  # before alpha's first query ends (4 s): it did not wait behind alpha's
    assert statuses.count(429) == 4 and statuses.count(400) == 2  # alpha: one ran, one waited (time limit)
