"""The embedded DuckDB store: one process owns the file; one writer thread commits in batches;
user SQL runs on cursors of the same database, sandboxed."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from taskcost.pricing import ClusterWindowCost, Pricer, RepriceReport
from taskcost.store import _dedupe, _keys, _rollup
from taskcost.store._base import (
    AllocationDue,
    CommitInfo,
    QueryError,
    QueryResult,
    StoreUnavailableError,
)
from taskcost.store._engine import EngineOptions, connect, engine_message, harden, is_fatal
from taskcost.store._heal import Healing
from taskcost.store._migrations import apply_migrations, pending_migrations
from taskcost.store._results import fetch_bounded
from taskcost.store._rows import TABLES, PreparedBatch, arrow_schema
from taskcost.store._sandbox import DEFAULT_MAX_VALUE_BYTES, Sandbox
from taskcost.store._sql import transaction
from taskcost.store._watchdog import QueryWatchdog
from taskcost.store._writer import Writer, empty_batch

__all__ = ["DuckDBStore"]

log = logging.getLogger("taskcost.store")

_ARROW_COPY_WARNING = "Arrow output on a DB-API result makes an extra copy"

_ALLOCATION = "the server's allocation of the clusters' windows"
_WAIT_FOR_ALLOCATION_S = 300.0  # a re-price waits this long for a chunk of that allocation (at most a day of windows)
_REOPENING = "the database is reopening after a failure of its engine (nothing acknowledged is lost); retry shortly"


class DuckDBStore(Healing):
    """One DuckDB file. ``open()`` for the serving process (migrates, starts the writer);
    ``open(read_only=True)`` to query a file no server holds."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        read_only: bool,
        max_batch_spans: int,
        max_queued_spans: int,
        fold_rows: int,
        dedupe_window: int,
        max_queued_s: float | None,
        max_value_bytes: int,
        engine: EngineOptions | None = None,
        sql_memory_limit: int | None = None,
    ) -> None:
        self.path = path
        self._dedupe_window = dedupe_window
        self.read_only = read_only
        self._engine = engine or EngineOptions()
        self._writer_args = (max_batch_spans, max_queued_spans, fold_rows, dedupe_window, max_queued_s)
        self._max_value_bytes = max_value_bytes
        self._spool = False
        self._watchdog = QueryWatchdog(sql_memory_limit)
        self._heal_lock = threading.Lock()
        self._healing: threading.Thread | None = None
        self._closing = False
        self._cut: set[duckdb.DuckDBPyConnection] = set()  # cursors whose result was cut short (``query``)
        self.heals = 0  # how often the database was reopened after a fatal engine error
        self._schemas: dict[str, pa.Schema] = {}
        self._writer: Writer | None = None
        self._attach(con)
        self._start_healer()
        self._closed = False
        self._keys_lock = threading.Lock()
        self._reprice_lock = threading.Lock()
        self._pricing_by: str | None = None  # what holds it: "a re-price", or the server's allocation
        self._active_keys: dict[str, _keys.ApiKey] = {}
        self._keys_ever = False  # once true, never false again (revoked keys stay in api_keys)

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        read_only: bool = False,
        max_batch_spans: int = 20_000,
        max_queued_spans: int = 200_000,
        max_queued_s: float | None = None,
        fold_rows: int = _rollup.FOLD_ROWS,
        dedupe_window: int = _dedupe.DEFAULT_WINDOW,
        spool: bool = False,
        memory_limit: str | None = None,
        threads: int | None = None,
        sql_max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        sql_memory_limit: int | None = None,
    ) -> DuckDBStore:
        """``spool``: acknowledge a submitted batch once it is fsynced to the intake spool beside the file
        (``<db>.spool/``, taskcost/store/_spool.py), and commit to DuckDB behind it in large transactions; reads
        wait for what was acknowledged before them. Either way, a spool a crashed server left is replayed here.
        ``memory_limit``: DuckDB's (its cache of the file and the working memory of queries, which spill to disk
        beyond it); None leaves DuckDB's default, 80% of the machine's memory (the server sets one: see the
        ``memory_limit`` setting). ``threads``: DuckDB's worker threads (None: DuckDB's default, one per core; the
        server sets one: see the ``duckdb_threads`` setting). ``dedupe_window``: a re-sent span (or a repeated
        provider response) is recognised while fewer than this many spans (responses) were stored after it
        (taskcost/store/_dedupe.py). ``max_queued_s``: the write queue also holds at most this many seconds of
        the writer's measured commit rate (None: ``max_queued_spans`` alone; the server sets one: see the
        ``max_queued_s`` setting). ``sql_max_value_bytes``: the largest value a size argument of user SQL may ask
        for (``repeat``, ``lpad``...: taskcost/store/_sizeguard.py). ``sql_memory_limit``: user queries are
        interrupted while this process's RSS is past it (bytes; None: no memory watchdog, taskcost/store/_watchdog.py).
        After a fatal engine error the store closes and reopens the file by itself (``heals`` counts it)."""
        path = Path(path)
        if read_only and not path.exists():
            raise StoreUnavailableError(f"no database at {path} (start `taskcost serve --db {path}` first)")
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = EngineOptions(memory_limit=memory_limit, threads=threads)
        con = connect(path, read_only, engine)
        try:
            if not read_only:
                if pending := pending_migrations(con):  # a backfill over a large file takes a while: say so first
                    log.info("upgrading %s: %s", path, ", ".join(m.name for m in pending))
                applied = apply_migrations(con)
                if applied:
                    log.info("applied migrations to %s: %s", path, ", ".join(applied))
            elif pending := pending_migrations(con):
                # a read never changes the file, and the views it would query may not exist yet: say so, once
                raise StoreUnavailableError(
                    f"{path} needs {len(pending)} schema upgrade(s) this taskcost brings "
                    f"({', '.join(m.name for m in pending)}); it was written by an older taskcost, or is not a "
                    f"taskcost database. Start `taskcost serve --db {path}` once: it upgrades the file (a "
                    "read-only open never changes it)"
                )
            harden(con)
        except Exception:
            con.close()
            raise
        store = cls(
            con,
            path,
            read_only,
            max_batch_spans,
            max_queued_spans,
            fold_rows,
            dedupe_window,
            max_queued_s,
            sql_max_value_bytes,
            engine,
            sql_memory_limit,
        )
        store._spool = spool
        if store._writer is not None:
            store._active_keys = _keys.load_active(con)
            store._keys_ever = _keys.created_any(con)
            store._writer.start(spool)
        return store

    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Serve from ``con``: its sandbox, and (read-write) a writer on it, not started yet."""
        self._con = con
        self._sandbox = Sandbox.for_connection(con, self._max_value_bytes)
        if not self.read_only:
            self._schemas = {t: self._table_schema(t) for t in TABLES}
            old = self._writer
            self._writer = Writer(con, self.path, self._schemas, *self._writer_args, on_fatal=self._heal_soon)
            if old is not None:  # counts and the commit callback go on across a reopen
                self._writer.carry_over(old)

    # -- what the writer counts ---------------------------------------------------------------------------
    @property
    def committed_spans(self) -> int:
        return self._writer.committed_spans if self._writer is not None else 0

    @property
    def deduplicated_spans(self) -> int:
        """Spans skipped because an earlier commit stored them (re-sent batches)."""
        return self._writer.deduplicated_spans if self._writer is not None else 0

    @property
    def failed_batches(self) -> int:
        """Batches refused by the writer (or, acknowledged from the spool, set aside beside it)."""
        return self._writer.failed_batches if self._writer is not None else 0

    @property
    def on_commit(self) -> Callable[[CommitInfo], None] | None:
        """Called after each commit that stored spans (metrics)."""
        return self._writer.on_commit if self._writer is not None else None

    @on_commit.setter
    def on_commit(self, fn: Callable[[CommitInfo], None] | None) -> None:
        if self._writer is not None:
            self._writer.on_commit = fn

    def _caught_up(self, timeout_s: float | None) -> None:
        if self._writer is not None:
            self._writer.caught_up(timeout_s)

    @property
    def arrow_schemas(self) -> dict[str, pa.Schema]:
        """The Arrow schema of each table a PreparedBatch fills (from the live table definitions)."""
        return dict(self._schemas)

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
        return self._writer.queued_spans if self._writer is not None else 0

    @property
    def queue_limit(self) -> int:
        """Spans the write queue takes at most now (``max_queued_spans``, or fewer: ``max_queued_s``)."""
        return self._writer.queue_limit if self._writer is not None else 0

    def submit(self, batch: PreparedBatch, wait_s: float = 0.0) -> Future[CommitInfo]:
        """Queue a batch for the single writer (taskcost/store/_writer.py). The future resolves once the batch is
        committed, or with the spool once it is spooled. When the queue is full, wait up to ``wait_s`` for room,
        then raise StoreBusyError (nothing queued): back-pressure."""
        if self.read_only or self._closed or self._writer is None:
            raise StoreUnavailableError("store is closed or read-only")
        if self._healing is not None:
            raise StoreUnavailableError(_REOPENING)
        return self._writer.submit(batch, wait_s)

    def write(self, batch: PreparedBatch, timeout: float | None = 30.0) -> CommitInfo:
        return self.submit(batch).result(timeout)

    # -- reading -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _sandboxed(
        self, sql: str, timeout_s: float, project: str | None
    ) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
        """A query's own cursor (the project's views, the sandbox's checks) and the SQL to run on it, interrupted
        after ``timeout_s``; DuckDB's errors come out as QueryError saying what a user can do."""
        if self._closed:
            raise StoreUnavailableError("store is closed")
        if self._healing is not None:
            raise StoreUnavailableError(_REOPENING)
        self._caught_up(timeout_s)
        con, sandbox = self._con, self._sandbox
        try:
            cur = sandbox.borrow(con, project)
        except duckdb.Error as exc:
            raise self._engine_error(exc, con) from None
        watched = self._watchdog.watch(cur, timeout_s)
        ended = False
        try:
            yield cur, sandbox.prepare(cur, sql)
            ended = True
        except duckdb.InterruptException:
            if watched.reason == "memory":
                raise QueryError(
                    f"query interrupted: the server's memory passed sql_memory_limit "
                    f"({self._watchdog.rss_limit_bytes or 0:,} bytes; {watched.rss_at_interrupt:,} in use) while it "
                    "ran. Narrow it (fewer rows, smaller values), or retry once other queries have finished"
                ) from None
            if watched.reason == "reopen":
                raise StoreUnavailableError(_REOPENING) from None
            raise QueryError(f"query interrupted after the {timeout_s:g} s time limit") from None
        except duckdb.OutOfMemoryException as exc:
            raise QueryError(self._out_of_memory(exc)) from None
        except duckdb.Error as exc:
            raise self._engine_error(exc, con) from None
        except MemoryError:
            raise QueryError(
                "the server's memory ceiling (process_memory_limit) was reached while this query ran; narrow it"
            ) from None
        except RecursionError:
            raise QueryError("the query or its result is nested too deeply") from None
        finally:
            self._watchdog.done(watched)
            # a cursor that answered whole is kept; one whose result was cut (``discard``) may still hold work
            if ended and watched.reason is None and not self._closed and con is self._con and cur not in self._cut:
                sandbox.give_back(project, cur)
            else:
                self._cut.discard(cur)
                with contextlib.suppress(duckdb.Error):
                    cur.close()

    def _engine_error(self, exc: duckdb.Error, con: duckdb.DuckDBPyConnection) -> Exception:
        """What a caller gets for a DuckDB error of a query on ``con``: its message without native traces; a fatal
        one also reopens the database."""
        if not is_fatal(exc):
            return QueryError(engine_message(exc))
        self._heal_soon(exc, con)
        if isinstance(exc, duckdb.InternalException):  # this query's own: it failed inside the engine
            return QueryError(
                f"the database engine failed on this query ({engine_message(exc)}); the store reopens itself: "
                "other queries may be refused for a moment, nothing acknowledged is lost"
            )
        return StoreUnavailableError(_REOPENING)

    def query(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = 10_000,
        timeout_s: float = 10.0,
        project: str | None = None,
        max_bytes: int | None = None,
    ) -> QueryResult:
        """Run one read-only SELECT over the public views (taskcost/store/_sandbox.py), within a time limit, and
        return at most ``max_rows`` rows and about ``max_bytes`` bytes of values (``truncated`` says so, and
        ``meta["truncated_by"]`` which limit). ``project`` limits every view to that project's rows."""
        started = time.perf_counter()
        with self._sandboxed(sql, timeout_s, project) as (cur, runnable):
            rel = cur.execute(runnable, params or [])
            columns = [d[0] for d in (rel.description or [])]
            types = [str(d[1]) for d in (rel.description or [])]
            rows, truncated_by = fetch_bounded(rel, max_rows, max_bytes)
            if truncated_by is not None:  # the rest of its result is not read: the cursor is closed, not kept
                self._cut.add(cur)
        return QueryResult(
            columns=columns,
            types=types,
            rows=rows,
            truncated=truncated_by is not None,
            elapsed_s=time.perf_counter() - started,
            meta={"truncated_by": truncated_by} if truncated_by else {},
        )

    def arrow(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = 1_000_000,
        timeout_s: float = 10.0,
        project: str | None = None,
    ) -> pa.Table:
        """``query``'s sandbox, time limit and project filter, answered as an Arrow table (analytics)."""
        # The DB-API result (execute) binds the statement once; a relation (cur.sql) binds it to type itself, then
        # again to run: 3-6 ms a question's query here, a fifth of one at 1M calls. DuckDB warns that Arrow from a
        # DB-API result copies the rows: an analytics answer's rows are few (max_rows bounds them). The filter is
        # added again on every call (it replaces itself): a test runner resets the filters between tests.
        warnings.filterwarnings("ignore", message=_ARROW_COPY_WARNING, category=UserWarning)
        with self._sandboxed(sql, timeout_s, project) as (cur, runnable):
            reader: pa.RecordBatchReader = cur.execute(runnable, params or []).to_arrow_reader(8192)
            batches, rows = [], 0
            for batch in reader:
                rows += batch.num_rows
                if rows > max_rows:
                    raise QueryError(f"the answer has more than {max_rows:,} rows")
                batches.append(batch)
            return pa.Table.from_batches(batches, schema=reader.schema)

    @property
    def engine_settings(self) -> dict[str, str]:
        """DuckDB's limits in this process (for /metrics: user SQL cannot read settings)."""
        with contextlib.closing(self._con.cursor()) as cur:
            row = cur.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchone()
        return {"memory_limit": str(row[0]), "threads": str(row[1])} if row else {}

    def _out_of_memory(self, exc: duckdb.Error) -> str:
        """DuckDB's own advice (SET threads, SET memory_limit) is refused in the sandbox: say what a user can do."""
        try:  # reading the setting is a query too: with the memory still taken, it can fail as the query did
            with contextlib.closing(self._con.cursor()) as cur:
                limit = cur.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        except duckdb.Error:
            limit = None
        first = engine_message(exc).split("\n", 1)[0].rstrip(".")
        if (
            "allocation failure" in first.lower() or "bad allocation" in first.lower()
        ):  # not DuckDB's limit: the operating system refused the memory
            return (
                f"{first}. The query asked for more memory than the server may take (process_memory_limit, the "
                "operating system's limit on the serving process): narrow it, or build smaller values"
            )
        return (
            f"{first}. The query needs more working memory than DuckDB's memory_limit"
            f"{'' if limit is None else f' ({limit})'} allows: narrow it or"
            " aggregate more before returning rows, or raise the memory_limit setting (TASKCOST_MEMORY_LIMIT)"
        )

    def admin_query(self, sql: str, params: list[Any] | None = None) -> QueryResult:
        """Any SQL over every table, unsandboxed: for this process's own use (tests, maintenance),
        never for user input (``query`` is the user-facing one)."""
        self._caught_up(60.0)
        with contextlib.closing(self._con.cursor()) as cur:
            rel = cur.execute(sql, params or [])
            columns = [d[0] for d in (rel.description or [])]
            types = [str(d[1]) for d in (rel.description or [])]
            return QueryResult(columns, types, [tuple(r) for r in rel.fetchall()])

    # -- API keys ------------------------------------------------------------------------------------
    def create_key(self, project: str, kind: str) -> tuple[_keys.ApiKey, str]:
        with self._keys_lock, contextlib.closing(self._con.cursor()) as cur:
            key, secret = _keys.create_key(cur, project, kind)
            self._keys_ever = True
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
    def keys_ever_created(self) -> bool:
        """True once any key was created in this database, revoked or not: from then on the server requires a key
        (``auth = auto``), also after the last one was revoked. Never read from the active keys alone."""
        return self._keys_ever

    @property
    def has_active_keys(self) -> bool:
        return bool(self._active_keys)

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def writer_alive(self) -> bool:
        return self._writer is not None and self._writer.alive

    def close(self) -> None:
        """Drain the writer (every queued batch is committed), then close the file."""
        with self._heal_lock:
            if self._closed:
                return
            self._closing = True
        self._stop_healer()
        if self._writer is not None:
            self._writer.stop()  # commits what it holds, folds the task roll-up
        self._closed = True
        self._watchdog.interrupt_all("closing")
        self._watchdog.close()
        self._sandbox.close_idle()
        self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- re-pricing (taskcost/store/_reprice.py) -----------------------------------------------------------
    @contextlib.contextmanager
    def _pricing(self, what: str, wait_for: str | None = None, wait_s: float = 0.0) -> Iterator[None]:
        """One re-price or allocation at a time (both rewrite the self-hosted calls and the clusters' windows): a
        second one is refused (StoreUnavailableError), unless the one running is ``wait_for`` (short: one chunk of
        the server's allocation), which it then waits for, up to ``wait_s``."""
        if self.read_only or self._closed:
            raise StoreUnavailableError("store is closed or read-only")
        got = self._reprice_lock.acquire(blocking=False)
        if not got and wait_for is not None and self._pricing_by in (wait_for, None):  # (None: just released)
            got = self._reprice_lock.acquire(timeout=wait_s)
        if not got:
            running = self._pricing_by or "a re-price"
            raise StoreUnavailableError(f"{running} is already running; try again once it has finished")
        self._pricing_by = what
        try:
            yield
        finally:
            self._pricing_by = None
            self._reprice_lock.release()

    def reprice(self, pricer: Pricer, **options: Any) -> RepriceReport:
        """Price stored calls again, a transaction per page (``_reprice.reprice``); returns a RepriceReport.
        One at a time: a second one while one runs is refused (StoreUnavailableError); one that comes while the
        server allocates a chunk of windows waits for it."""
        from taskcost.store import _reprice

        with self._pricing("a re-price", wait_for=_ALLOCATION, wait_s=_WAIT_FOR_ALLOCATION_S):
            self._caught_up(60.0)
            report = _reprice.reprice(self._con, pricer, **options)
        if not report.dry_run:
            # the re-price appended its cost changes to the task roll-up's delta: the writer folds them in
            with contextlib.suppress(Exception):
                self.fold_rollups()
        return report

    def allocate_clusters(
        self,
        pricer: Pricer,
        *,
        since_ns: int | None,
        until_ns: int | None,
        now_ns: int | None = None,
        closed_ns: int | None = None,
    ) -> RepriceReport:
        """Allocate the clusters' windows in [since, until) that ended by ``closed_ns`` to their calls, in one
        transaction (``_reprice.allocate``: the self-hosted part of ``reprice``, the same code). Refused
        (StoreUnavailableError) while a re-price runs, which allocates as well."""
        from taskcost.store import _reprice

        with self._pricing(_ALLOCATION):
            self._caught_up(60.0)
            report = _reprice.allocate(
                self._con, pricer, since_ns=since_ns, until_ns=until_ns, now_ns=now_ns, closed_ns=closed_ns
            )
        if report.self_hosted_changed:
            with contextlib.suppress(Exception):
                self.fold_rollups()
        return report

    def cluster_allocation_due(self, pricer: Pricer, *, closed_ns: int, received_since_ns: int | None) -> AllocationDue:
        """The windows the server's allocation has to compute before ``closed_ns`` (``_allocation_due``)."""
        from taskcost.store import _allocation_due

        if self._closed:
            raise StoreUnavailableError("store is closed")
        self._caught_up(60.0)
        return _allocation_due.allocation_due(
            self._con, pricer, closed_ns=closed_ns, received_since_ns=received_since_ns
        )

    def fold_rollups(self, timeout: float | None = 60.0) -> None:
        """Have the writer fold the roll-ups' deltas in now (it does so by itself every ``fold_rows`` delta rows,
        after a re-price, and on close) and settle every dirty hour of the engines question's roll-up (by itself: an
        hour no commit marked for a minute); the views are exact either way."""
        self.write(empty_batch(), timeout)

    def rebuild_rollups(self) -> None:
        """Decide the duplicate marker again and rebuild the roll-ups from the row tables,
        in one transaction (``_rollup.rebuild``): for rows loaded into the tables directly (bulk loads,
        repairs). Meant for a store nothing is being ingested into meanwhile."""
        if self.read_only or self._closed:
            raise StoreUnavailableError("store is closed or read-only")
        self._caught_up(60.0)
        with contextlib.closing(self._con.cursor()) as cur, transaction(cur):
            _rollup.rebuild(cur, self._dedupe_window)

    def cluster_costs(self, **options: Any) -> list[ClusterWindowCost]:
        """The self-hosted clusters' allocated windows (``_reprice.cluster_costs``)."""
        from taskcost.store import _reprice

        if self._closed:
            raise StoreUnavailableError("store is closed")
        self._caught_up(60.0)
        return _reprice.cluster_costs(self._con, **options)
