"""``ClickHouseStore``: the ``Store`` contract on ClickHouse (a server, or chDB in this process), for many collectors
writing to one database.

What differs from the DuckDB store, and why:

* No single writer owning the file: each store writes its batches itself (one thread per store, so ``submit`` has a
  queue and back-pressure as before), and keeps no state about what was stored: re-sent spans are found by a look-up
  in the tables (``_write``), and the views deduplicate and add up at read time (``_schema``). Several stores (in
  several processes) on one database stay exact.
* API keys are read from the database again after ``KEY_CACHE_S``: a key created or revoked by another collector
  takes effect here within that time (this store's own changes at once).
* Answers come back as Arrow, made to look as the DuckDB store's: ClickHouse's ``DateTime64(6, 'UTC')`` columns are
  given as Arrow timestamps without a zone (the same UTC instants DuckDB's ``TIMESTAMP`` gives), and every field is
  nullable (ClickHouse marks its non-Nullable columns ``not null``; DuckDB marks none). ``query`` reads its rows from
  that Arrow answer, so both stores give the same Python values (Decimal, naive datetime, list).
* Re-pricing and the clusters' allocation are not implemented on ClickHouse yet: those methods raise
  StoreUnavailableError.
* With ``spool_dir`` (what ``taskcost serve`` opens), a batch is acknowledged once fsynced in a local spool and
  inserted behind it (``_spool_writer``): ClickHouse unreachable for a while loses nothing acknowledged, and reads
  wait for what was acknowledged before them. Without it, ``submit``'s future resolves once ClickHouse has the batch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlparse

import pyarrow as pa
from sqlglot.tokens import Tokenizer, TokenType

from taskcost.pricing import ClusterWindowCost
from taskcost.store import _keys
from taskcost.store._base import (
    AllocationDue,
    CommitInfo,
    QueryError,
    QueryResult,
    StoreBusyError,
    StoreUnavailableError,
)
from taskcost.store._results import fetch_bounded
from taskcost.store._rows import PreparedBatch
from taskcost.store.clickhouse._access import ReaderAccess
from taskcost.store.clickhouse._dialect import as_duckdb_types
from taskcost.store.clickhouse._rows_out import Rows as _Rows
from taskcost.store.clickhouse._rows_out import duck_type as _duck_type
from taskcost.store.clickhouse._rows_out import naive as _naive
from taskcost.store.clickhouse._sandbox import query_error
from taskcost.store.clickhouse._schema import MIGRATIONS, batch_schemas, bootstrap_sql
from taskcost.store.clickhouse._spool_writer import SpoolWriter
from taskcost.store.clickhouse._write import batch_tables, write_batch

__all__ = ["DEFAULT_DATABASE", "KEY_CACHE_S", "ClickHouseStore", "duckdb_like"]

log = logging.getLogger("taskcost.store")

DEFAULT_DATABASE = "taskcost"
KEY_CACHE_S = 5.0
"""How long the keys read from the database are trusted before they are read again."""

_KEY_COLUMNS = ("id", "project", "kind", "secret_sha256", "prefix")  # what _keys.create_key inserts, in its order
_READ_WAIT_S = 10.0  # at most, a read waits this long for the spool's acknowledged spans to be in ClickHouse


def duckdb_like(tbl: pa.Table) -> pa.Table:
    """``tbl`` (a ClickHouse answer) with the Arrow schema the DuckDB store gives for the same columns
    (``_dialect.as_duckdb_types``: the one place where the two differ in form)."""
    return as_duckdb_types(tbl)


class _Capture:
    """Stands in for a DuckDB cursor in ``_keys.create_key`` (its checks, id, secret and hash), keeping the row."""

    params: list[Any]

    def execute(self, sql: str, params: list[Any]) -> None:
        self.params = params


def _connect(dsn: str, database: str | None) -> tuple[Any, str]:
    """A clickhouse-connect client on ``dsn``'s database (created when missing), and the database's name."""
    import clickhouse_connect

    url = urlparse(dsn)
    if url.scheme == "chdb":
        if not url.path.startswith("/"):
            raise StoreUnavailableError(f"a chDB dsn names an absolute directory: chdb:///abs/path, not {dsn!r}")
        db = database or parse_qs(url.query).get("database", [DEFAULT_DATABASE])[0]
        target = f"chdb://{url.path}"
        boot = clickhouse_connect.get_client(dsn=target)
        boot.command(f"CREATE DATABASE IF NOT EXISTS `{db}`")
        return clickhouse_connect.get_client(dsn=target, database=db), db
    if url.scheme in ("clickhouse", "http", "https"):
        db = database or url.path.strip("/") or DEFAULT_DATABASE
        args: dict[str, Any] = {
            "host": url.hostname or "localhost",
            "port": url.port or 8123,
            "username": unquote(url.username or "default"),
            "password": unquote(url.password or ""),
            "secure": url.scheme == "https",
        }
        boot = clickhouse_connect.get_client(**args)
        boot.command(f"CREATE DATABASE IF NOT EXISTS `{db}`")
        boot.close()
        return clickhouse_connect.get_client(**args, database=db), db
    raise StoreUnavailableError(f"not a ClickHouse dsn: {dsn!r} (chdb:///abs/dir or clickhouse://user:pw@host:8123/db)")


def _applied(client: Any) -> set[str]:
    return {r[0] for r in client.query("SELECT name FROM schema_migrations FINAL").result_rows}


class ClickHouseStore:
    """One ClickHouse database. ``open(dsn)`` migrates it (unless ``read_only``) and writes through a thread of its
    own; any number of stores, in any number of processes, may write to the same database."""

    def __init__(self, client: Any, database: str, read_only: bool, max_queued_spans: int, access: Any = None) -> None:
        self._client = client
        self.access = access or ReaderAccess.off("not set up")  # the reader and row policies (``_access``)
        self.database = database
        self._read_only = read_only
        self._max_queued = max_queued_spans
        self._schemas = batch_schemas()
        self._executor: ThreadPoolExecutor | None = (
            None if read_only else ThreadPoolExecutor(1, thread_name_prefix="taskcost-ch-writer")
        )
        self._queue_lock = threading.Condition()
        self._queued = 0
        self._closed = False
        self._on_commit: Callable[[CommitInfo], None] | None = None
        self._committed = 0
        self._deduplicated = 0
        self._keys_lock = threading.Lock()
        self._pricing_lock = threading.Lock()
        self._query_memory_bytes: int | None = None
        self._active_keys: dict[str, _keys.ApiKey] = {}
        self._keys_ever = False
        self._keys_read_at = float("-inf")
        self._sandbox: Any = None  # a ClickHouseSandbox, made on the first user query
        self._spool: SpoolWriter | None = None  # the local intake spool (``open``'s ``spool_dir``)
        self._chdb = False  # the client is chDB's (in this process), not a server's

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        read_only: bool = False,
        database: str | None = None,
        max_queued_spans: int = 200_000,
        spool_dir: Path | None = None,
        spool_max_bytes: int = 1024**3,
        max_batch_spans: int = 20_000,
        insert_dsn: str | None = None,
        query_memory_bytes: int | None = None,
    ) -> ClickHouseStore:
        """``dsn``: ``chdb:///abs/dir`` (in-process chDB keeping its data there; database ``taskcost`` unless
        ``?database=`` says otherwise) or ``clickhouse://user:password@host:8123/db``. Applies the pending
        migrations (``_schema.MIGRATIONS``, each idempotent and recorded); a ``read_only`` open changes nothing and
        refuses a database that needs one. ``max_queued_spans``: spans ``submit`` accepts before StoreBusyError.

        ``spool_dir``: acknowledge intake once fsynced there, insert behind it (``_spool_writer``; at most
        ``spool_max_bytes`` not in ClickHouse, then StoreBusyError; inserts of up to ``max_batch_spans`` spans), and
        insert now what an earlier run acknowledged there. ``insert_dsn``: the spool inserts through a client of this
        dsn instead of ``dsn``'s (tests: a ClickHouse that cannot be reached). ``query_memory_bytes``: the memory a
        user or analytics query may use (``max_memory_usage``; default ``_sandbox.DEFAULT_MAX_MEMORY_BYTES``)."""
        try:
            client, db = _connect(dsn, database)
        except StoreUnavailableError:
            raise
        except Exception as exc:
            raise StoreUnavailableError(f"cannot open ClickHouse at {dsn.split('@')[-1]}: {exc}") from None
        try:
            if read_only:
                have = _applied(client) if client.command("EXISTS TABLE schema_migrations") else set()
                if pending := [m.name for m in MIGRATIONS if m.name not in have]:
                    raise StoreUnavailableError(
                        f"database {db} needs {len(pending)} schema upgrade(s) ({', '.join(pending)}); open it "
                        "read-write once (a read-only open never changes it)"
                    )
            else:
                client.command(bootstrap_sql())
                have = _applied(client)
                for m in MIGRATIONS:
                    if m.name in have:
                        continue
                    for statement in m.statements:
                        client.command(statement)
                    client.command("INSERT INTO schema_migrations (name) VALUES ({n:String})", parameters={"n": m.name})
                    log.info("applied migration %s to ClickHouse database %s", m.name, db)
        except Exception:
            client.close()
            raise
        # clickhouse-connect imports pandas on a first insert, in the writer's thread, while plotly's callbacks look it
        # up in sys.modules without the import lock and may meet it half made: imported here, before those threads
        with contextlib.suppress(ImportError):
            import pandas  # noqa: F401
        store = cls(client, db, read_only, max_queued_spans, ReaderAccess.open(client, dsn, db, not read_only))
        store._chdb = dsn.startswith("chdb:")
        store._query_memory_bytes = query_memory_bytes
        if spool_dir is not None and not read_only:
            target = insert_dsn or dsn  # the spool inserts with a client (a session) of its own, made again on failure
            store._spool = SpoolWriter(
                spool_dir,
                lambda: _connect(target, db)[0],
                write_batch,
                lambda batch: batch_tables(batch, store._schemas),
                max_bytes=spool_max_bytes,
                max_spans=max_queued_spans,
                max_batch_spans=max_batch_spans,
                on_commit=store._count,
            )
            try:
                store._spool.start()
            except Exception:
                store.close()
                raise
        return store

    @property
    def spool_directory(self) -> Path | None:
        """Where intake is spooled before ClickHouse has it (None: no spool)."""
        return None if self._spool is None else self._spool.directory

    def _caught_up(self, timeout_s: float) -> None:
        """A read waits (at most ``timeout_s``) for what the spool acknowledged before it to be in ClickHouse."""
        if self._spool is not None and not self._spool.caught_up(timeout_s):
            log.warning("a read did not wait longer for the spool's %d spans to reach ClickHouse", self.queued_spans)

    # -- intake ---------------------------------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def arrow_schemas(self) -> dict[str, pa.Schema]:
        """The Arrow schema of each table a PreparedBatch fills (the DuckDB store's: a batch suits either store)."""
        return dict(self._schemas)

    @property
    def on_commit(self) -> Callable[[CommitInfo], None] | None:
        """Called after each write that carried spans (metrics)."""
        return self._on_commit

    @on_commit.setter
    def on_commit(self, fn: Callable[[CommitInfo], None] | None) -> None:
        self._on_commit = fn

    def submit(self, batch: PreparedBatch, wait_s: float = 0.0) -> Future[CommitInfo]:
        """Queue a batch for this store's writer thread; the future resolves once ClickHouse has it. When the queue
        holds ``max_queued_spans``, wait up to ``wait_s`` for room, then raise StoreBusyError (back-pressure)."""
        if self._read_only or self._closed or self._executor is None:
            raise StoreUnavailableError("store is closed or read-only")
        if self._spool is not None:
            return self._spool.submit(batch, wait_s)
        n = batch.span_count
        with self._queue_lock:
            room = self._queue_lock.wait_for(lambda: self._queued == 0 or self._queued + n <= self._max_queued, wait_s)
            if not room:
                raise StoreBusyError(f"the write queue holds {self._queued:,} spans; try again shortly")
            self._queued += n
        try:
            return self._executor.submit(self._commit, batch)
        except RuntimeError:  # shut down meanwhile
            self._dequeue(n)
            raise StoreUnavailableError("store is closed") from None

    def write(self, batch: PreparedBatch, timeout: float | None = 30.0) -> CommitInfo:
        return self.submit(batch).result(timeout)

    def _dequeue(self, n: int) -> None:
        with self._queue_lock:
            self._queued -= n
            self._queue_lock.notify_all()

    def _commit(self, batch: PreparedBatch) -> CommitInfo:
        started = time.perf_counter()
        try:
            done = write_batch(self._client, batch_tables(batch, self._schemas))
        finally:
            self._dequeue(batch.span_count)
        info = CommitInfo(spans=done.spans, deduplicated=done.deduplicated, seconds=time.perf_counter() - started)
        self._count(info)
        return info

    def _count(self, info: CommitInfo) -> None:
        """An insert's figures: counted, and given to ``on_commit``."""
        self._committed += info.spans
        self._deduplicated += info.deduplicated
        if self._on_commit is not None and (info.spans or info.deduplicated):
            with contextlib.suppress(Exception):
                self._on_commit(info)

    def fold_rollups(self, timeout: float | None = 60.0) -> None:
        """Nothing to fold: ``tasks`` and ``llm_call_hours`` are computed from the stored rows on each read."""
        if self._closed:
            raise StoreUnavailableError("store is closed")

    # -- operations -----------------------------------------------------------------------------------------
    @property
    def queued_spans(self) -> int:
        """Spans accepted by ``submit`` and not written yet (with the spool: not in ClickHouse yet)."""
        return self._queued if self._spool is None else self._spool.queued_spans

    @property
    def queue_limit(self) -> int:
        return self._max_queued

    @property
    def writer_alive(self) -> bool:
        alive = self._executor is not None and not self._closed
        return alive and (self._spool is None or self._spool.alive)

    @property
    def committed_spans(self) -> int:
        """Spans this store stored new (a racing writer may have stored some of them too)."""
        return self._committed

    @property
    def deduplicated_spans(self) -> int:
        """Spans this store found stored already (re-sent), or repeated within a batch."""
        return self._deduplicated

    @property
    def engine_settings(self) -> dict[str, str]:
        """ClickHouse's limits for this client's queries (for /metrics)."""
        rows = self._client.query(
            "SELECT name, value FROM system.settings WHERE name IN ('max_memory_usage', 'max_threads')"
        ).result_rows
        got = {r[0]: str(r[1]) for r in rows}
        return {"memory_limit": got.get("max_memory_usage", ""), "threads": got.get("max_threads", "")}

    def close(self) -> None:
        """Write what is queued (with the spool: for a few seconds; the rest stays spooled), then close the client."""
        if self._closed:
            return
        self._closed = True
        if self._spool is not None:
            self._spool.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        with contextlib.suppress(Exception):
            self._client.close()

    def __enter__(self) -> ClickHouseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def admin_arrow(self, sql: str) -> pa.Table:
        """ClickHouse SQL over every table, unsandboxed, answered as ``arrow`` answers (tests, maintenance)."""
        self._caught_up(_READ_WAIT_S)
        return duckdb_like(self._client.query_arrow(sql))

    def admin_query(self, sql: str, params: list[Any] | None = None) -> QueryResult:
        """Any ClickHouse SQL over every table, unsandboxed: for this process's own use (tests, maintenance), never
        for user input. ``?`` placeholders take ``params`` (inlined as ClickHouse literals)."""
        from clickhouse_connect.driver.binding import format_query_value

        if self._closed:
            raise StoreUnavailableError("store is closed")
        values = list(params or [])
        if values:
            holes = [t for t in Tokenizer().tokenize(sql) if t.token_type == TokenType.PLACEHOLDER]
            if len(holes) != len(values):
                raise QueryError(f"the query has {len(holes)} placeholder(s) and {len(values)} parameter(s)")
            for hole, value in reversed(list(zip(holes, values, strict=True))):
                sql = sql[: hole.start] + str(format_query_value(value)) + sql[hole.end + 1 :]
        self._caught_up(_READ_WAIT_S)
        result = self._client.query(sql)
        rows = [tuple(_naive(v) for v in r) for r in result.result_rows]
        return QueryResult(list(result.column_names), [t.name for t in result.column_types], rows)

    # -- reading -------------------------------------------------------------------------------------
    def _user_sandbox(self) -> Any:
        if self._sandbox is None:
            from taskcost.store.clickhouse._sandbox import ClickHouseSandbox  # (written separately)

            self._sandbox = ClickHouseSandbox(self.database)
            if self._query_memory_bytes is not None:
                self._sandbox.max_memory_bytes = self._query_memory_bytes
        return self._sandbox

    def _run(self, sql: str, params: list[Any] | None, timeout_s: float, rows: int, project: str | None) -> pa.Table:
        """A user query (DuckDB's dialect), converted, checked by the sandbox, run with its settings."""
        from clickhouse_connect.driver.binding import format_query_value
        from clickhouse_connect.driver.exceptions import ClickHouseError

        from taskcost.store.clickhouse._dialect import to_clickhouse

        if self._closed:
            raise StoreUnavailableError("store is closed")
        self._caught_up(min(timeout_s, _READ_WAIT_S))
        sandbox = self._user_sandbox()
        runnable = sandbox.prepare(self._client, to_clickhouse(sql, params), project, timeout_s)
        settings: dict[str, Any] | None = sandbox.settings(timeout_s, rows)
        if self._chdb and settings:
            # chDB applies an Arrow query's settings by SET on the session and restores them after, which readonly=1
            # forbids: the session would stay read-only (every later setting refused). A SETTINGS clause holds them
            # for this query only (the runnable is ClickHouse's own formatting of a SELECT: no trailing comment).
            clause = ", ".join(f"{k} = {format_query_value(v)}" for k, v in settings.items())
            runnable, settings = f"{runnable}\nSETTINGS {clause}", None
        try:
            tbl = self.access.query_arrow(self._client, runnable, settings, project)
        except ClickHouseError as exc:
            if self._chdb:
                # after a failed Arrow query chDB's session answered the next query with bytes left from the failed
                # one (a canonical text that did not decode, then a parse refusal): one query through the same
                # session drains them
                with contextlib.suppress(Exception):
                    self._client.query("SELECT 1")
            raise query_error(exc, timeout_s) from None
        return duckdb_like(tbl)

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
        """One read-only SELECT over the public views (DuckDB's dialect, ``?`` parameters: ``_dialect``), sandboxed
        (``_sandbox``), within ``timeout_s``; at most ``max_rows`` rows and about ``max_bytes`` bytes (``truncated``
        and ``meta["truncated_by"]`` say which limit cut it). ``project``: that project's rows only."""
        started = time.perf_counter()
        tbl = self._run(sql, params, timeout_s, max_rows + 1, project)
        rows, truncated_by = fetch_bounded(_Rows(tbl), max_rows, max_bytes)
        return QueryResult(
            columns=list(tbl.column_names),
            types=[_duck_type(t) for t in tbl.schema.types],
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
        """``query``'s sandbox, time limit and project filter, as one Arrow table typed as the DuckDB store's; more
        than ``max_rows`` rows is a QueryError."""
        tbl = self._run(sql, params, timeout_s, max_rows + 1, project)
        if tbl.num_rows > max_rows:
            raise QueryError(f"the answer has more than {max_rows:,} rows")
        return tbl

    # -- access control -------------------------------------------------------------------------------------
    def _keys_fresh(self, force: bool = False) -> None:
        """Read the active keys again when they were read more than KEY_CACHE_S ago (or ``force``)."""
        now = time.monotonic()
        if not force and now - self._keys_read_at < KEY_CACHE_S:
            return
        rows = self._client.query(
            "SELECT secret_sha256, id, project, kind, prefix, created_at, revoked_at FROM api_keys FINAL"
        ).result_rows
        self._active_keys = {r[0]: _keys.ApiKey(r[1], r[2], r[3], r[4], _naive(r[5])) for r in rows if r[6] is None}
        self._keys_ever = self._keys_ever or bool(rows)
        self._keys_read_at = now

    @property
    def keys_ever_created(self) -> bool:
        """True once any key was created in this database, revoked or not (never false again)."""
        if not self._keys_ever:
            with self._keys_lock:
                self._keys_fresh()
        return self._keys_ever

    @property
    def has_active_keys(self) -> bool:
        with self._keys_lock:
            self._keys_fresh()
        return bool(self._active_keys)

    def verify_key(self, secret: str) -> _keys.ApiKey | None:
        with self._keys_lock:
            self._keys_fresh()
        return self._active_keys.get(_keys.hash_secret(secret))

    def create_key(self, project: str, kind: str) -> tuple[_keys.ApiKey, str]:
        """A new key (``_keys.create_key``'s checks, id and secret); returns it and its secret (shown once)."""
        row = _Capture()
        key, secret = _keys.create_key(cast(Any, row), project, kind)
        self._client.insert("api_keys", [row.params], column_names=list(_KEY_COLUMNS))
        with self._keys_lock:
            self._keys_fresh(force=True)
        return key, secret

    def revoke_key(self, key_id: str) -> bool:
        """Revoke an active key: a new version of its row, with ``revoked_at`` (False: no such active key)."""
        with self._keys_lock:
            found = self._client.query(
                "SELECT id, project, kind, secret_sha256, prefix, created_at FROM api_keys FINAL "
                "WHERE id = {id:String} AND revoked_at IS NULL",
                parameters={"id": key_id},
            ).result_rows
            if not found:
                return False
            self._client.insert(
                "api_keys",
                [[*found[0], datetime.now(UTC), 1]],
                column_names=[*_KEY_COLUMNS, "created_at", "revoked_at", "revision"],
            )
            self._keys_fresh(force=True)
        return True

    def list_keys(self) -> list[_keys.ApiKey]:
        rows = self._client.query(
            "SELECT id, project, kind, prefix, created_at, revoked_at FROM api_keys FINAL ORDER BY created_at, id"
        ).result_rows
        return [_keys.ApiKey(r[0], r[1], r[2], r[3], _naive(r[4]), _naive(r[5])) for r in rows]

    # -- pricing: versioned cost rows (_reprice) -------------------------------------------------------------
    def _pricing(self) -> Any:
        if self._closed or self._read_only:
            raise StoreUnavailableError("store is closed or read-only")
        if not self._pricing_lock.acquire(blocking=False):
            raise StoreUnavailableError("a re-price or an allocation is running in this process: try again after it")
        return self._pricing_lock

    def reprice(self, pricer: Any, **options: Any) -> Any:
        """Price stored calls again (``_reprice.reprice``): the changed rows are inserted as new versions; returns a
        RepriceReport. One at a time in a process (StoreUnavailableError otherwise)."""
        from taskcost.store.clickhouse import _reprice

        lock = self._pricing()
        try:
            self._caught_up(60.0)
            return _reprice.reprice(self._client, self._schemas["llm_call_rows"], pricer, **options)
        finally:
            lock.release()

    def allocate_clusters(
        self,
        pricer: Any,
        *,
        since_ns: int | None,
        until_ns: int | None,
        now_ns: int | None = None,
        closed_ns: int | None = None,
    ) -> Any:
        """Allocate the clusters' windows in [since, until) that ended by ``closed_ns`` to their calls
        (``_reprice.allocate``, the self-hosted part of ``reprice``)."""
        from taskcost.store.clickhouse import _reprice

        lock = self._pricing()
        try:
            self._caught_up(60.0)
            window = {"since_ns": since_ns, "until_ns": until_ns, "now_ns": now_ns, "closed_ns": closed_ns}
            return _reprice.allocate(self._client, self._schemas["llm_call_rows"], pricer, **window)
        finally:
            lock.release()

    def cluster_allocation_due(self, pricer: Any, *, closed_ns: int, received_since_ns: int | None) -> AllocationDue:
        """The windows the server's allocation has to compute before ``closed_ns`` (``_reprice.allocation_due``)."""
        from taskcost.store.clickhouse import _reprice

        if self._closed:
            raise StoreUnavailableError("store is closed")
        self._caught_up(60.0)
        return _reprice.allocation_due(self._client, pricer, closed_ns=closed_ns, received_since_ns=received_since_ns)

    def cluster_costs(self, **options: Any) -> list[ClusterWindowCost]:
        """The allocated GPU-hour windows, oldest first, as the DuckDB store reads them (``cluster_cost_rows``, the
        last version of each window)."""
        since_ns, until_ns, cluster_id = (options.get(k) for k in ("since_ns", "until_ns", "cluster_id"))
        where, params = ["1"], {}
        if since_ns is not None:
            where.append("window_start_ns >= {since:Int64}")
            params["since"] = since_ns
        if until_ns is not None:
            where.append("window_start_ns < {until:Int64}")
            params["until"] = until_ns
        if cluster_id is not None:
            where.append("cluster_id = {cluster:String}")
            params["cluster"] = cluster_id
        rows = self._client.query(
            "SELECT cluster_id, window_start_ns, window_end_ns, gpu_type, gpu_count, usd_per_gpu_hour, rate_source, "
            "bill_usd, attributed_usd, idle_usd, busy_s, calls, clusters_version FROM cluster_cost_rows FINAL "
            f"WHERE {' AND '.join(where)} ORDER BY window_start_ns, cluster_id",
            parameters=params,
        ).result_rows
        return [ClusterWindowCost(*r) for r in rows]
