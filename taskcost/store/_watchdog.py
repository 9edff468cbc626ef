"""The bound on what user queries take, enforced from outside the query: one watchdog thread that interrupts them.

DuckDB bounds the working memory it can spill (``memory_limit``), but not the strings and lists of the vectors it
computes, the binder's expansion of a query, or time. So every user query (SQL API, analytics, dashboards: all go
through ``DuckDBStore._sandboxed``) is registered here while it runs, and one thread, awake only while a query runs,
samples the serving process's resident memory (``/proc/self/statm``, a few microseconds) every ``interval_s``:

- past a query's deadline, that query is interrupted (DuckDB's own interrupt: the query fails, the database is fine);
- past ``rss_limit_bytes`` of the whole process, every running user query is interrupted: memory cannot be told
  apart per query inside one process, and any of them may be the one growing. The server's own work (intake, the
  writer, health checks) is never interrupted.

What an interrupt cannot stop (one allocation larger than what is left, inside one function call) is stopped by the
operating system's limit on the process's data memory (``taskcost/_internal/limits.py``): the allocation fails and
DuckDB answers the query with an out-of-memory error. docs/security.md has the figures.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["QueryWatchdog", "Watched", "process_rss_bytes"]

# While the process is past the limit, a query is interrupted only if the process grew by this much since it began:
# memory freed by interrupted queries is not always returned to the operating system at once, and a query that
# only reads must not fail because of what another one left behind.
_GRACE_BYTES = 128 * 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_rss_bytes() -> int:
    """This process's resident set size (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class _Interruptible(Protocol):
    def interrupt(self) -> None: ...


@dataclass(eq=False)
class Watched:
    """One running query: why it was interrupted, if it was (``"time"`` or ``"memory"``)."""

    cursor: _Interruptible
    deadline: float
    start_rss: int = 0
    reason: str | None = None
    rss_at_interrupt: int = 0
    _id: int = field(default=0, repr=False)

    def interrupt(self, reason: str, rss: int = 0) -> None:
        if self.reason is None:
            self.reason, self.rss_at_interrupt = reason, rss
            with contextlib.suppress(Exception):  # a cursor closed meanwhile: the query has ended anyway
                self.cursor.interrupt()


class QueryWatchdog:
    """Interrupts registered queries past their deadline, or all of them while the process's RSS is past
    ``rss_limit_bytes`` (None: no memory bound, time only)."""

    def __init__(self, rss_limit_bytes: int | None, interval_s: float = 0.01) -> None:
        self.rss_limit_bytes = rss_limit_bytes
        self.interval_s = interval_s
        self._running: dict[int, Watched] = {}
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._closed = False
        # started now, not on the first query: a thread started when memory is short can fail to start, and then
        # Thread.start never returns
        self._thread = threading.Thread(target=self._loop, name="taskcost-query-watchdog", daemon=True)
        self._thread.start()

    def watch(self, cursor: _Interruptible, timeout_s: float) -> Watched:
        """Register a query that starts now; ``done`` it when it ends (however it ends)."""
        rss = process_rss_bytes() if self.rss_limit_bytes is not None else 0
        w = Watched(cursor, time.monotonic() + timeout_s, rss, _id=next(self._ids))
        with self._cond:
            self._running[w._id] = w
            self._cond.notify()
        return w

    def done(self, w: Watched) -> None:
        with self._cond:
            self._running.pop(w._id, None)
            self._cond.notify_all()

    def interrupt_all(self, reason: str) -> int:
        """Interrupt every running query (the store is closing or reopening). Returns how many."""
        with self._cond:
            for w in self._running.values():
                w.interrupt(reason)
            return len(self._running)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no query runs (True) or ``timeout_s`` passed (False)."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self._running:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            rss = process_rss_bytes() if self.rss_limit_bytes is not None else 0
            now = time.monotonic()
            with self._cond:  # decided and interrupted under the lock: a query that is done is never interrupted
                while not self._running and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                limit = self.rss_limit_bytes
                for w in self._running.values():
                    if w.reason is not None:  # again: DuckDB drops an interrupt that comes between two fetches
                        with contextlib.suppress(Exception):
                            w.cursor.interrupt()
                        continue
                    if now >= w.deadline:
                        w.interrupt("time")
                    # a query that started above the limit (memory its predecessors freed and the allocator keeps)
                    # is interrupted once the process grew by _GRACE_BYTES beyond where it started
                    elif limit is not None and rss > max(limit, w.start_rss + _GRACE_BYTES):
                        w.interrupt("memory", rss)
            time.sleep(self.interval_s)
