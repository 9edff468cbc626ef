"""The embedded DuckDB store: one process owns the file; one writer thread commits in batches;
user SQL runs on cursors of the same database, sandboxed."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from taskcost.pricing import ClusterWindowCost, Pricer, RepriceReport
from taskcost.store import _keys, _rollup
from taskcost.store._base import (
    CommitInfo,
    QueryError,
    QueryResult,
    StoreBusyError,
    StoreLockedError,
    StoreUnavailableError,
)
from taskcost.store._migrations import apply_migrations
from taskcost.store._rows import TABLES, PreparedBatch, arrow_schema
from taskcost.store._sandbox import check_select, scope_to_project

__all__ = ["DuckDBStore"]

log = logging.getLogger("taskcost.store")

_HARDEN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)
# Group commit: a commit of fewer spans than this waits up to _LINGER_S for more requests to share it.
_LINGER_BELOW_SPANS = 2_000
_LINGER_S = 0.010
_KEY_EXPR = "md5_number(project || chr(31) || trace_id || span_id)"


def _empty_batch() -> PreparedBatch:
    """A batch with no rows: committing it folds the task roll-up's delta in (``_rollup.fold``)."""
    return PreparedBatch(columns={t: {"received_ns": []} for t in TABLES}, span_count=0)


class _Job:
    __slots__ = ("batch", "future")

    def __init__(self, batch: PreparedBatch) -> None:
        self.batch = batch
        self.future: Future[CommitInfo] = Future()


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise StoreLockedError(
                f"{path} is held by another process (DuckDB allows one process per file). "
                f"Ask the server that owns it (taskcost sql --url ...). DuckDB said: {text}"
            ) from None
        raise StoreUnavailableError(f"cannot open {path}: {text}") from None


class DuckDBStore:
    """One DuckDB file. ``open()`` for the serving process (migrates, starts the writer);
    ``open(read_only=True)`` to query a file no server holds."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        read_only: bool,
        max_batch_spans: int,
        max_queued_spans: int,
        fold_rows: int = _rollup.FOLD_ROWS,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._con = con
        self._database = str(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        self._max_batch_spans = max_batch_spans
        self._max_queued_spans = max_queued_spans
        self._fold_rows = fold_rows
        self._schemas: dict[str, pa.Schema] = {}
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._queued_spans = 0
        self._queue_room = threading.Condition()
        self._writer: threading.Thread | None = None
        self._closed = False
        self._keys_lock = threading.Lock()
        self._active_keys: dict[str, _keys.ApiKey] = {}
        self.committed_spans = 0
        self.deduplicated_spans = 0
        self.failed_batches = 0
        self.on_commit: Callable[[CommitInfo], None] | None = None

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        read_only: bool = False,
        max_batch_spans: int = 20_000,
        max_queued_spans: int = 200_000,
        fold_rows: int = _rollup.FOLD_ROWS,
    ) -> DuckDBStore:
        path = Path(path)
        if read_only and not path.exists():
            raise StoreUnavailableError(f"no database at {path} (start `taskcost serve --db {path}` first)")
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        con = _connect(path, read_only)
        try:
            if not read_only:
                applied = apply_migrations(con)
                if applied:
                    log.info("applied migrations to %s: %s", path, ", ".join(applied))
            for stmt in _HARDEN:
                con.execute(stmt)
        except Exception:
            con.close()
            raise
        store = cls(con, path, read_only, max_batch_spans, max_queued_spans, fold_rows)
        if not read_only:
            store._schemas = {t: store._table_schema(t) for t in TABLES}
            store._active_keys = _keys.load_active(con)
            store._writer = threading.Thread(target=store._write_loop, name="taskcost-writer", daemon=True)
            store._writer.start()
        return store

    def _table_schema(self, table: str) -> pa.Schema:
        rows = self._con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? AND table_schema = 'main' ORDER BY ordinal_position",
            [table],
        ).fetchall()
        # what a batch carries: the columns the writer decides itself are not part of it
        return arrow_schema([(r[0], r[1]) for r in rows if r[0] not in _rollup.WRITER_COLUMNS])

    # -- writing -------------------------------------------------------------------------------------
    @property
    def queued_spans(self) -> int:
        """Spans accepted for writing and not yet committed."""
        return self._queued_spans

    def submit(self, batch: PreparedBatch, wait_s: float = 0.0) -> Future[CommitInfo]:
        """Queue a batch for the single writer; the future resolves once it is committed.

        When the queue is full, wait up to ``wait_s`` for room, then raise StoreBusyError (nothing
        queued): back-pressure.
        """
        if self.read_only or self._closed:
            raise StoreUnavailableError("store is closed or read-only")
        if not self.writer_alive:
            raise StoreUnavailableError("the store's writer is not running (see the server log)")

        def has_room() -> bool:
            return not self._queued_spans or self._queued_spans + batch.span_count <= self._max_queued_spans

        with self._queue_room:
            if not self._queue_room.wait_for(has_room, timeout=wait_s):
                raise StoreBusyError(f"write queue full ({self._queued_spans} spans waiting)")
            self._queued_spans += batch.span_count
        job = _Job(batch)
        self._queue.put(job)
        return job.future

    def write(self, batch: PreparedBatch, timeout: float | None = 30.0) -> CommitInfo:
        return self.submit(batch).result(timeout)

    def _write_loop(self) -> None:
        cur = self._con.cursor()
        try:
            while True:
                job = self._queue.get()
                if job is None:
                    return
                jobs, spans, stop = [job], job.batch.span_count, False
                linger_until = time.monotonic() + _LINGER_S
                while spans < self._max_batch_spans:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        # Group commit: a small commit costs DuckDB nearly as much as a large one (the WAL write
                        # and its fsync, per-statement work), so wait a moment for the next requests to join it.
                        left = linger_until - time.monotonic()
                        if spans >= _LINGER_BELOW_SPANS or left <= 0:
                            break
                        try:
                            nxt = self._queue.get(timeout=left)
                        except queue.Empty:
                            break
                    if nxt is None:
                        stop = True
                        break
                    jobs.append(nxt)
                    spans += nxt.batch.span_count
                try:
                    self._commit(cur, jobs)
                except BaseException as exc:  # never leave a request waiting on a future nobody resolves
                    log.exception("the writer failed; refusing the batches it held")
                    for j in jobs:
                        if not j.future.done():
                            j.future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                finally:
                    with self._queue_room:
                        self._queued_spans -= spans
                        self._queue_room.notify_all()
                if stop:
                    return
        finally:
            cur.close()

    def _incoming(self, jobs: list[_Job], table: str) -> pa.Table | None:
        schema = self._schemas[table]
        parts: list[pa.Table] = []
        for j in jobs:
            if j.batch.tables is not None:  # built by a decode worker, with these schemas
                if (built := j.batch.tables.get(table)) is not None and built.num_rows:
                    parts.append(built)
            elif j.batch.columns[table]["received_ns"]:
                parts.append(pa.Table.from_pydict(j.batch.columns[table], schema=schema))
        if not parts:
            return None
        return pa.concat_tables(parts)

    @property
    def arrow_schemas(self) -> dict[str, pa.Schema]:
        """The Arrow schema of each table a PreparedBatch fills (from the live table definitions)."""
        return dict(self._schemas)

    def _insert_all(
        self, cur: duckdb.DuckDBPyConnection, data: dict[str, pa.Table], only_new: bool, known_responses: bool
    ) -> None:
        """Insert the commit's rows (``only_new``: those whose span key is in _taskcost_new, once each) and
        add them to the roll-ups (taskcost/store/_rollup.py), all in the caller's transaction."""
        sources: dict[str, str] = {}
        try:
            for table, tbl in data.items():
                name = f"_taskcost_in_{table}"
                cur.register(name, tbl)
                if only_new:  # staged once, so that the rows stored and the rows added up are the same
                    cur.execute(
                        f"CREATE OR REPLACE TEMP TABLE _taskcost_new_{table} AS SELECT * FROM {name} "
                        f"WHERE {_KEY_EXPR} IN (SELECT k FROM _taskcost_new) "
                        "QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id) = 1"
                    )
                    name = f"_taskcost_new_{table}"
                sources[table] = name
            for table, name in sources.items():
                if table != "llm_call_rows":
                    cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {name}")
            calls = None
            if "llm_call_rows" in sources:
                calls = _rollup.insert_calls(cur, sources["llm_call_rows"], known_responses)
            _rollup.add_to_tasks(cur, calls, sources.get("task_rows"), sources.get("tool_call_rows"))
            if calls not in (None, sources.get("llm_call_rows")):
                _rollup.drop_stage(cur)
            if only_new:
                for table in data:
                    cur.execute(f"DROP TABLE IF EXISTS _taskcost_new_{table}")
        finally:  # (after a failed statement the transaction is rolled back, temporary tables with it)
            for table in data:
                with contextlib.suppress(duckdb.Error):
                    cur.unregister(f"_taskcost_in_{table}")

    def _commit(self, cur: duckdb.DuckDBPyConnection, jobs: list[_Job]) -> None:
        started = time.perf_counter()
        try:
            data = {t: tbl for t in TABLES if (tbl := self._incoming(jobs, t)) is not None}
        except Exception as exc:  # a value the columns cannot hold: refuse these batches, keep the writer alive
            log.exception("batch(es) not writable; nothing of them was committed")
            self.failed_batches += len(jobs)
            for j in jobs:
                j.future.set_exception(exc)
            return
        spans = data.get("spans")
        n_spans = spans.num_rows if spans is not None else 0
        try:
            # an empty batch asks for the task roll-up's delta to be folded in now (after a re-price, on close)
            fold_rows = self._fold_rows if all(j.batch.span_count for j in jobs) else 0
            try:
                new = self._store(cur, data, fold_rows, known_responses=False)
            except _rollup.ResponseSeenError:
                # a response an earlier commit stored (one call reported in two requests): store again,
                # this time looking the commit's responses up first
                cur.execute("ROLLBACK")
                new = self._store(cur, data, fold_rows, known_responses=True)
        except Exception as exc:
            log.exception("write of %d batch(es) failed; nothing of them was committed", len(jobs))
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            self.failed_batches += len(jobs)
            for j in jobs:
                j.future.set_exception(exc)
            return
        info = CommitInfo(spans=new, deduplicated=n_spans - new, seconds=time.perf_counter() - started)
        self.committed_spans += info.spans
        self.deduplicated_spans += info.deduplicated
        if self.on_commit is not None and n_spans:
            with contextlib.suppress(Exception):
                self.on_commit(info)
        for j in jobs:
            j.future.set_result(info)

    def _store(
        self, cur: duckdb.DuckDBPyConnection, data: dict[str, pa.Table], fold_rows: int, known_responses: bool
    ) -> int:
        """One transaction storing a commit's rows; returns how many of its spans were new."""
        spans = data.get("spans")
        n_spans = spans.num_rows if spans is not None else 0
        cur.execute("BEGIN TRANSACTION")
        new = n_spans
        if spans is not None:
            cur.register("_taskcost_spans", spans)
            row = cur.execute(f"INSERT OR IGNORE INTO span_keys SELECT {_KEY_EXPR} FROM _taskcost_spans").fetchone()
            new = int(row[0]) if row else 0
            if new < n_spans:
                # Some spans were committed before (a re-sent batch): redo, keeping the new ones only.
                # (The rollback also drops the registration: register again.)
                cur.execute("ROLLBACK")
                cur.execute("BEGIN TRANSACTION")
                cur.register("_taskcost_spans", spans)
                cur.execute(
                    "CREATE OR REPLACE TEMP TABLE _taskcost_new AS "
                    f"SELECT DISTINCT {_KEY_EXPR} AS k FROM _taskcost_spans "
                    "WHERE k NOT IN (SELECT k FROM span_keys)"
                )
                row = cur.execute("INSERT INTO span_keys SELECT k FROM _taskcost_new").fetchone()
                new = int(row[0]) if row else 0
            cur.unregister("_taskcost_spans")
        if new:
            self._insert_all(cur, data, only_new=new < n_spans, known_responses=known_responses)
        if new < n_spans:
            cur.execute("DROP TABLE IF EXISTS _taskcost_new")
        _rollup.fold(cur, fold_rows)
        cur.execute("COMMIT")
        return new

    # -- reading -------------------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = 10_000,
        timeout_s: float = 10.0,
        project: str | None = None,
    ) -> QueryResult:
        """Run one read-only SELECT over the public views, with a time and a row limit.
        ``project`` limits every view to that project's rows."""
        if self._closed:
            raise StoreUnavailableError("store is closed")
        cur = self._con.cursor()
        timer = threading.Timer(timeout_s, cur.interrupt)
        try:
            check_select(cur, sql)
            if project is not None:
                scope_to_project(cur, self._database, project)
            started = time.perf_counter()
            timer.start()
            try:
                rel = cur.execute(sql, params or [])
                columns = [d[0] for d in (rel.description or [])]
                types = [str(d[1]) for d in (rel.description or [])]
                rows = rel.fetchmany(max_rows + 1)
            except duckdb.InterruptException:
                raise QueryError(f"query interrupted after the {timeout_s:g} s time limit") from None
            except duckdb.Error as exc:
                raise QueryError(str(exc)) from None
            return QueryResult(
                columns=columns,
                types=types,
                rows=[tuple(r) for r in rows[:max_rows]],
                truncated=len(rows) > max_rows,
                elapsed_s=time.perf_counter() - started,
            )
        finally:
            timer.cancel()
            cur.close()

    def admin_query(self, sql: str, params: list[Any] | None = None) -> QueryResult:
        """Any SQL over every table, unsandboxed: for this process's own use (tests, maintenance),
        never for user input (``query`` is the user-facing one)."""
        with contextlib.closing(self._con.cursor()) as cur:
            rel = cur.execute(sql, params or [])
            columns = [d[0] for d in (rel.description or [])]
            types = [str(d[1]) for d in (rel.description or [])]
            return QueryResult(columns, types, [tuple(r) for r in rel.fetchall()])

    # -- API keys ------------------------------------------------------------------------------------
    def create_key(self, project: str, kind: str) -> tuple[_keys.ApiKey, str]:
        with self._keys_lock, contextlib.closing(self._con.cursor()) as cur:
            key, secret = _keys.create_key(cur, project, kind)
            self._active_keys = _keys.load_active(cur)
        return key, secret

    def revoke_key(self, key_id: str) -> bool:
        with self._keys_lock, contextlib.closing(self._con.cursor()) as cur:
            done = _keys.revoke_key(cur, key_id)
            self._active_keys = _keys.load_active(cur)
        return done

    def list_keys(self) -> list[_keys.ApiKey]:
        with contextlib.closing(self._con.cursor()) as cur:
            return _keys.list_keys(cur)

    def verify_key(self, secret: str) -> _keys.ApiKey | None:
        return self._active_keys.get(_keys.hash_secret(secret))

    @property
    def auth_enabled(self) -> bool:
        """True once any active key exists: from then on every request needs one."""
        return bool(self._active_keys)

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def writer_alive(self) -> bool:
        return self._writer is not None and self._writer.is_alive()

    def close(self) -> None:
        """Drain the writer (every queued batch is committed), then close the file."""
        if self._closed:
            return
        if self._writer is not None:
            if self.writer_alive:  # leave the task roll-up folded: no delta for the next reader to merge
                with contextlib.suppress(Exception):
                    self.submit(_empty_batch())
            self._queue.put(None)
            self._writer.join()
        self._closed = True
        self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- re-pricing (taskcost/store/_reprice.py) -----------------------------------------------------------
    def reprice(self, pricer: Pricer, **options: Any) -> RepriceReport:
        """Price stored calls again in one transaction (``_reprice.reprice``); returns a RepriceReport."""
        from taskcost.store import _reprice

        if self.read_only or self._closed:
            raise StoreUnavailableError("store is closed or read-only")
        report = _reprice.reprice(self._con, pricer, **options)
        if not report.dry_run:
            # the re-price appended its cost changes to the task roll-up's delta: the writer folds them in
            with contextlib.suppress(Exception):
                self.fold_rollups()
        return report

    def fold_rollups(self, timeout: float | None = 60.0) -> None:
        """Have the writer fold the task roll-up's delta in now (it does so by itself every ``fold_rows``
        delta rows, after a re-price, and on close); ``tasks`` is exact either way."""
        self.write(_empty_batch(), timeout)

    def rebuild_rollups(self) -> None:
        """Decide the duplicate marker again and rebuild the roll-ups from the row tables,
        in one transaction (``_rollup.rebuild``): for rows loaded into the tables directly (bulk loads,
        repairs). Meant for a store nothing is being ingested into meanwhile."""
        if self.read_only or self._closed:
            raise StoreUnavailableError("store is closed or read-only")
        with contextlib.closing(self._con.cursor()) as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                _rollup.rebuild(cur)
                cur.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    cur.execute("ROLLBACK")
                raise

    def cluster_costs(self, **options: Any) -> list[ClusterWindowCost]:
        """The self-hosted clusters' allocated windows (``_reprice.cluster_costs``)."""
        from taskcost.store import _reprice

        if self._closed:
            raise StoreUnavailableError("store is closed")
        return _reprice.cluster_costs(self._con, **options)
