"""The SDK's clock and id source, swappable as a whole for deterministic tests (``taskcost_sdk.testing``).

Every span the SDK starts or ends takes its timestamp from :func:`now_ns`; every task and call id comes
from :func:`new_id`.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable

__all__ = ["FakeClock", "new_id", "now_ns", "sequential_ids", "use"]


_now: Callable[[], int] = time.time_ns
_new_id: Callable[[], str] = lambda: os.urandom(16).hex()  # noqa: E731 - fork-safe, cheaper than uuid4


def now_ns() -> int:
    """Wall-clock time in epoch nanoseconds."""
    return _now()


def new_id() -> str:
    """A random 32-hex-digit id."""
    return _new_id()


class FakeClock:
    """A deterministic clock: starts at ``start_ns`` and moves ``step_ns`` forward on every reading."""

    def __init__(self, start_ns: int = 1_735_689_600_000_000_000, step_ns: int = 1_000_000) -> None:
        self._now = start_ns
        self._step = step_ns
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            now = self._now
            self._now += self._step
            return now

    def advance(self, seconds: float) -> None:
        """Move the clock forward, e.g. to simulate a slow call."""
        with self._lock:
            self._now += round(seconds * 1e9)


def sequential_ids(prefix: int = 0) -> Callable[[], str]:
    """Ids ``000...001``, ``000...002``, ... (32 hex digits each)."""
    counter = itertools.count(1)
    lock = threading.Lock()

    def next_id() -> str:
        with lock:
            return f"{prefix:016x}{next(counter):016x}"

    return next_id


def use(clock: Callable[[], int] | None = None, ids: Callable[[], str] | None = None) -> None:
    """Install a clock and an id source (None: the real ones)."""
    global _now, _new_id
    _now = clock if clock is not None else time.time_ns
    _new_id = ids if ids is not None else (lambda: os.urandom(16).hex())
