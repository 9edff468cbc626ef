"""How the DuckDB store reopens itself after a fatal engine error, and replays what its writer set aside.

DuckDB invalidates a database instance after an internal error of one statement (taskcost/store/_engine.py): every
later statement of every connection fails until the instance is closed and opened again. The store does that by
itself, in the background: the writer stops without committing (what the spool acknowledged stays there, and the next
writer replays it), running queries are interrupted, every connection is closed, the file is opened again with the
same options and a new writer starts. Meanwhile queries and intake are refused as unavailable (503 with Retry-After:
a client retries); nothing acknowledged is lost or set aside for it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from taskcost.store import _keys
from taskcost.store._base import CommitInfo, StoreUnavailableError
from taskcost.store._engine import EngineOptions, connect, engine_message, harden
from taskcost.store._rows import PreparedBatch
from taskcost.store._spool import read_set_aside, set_aside_files, spool_dir

if TYPE_CHECKING:
    from taskcost.store._sandbox import Sandbox
    from taskcost.store._watchdog import QueryWatchdog
    from taskcost.store._writer import Writer

__all__ = ["Healing"]

log = logging.getLogger("taskcost.store")


class Healing:
    """The reopening part of DuckDBStore (a mixin: it works on the store's connection, writer and watchdog)."""

    path: Path
    read_only: bool
    heals: int
    _con: duckdb.DuckDBPyConnection
    _engine: EngineOptions
    _writer: Writer | None
    _sandbox: Sandbox
    _watchdog: QueryWatchdog
    _heal_lock: threading.Lock
    _healing: threading.Thread | None
    _healer: threading.Thread
    _heal_wanted: threading.Event
    _closing: bool
    _spool: bool
    _active_keys: dict[str, _keys.ApiKey]

    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        raise NotImplementedError

    def write(self, batch: PreparedBatch, timeout: float | None = 30.0) -> CommitInfo:
        raise NotImplementedError

    def _heal_soon(self, exc: BaseException, con: duckdb.DuckDBPyConnection | None = None) -> None:
        """After a fatal engine error on ``con``, reopen the database in the background (once for that failure):
        meanwhile queries and intake are refused as unavailable (503, retry), nothing acknowledged is lost."""
        with self._heal_lock:
            if self._closing or self._healing is not None or (con is not None and con is not self._con):
                return
            log.error("the database engine failed (%s); reopening %s", engine_message(exc), self.path)
            self._healing = self._healer
            self._heal_wanted.set()

    def _start_healer(self) -> None:
        """The thread that reopens the database, started with the store: a thread started when memory is short
        (the moment an engine failure is likely) can fail to start, and then ``Thread.start`` never returns."""
        self._heal_wanted = threading.Event()
        self._healer = threading.Thread(target=self._heal_loop, name="taskcost-reopen", daemon=True)
        self._healer.start()

    def _heal_loop(self) -> None:
        while True:
            self._heal_wanted.wait()
            self._heal_wanted.clear()
            if self._closing:
                return
            self._heal()

    def _stop_healer(self) -> None:
        """Wait for a reopening under way (it gives up once ``_closing`` is set), then end the healer thread."""
        while self._healing is not None:
            time.sleep(0.01)
        self._heal_wanted.set()
        self._healer.join()

    def _heal(self) -> None:
        """Close every connection to the failed instance, open the file again, and start a writer on it, which
        replays what the spool acknowledged and the failed one had not committed; then what was set aside."""
        try:
            if self._writer is not None:
                self._writer.abandon()
            self._watchdog.interrupt_all("reopen")
            self._watchdog.wait_idle(30.0)
            self._sandbox.close_idle()
            with contextlib.suppress(duckdb.Error):
                self._con.close()
            delay = 0.05
            while True:
                try:
                    con = connect(self.path, self.read_only, self._engine)
                except StoreUnavailableError as exc:
                    log.warning("reopening %s: %s", self.path, exc)
                else:
                    try:  # a cursor of the failed instance still open somewhere hands back that instance: wait for it
                        con.execute("SELECT 1").fetchall()
                        harden(con)
                        break
                    except duckdb.Error as exc:
                        con.close()
                        log.warning("reopening %s: %s", self.path, engine_message(exc))
                if self._closing:
                    return
                time.sleep(delay)
                delay = min(2 * delay, 2.0)
            self._attach(con)
            if self._writer is not None:
                self._active_keys = _keys.load_active(con)
                self._writer.start(self._spool)
            self.heals += 1
            log.warning("reopened %s after a failure of the database engine", self.path)
        except Exception:
            log.exception("could not reopen %s; restart the server", self.path)
            return
        finally:
            with self._heal_lock:
                self._healing = None
        self.replay_set_aside_in_background()

    def replay_set_aside_in_background(self) -> threading.Thread | None:
        """Commit again, on a thread of its own, what the writer set aside (``retry_set_aside``), logging each (None:
        nothing was set aside)."""
        if self.read_only or not set_aside_files(spool_dir(self.path)):
            return None

        def run() -> None:
            for path, outcome in self.retry_set_aside():
                if isinstance(outcome, Exception):
                    log.error("set-aside record %s still not committable, kept: %s", path.name, outcome)
                else:
                    log.warning("set-aside record %s committed (%d spans)", path.name, outcome.spans)

        thread = threading.Thread(target=run, name="taskcost-set-aside", daemon=True)
        thread.start()
        return thread

    def retry_set_aside(self) -> Iterator[tuple[Path, CommitInfo | Exception]]:
        """Commit again, one at a time, the intake records the writer set aside beside the spool (``*.rejected``:
        acknowledged batches it could not commit after three tries), once what refused them is mended. A record
        committed is removed; one that fails again is kept as it is. Yields each file with its commit, or with the
        error that kept it."""
        for path in set_aside_files(spool_dir(self.path)):
            try:
                record = read_set_aside(path)
                batch = PreparedBatch(columns={}, span_count=record.span_count, tables=record.tables)
                info = self.write(batch, timeout=None)  # its outcome, however long: a timeout would not stop it
            except Exception as exc:  # kept as it is, and said: the caller reports it
                yield path, exc
                continue
            path.unlink()
            yield path, info
