"""The DuckDB store: migrations, the single writer, and the read-only query surface."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskcost.normalize import normalize_request
from taskcost.store import MIGRATIONS, VIEWS, DuckDBStore, QueryError, StoreLockedError, prepare_batch
from tests.otlp_samples import sample_request


def _load(store: DuckDBStore) -> None:
    store.write(prepare_batch(normalize_request(sample_request()), time.time_ns()))


def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    with DuckDBStore.open(db) as st:
        names = [r[0] for r in st.query("SELECT name FROM schema_migrations ORDER BY name").rows]
        assert names == [m.name for m in MIGRATIONS]
    with DuckDBStore.open(db) as st:  # reopening applies nothing twice
        assert st.query("SELECT count(*) FROM schema_migrations").rows[0][0] == len(MIGRATIONS)
        views = {r[0] for r in st.query("SELECT view_name FROM duckdb_views() WHERE NOT internal").rows}
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
    calls = store.query("SELECT attempt, status, error_type, ttft_s, model FROM llm_calls ORDER BY attempt").rows
    assert calls == [(1, "error", "invalid_json", None, "gpt-4o"), (2, "ok", None, 0.25, "gpt-4o-2024-08-06")]


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
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
        ("COPY spans TO '/tmp/x.csv'", "only read-only SELECT"),
        ("SET enable_external_access = true", "only read-only SELECT"),
        ("SELEC 1", "does not parse"),
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
