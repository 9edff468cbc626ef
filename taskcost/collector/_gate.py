"""User SQL gets its own bounded pool: at most ``concurrent`` queries run at once and ``queued`` more wait; beyond
that a query is refused at once (429 with Retry-After), so slow queries never hold the threads that health checks,
readiness, metrics, intake or key checks need."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from taskcost.store import StoreBusyError

__all__ = ["QueryGate", "QueryGateFull"]

T = TypeVar("T")


class QueryGateFull(StoreBusyError):
    """Every query slot and queue place is taken."""


class QueryGate:
    def __init__(self, concurrent: int, queued: int) -> None:
        self.concurrent = concurrent
        self.limit = concurrent + queued
        self._slots = threading.BoundedSemaphore(concurrent)
        self._lock = threading.Lock()
        self._admitted = 0
        self._executor: ThreadPoolExecutor | None = None
        self.on_refused: Callable[[], None] | None = None

    def _admit(self) -> None:
        with self._lock:
            if self._admitted >= self.limit:
                if self.on_refused is not None:
                    self.on_refused()
                raise QueryGateFull(
                    f"too many SQL queries at once ({self.concurrent} run, {self.limit - self.concurrent} wait); "
                    "try again shortly"
                )
            self._admitted += 1

    def _leave(self) -> None:
        with self._lock:
            self._admitted -= 1

    def _run_admitted(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            with self._slots:
                return fn(*args, **kwargs)
        finally:
            self._leave()

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` in the calling thread once a slot is free (a caller with threads of its own: the dashboards)."""
        self._admit()
        return self._run_admitted(fn, *args, **kwargs)

    async def run_async(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the gate's own threads; refused before any thread is taken when the gate is full."""
        self._admit()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.limit, thread_name_prefix="taskcost-sql")
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, partial(self._run_admitted, fn, *args, **kwargs))
        except BaseException:
            self._leave()
            raise
        return await future

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
