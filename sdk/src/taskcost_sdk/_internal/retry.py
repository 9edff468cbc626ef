"""Agent-level retries: ``with t.retry(reason="invalid_json"):`` makes the LLM calls inside it further
attempts of an earlier call (same ``taskcost.call.id``, attempt numbers continuing)."""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from .guard import guarded

__all__ = ["CallRef", "RetryScope", "current_retry_scope"]


@dataclass(frozen=True, slots=True)
class CallRef:
    """A reference to one attempt of a logical LLM call: what ``retry_of=`` and ``t.retry(of=...)`` take."""

    call_id: str
    attempt: int


class AttemptLedger(Protocol):
    """Who knows the highest attempt number used so far per call id (a task)."""

    def _max_attempt(self, call_id: str) -> int: ...


_retry_scope: ContextVar[RetryScope | None] = ContextVar("taskcost_sdk_retry_scope", default=None)


def current_retry_scope() -> RetryScope | None:
    return _retry_scope.get()


class RetryScope:
    """Calls made inside the block are retries of ``call_id``. Re-entrant per context, thread-safe."""

    def __init__(
        self, call_id: str | None, last_attempt: int, reason: str | None, ledger: AttemptLedger | None
    ) -> None:
        self._call_id = call_id
        self._last = last_attempt
        self._reason = reason
        self._ledger = ledger
        self._lock = threading.Lock()
        self._token: Token[RetryScope | None] | None = None

    @property
    def call_id(self) -> str | None:
        """The call being retried (None: there was no earlier call; calls inside are new calls)."""
        return self._call_id

    @property
    def reason(self) -> str | None:
        return self._reason

    def next_attempt(self) -> tuple[str, int] | None:
        """(call id, attempt number) for the next attempt made in this scope; None without a call to retry."""
        if self._call_id is None:
            return None
        with self._lock:
            known = self._ledger._max_attempt(self._call_id) if self._ledger is not None else 0
            self._last = max(self._last, known) + 1
            return self._call_id, self._last

    def __enter__(self) -> Self:
        with guarded("retry start"):
            self._token = _retry_scope.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token, self._token = self._token, None
        if token is not None:
            with guarded("retry end"):
                _retry_scope.reset(token)

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)
