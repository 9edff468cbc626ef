"""The DuckDB store: migrations, the single writer, and the read-only query surface."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from taskcost.normalize import normalize_request
from taskcost.store import MIGRATIONS, VIEWS, DuckDBStore, QueryError, StoreLockedError, prepare_batch
from tests.otlp_samples import sample_request


def _load(store: DuckDBStore) -> None:
    store.write(prepare_batch(normalize_request(sample_request()), time.time_ns()))


def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    with DuckDBStore.open(db) as st:
        names = [r[0] for r in st.admin_query("SELECT name FROM schema_migrations ORDER BY name").rows]
        assert names == [m.name for m in MIGRATIONS]
    with DuckDBStore.open(db) as st:  # reopening applies nothing twice
        assert st.admin_query("SELECT count(*) FROM schema_migrations").rows[0][0] == len(MIGRATIONS)
        views = {r[0] for r in st.admin_query("SELECT view_name FROM duckdb_views() WHERE NOT internal").rows}
        assert set(VIEWS) <= views


def test_views_roll_up_a_task(store: DuckDBStore) -> None:
    _load(store)
    t = store.query("SELECT * FROM tasks").dicts()
    assert len(t) == 1
    task = t[0]
    assert (task["task_id"], task["kind"], task["outcome"]) == ("task-1", "code_review", "completed")
    assert (task["llm_calls"], task["attempts"], task["retries"], task["failed_attempts"]) == (1, 2, 1, 1)
    assert task["tool_calls"] == 1
    assert (task["input_tokens"], task["cache_read_tokens"], task["output_tokens"]) == (2200, 1000, 310)
    # gpt-4o: attempt 1 = 1000 in, 10 out; attempt 2 = 200 uncached + 1000 cached in, 300 out; tool $0.005
    from decimal import Decimal as D

    llm = (1000 * D("2.5") + 10 * 10 + 200 * D("2.5") + 1000 * D("1.25") + 300 * 10) / 1_000_000
    assert task["llm_cost_usd"] == llm
    assert task["tool_cost_usd"] == D("0.005")
    assert task["cost_usd"] == llm + D("0.005")
    assert task["duration_s"] == 5.0
    sql = "SELECT attempt, status, error_type, ttft_s, model, request_model FROM llm_calls ORDER BY attempt"
    # the failed attempt is counted under the model that answered its call; the name it asked for is kept beside
    assert store.query(sql).rows == [
        (1, "error", "invalid_json", None, "gpt-4o-2024-08-06", "gpt-4o"),
        (2, "ok", None, 0.25, "gpt-4o-2024-08-06", "gpt-4o"),
    ]


def test_writer_batches_many_submissions_into_commits(store: DuckDBStore) -> None:
    futures = [store.submit(prepare_batch(normalize_request(sample_request()), 1)) for _ in range(50)]
    for f in futures:
        f.result(30)
    assert store.query("SELECT count(*) FROM spans").rows[0][0] == 200
    assert store.committed_spans == 200


def test_close_drains_the_queue(tmp_path: Path) -> None:
    st = DuckDBStore.open(tmp_path / "d.duckdb")
    futures = [st.submit(prepare_batch(normalize_request(sample_request()), 1)) for _ in range(20)]
    st.close()
    assert all(f.done() and f.exception() is None for f in futures)
    with DuckDBStore.open(tmp_path / "d.duckdb", read_only=True) as ro:
        assert ro.query("SELECT count(*) FROM spans").rows[0][0] == 80


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("DELETE FROM spans", "only read-only SELECT"),
        ("DROP VIEW tasks", "only read-only SELECT"),
        ("SELECT 1; SELECT 2", "exactly one statement"),
        ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv"),
        ("SELECT * FROM llm_call_rows", "private relation"),
        ("SELECT * FROM main.llm_calls", "plain name"),
        ("SELECT * FROM api_keys", "private relation"),
        ("SELECT * FROM duckdb_settings()", "table function duckdb_settings"),
        ("SELECT * FROM information_schema.tables", "plain name"),
        ("COPY spans TO '/tmp/x.csv'", "only read-only SELECT"),
        ("SET enable_external_access = true", "only read-only SELECT"),
        ("SELEC 1", "does not parse"),
        ("ATTACH '/tmp/other.duckdb' AS other", "only read-only SELECT"),
        ("INSTALL httpfs", "only read-only SELECT"),
        ("LOAD parquet", "only read-only SELECT"),
        ("PRAGMA database_list", "only read-only SELECT"),
        ("EXPORT DATABASE '/tmp/out'", "only read-only SELECT"),
        ("SELECT * FROM read_text('/etc/passwd')", "table function read_text"),
        ("SELECT * FROM glob('/etc/*')", "table function glob"),
        ("SELECT * FROM '/etc/passwd'", "private relation"),
        ("SELECT * FROM sniff_csv('/etc/passwd')", "table function sniff_csv"),
    ],
)
def test_query_refuses_writes_and_escapes(store: DuckDBStore, sql: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        store.query(sql)


def test_query_time_and_row_limits(store: DuckDBStore) -> None:
    with pytest.raises(QueryError, match="time limit"):
        store.query("SELECT count(*) FROM range(10000000000000) a", timeout_s=0.5)
    res = store.query("SELECT * FROM range(100)", max_rows=10)
    assert len(res.rows) == 10 and res.truncated


def test_a_second_process_cannot_open_a_held_file(tmp_path: Path) -> None:
    db = tmp_path / "held.duckdb"
    DuckDBStore.open(db).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from taskcost.store import DuckDBStore; s = DuckDBStore.open(sys.argv[1]);"
            " print('ready', flush=True); time.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError, match="held by another process"):
            DuckDBStore.open(db, read_only=True)
    finally:
        holder.kill()
        holder.wait()


def test_read_only_open_of_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no database at"):
        DuckDBStore.open(tmp_path / "nope.duckdb", read_only=True)


def test_a_resent_batch_is_stored_once(store: DuckDBStore) -> None:
    req = sample_request()
    first = store.write(prepare_batch(normalize_request(req), 1))
    again = store.write(prepare_batch(normalize_request(req), 2))
    assert (first.spans, first.deduplicated) == (4, 0)
    assert (again.spans, again.deduplicated) == (0, 4)
    # a batch mixing old and new spans keeps the new ones only, in every table
    mixed = sample_request()
    mixed.resource_spans.extend(req.resource_spans)
    info = store.write(prepare_batch(normalize_request(mixed), 3))
    assert (info.spans, info.deduplicated) == (4, 4)
    counts = {
        t: store.admin_query(f"SELECT count(*) FROM {t}").rows[0][0]
        for t in ("spans", "llm_call_rows", "tool_call_rows", "task_rows", "span_keys")
    }
    assert counts == {"spans": 8, "llm_call_rows": 4, "tool_call_rows": 2, "task_rows": 2, "span_keys": 8}
    assert store.deduplicated_spans == 8


def test_the_same_span_in_another_project_is_another_span(store: DuckDBStore) -> None:
    req = sample_request()
    store.write(prepare_batch(normalize_request(req), 1, project="alpha"))
    info = store.write(prepare_batch(normalize_request(req), 1, project="beta"))
    assert info.spans == 4


def test_project_scope_applies_to_every_view(store: DuckDBStore) -> None:
    store.write(prepare_batch(normalize_request(sample_request()), 1, project="alpha"))
    store.write(prepare_batch(normalize_request(sample_request()), 1, project="beta"))
    assert store.query("SELECT count(*) FROM spans").rows[0][0] == 8
    for view in ("spans", "llm_calls", "tool_calls", "tasks"):
        res = store.query(f"SELECT DISTINCT project FROM {view}", project="alpha")
        assert res.rows == [("alpha",)], view
    # every path to the data is scoped: CTEs, subqueries, joins
    sql = (
        "WITH x AS (SELECT project FROM llm_calls) SELECT count(*) FROM x JOIN tasks USING (project) "
        "WHERE project IN (SELECT project FROM spans)"
    )
    assert store.query(sql, project="alpha").rows == [(2,)]
    assert store.query("SELECT count(*) FROM tasks", project="nobody").rows == [(0,)]


def test_a_full_queue_refuses_instead_of_growing(tmp_path: Path) -> None:
    from taskcost.store import StoreBusyError

    st = DuckDBStore.open(tmp_path / "q.duckdb", max_queued_spans=6)
    try:
        batch = prepare_batch(normalize_request(sample_request()), 1)
        accepted, refused = 0, 0
        futures = []
        for _ in range(200):
            try:
                futures.append(st.submit(batch))
                accepted += 1
            except StoreBusyError:
                refused += 1
        for f in futures:
            f.result(30)
        assert refused > 0 and accepted > 0
        assert st.queued_spans == 0
    finally:
        st.close()


def test_the_queue_holds_at_most_some_seconds_of_the_writers_commit_rate(tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from bench.traffic import requests
    from taskcost.store import StoreBusyError

    big = ExportTraceServiceRequest()
    for r in requests(3_000):
        big.resource_spans.extend(r.resource_spans)
    small = prepare_batch(normalize_request(sample_request()), 1)
    for i, max_queued_s in enumerate((None, 0.5, 1e-9)):
        st = DuckDBStore.open(
            tmp_path / f"q{i}.duckdb", max_batch_spans=8, max_queued_spans=100_000, max_queued_s=max_queued_s
        )
        try:
            assert st.queue_limit == 100_000  # no commit measured yet: the count alone
            info = st.write(prepare_batch(normalize_request(big), 1))  # one commit of about 3,000 spans
            rate = (info.spans + info.deduplicated) / info.seconds
            if max_queued_s is None:
                assert st.queue_limit == 100_000
            else:  # that many seconds of the rate measured, but at least one commit (max_batch_spans)
                assert st.queue_limit == min(100_000, max(8, int(rate * max_queued_s)))
            refused, futures = 0, []
            for _ in range(200):
                try:
                    futures.append(st.submit(small))
                except StoreBusyError:
                    refused += 1
            for f in futures:
                f.result(30)
            if max_queued_s == 1e-9:  # the limit is one commit: most of a burst is refused
                assert st.queue_limit == 8 and refused > 0
            elif max_queued_s is None:  # 200 small batches fit in 100,000 spans
                assert refused == 0
        finally:
            st.close()


def test_a_span_twice_in_one_batch_is_stored_once(store: DuckDBStore) -> None:
    req = sample_request()
    twice = type(req)()
    twice.CopyFrom(req)
    twice.resource_spans.extend(req.resource_spans)
    info = store.write(prepare_batch(normalize_request(twice), 1))
    assert (info.spans, info.deduplicated) == (4, 4)
    assert store.query("SELECT count(*) FROM llm_calls").rows == [(2,)]


def test_a_batch_the_columns_cannot_hold_fails_alone_and_the_writer_lives_on(store: DuckDBStore) -> None:
    bad = prepare_batch(normalize_request(sample_request()), 1)
    bad.columns["spans"]["start_ns"][0] = 2**64  # beyond BIGINT: Arrow refuses it
    with pytest.raises(Exception, match="overflow|out of range|not in range|too large|convert"):
        store.write(bad)
    assert store.writer_alive and store.queued_spans == 0
    assert store.write(prepare_batch(normalize_request(sample_request()), 1)).spans == 4


def test_open_applies_the_servers_duckdb_settings(tmp_path: Path) -> None:
    with DuckDBStore.open(tmp_path / "s.duckdb", memory_limit="64MB", threads=1) as store:
        row = store.admin_query(
            "SELECT current_setting('threads'), current_setting('memory_limit'),"
            " current_setting('checkpoint_threshold')"
        ).rows[0]
    assert row[0] == 1 and row[1].startswith("61") and row[2] == "128.0 MiB"  # DuckDB shows 64MB as 61.0 MiB


def test_duckdb_threads_default_leaves_the_decode_workers_their_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from taskcost.settings import Settings

    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert Settings(decode_workers=0).server_duckdb_threads() == 1
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert Settings(decode_workers=1).server_duckdb_threads() == 2  # a query may use both cores
    assert Settings(decode_workers=4).server_duckdb_threads() == 2
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert Settings(decode_workers=1).server_duckdb_threads() == 6
    assert Settings(decode_workers=1, duckdb_threads=3).server_duckdb_threads() == 3  # the setting wins


def test_memory_limit_default_is_128mb_per_core_left_after_the_decode_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from taskcost.settings import Settings

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert Settings(decode_workers=2).server_memory_limit() == "128MB"  # 2 DuckDB threads, one core left
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert Settings(decode_workers=2).server_memory_limit() == "640MB"  # 5 DuckDB threads
    assert Settings(decode_workers=2, duckdb_threads=2).server_memory_limit() == "256MB"
    assert Settings(decode_workers=2, memory_limit="1GB").server_memory_limit() == "1GB"  # the setting wins
    monkeypatch.setenv("TASKCOST_MEMORY_LIMIT", "300MB")
    assert Settings().server_memory_limit() == "300MB"


def test_a_query_out_of_memory_is_a_400_that_says_which_setting_to_raise(tmp_path: Path) -> None:
    """DuckDB's advice (SET memory_limit, SET threads) cannot be followed through the sandbox: the error names the
    server's setting instead; the store stays usable."""
    from fastapi.testclient import TestClient

    from taskcost.app import create_app
    from taskcost.settings import Settings

    store = DuckDBStore.open(tmp_path / "m.duckdb", memory_limit="32MB", threads=1)
    with store, TestClient(create_app(Settings(db=store.path), store, dashboards=False)) as client:
        big = "SELECT string_agg(i::VARCHAR, ',') FROM range(20000000) t(i)"
        r = client.post("/api/sql", json={"sql": big})
        assert r.status_code == 400, r.text
        message = r.json()["message"]
        assert message.startswith("Out of Memory Error")
        assert "memory_limit (30.5 MiB)" in message and "TASKCOST_MEMORY_LIMIT" in message
        assert "SET memory_limit" not in message
        ok = client.post("/api/sql", json={"sql": "SELECT count(*) FROM spans"})
        assert ok.status_code == 200 and ok.json()["rows"] == [[0]]


def test_out_of_memory_says_so_when_the_setting_cannot_be_read_either(tmp_path: Path) -> None:
    """With the memory still taken, reading memory_limit for the message can fail as the query did (seen: /healthz
    answered 500 while the store reopened after an engine failure): the message goes without the figure."""
    import duckdb

    class Exhausted:  # the store's connection, every cursor of which fails as DuckDB does with no memory left
        def cursor(self) -> Any:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 4.0 KiB")

    with DuckDBStore.open(tmp_path / "m.duckdb") as store:
        real, store._con = store._con, Exhausted()  # type: ignore[assignment]
        try:
            message = store._out_of_memory(duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate"))
        finally:
            store._con = real
    assert message.startswith("Out of Memory Error: failed to allocate. The query needs more working memory than")
    assert "DuckDB's memory_limit allows" in message and "TASKCOST_MEMORY_LIMIT" in message
