"""The embedded DuckDB store: one process owns the file; one writer thread commits in batches;
user SQL runs on cursors of the same database, sandboxed."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from taskcost.store._base import QueryError, QueryResult, StoreLockedError, StoreUnavailableError
from taskcost.store._migrations import apply_migrations
from taskcost.store._rows import TABLES, PreparedBatch, arrow_schema

__all__ = ["DuckDBStore"]

log = logging.getLogger("taskcost.store")

_HARDEN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)
_ALLOWED_STATEMENTS = {"SELECT", "EXPLAIN"}


class _Job:
    __slots__ = ("batch", "future")

    def __init__(self, batch: PreparedBatch) -> None:
        self.batch = batch
        self.future: Future[None] = Future()


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

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, read_only: bool, max_batch_spans: int):
        self.path = path
        self.read_only = read_only
        self._con = con
        self._max_batch_spans = max_batch_spans
        self._schemas: dict[str, pa.Schema] = {}
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._closed = False
        self.committed_spans = 0

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False, max_batch_spans: int = 20_000) -> DuckDBStore:
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
        store = cls(con, path, read_only, max_batch_spans)
        if not read_only:
            store._schemas = {t: store._table_schema(t) for t in TABLES}
            store._writer = threading.Thread(target=store._write_loop, name="taskcost-writer", daemon=True)
            store._writer.start()
        return store

    def _table_schema(self, table: str) -> pa.Schema:
        rows = self._con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position",
            [table],
        ).fetchall()
        return arrow_schema([(r[0], r[1]) for r in rows])

    # -- writing -------------------------------------------------------------------------------------
    def submit(self, batch: PreparedBatch) -> Future[None]:
        """Queue a batch for the single writer; the future resolves once it is committed."""
        if self.read_only or self._closed:
            raise StoreUnavailableError("store is closed or read-only")
        job = _Job(batch)
        self._queue.put(job)
        return job.future

    def write(self, batch: PreparedBatch, timeout: float | None = 30.0) -> None:
        self.submit(batch).result(timeout)

    def _write_loop(self) -> None:
        cur = self._con.cursor()
        try:
            while True:
                job = self._queue.get()
                if job is None:
                    return
                jobs, spans, stop = [job], job.batch.span_count, False
                while spans < self._max_batch_spans:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    jobs.append(nxt)
                    spans += nxt.batch.span_count
                self._commit(cur, jobs)
                if stop:
                    return
        finally:
            cur.close()

    def _commit(self, cur: duckdb.DuckDBPyConnection, jobs: list[_Job]) -> None:
        try:
            cur.execute("BEGIN TRANSACTION")
            for table in TABLES:
                schema = self._schemas[table]
                parts = [j.batch.columns[table] for j in jobs if j.batch.columns[table]["received_ns"]]
                if not parts:
                    continue
                data = pa.concat_tables([pa.Table.from_pydict(p, schema=schema) for p in parts])
                cur.register("_taskcost_incoming", data)
                try:
                    cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _taskcost_incoming")
                finally:
                    cur.unregister("_taskcost_incoming")
            cur.execute("COMMIT")
        except Exception as exc:
            log.exception("write of %d batch(es) failed; nothing of them was committed", len(jobs))
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            for j in jobs:
                j.future.set_exception(exc)
            return
        self.committed_spans += sum(j.batch.span_count for j in jobs)
        for j in jobs:
            j.future.set_result(None)

    # -- reading -------------------------------------------------------------------------------------
    def query(
        self, sql: str, params: list[Any] | None = None, *, max_rows: int = 10_000, timeout_s: float = 10.0
    ) -> QueryResult:
        """Run one read-only statement (SELECT, or EXPLAIN) with a time and a row limit."""
        if self._closed:
            raise StoreUnavailableError("store is closed")
        cur = self._con.cursor()
        timer = threading.Timer(timeout_s, cur.interrupt)
        try:
            try:
                statements = cur.extract_statements(sql)
            except duckdb.Error as exc:
                raise QueryError(f"SQL does not parse: {exc}") from None
            if len(statements) != 1:
                raise QueryError(f"send exactly one statement, got {len(statements)}")
            kind = statements[0].type.name
            if kind not in _ALLOWED_STATEMENTS:
                raise QueryError(f"only read-only SELECT queries are allowed here, not {kind}")
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
            truncated = len(rows) > max_rows
            return QueryResult(
                columns=columns,
                types=types,
                rows=[tuple(r) for r in rows[:max_rows]],
                truncated=truncated,
                elapsed_s=time.perf_counter() - started,
            )
        finally:
            timer.cancel()
            cur.close()

    # -- lifecycle -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Drain the writer (every queued batch is committed), then close the file."""
        if self._closed:
            return
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
        self._closed = True
        self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
