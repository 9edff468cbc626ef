"""User SQL gets its own bounded pool: at most ``concurrent`` queries run at once and ``queued`` more wait; beyond
that a query is refused at once (429 with Retry-After), so slow queries never hold the threads that health checks,
readiness, metrics, intake or key checks need.

The slots are shared fairly between projects (the caller's project: a read key's; the admin token and callers of a
server without keys count as one more, ``None``). One project runs at most ``concurrent - 1`` queries at once (at
least 1) and holds at most half of the waiting places (``queued // 2``), so another project's query always finds
a place, and a slot when one is free; a slot that frees goes to the waiting query of the project with the fewest
running, then of the one served longest ago (round robin), then the earliest. One project's slow queries cannot turn
every other project away."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from taskcost.store import StoreBusyError

__all__ = ["QueryGate", "QueryGateFull"]

T = TypeVar("T")
Owner = str | None  # the caller's project; None: the admin token, or a server without keys


class QueryGateFull(StoreBusyError):
    """Every query slot and queue place is taken, or the caller's project holds its share of them."""


class QueryGate:
    def __init__(self, concurrent: int, queued: int) -> None:
        self.concurrent = concurrent
        self.limit = concurrent + queued
        self.project_running = max(1, concurrent - 1)  # a project's share of the slots
        self.project_queued = queued // 2  # and of the waiting places
        self._cond = threading.Condition()
        self._admitted: Counter[Owner] = Counter()  # running or waiting, by project
        self._running: Counter[Owner] = Counter()
        self._served: dict[Owner, int] = {}  # when each project last got a slot (a count of slots given)
        self._given = itertools.count()
        self._waiting: dict[int, Owner] = {}  # ticket -> project, in arrival order
        self._tickets = itertools.count()
        self._executor: ThreadPoolExecutor | None = None
        self.on_refused: Callable[[], None] | None = None

    def _refuse(self, message: str) -> QueryGateFull:
        if self.on_refused is not None:
            self.on_refused()
        return QueryGateFull(message + "; try again shortly")

    def _admit(self, owner: Owner) -> None:
        with self._cond:
            if self._admitted.total() >= self.limit:
                raise self._refuse(
                    f"too many SQL queries at once ({self.concurrent} run, {self.limit - self.concurrent} wait)"
                )
            if self._admitted[owner] >= self.project_running + self.project_queued:
                raise self._refuse(
                    f"too many SQL queries at once from one project ({self.project_running} may run and "
                    f"{self.project_queued} wait; the other places are kept for other projects)"
                )
            self._admitted[owner] += 1

    def _leave(self, owner: Owner) -> None:
        self._admitted[owner] -= 1
        if not self._admitted[owner]:  # no project stays in the counters once it has nothing here
            del self._admitted[owner]
            self._running.pop(owner, None)
            self._served.pop(owner, None)

    def _next(self) -> int | None:
        """The ticket that gets the next free slot: of the projects below their share, the one with the fewest
        running, then the one served longest ago, then the earliest ticket."""
        best: tuple[int, int, int] | None = None
        for ticket, owner in self._waiting.items():
            running = self._running[owner]
            rank = (running, self._served.get(owner, -1), ticket)
            if running < self.project_running and (best is None or rank < best):
                best = rank
        return None if best is None else best[2]

    def _run_admitted(self, owner: Owner, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        ticket = next(self._tickets)
        started = False
        try:
            with self._cond:
                self._waiting[ticket] = owner
                try:
                    while self._running.total() >= self.concurrent or self._next() != ticket:
                        self._cond.wait()
                finally:
                    del self._waiting[ticket]
                self._running[owner] += 1
                self._served[owner] = next(self._given)
                started = True
                self._cond.notify_all()  # another slot may be free for another project
            return fn(*args, **kwargs)
        finally:
            with self._cond:
                if started:
                    self._running[owner] -= 1
                self._leave(owner)
                self._cond.notify_all()

    def run(self, owner: Owner, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` for ``owner`` (the caller's project) in the calling thread once a slot is free (a caller with
        threads of its own: the dashboards)."""
        self._admit(owner)
        return self._run_admitted(owner, fn, *args, **kwargs)

    async def run_async(self, owner: Owner, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` for ``owner`` (the caller's project) on the gate's own threads; refused before any thread is
        taken when the gate, or the project's share of it, is full."""
        self._admit(owner)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.limit, thread_name_prefix="taskcost-sql")
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, partial(self._run_admitted, owner, fn, *args, **kwargs))
        except BaseException:
            with self._cond:
                self._leave(owner)
            raise
        return await future

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
