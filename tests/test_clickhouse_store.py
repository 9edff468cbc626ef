"""The ClickHouse store on chDB (in this process, in tmp_path), held to the DuckDB store: the same public views with the
same Arrow types, the same contents for the same spans (money exact), re-sent spans stored once, and two writers on
one database exact (every span once, every task's totals those of the DuckDB store fed the union).

The FINAL / argMax / LIMIT 1 BY figures in taskcost/store/clickhouse/_schema.py were measured ad hoc (not here: the
file stays fast) on 1M ``span_rows`` rows, 100k of them re-sent, in unmerged parts.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from taskcost.normalize import normalize_request
from taskcost.store import ENGINE_CONFIG, DuckDBStore, PreparedBatch, QueryError, StoreUnavailableError, prepare_batch
from taskcost.store.clickhouse._schema import MIGRATIONS, PUBLIC_VIEWS
from taskcost.store.clickhouse._store import ClickHouseStore
from tests.builders.analytics import Fleet, pricer
from tests.otlp_samples import sample_request

DATED = "gpt-4o-2024-08-06"

# Where the two stores cannot agree, and why (kept minimal; the test fails if one is not needed any more).
SCHEMA_DIFFERENCES: dict[tuple[str, str], str] = {}
VALUE_DIFFERENCES = {
    ("llm_calls", "container_image_tags"): "a ClickHouse Array cannot be NULL: a call without tags has [], not NULL",
}
ORDER = {
    "llm_calls": ("project", "trace_id", "span_id"),
    "tool_calls": ("project", "trace_id", "span_id"),
    "spans": ("project", "trace_id", "span_id"),
    "tasks": ("project", "task_id"),
    "llm_call_hours": ("project", "hour", "provider", "model", "deployment", "engine", "priced"),
    "engine_spans": ("project", "trace_id", "span_id"),
    "engine_calls": ("project", "trace_id", "span_id"),
    "engine_call_figures": ("project", "trace_id", "span_id"),
    "engine_config_hours": ("project", "hour", *ENGINE_CONFIG, "call_engine", "call_cluster_id"),
}


class _Collect:
    """Stands in for a store in ``Fleet.write``: keeps the batches it is given."""

    def __init__(self) -> None:
        self.batches: list[PreparedBatch] = []

    def write(self, batch: PreparedBatch) -> None:
        self.batches.append(batch)


def _batches(fleet: Fleet, received_ns: int = 1) -> list[PreparedBatch]:
    c = _Collect()
    fleet.write(c, received_ns)  # type: ignore[arg-type]
    return c.batches


def _fleet(prefix: str, n: int = 4) -> Fleet:
    """Tasks with what the views have rules for: retries answered later, a call failing every attempt, a response
    reported by two spans, tools priced and not, a running task, a golden one, infra tags, two projects."""
    f = Fleet()
    for i in range(n):
        t = f.task(f"{prefix}-t{i}", minute=i * 7, golden=i == 0, agent_name="bot", harness_version="h1")
        t.call("gpt-4o", call_id=f"{prefix}c{i}", attempt=1, status="error", output_tokens=0)
        t.call("gpt-4o", call_id=f"{prefix}c{i}", attempt=2, response_model=DATED, response_id=f"r{i}", ttft_s=0.25)
        t.call("gpt-4o", call_id=f"{prefix}d{i}", attempt=1, response_id=f"r{i}")  # the same response again
        t.call("cheap-1", cache_read=300, cache_write=100, engine="vllm", gpu_type="H100", input_tokens=1234)
        t.call("gpt-4o", call_id=f"{prefix}e{i}", status="error", output_tokens=0)
        t.tool(Decimal("0.005")).tool(None, name="grep")
    f.task(f"{prefix}-running", outcome=None, minute=3).call("claude-x", input_tokens=77, output_tokens=7)
    f.task(f"{prefix}-tools-only", minute=90).tool(Decimal("0.125"))
    f.task(f"{prefix}-other", project="other", kind="chat").call("pricey-1", engine="sglang").call("cheap-1")
    f.task(f"{prefix}-empty", outcome="abandoned", minute=61)
    return f


def _sample() -> PreparedBatch:
    return prepare_batch(normalize_request(sample_request()), 5, pricer=pricer())


@pytest.fixture
def duck(tmp_path: Path) -> Iterator[DuckDBStore]:
    with DuckDBStore.open(tmp_path / "d.duckdb") as s:
        yield s


@pytest.fixture
def ch(tmp_path: Path) -> Iterator[ClickHouseStore]:
    with ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}") as s:
        yield s


def _ch_rows(store: ClickHouseStore, view: str) -> list[dict[str, Any]]:
    return _sorted(view, store.admin_arrow(f"SELECT * FROM {view}").to_pylist())


def _duck_rows(store: DuckDBStore, view: str) -> list[dict[str, Any]]:
    rows = store.arrow(f"SELECT * FROM {view}").to_pylist()
    for (v, col), _why in VALUE_DIFFERENCES.items():
        if v == view:
            for r in rows:
                r[col] = [] if r[col] is None else r[col]
    return _sorted(view, rows)


def _sorted(view: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(repr(r[k]) for k in ORDER[view]))


def _same_views(ch: ClickHouseStore, duck: DuckDBStore) -> None:
    for view in PUBLIC_VIEWS:
        want, got = _duck_rows(duck, view), _ch_rows(ch, view)
        assert len(got) == len(want), view
        for g, w in zip(got, want, strict=True):
            assert g == w, (view, {k: (g[k], w[k]) for k in w if g[k] != w[k]})


def test_migrations_apply_once_and_reopen_is_a_no_op(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'ch'}"
    with ClickHouseStore.open(dsn) as s:
        names = sorted(r[0] for r in s.admin_query("SELECT name FROM schema_migrations FINAL").rows)
        assert names == [m.name for m in MIGRATIONS]
        s.write(_sample())
    with ClickHouseStore.open(dsn) as s:  # nothing applied again, nothing lost
        assert s.admin_query("SELECT count() FROM schema_migrations").rows == [(len(MIGRATIONS),)]
        assert s.admin_query("SELECT count() FROM spans").rows[0][0] == 4
        tables = {r[0] for r in s.admin_query("SELECT name FROM system.tables WHERE database = currentDatabase()").rows}
        assert {*PUBLIC_VIEWS, "span_rows", "llm_call_rows", "api_keys", "cluster_cost_rows"} <= tables
    with ClickHouseStore.open(dsn, read_only=True) as s:
        assert s.read_only
        with pytest.raises(StoreUnavailableError):
            s.write(_sample())
    with pytest.raises(StoreUnavailableError, match="upgrade"):
        ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}?database=fresh", read_only=True)


def test_schemas_match_the_duckdb_store(ch: ClickHouseStore, duck: DuckDBStore) -> None:
    assert ch.arrow_schemas == duck.arrow_schemas  # a batch laid out for one suits the other
    differences = {}
    for view in PUBLIC_VIEWS:
        want = duck.arrow(f"SELECT * FROM {view} LIMIT 0").schema
        got = ch.admin_arrow(f"SELECT * FROM {view} LIMIT 0").schema
        assert got.names == want.names, view
        for g, w in zip(got, want, strict=True):
            if g.type != w.type or g.nullable != w.nullable:
                differences[(view, g.name)] = (str(g.type), str(w.type))
    assert set(differences) == set(SCHEMA_DIFFERENCES), differences


def test_the_same_spans_give_the_same_views(ch: ClickHouseStore, duck: DuckDBStore) -> None:
    batches = [*_batches(_fleet("a")), _sample()]
    for b in batches:
        duck.write(b)
        ch.write(b)
    _same_views(ch, duck)
    tasks = {r["task_id"]: r for r in _ch_rows(ch, "tasks")}
    assert isinstance(tasks["a-t0"]["cost_usd"], Decimal) and tasks["a-t0"]["golden"]
    t0 = tasks["a-t0"]
    assert (t0["llm_calls"], t0["attempts"], t0["model"]) == (3, 4, DATED)  # the repeated response counts once
    assert tasks["a-tools-only"]["cost_usd"] == Decimal("0.125") and tasks["a-tools-only"]["attempts"] == 0
    models = ch.admin_query("SELECT DISTINCT model FROM llm_calls WHERE task_id = 'a-t1' AND status = 'error'").rows
    assert models == [(DATED,)]  # failed attempts count under the model that answered their call (else the task's)


def test_a_re_sent_batch_stores_nothing_new(ch: ClickHouseStore, duck: DuckDBStore) -> None:
    batches = _batches(_fleet("r", n=2))
    n = sum(b.span_count for b in batches)
    first = [ch.write(b) for b in batches]
    assert sum(i.spans for i in first) == n and not any(i.deduplicated for i in first)
    again = [ch.write(b) for b in batches]  # a client retry, received again later
    resent = [dataclasses.replace(b, columns=_later(b.columns)) for b in batches]
    later = [ch.write(b) for b in resent]
    assert [i.spans for i in again + later] == [0] * 4
    assert sum(i.deduplicated for i in again) == n == sum(i.deduplicated for i in later)
    assert (ch.committed_spans, ch.deduplicated_spans) == (n, 2 * n)
    for b in batches:
        duck.write(b)
    _same_views(ch, duck)
    # within a batch too: a span twice counts once
    twice = dataclasses.replace(_sample(), columns=_doubled(_sample().columns))
    info = ch.write(twice)
    assert (info.spans, info.deduplicated) == (4, 4)
    assert ch.admin_query("SELECT count() FROM spans WHERE project = 'default' AND received_ns = 5").rows == [(4,)]


def _later(columns: dict[str, dict[str, list[Any]]]) -> dict[str, dict[str, list[Any]]]:
    return {t: {**cols, "received_ns": [n + 1000 for n in cols["received_ns"]]} for t, cols in columns.items()}


def _doubled(columns: dict[str, dict[str, list[Any]]]) -> dict[str, dict[str, list[Any]]]:
    return {t: {c: v + v for c, v in cols.items()} for t, cols in columns.items()}


def test_two_writers_on_one_database_are_exact(tmp_path: Path, duck: DuckDBStore) -> None:
    """Two stores (two clients, as two collectors would be) write overlapping batches at once: the shared tasks sent
    to both, task by task, in opposite orders, and each its own tasks."""
    shared = _batches(_fleet("s", n=12))
    own = [_batches(_fleet("w1", n=3), received_ns=7), _batches(_fleet("w2", n=3), received_ns=8)]
    dsn = f"chdb://{tmp_path / 'ch'}"
    stores = [ClickHouseStore.open(dsn), ClickHouseStore.open(dsn)]
    per_task = _split(shared)
    plans = [per_task + own[0], own[1] + per_task[::-1]]
    errors: list[BaseException] = []

    def run(store: ClickHouseStore, plan: list[PreparedBatch]) -> None:
        try:
            for f in [store.submit(b) for b in plan]:
                f.result(30)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s, p)) for s, p in zip(stores, plans, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    n_shared = sum(b.span_count for b in per_task)
    n_own = sum(b.span_count for o in own for b in o)
    stored = sum(s.committed_spans for s in stores)
    assert n_shared + n_own <= stored <= 2 * n_shared + n_own  # a race may count a span new in both writers
    assert sum(s.committed_spans + s.deduplicated_spans for s in stores) == 2 * n_shared + n_own
    for b in [*per_task, *own[0], *own[1]]:
        duck.write(b)
    for s in stores:
        _same_views(s, duck)
    assert stores[0].admin_query("SELECT count() FROM spans").rows == [(n_shared + n_own,)]
    for s in stores:
        s.close()


def _split(batches: list[PreparedBatch]) -> list[PreparedBatch]:
    """Each batch as one batch per task (the rows of a trace together: a trace is a task here)."""
    out = []
    for b in batches:
        traces = sorted(set(b.columns["spans"]["trace_id"]))
        for trace in traces:
            cols = {}
            for t, c in b.columns.items():
                keep = [i for i, x in enumerate(c.get("trace_id", [])) if x == trace]
                cols[t] = {k: [v[i] for i in keep] for k, v in c.items()}
            out.append(PreparedBatch(columns=cols, span_count=len(cols["spans"]["trace_id"])))
    return out


def test_keys_round_trip(ch: ClickHouseStore, tmp_path: Path) -> None:
    assert not ch.keys_ever_created and not ch.has_active_keys
    key, secret = ch.create_key("proj", "ingest")
    read, _ = ch.create_key("proj", "read")
    assert ch.verify_key(secret) == dataclasses.replace(key, created_at=ch.verify_key(secret).created_at)  # type: ignore[union-attr]
    assert ch.verify_key("tc_ingest_nope") is None
    assert secret not in str(ch.admin_query("SELECT * FROM api_keys").rows)  # stored hashed
    assert ch.revoke_key(key.id) and not ch.revoke_key(key.id) and not ch.revoke_key("key_missing")
    assert ch.verify_key(secret) is None and ch.keys_ever_created and ch.has_active_keys
    listed = {k.id: k for k in ch.list_keys()}
    assert set(listed) == {key.id, read.id} and listed[key.id].revoked_at is not None
    assert listed[read.id].revoked_at is None and listed[read.id].kind == "read"
    with pytest.raises(ValueError):
        ch.create_key("proj", "admin")
    with ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}") as other:  # another collector sees them
        assert other.keys_ever_created and other.verify_key(secret) is None
        assert other.has_active_keys


class _PassThrough:
    """Stands in for the ClickHouse sandbox (written separately): checks nothing, sets a time limit."""

    def prepare(self, client: Any, ch_sql: str, project: str | None, timeout_s: float) -> str:
        assert project is None and timeout_s > 0
        return ch_sql

    def settings(self, timeout_s: float, max_rows: int) -> dict[str, Any]:
        return {"max_execution_time": timeout_s}


def test_query_and_arrow_answer_as_the_duckdb_store(ch: ClickHouseStore, duck: DuckDBStore) -> None:
    for b in _batches(_fleet("q")):
        duck.write(b)
        ch.write(b)
    ch._sandbox = _PassThrough()
    sql = "SELECT project, task_id, cost_usd, start_time, golden FROM tasks WHERE attempts >= ? ORDER BY task_id"
    assert ch.arrow(sql, [1]) == duck.arrow(sql, [1])
    got, want = ch.query(sql, [1], max_rows=3), duck.query(sql, [1], max_rows=3)
    assert (got.columns, got.types, got.rows, got.truncated) == (want.columns, want.types, want.rows, want.truncated)
    sql = "SELECT model, sum(cost_usd) AS usd, count(*) AS n FROM llm_calls GROUP BY model ORDER BY model"
    assert ch.query(sql).rows == duck.query(sql).rows


def test_operations_answer_as_on_duckdb(ch: ClickHouseStore) -> None:
    ch.fold_rollups()  # nothing to fold: tasks are computed on each read
    assert ch.cluster_costs() == []  # no window allocated without a clusters file
    assert ch.writer_alive and ch.queued_spans == 0 and ch.queue_limit == 200_000
    assert set(ch.engine_settings) == {"memory_limit", "threads"}
    assert isinstance(ch.arrow_schemas["spans"], pa.Schema)


def test_a_query_past_its_bounds_is_refused_and_the_next_one_answers(ch: ClickHouseStore) -> None:
    """A user query over the memory bound and one over the time limit each get a QueryError saying which bound, and
    the store answers the next query (chDB's session is drained after a failed query)."""
    ch.write(_sample())
    with pytest.raises(QueryError, match="more memory than a query may use"):
        ch.query("SELECT list(i) FROM range(100000000) AS t(i)", project="default")
    with pytest.raises(QueryError, match="time limit"):
        ch.query("SELECT count(*) FROM llm_calls, llm_calls, llm_calls, range(100000000) AS r(i)", timeout_s=1)
    assert ch.query("SELECT i FROM range(3) AS t(i) ORDER BY i").rows == [(0,), (1,), (2,)]  # DuckDB's range: end out
    assert ch.query("SELECT count(*) FROM spans", project="default").rows == [(4,)]
