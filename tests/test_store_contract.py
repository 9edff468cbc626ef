"""The Store contract (taskcost/store/_base.py): what every storage backend must do, tested through the protocol
alone. A new backend joins ``BACKENDS`` and passes the same tests; nothing here knows DuckDB.

Each test opens a fresh store of each backend on a real file (``open_store(path, **options)``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from taskcost.normalize import normalize_request
from taskcost.pricing import RepriceReport, default_pricer
from taskcost.store import (
    CommitInfo,
    DuckDBStore,
    QueryError,
    ReadStore,
    Store,
    StoreBusyError,
    StoreUnavailableError,
    prepare_batch,
)
from tests.otlp_samples import sample_request

Opener = Callable[..., Store]


def _clickhouse(path: Path, **options: Any) -> Store:
    from taskcost.store.clickhouse import ClickHouseStore

    return ClickHouseStore.open(f"chdb://{path}", **options)


BACKENDS: dict[str, Opener] = {"duckdb": DuckDBStore.open, "clickhouse": _clickhouse}


@pytest.fixture(params=sorted(BACKENDS))
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Store]]:
    opened: list[Store] = []

    def open_(name: str = "contract", **options: Any) -> Store:
        store = BACKENDS[request.param](tmp_path / f"{name}.db", **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


REQUEST = sample_request()  # the same spans (ids included) every time


def _batch(project: str = "default", received_ns: int = 1, request: Any = REQUEST) -> Any:
    return prepare_batch(normalize_request(request), received_ns, project=project)


def test_a_store_is_a_read_store(open_store: Callable[..., Store]) -> None:
    store: ReadStore = open_store()
    assert store.query("SELECT 1 AS one").dicts() == [{"one": 1}]


def test_a_written_batch_is_read_back_and_counted(open_store: Callable[..., Store]) -> None:
    store = open_store()
    seen: list[CommitInfo] = []
    store.on_commit = seen.append
    info = store.write(_batch(), timeout=30)
    assert (info.spans, info.deduplicated) == (4, 0)
    assert seen and seen[-1].spans == 4
    assert store.committed_spans == 4
    task = store.query("SELECT task_id, attempts, cost_usd FROM tasks").dicts()
    assert task == [{"task_id": "task-1", "attempts": 2, "cost_usd": task[0]["cost_usd"]}]
    assert isinstance(task[0]["cost_usd"], Decimal) and task[0]["cost_usd"] > 0


def test_submit_resolves_once_durable_and_a_resend_is_stored_once(open_store: Callable[..., Store]) -> None:
    store = open_store()
    first = store.submit(_batch()).result(30)
    again = store.submit(_batch(received_ns=2)).result(30)
    assert (first.spans, again.spans, again.deduplicated) == (4, 0, 4)
    assert store.deduplicated_spans == 4
    assert store.query("SELECT count(*) FROM spans").rows == [(4,)]


def test_every_view_is_scoped_by_project(open_store: Callable[..., Store]) -> None:
    store = open_store()
    store.write(_batch("alpha"), timeout=30)
    store.write(_batch("beta"), timeout=30)
    for view in ("spans", "llm_calls", "tool_calls", "tasks"):
        assert store.query(f"SELECT DISTINCT project FROM {view}", project="alpha").rows == [("alpha",)], view
        assert store.query(f"SELECT count(*) FROM {view}", project="nobody").rows == [(0,)], view
    assert {r[0] for r in store.query("SELECT DISTINCT project FROM spans").rows} == {"alpha", "beta"}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM api_keys",
        "SELECT * FROM llm_call_rows",
        "DELETE FROM spans",
        "SELECT 1; SELECT 2",
        "SELECT current_setting('memory_limit')",
    ],
)
def test_user_sql_cannot_reach_past_the_public_views(open_store: Callable[..., Store], sql: str) -> None:
    store = open_store()
    with pytest.raises(QueryError):
        store.query(sql)


def test_results_are_bounded_by_rows_bytes_and_time(open_store: Callable[..., Store]) -> None:
    store = open_store()
    res = store.query("SELECT * FROM range(100)", max_rows=10)
    assert len(res.rows) == 10 and res.truncated and res.meta["truncated_by"] == "rows"
    res = store.query("SELECT repeat('x', 1000) FROM range(100)", max_bytes=10_000)
    assert 0 < len(res.rows) < 11 and res.truncated and res.meta["truncated_by"] == "bytes"
    res = store.query("SELECT * FROM range(5)")
    assert not res.truncated and len(res.rows) == 5
    started = time.perf_counter()
    with pytest.raises(QueryError, match="time limit"):
        store.query("SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 1", timeout_s=0.5)
    assert time.perf_counter() - started < 10


def test_keys_turn_auth_on_for_good(open_store: Callable[..., Store]) -> None:
    store = open_store()
    assert not store.keys_ever_created and not store.has_active_keys and store.list_keys() == []
    key, secret = store.create_key("alpha", "read")
    assert store.keys_ever_created and store.has_active_keys
    verified = store.verify_key(secret)
    assert verified is not None and (verified.id, verified.project, verified.kind) == (key.id, "alpha", "read")
    assert store.verify_key(secret + "x") is None
    assert [k.id for k in store.list_keys()] == [key.id]
    assert secret not in str(store.admin_query("SELECT * FROM api_keys").rows)  # stored hashed
    with pytest.raises(ValueError):
        store.create_key("no spaces", "read")
    assert store.revoke_key(key.id) and not store.revoke_key(key.id)
    # revoking the last key leaves a store that had keys: authentication stays on (auth = auto)
    assert store.verify_key(secret) is None and not store.has_active_keys and store.keys_ever_created
    store.close()
    again = open_store()  # the same file: what it remembers is in the file
    assert again.keys_ever_created and not again.has_active_keys


def test_operations_figures(open_store: Callable[..., Store]) -> None:
    store = open_store()
    assert store.writer_alive and not store.read_only
    assert store.queued_spans == 0 and store.queue_limit > 0
    assert set(store.engine_settings) >= {"memory_limit", "threads"}
    assert {"spans", "llm_call_rows", "tool_call_rows", "task_rows"} <= set(store.arrow_schemas)


def test_a_full_queue_refuses_and_keeps_nothing(open_store: Callable[..., Store]) -> None:
    store = open_store(max_queued_spans=1, max_batch_spans=1)
    with pytest.raises(StoreBusyError):
        for _ in range(200):
            store.submit(_batch(request=sample_request()), wait_s=0)  # new spans each time


def test_reprice_and_cluster_costs_answer(open_store: Callable[..., Store]) -> None:
    store = open_store()
    store.write(_batch(), timeout=30)
    report = store.reprice(default_pricer(), dry_run=True)
    assert isinstance(report, RepriceReport) and report.calls == 2 and report.changed == 0
    assert store.cluster_costs() == []
    store.fold_rollups()
    assert store.query("SELECT count(*) FROM tasks").rows == [(1,)]


def test_cluster_allocation_answers(open_store: Callable[..., Store]) -> None:
    """The server's allocation of the clusters' windows: nothing due and nothing allocated without a clusters file."""
    store = open_store()
    store.write(_batch(), timeout=30)
    now = time.time_ns()
    due = store.cluster_allocation_due(default_pricer(), closed_ns=now, received_since_ns=0)
    assert due.since_ns is None and due.allocated_through_ns is None and due.closed_ns <= now
    report = store.allocate_clusters(default_pricer(), since_ns=now - 3_600_000_000_000, until_ns=now)
    assert isinstance(report, RepriceReport) and report.windows == 0 and report.self_hosted_changed == 0
    assert store.cluster_costs() == []


def test_a_read_only_store_reads_and_refuses_writes(open_store: Callable[..., Store]) -> None:
    writer = open_store("ro")
    writer.write(_batch(), timeout=30)
    writer.close()
    reader = open_store("ro", read_only=True)
    assert reader.read_only and reader.query("SELECT count(*) FROM spans").rows == [(4,)]
    with pytest.raises(StoreUnavailableError):
        reader.submit(_batch())


def test_close_is_idempotent_and_final(open_store: Callable[..., Store]) -> None:
    store = open_store()
    store.submit(_batch())
    store.close()
    store.close()
    with pytest.raises(StoreUnavailableError):
        store.query("SELECT 1")
