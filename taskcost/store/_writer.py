"""The single writer of one DuckDB file, and its intake spool.

Batches are committed by one thread, several requests per transaction (group commit). With the spool
(taskcost/store/_spool.py) a batch is acknowledged once fsynced there and committed behind it, in transactions of
up to ``max_batch_spans``; without it, once committed. Each commit also dedupes spans and responses and adds to the
task roll-ups (taskcost/store/_rollup.py).
"""

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

from taskcost.store import _answers, _dedupe, _engine_hours, _engine_match, _hours, _rollup
from taskcost.store._base import CommitInfo, StoreBusyError, StoreUnavailableError
from taskcost.store._engine import engine_message, is_fatal
from taskcost.store._rows import TABLES, PreparedBatch
from taskcost.store._spool import (
    Spool,
    Where,
    encode_payload,
    encode_streams,
    read_at,
    set_aside,
    set_aside_raw,
    spool_dir,
)
from taskcost.store._sql import count

__all__ = ["Writer", "empty_batch"]

log = logging.getLogger("taskcost.store")

# Group commit: a commit of fewer spans than this waits up to _LINGER_S for more requests to share it.
_LINGER_BELOW_SPANS = 2_000
_LINGER_S = 0.010
# With the spool, an acknowledgement no longer waits for the commit: the writer waits up to this long for more
# (bounded by max_batch_spans), so that a commit holds what a quarter second brings.
_SPOOL_LINGER_S = 0.25
# The commit rate that bounds the queue (queue_limit): from commits of this many spans or more, each weighing this
# much against the ones before it.
_RATE_MIN_SPANS = 1_000
_RATE_WEIGHT = 0.3
_ABANDONED = "the database is reopening after a failure of its engine; nothing of this batch was kept, retry shortly"
_FLUSH = object()  # put in the writer's queue: commit what is gathered now (a reader waits for it)
ENGINE_SAMPLES = "engine_metric_rows"  # not keyed by span: inserted as they come, outside the span dedupe


def empty_batch() -> PreparedBatch:
    """A batch with no rows: committing it folds the task roll-up's delta in (``_rollup.fold``)."""
    return PreparedBatch(columns={t: {"received_ns": []} for t in TABLES}, span_count=0)


class _Job:
    __slots__ = ("batch", "future", "queued", "where")

    def __init__(self, batch: PreparedBatch, where: Where | None = None) -> None:
        self.batch = batch
        self.future: Future[CommitInfo] = Future()
        self.queued = True  # its spans count in queued_spans (until it is committed, refused or set aside)
        # its spool record: a spooled batch waits for the writer as its place there, not as tables in memory
        # (read back to be committed); None: not spooled
        self.where = where

    @property
    def seq(self) -> int:
        """Its spool record's number (0: not spooled; its future was resolved when it was spooled)."""
        return self.where.seq if self.where is not None else 0


class Writer:
    """The writer thread (and with the spool, the spooling thread) of one open database."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        path: Path,
        schemas: dict[str, pa.Schema],
        max_batch_spans: int,
        max_queued_spans: int,
        fold_rows: int,
        dedupe_window: int,
        max_queued_s: float | None,
        on_fatal: Callable[[BaseException, duckdb.DuckDBPyConnection], None] | None = None,
    ) -> None:
        self._con = con
        # after a fatal engine error nothing more is committed (the database must be reopened: ``on_fatal``); what
        # the spool acknowledged stays in it for the next writer to replay
        self._on_fatal = on_fatal
        self._fatal = False
        self._dedupe_window = dedupe_window
        self.path = path
        self._schemas = schemas
        self._max_batch_spans = max_batch_spans
        self._max_queued_spans = max_queued_spans
        self._max_queued_s = max_queued_s
        self._rate: float | None = None  # spans a second of commit, over recent commits (see queue_limit)
        self._fold_rows = fold_rows
        self._settler = _engine_hours.Settler()  # when the engines question's hours are settled
        self._queue: queue.Queue[Any] = queue.Queue()  # _Job, _FLUSH, or None (stop)
        self._queued_spans = 0
        self._queue_room = threading.Condition()
        self._thread = threading.Thread(target=self._write_loop, name="taskcost-writer", daemon=True)
        self.committed_spans = 0
        self.deduplicated_spans = 0
        self.failed_batches = 0
        self.on_commit: Callable[[CommitInfo], None] | None = None
        # the intake spool: acknowledged records and how far the writer has committed them
        self._spool: Spool | None = None
        self._spool_queue: queue.Queue[_Job | None] = queue.Queue()
        self._spooler: threading.Thread | None = None
        self._progress = threading.Condition()
        self._acked_seq = 0
        self._done_seq = 0

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and (self._spooler is None or self._spooler.is_alive())

    def start(self, spool: bool) -> None:
        """Start the writer; replay what a previous run acknowledged in its spool and did not commit; with
        ``spool``, keep spooling (else wait for the replay to be committed and remove the spool)."""
        self._thread.start()
        with contextlib.closing(self._con.cursor()) as cur:
            self._done_seq = int(cur.execute("SELECT coalesce(max(seq), 0) FROM spool_commits").fetchall()[0][0])
            # a row is appended per commit (appends keep DuckDB's automatic checkpoint; an UPDATE would skip it);
            # only the highest matters: keep the table at one row from one start to the next
            cur.execute("DELETE FROM spool_commits WHERE seq < ?", [self._done_seq])
        sp = Spool(spool_dir(self.path))
        replayed = 0
        for record in sp.recover(self._done_seq):
            # like a batch spooled in this run, it waits as its place in the spool (read back to be committed):
            # a large backlog is not held in memory
            job = _Job(
                PreparedBatch(columns={}, span_count=record.span_count, sample_count=record.sample_count), record.where
            )
            with self._queue_room:
                self._queued_spans += job.batch.span_count
            self._queue.put(job)
            replayed += job.batch.span_count
        self._acked_seq = sp.last_seq
        if replayed:
            log.info("replaying %d acknowledged spans from the spool %s", replayed, sp.directory)
        if spool:
            self._spool = sp
            self._spooler = threading.Thread(target=self._spool_loop, name="taskcost-spool", daemon=True)
            self._spooler.start()
            return
        if self._acked_seq > self._done_seq:
            self.caught_up(timeout_s=None)
        sp.close(self._done_seq)

    def carry_over(self, old: Writer) -> None:
        """Go on from ``old``'s counts, commit rate and commit callback (a reopened database)."""
        self.committed_spans, self.deduplicated_spans = old.committed_spans, old.deduplicated_spans
        self.failed_batches, self.on_commit, self._rate = old.failed_batches, old.on_commit, old._rate

    def abandon(self) -> None:
        """Stop after a fatal engine error, committing nothing more: what the spool acknowledged stays there for the
        next writer to replay; what was not acknowledged is refused (its sender retries)."""
        self._fatal = True
        if self._spooler is not None:
            self._spool_queue.put(None)
            self._spooler.join()
        self._queue.put(None)
        if self._thread.ident is not None:
            self._thread.join()
        for q in (self._spool_queue, self._queue):  # a request that slipped in meanwhile is refused, never left
            while True:
                try:
                    job = q.get_nowait()
                except queue.Empty:
                    break
                if isinstance(job, _Job):
                    self._fail([job], StoreUnavailableError(_ABANDONED))
        if self._spool is not None:
            self._spool.close_file()
        with self._progress:  # readers waiting for a commit see the writer gone
            self._progress.notify_all()

    def stop(self) -> None:
        """Commit everything accepted (and fold the task roll-up), then stop; the spool is removed."""
        if self._spooler is not None:  # everything it took is acknowledged and handed to the writer
            self._spool_queue.put(None)
            self._spooler.join()
        if self._thread.is_alive():  # leave the task roll-up folded: no delta for the next reader to merge
            self._queue.put(_Job(empty_batch()))
        self._queue.put(None)
        if self._thread.ident is not None:
            self._thread.join()
        if self._spool is not None:
            self._spool.close(self._done_seq)

    @property
    def queue_limit(self) -> int:
        """Spans the queue takes at most now: ``max_queued_s`` seconds of the writer's commit rate (measured
        over recent commits of 1,000 spans or more; at least one commit's worth), and never more than
        ``max_queued_spans``. A read waits for what was acknowledged before it, so this bounds how long: a count
        alone would allow more seconds on a slower machine or a larger database."""
        if self._max_queued_s is None or self._rate is None:
            return self._max_queued_spans
        return min(self._max_queued_spans, max(self._max_batch_spans, int(self._rate * self._max_queued_s)))

    @property
    def queued_spans(self) -> int:
        """Spans accepted for writing and not yet committed."""
        return self._queued_spans

    def submit(self, batch: PreparedBatch, wait_s: float = 0.0) -> Future[CommitInfo]:
        """Queue a batch for the single writer; the future resolves once it is committed.

        When the queue is full, wait up to ``wait_s`` for room, then raise StoreBusyError (nothing
        queued): back-pressure.
        """
        if not self.alive or self._fatal:
            raise StoreUnavailableError("the store's writer is not running (see the server log)")

        def has_room() -> bool:
            return not self._queued_spans or self._queued_spans + batch.span_count <= self.queue_limit

        with self._queue_room:
            if not self._queue_room.wait_for(has_room, timeout=wait_s):
                raise StoreBusyError(f"write queue full ({self._queued_spans} spans waiting)")
            self._queued_spans += batch.span_count
        job = _Job(batch)
        (self._spool_queue if self._spool is not None and not batch.empty else self._queue).put(job)
        return job.future

    def _write_loop(self) -> None:
        cur = self._con.cursor()
        try:
            while True:
                try:
                    job = self._queue.get(timeout=None if self._fatal else self._settler.idle_wait())
                except queue.Empty:  # idle, with engine hours to settle: no commit will come to do it
                    self._settler.when_idle(cur)
                    continue
                if job is None:
                    return
                if job is _FLUSH:  # nothing gathered: what was acknowledged before it is committed already
                    continue
                jobs, spans, stop = [job], job.batch.span_count, False
                spooled = job.seq > 0  # acknowledged already: nobody waits for this commit, make it large
                linger_until = time.monotonic() + (_SPOOL_LINGER_S if spooled else _LINGER_S)
                linger_below = self._max_batch_spans if spooled else _LINGER_BELOW_SPANS
                while spans < self._max_batch_spans:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        # Group commit: a small commit costs DuckDB nearly as much as a large one (the WAL write
                        # and its fsync, per-statement work), so wait a moment for the next requests to join it.
                        left = linger_until - time.monotonic()
                        if spans >= linger_below or left <= 0:
                            break
                        try:
                            nxt = self._queue.get(timeout=left)
                        except queue.Empty:
                            break
                    if nxt is _FLUSH:
                        break
                    if nxt is None:
                        stop = True
                        break
                    jobs.append(nxt)
                    spans += nxt.batch.span_count
                try:
                    if not self._commit(cur, jobs) and (acked := [j for j in jobs if j.seq]):
                        self._retry_acked(cur, acked)
                except BaseException as exc:  # never leave a request waiting on a future nobody resolves
                    log.exception("the writer failed; refusing the batches it held")
                    self._fail(jobs, exc if isinstance(exc, Exception) else RuntimeError("the writer stopped"))
                    self._release(jobs)
                    if not isinstance(exc, Exception):
                        raise
                if stop:
                    return
        finally:
            cur.close()

    def _table(self, batch: PreparedBatch, table: str) -> pa.Table | None:
        """A batch's rows of ``table`` as Arrow (None: none)."""
        if batch.tables is not None:  # built by a decode worker or read from the spool, with these schemas
            built = batch.tables.get(table)
            return built if built is not None and built.num_rows else None
        columns = batch.columns.get(table)  # (a batch of spans has no engine metric samples, and the other way round)
        if columns is not None and columns["received_ns"]:
            return pa.Table.from_pydict(columns, schema=self._schemas[table])
        return None

    def _incoming(self, jobs: list[_Job], table: str) -> pa.Table | None:
        parts = [t for j in jobs if (t := self._table(j.batch, table)) is not None]
        return pa.concat_tables(parts) if parts else None

    def _insert_all(self, cur: duckdb.DuckDBPyConnection, data: dict[str, pa.Table], only_new: bool) -> None:
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
                        f"WHERE {_dedupe.span_key()} IN (SELECT k FROM _taskcost_new) "
                        "QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id) = 1"
                    )
                    name = f"_taskcost_new_{table}"
                sources[table] = name
            for table, name in sources.items():
                if table != "llm_call_rows":
                    cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {name}")
            calls = None
            if "llm_call_rows" in sources:
                rows = data["llm_call_rows"]  # (an Arrow column knows its nulls: no scan to count them)
                with_id = None if only_new else rows.num_rows - rows.column("response_id").null_count
                calls = _rollup.insert_calls(cur, sources["llm_call_rows"], with_id)
            _rollup.add_to_tasks(cur, calls, sources.get("task_rows"), sources.get("tool_call_rows"))
            if calls is not None:
                _hours.add_to_hours(cur, calls)
                _answers.resolve_answers(cur, calls, _hours.move_hours)
            _engine_match.update(
                cur,
                sources.get("engine_span_rows"),
                calls,
                sources.get("llm_call_engine_rows"),
                sources.get("llm_call_rows"),
            )
            if calls not in (None, sources.get("llm_call_rows")):
                _rollup.drop_stage(cur)
            if only_new:
                for table in data:
                    cur.execute(f"DROP TABLE IF EXISTS _taskcost_new_{table}")
        finally:  # (after a failed statement the transaction is rolled back, temporary tables with it)
            for table in data:
                with contextlib.suppress(duckdb.Error):
                    cur.unregister(f"_taskcost_in_{table}")

    def _commit(self, cur: duckdb.DuckDBPyConnection, jobs: list[_Job]) -> bool:
        """Commit the jobs in one transaction and resolve their futures. False when nothing was committed: the
        futures not resolved yet hold the error; acknowledged spool records are the caller's to try again."""
        if self._fatal:
            self._fail(jobs, StoreUnavailableError(_ABANDONED))
            return False
        started = time.perf_counter()
        try:
            for j in jobs:
                if j.where is not None and j.batch.tables is None:
                    j.batch = PreparedBatch(
                        columns={},
                        span_count=j.batch.span_count,
                        tables=read_at(j.where).tables,
                        sample_count=j.batch.sample_count,
                    )
            data = {t: tbl for t in TABLES if (tbl := self._incoming(jobs, t)) is not None}
        except Exception as exc:  # a value the columns cannot hold: refuse these batches, keep the writer alive
            log.exception("batch(es) not writable; nothing of them was committed")
            self._fail(jobs, exc)
            return False
        seq = max(j.seq for j in jobs)
        spans = data.get("spans")
        n_spans = spans.num_rows if spans is not None else 0
        try:
            # an empty batch asks for the task roll-up's delta to be folded in now (after a re-price, on close)
            fold_rows = self._fold_rows if all(not j.batch.empty for j in jobs) else 0
            new = self._store(cur, data, fold_rows, seq=seq)
        except Exception as exc:
            if is_fatal(exc):  # nothing can be committed until the database is reopened: no retries, no set-aside
                log.error("the database engine failed during a commit (%s); it will be reopened", engine_message(exc))
                self._fatal = True
                self._fail(jobs, StoreUnavailableError(_ABANDONED))
                if self._on_fatal is not None:
                    self._on_fatal(exc, self._con)
                return False
            log.exception("write of %d batch(es) failed; nothing of them was committed", len(jobs))
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            self._fail(jobs, exc)
            return False
        info = CommitInfo(spans=new, deduplicated=n_spans - new, seconds=time.perf_counter() - started)
        if n_spans >= _RATE_MIN_SPANS and info.seconds > 0:  # a small commit is mostly fixed costs: not a rate
            rate = n_spans / info.seconds
            self._rate = rate if self._rate is None else (1 - _RATE_WEIGHT) * self._rate + _RATE_WEIGHT * rate
        self.committed_spans += info.spans
        self.deduplicated_spans += info.deduplicated
        if self.on_commit is not None and n_spans:
            with contextlib.suppress(Exception):
                self.on_commit(info)
        self._release(jobs)
        if seq:
            self._committed_up_to(seq)
        try:
            _dedupe.rotate_full(cur, self._dedupe_window)
        except duckdb.Error:  # the window only grows until the next try: nothing is lost
            log.exception("could not start a new generation of the dedupe keys")
        for j in jobs:
            if not j.seq:  # (a spool record's future is the spooler's: resolved when it was appended)
                j.future.set_result(info)
        return True

    def _release(self, jobs: list[_Job]) -> None:
        """The jobs leave queued_spans (once each): committed, refused or set aside."""
        spans = 0
        for j in jobs:
            if j.queued:
                j.queued = False
                spans += j.batch.span_count
        if spans:
            with self._queue_room:
                self._queued_spans -= spans
                self._queue_room.notify_all()

    def _fail(self, jobs: list[_Job], exc: Exception) -> None:
        """Refuse the jobs not acknowledged yet (acknowledged spool records are kept: ``_retry_acked``)."""
        refused = [j for j in jobs if not j.seq and not j.future.done()]
        self._release(refused)
        for j in refused:
            self.failed_batches += 1
            j.future.set_exception(exc)

    def _committed_up_to(self, seq: int) -> None:
        with self._progress:
            self._done_seq = max(self._done_seq, seq)
            self._progress.notify_all()
        if self._spool is not None:
            self._spool.release(seq)

    def _retry_acked(self, cur: duckdb.DuckDBPyConnection, jobs: list[_Job]) -> None:
        """Acknowledged spool records a commit failed on: each is committed on its own, with three tries. One that
        still fails is set aside beside the spool (kept, never dropped), and the writer goes on."""
        if self._fatal:  # not these records' fault: they stay in the spool, for the reopened database's writer
            return
        for j in jobs:
            committed = False
            for attempt in range(3):
                time.sleep(0.2 * 2**attempt)
                if committed := self._commit(cur, [j]):
                    break
                if self._fatal:  # not this record's fault: it stays in the spool, for the reopened database's writer
                    return
            if not committed:
                self.failed_batches += 1
                try:
                    if j.batch.tables is None and j.where is not None:  # not readable back: keep its bytes as they are
                        kept = set_aside_raw(spool_dir(self.path), j.where)
                    else:
                        kept = set_aside(spool_dir(self.path), j.seq, j.batch.tables or {})
                    log.error("spool record %d (%d spans) not committable; kept in %s", j.seq, j.batch.span_count, kept)
                except OSError:
                    log.exception(
                        "spool record %d (%d spans) can be neither committed nor kept: lost", j.seq, j.batch.span_count
                    )
                with contextlib.suppress(duckdb.Error):
                    cur.execute("INSERT INTO spool_commits VALUES (?)", [j.seq])
                self._release([j])
                self._committed_up_to(j.seq)

    def _spool_loop(self) -> None:
        """Append what ``submit`` queued to the spool, fsync once per group, acknowledge, hand to the writer."""
        stop = False
        while not stop:
            job = self._spool_queue.get()
            if job is None:
                return
            jobs = [job]
            while len(jobs) < 256:
                try:
                    nxt = self._spool_queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                jobs.append(nxt)
            try:
                self._spool_jobs(jobs)
            except BaseException as exc:  # never leave a request waiting on a future nobody resolves
                log.exception("the spool failed; refusing the batches it held")
                self._fail([j for j in jobs if not j.seq], exc if isinstance(exc, Exception) else RuntimeError())
                if not isinstance(exc, Exception):
                    raise

    def _spool_jobs(self, jobs: list[_Job]) -> None:
        assert self._spool is not None
        ready, payloads = [], []
        for j in jobs:
            try:  # typed as the tables are, here: a value the columns cannot hold is refused before the ack
                tables = {t: tbl for t in TABLES if (tbl := self._table(j.batch, t)) is not None}
                streams = j.batch.streams  # a decode worker's: those bytes are these tables
                payloads.append(encode_payload(tables) if streams is None else encode_streams(streams))
            except Exception as exc:
                log.exception("batch not writable; nothing of it was kept")
                self._fail([j], exc)
                continue
            j.batch = PreparedBatch(
                columns={}, span_count=j.batch.span_count, tables=tables, sample_count=j.batch.sample_count
            )
            ready.append(j)
        if not ready:
            return
        try:
            places = self._spool.append(payloads)
        except OSError as exc:
            log.exception("could not append %d batch(es) to the spool; nothing of them was kept", len(ready))
            self._fail(ready, exc)
            return
        for j, where in zip(ready, places, strict=True):
            j.where = where
            # the spool holds it now
            j.batch = PreparedBatch(columns={}, span_count=j.batch.span_count, sample_count=j.batch.sample_count)
            self._queue.put(j)
        with self._progress:
            self._acked_seq = places[-1].seq
        for j in ready:
            j.future.set_result(CommitInfo(spans=j.batch.span_count, deduplicated=0, seconds=0.0))

    def caught_up(self, timeout_s: float | None) -> None:
        """Wait until what the spool acknowledged before this call is committed (reads see their writes)."""
        with self._progress:
            target = self._acked_seq
            if self._done_seq >= target:
                return
        self._queue.put(_FLUSH)
        with self._progress:
            self._progress.wait_for(lambda: self._done_seq >= target or not self.alive, timeout_s)

    def _store(
        self,
        cur: duckdb.DuckDBPyConnection,
        data: dict[str, pa.Table],
        fold_rows: int,
        seq: int = 0,
    ) -> int:
        """One transaction storing a commit's rows; returns how many of its spans were new."""
        data = dict(data)
        samples = data.pop(ENGINE_SAMPLES, None)
        spans = data.get("spans")
        n_spans = spans.num_rows if spans is not None else 0
        cur.execute("BEGIN TRANSACTION")
        if samples is not None:  # every sample as sent: a re-sent one is left out at read time (``engine_metrics``)
            cur.register("_taskcost_samples", samples)
            cur.execute(f"INSERT INTO {ENGINE_SAMPLES} BY NAME SELECT * FROM _taskcost_samples")
            cur.unregister("_taskcost_samples")
        new = n_spans
        if spans is not None:
            cur.register("_taskcost_spans", spans)
            # the commit's new keys, staged once: not in the dedupe window, and each once (a span repeated
            # within the commit is stored once). An anti join, not NOT IN: NOT IN's NULL rule (no key passes
            # when the window holds a NULL) made DuckDB hash the whole window for every commit, 3-4x the time
            # (79 against 25 ms for 20k spans against 1.5M keys; a key is never NULL, so the answer is the same)
            cur.execute(
                f"CREATE OR REPLACE TEMP TABLE _taskcost_new AS SELECT DISTINCT k FROM "
                f"(SELECT {_dedupe.span_key()} AS k FROM _taskcost_spans) ANTI JOIN {_dedupe.seen('span_keys')} "
                "USING (k)"
            )
            new = count(cur, "INSERT INTO span_keys SELECT k FROM _taskcost_new")
            cur.unregister("_taskcost_spans")
        if new:
            self._insert_all(cur, data, only_new=new < n_spans)
        cur.execute("DROP TABLE IF EXISTS _taskcost_new")
        _rollup.fold(cur, fold_rows)
        _hours.fold_hours(cur, fold_rows)
        _engine_match.fold(cur, fold_rows)
        # the engines question's hours no commit marked for a while (every one: when asked to fold everything)
        self._settler.after_commit(cur, everything=not fold_rows)
        if seq:  # the spool records up to here are stored: a restart replays what follows
            cur.execute("INSERT INTO spool_commits VALUES (?)", [seq])
        cur.execute("COMMIT")
        return new
