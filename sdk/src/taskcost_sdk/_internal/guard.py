"""The SDK never raises into user code: internal errors are logged once and become no-ops.

Exception: with ``TASKCOST_SDK_RAISE_INTERNAL=1`` (set by this project's own test suite) internal errors
are re-raised, so our tests see SDK bugs. Users' test runs never turn it on by accident.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Hashable

logger = logging.getLogger("taskcost_sdk")

_seen: set[Hashable] = set()
_seen_lock = threading.Lock()


def raise_internal_errors() -> bool:
    """True when internal errors must propagate (this project's own tests set the variable)."""
    return os.environ.get("TASKCOST_SDK_RAISE_INTERNAL") == "1"


def first_time(key: Hashable) -> bool:
    """True the first time ``key`` is seen in this process (until reset_once())."""
    with _seen_lock:
        if key in _seen:
            return False
        _seen.add(key)
        return True


def reset_once() -> None:
    with _seen_lock:
        _seen.clear()


def warn_once(key: Hashable, msg: str, *args: object) -> None:
    """Log a warning about bad user input, once per key."""
    if first_time(("warn", key)):
        logger.warning(msg + " (further warnings of this kind are suppressed)", *args)


def internal_error(where: str, exc: Exception) -> None:
    """Handle an SDK-internal exception: re-raise when TASKCOST_SDK_RAISE_INTERNAL=1 (this project's tests), else log
    it once per site and type."""
    if raise_internal_errors():
        raise exc
    if first_time(("error", where, type(exc).__name__)):
        logger.warning(
            "taskcost_sdk internal error in %s; the operation was skipped (logged once per site)",
            where,
            exc_info=exc,
        )


class guarded:  # noqa: N801 - used like a function: ``with guarded("where"):``
    """Run SDK-internal code; an exception in it is handed to internal_error(). Never wrap user code.

    A class rather than a ``@contextmanager`` generator: it sits on the hot path of every recorded call.
    """

    __slots__ = ("_where",)

    def __init__(self, where: str) -> None:
        self._where = where

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        internal_error(self._where, exc)
        return True
