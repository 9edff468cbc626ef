"""The ClickHouse store's local intake spool: a batch is acknowledged once it is fsynced on this machine, and inserted
into ClickHouse behind it, so a ClickHouse that is slow or unreachable for a while loses nothing acknowledged.

Why: many collectors write to one ClickHouse over the network. Acknowledging only after ClickHouse confirmed the
insert ties every client's latency, and the intake's availability, to that network and server; a local spool keeps
the collector's promise ("a 200 means the span is kept") while ClickHouse restarts or the network is down, up to a
bound of disk (``max_bytes``, then StoreBusyError: the intake answers 503 + Retry-After).

How, reusing the DuckDB store's spool format (taskcost/store/_spool.py: checksummed Arrow records in segment files,
fsynced before the acknowledgement):

* ``submit`` queues the batch for the spooling thread, which appends what is queued and fsyncs once, then resolves
  the batches' futures (the acknowledgement).
* The inserting thread inserts the records into ClickHouse in order (``insert``: taskcost/store/clickhouse/_write.py,
  several records per insert), read back from the spool, not held in memory. While ClickHouse cannot be reached it
  tries again with backoff (reconnecting), forever; a record ClickHouse refuses ``_SET_ASIDE_AFTER`` times in a row
  for another reason is kept beside the spool (``*.rejected``), never dropped, and the writer goes on.
* After each insert the highest inserted record's number is written to ``committed`` in the spool directory (not
  fsynced: a stale number only replays records again, and the store finds re-sent spans stored already), and the
  segments that hold only inserted records are deleted.
* At open, the records after ``committed`` are inserted again (the replay), before anything new.
* ``caught_up`` lets a read wait for what was acknowledged before it (a client that got its 200 sees its spans).

One collector per spool directory: a lock (``flock`` on ``LOCK``) refuses a second one.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from taskcost.store._base import CommitInfo, StoreBusyError, StoreUnavailableError
from taskcost.store._rows import PreparedBatch
from taskcost.store._spool import Spool, Where, encode_payload, encode_streams, read_at, set_aside, set_aside_raw

__all__ = ["SpoolWriter", "clickhouse_spool_dir"]

log = logging.getLogger("taskcost.store")

_SEGMENT_BYTES = 16 * 1024 * 1024  # smaller than DuckDB's: inserted segments are deleted sooner
_LINGER_S = 0.2  # an insert waits this long for more records (ClickHouse prefers few large inserts)
_BACKOFF_S = (0.25, 15.0)  # first and longest wait between tries
_SET_ASIDE_AFTER = 8  # refusals in a row (not unreachability) after which a record is kept aside
_COMMITTED = "committed"
_LOCK = "LOCK"


def clickhouse_spool_dir(db: Path) -> Path:
    """The ClickHouse store's spool of a server whose ``db`` setting is ``db`` (``<db>.clickhouse-spool/``): not the
    DuckDB store's ``<db>.spool/``, whose records are committed to the DuckDB file."""
    return db.with_name(db.name + ".clickhouse-spool")


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says ClickHouse could not be reached (tried again forever), not that it refused the rows."""
    from clickhouse_connect.driver.exceptions import OperationalError

    return isinstance(exc, OperationalError | OSError | StoreUnavailableError)


@dataclass(slots=True)
class _Pending:
    """An acknowledged record not inserted yet: where it lies in the spool, its spans, its size."""

    where: Where
    spans: int
    failures: int = 0


class SpoolWriter:
    """The spool of one ClickHouse store: ``start`` (lock, replay), ``submit``, ``caught_up``, ``close``.

    ``connect()`` gives the client to insert with (called again after a failure); ``insert(client, tables)`` inserts
    one batch's tables and returns an object with ``spans`` and ``deduplicated``; ``tables_of(batch)`` gives a
    batch's tables (to spool them); ``on_commit`` gets each insert's CommitInfo."""

    def __init__(
        self,
        directory: Path,
        connect: Callable[[], Any],
        insert: Callable[[Any, dict[str, pa.Table]], Any],
        tables_of: Callable[[PreparedBatch], dict[str, pa.Table]],
        *,
        max_bytes: int,
        max_spans: int,
        max_batch_spans: int = 20_000,
        on_commit: Callable[[CommitInfo], None] | None = None,
        owns_clients: bool = True,
    ) -> None:
        self.directory = directory
        self._connect = connect
        self._owns_clients = owns_clients  # False: ``connect`` lends a client owned elsewhere, never closed here
        self._insert = insert
        self._tables_of = tables_of
        self.max_bytes = max_bytes
        self.max_spans = max_spans
        self._max_batch_spans = max_batch_spans
        self._on_commit = on_commit
        self._spool = Spool(directory, _SEGMENT_BYTES)
        self._lock_fd: int | None = None
        self._client: Any = None
        self._jobs: queue.Queue[tuple[PreparedBatch, Future[CommitInfo]] | None] = queue.Queue()
        self._cond = threading.Condition()  # guards everything below
        self._pending: collections.deque[_Pending] = collections.deque()
        self._pending_bytes = 0
        self._queued_spans = 0  # submitted, not inserted yet (spooled or waiting to be)
        self._acked_seq = 0
        self._done_seq = 0
        self._flush = False
        self._stopping = False
        self._give_up_at = float("inf")
        self.unreachable_since: float | None = None
        self.set_aside_records = 0
        self._spooler = threading.Thread(target=self._spool_loop, name="taskcost-ch-spool", daemon=True)
        self._inserter = threading.Thread(target=self._insert_loop, name="taskcost-ch-insert", daemon=True)

    # -- start ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Lock the directory (StoreUnavailableError: another collector has it), queue the records a previous run
        acknowledged and did not insert, and start the threads."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreUnavailableError(
                f"another taskcost process uses the spool {self.directory}: give each collector its own --db "
                "(its path names the spool)"
            ) from None
        self._lock_fd = fd
        try:
            self._done_seq = int((self.directory / _COMMITTED).read_text().strip() or 0)
        except (OSError, ValueError):
            self._done_seq = 0
        replayed = 0
        for record in self._spool.recover(self._done_seq):
            assert record.where is not None
            self._pending.append(_Pending(record.where, record.span_count))
            self._pending_bytes += record.where.size
            self._queued_spans += record.span_count
            replayed += record.span_count
        self._acked_seq = self._spool.last_seq
        if replayed:
            log.info("replaying %d acknowledged spans from the spool %s into ClickHouse", replayed, self.directory)
        self._spooler.start()
        self._inserter.start()

    # -- intake -----------------------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._spooler.is_alive() and self._inserter.is_alive() and not self._stopping

    @property
    def queued_spans(self) -> int:
        """Spans accepted and not in ClickHouse yet."""
        return self._queued_spans

    @property
    def pending_bytes(self) -> int:
        """Bytes of acknowledged records in the spool not in ClickHouse yet (bounded by ``max_bytes``)."""
        return self._pending_bytes

    def submit(self, batch: PreparedBatch, wait_s: float = 0.0) -> Future[CommitInfo]:
        """Queue ``batch`` for the spool; its future resolves once it is fsynced there (the acknowledgement). Past
        ``max_spans`` spans or ``max_bytes`` bytes not in ClickHouse yet, wait up to ``wait_s`` for room, then
        raise StoreBusyError (nothing kept)."""
        n = batch.span_count
        if not self.alive:
            raise StoreUnavailableError("the ClickHouse store's spool is not running (see the server log)")
        future: Future[CommitInfo] = Future()
        if batch.empty:  # nothing to keep (the DuckDB writer's rule: rows without spans are not stored)
            future.set_result(CommitInfo(0, 0, 0.0))
            return future

        def room() -> bool:
            return not self._queued_spans or (
                self._queued_spans + n <= self.max_spans and self._pending_bytes < self.max_bytes
            )

        with self._cond:
            if not self._cond.wait_for(room, wait_s):
                behind = "" if self.unreachable_since is None else " (ClickHouse cannot be reached)"
                raise StoreBusyError(
                    f"the spool holds {self._queued_spans:,} spans, {self._pending_bytes / 1e6:,.1f} MB not yet in "
                    f"ClickHouse{behind}"
                )
            self._queued_spans += n
        self._jobs.put((batch, future))
        return future

    def _left(self, spans: int, size: int = 0) -> None:
        with self._cond:
            self._queued_spans -= spans
            self._pending_bytes -= size
            self._cond.notify_all()

    def _spool_loop(self) -> None:
        """Append what ``submit`` queued, fsync once per group, acknowledge; hand the records to the inserter."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            jobs = [job]
            while len(jobs) < 256:
                try:
                    nxt = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._jobs.put(None)  # seen after this group
                    break
                jobs.append(nxt)
            try:
                self._append(jobs)
            except BaseException as exc:  # never leave a request waiting on a future nobody resolves
                log.exception("the spool failed; refusing the batches it held")
                for batch, future in jobs:
                    if not future.done():
                        self._left(batch.span_count)
                        future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("spool stopped"))
                if not isinstance(exc, Exception):
                    raise

    def _append(self, jobs: list[tuple[PreparedBatch, Future[CommitInfo]]]) -> None:
        ready, payloads = [], []
        for batch, future in jobs:
            try:  # typed here: a value the columns cannot hold is refused before the acknowledgement
                streams = batch.streams
                payloads.append(encode_payload(self._tables_of(batch)) if streams is None else encode_streams(streams))
            except Exception as exc:
                log.exception("batch not writable; nothing of it was kept")
                self._left(batch.span_count)
                future.set_exception(exc)
                continue
            ready.append((batch, future))
        if not ready:
            return
        try:
            places = self._spool.append(payloads)
        except OSError as exc:
            log.exception("could not append %d batch(es) to the spool; nothing of them was kept", len(ready))
            for batch, future in ready:
                self._left(batch.span_count)
                future.set_exception(exc)
            return
        with self._cond:
            for (batch, _), where in zip(ready, places, strict=True):
                self._pending.append(_Pending(where, batch.span_count))
                self._pending_bytes += where.size
            self._acked_seq = places[-1].seq
            self._cond.notify_all()
        for batch, future in ready:
            future.set_result(CommitInfo(spans=batch.span_count, deduplicated=0, seconds=0.0))

    # -- inserting --------------------------------------------------------------------------------------------
    def _next_group(self) -> list[_Pending] | None:
        """The records to insert next, oldest first (waiting for some, and up to _LINGER_S for more); None: stop."""
        with self._cond:
            while not self._pending or self._stopping:
                if self._stopping and (not self._pending or time.monotonic() >= self._give_up_at):
                    return None
                if self._pending:
                    break
                self._cond.wait()
            linger_until = time.monotonic() + _LINGER_S
            while True:
                spans = sum(p.spans for p in self._pending)
                left = linger_until - time.monotonic()
                if self._flush or self._stopping or spans >= self._max_batch_spans or left <= 0:
                    break
                self._cond.wait(left)
            self._flush = False
            if self._pending[0].failures >= 2:  # refused twice within a group: alone, to find the one at fault
                return [self._pending[0]]
            group: list[_Pending] = []
            spans = 0
            for p in self._pending:
                if group and spans + p.spans > self._max_batch_spans:
                    break
                group.append(p)
                spans += p.spans
            return group

    def _read(self, group: list[_Pending]) -> tuple[list[_Pending], dict[str, pa.Table]]:
        """The group's tables read back from the spool (a record that cannot be read back is kept aside as it is)."""
        parts: dict[str, list[pa.Table]] = {}
        readable = []
        for p in group:
            try:
                tables = read_at(p.where).tables
            except (OSError, ValueError):
                log.exception("spool record %d cannot be read back; keeping its bytes aside", p.where.seq)
                with contextlib.suppress(OSError):
                    set_aside_raw(self.directory, p.where)
                self._done([p], None)
                continue
            readable.append(p)
            for name, tbl in tables.items():
                parts.setdefault(name, []).append(tbl)
        merged = {name: pa.concat_tables(tbls, promote_options="permissive") for name, tbls in parts.items()}
        return readable, merged

    def _insert_loop(self) -> None:
        while True:
            group = self._next_group()
            if group is None:
                return
            try:
                readable, tables = self._read(group)
            except Exception:  # tables that do not concatenate: one at a time from now on
                log.exception("spool records %d-%d do not go together", group[0].where.seq, group[-1].where.seq)
                group[0].failures = max(group[0].failures, 2)
                continue
            if not readable:
                continue
            started = time.perf_counter()
            try:
                if self._client is None:
                    self._client = self._connect()
                done = self._insert(self._client, tables)
            except Exception as exc:
                self._failed(readable, exc)
                continue
            if self.unreachable_since is not None:
                log.info("ClickHouse is reachable again; inserting the spool's backlog (%d spans)", self._queued_spans)
                self.unreachable_since = None
            info = CommitInfo(spans=done.spans, deduplicated=done.deduplicated, seconds=time.perf_counter() - started)
            self._done(readable, info)

    def _failed(self, group: list[_Pending], exc: Exception) -> None:
        """An insert failed: wait (backoff) and try again; a record refused too often is kept aside."""
        if self._owns_clients and self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._client = None  # reconnect for the next try
        first = group[0]
        if _unreachable(exc):
            if self.unreachable_since is None:
                with self._cond:  # a read waiting for the backlog goes on now (caught_up)
                    self.unreachable_since = time.monotonic()
                    self._cond.notify_all()
                log.warning(
                    "ClickHouse cannot be reached (%s); intake goes on into the spool %s (up to %.1f MB)",
                    str(exc).split("\n", 1)[0][:300],
                    self.directory,
                    self.max_bytes / 1e6,
                )
            waited = time.monotonic() - self.unreachable_since
            pause = min(_BACKOFF_S[1], max(_BACKOFF_S[0], waited / 2))
        else:
            first.failures += 1
            log.error("ClickHouse refused spool records from %d (try %d): %s", first.where.seq, first.failures, exc)
            if len(group) == 1 and first.failures >= _SET_ASIDE_AFTER:
                try:
                    kept = set_aside(self.directory, first.where.seq, read_at(first.where).tables)
                except (OSError, ValueError):
                    kept = set_aside_raw(self.directory, first.where)
                self.set_aside_records += 1
                log.error("spool record %d (%d spans) not insertable; kept in %s", first.where.seq, first.spans, kept)
                self._done([first], None)
                return
            pause = min(_BACKOFF_S[1], _BACKOFF_S[0] * 2 ** (first.failures - 1))
        with self._cond:
            if self._stopping and self.unreachable_since is not None:  # closing: what is left stays spooled
                self._give_up_at = 0.0
            if self._stopping and time.monotonic() >= self._give_up_at:
                return
            self._cond.wait_for(lambda: self._stopping and time.monotonic() >= self._give_up_at, pause)

    def _done(self, group: list[_Pending], info: CommitInfo | None) -> None:
        """The group is in ClickHouse (or kept aside): forget it, note how far the spool is inserted, free room."""
        if info is not None and self._on_commit is not None and (info.spans or info.deduplicated):
            with contextlib.suppress(Exception):  # counted before a waiting read goes on
                self._on_commit(info)
        with self._cond:
            for p in group:
                self._pending.remove(p)
            seq = self._pending[0].where.seq - 1 if self._pending else self._acked_seq
            self._done_seq = max(self._done_seq, seq)
            self._queued_spans -= sum(p.spans for p in group)
            self._pending_bytes -= sum(p.where.size for p in group)
            self._cond.notify_all()
            done_seq = self._done_seq
        try:
            marker = self.directory / _COMMITTED
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(str(done_seq))
            os.replace(tmp, marker)
        except OSError:  # a stale marker only replays inserted records again (found stored, not counted twice)
            log.exception("could not note the spool's progress in %s", self.directory)
        self._spool.release(done_seq)

    # -- reads, stop ------------------------------------------------------------------------------------------
    def caught_up(self, timeout_s: float | None) -> bool:
        """Wait until what was acknowledged before this call is in ClickHouse (at most ``timeout_s``); False when
        it is not (a backlog longer than that; at once while ClickHouse cannot be reached: the read goes on with what
        it has, nothing would arrive meanwhile)."""
        with self._cond:
            target = self._acked_seq
            if self._done_seq >= target:
                return True
            if self.unreachable_since is not None:
                return False
            self._flush = True
            self._cond.notify_all()
            self._cond.wait_for(
                lambda: self._done_seq >= target or self.unreachable_since is not None or not self._inserter.is_alive(),
                timeout_s,
            )
            return self._done_seq >= target

    def close(self, timeout_s: float = 10.0) -> None:
        """Acknowledge what was submitted, insert what is pending for up to ``timeout_s`` (ClickHouse unreachable:
        not at all: it stays in the spool, inserted at the next start), then stop and unlock."""
        if self._lock_fd is None:
            return
        if self._spooler.is_alive():
            self._jobs.put(None)
            self._spooler.join()
        with self._cond:
            self._stopping = True
            # ClickHouse unreachable now: no wait (what is left stays spooled, inserted at the next start)
            self._give_up_at = time.monotonic() + (timeout_s if self.unreachable_since is None else 0.0)
            self._flush = True
            self._cond.notify_all()
        started = self._inserter.ident is not None  # (not when ``start`` failed half way)
        if started:
            self._inserter.join(timeout_s + 1.0)
        with self._cond:
            left, spans = len(self._pending), self._queued_spans
            self._stopping = True
            self._give_up_at = 0.0
            self._cond.notify_all()
        if started:
            self._inserter.join()
        if self._owns_clients and self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        if left:
            log.warning(
                "%d spool record(s) (%d spans) not in ClickHouse yet: kept in %s, inserted at the next start",
                left,
                spans,
                self.directory,
            )
        self._spool.close_file()
        self._spool.release(self._done_seq)
        os.close(self._lock_fd)
        self._lock_fd = None
