"""The scopes spans open: the base of every ``with``/``async with`` span (task, LLM call, tool call) and the context
variables that say which task and call are current. Below spans.py and tools.py, which both build on it."""

from __future__ import annotations

from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from . import names as n
from .clock import now_ns
from .guard import guarded, warn_once

if TYPE_CHECKING:
    from .spans import LLMCall, Task

__all__ = ["CURRENT_CALL", "CURRENT_TASK", "SpanScope", "TaskScope"]

CURRENT_TASK: ContextVar[Task | None] = ContextVar("taskcost_sdk_current_task", default=None)
CURRENT_CALL: ContextVar[LLMCall | None] = ContextVar("taskcost_sdk_current_call", default=None)


class SpanScope:
    """A span opened by ``with``/``async with`` and made current for the block."""

    _where = "span"

    def __init__(self) -> None:
        self._span: Span = trace.INVALID_SPAN
        self._context_token: Token[otel_context.Context] | None = None
        self._error_type: str | None = None

    @property
    def span(self) -> Span:
        """The underlying OpenTelemetry span (a non-recording span when not configured)."""
        return self._span

    def _start_span(self, start_time: int | None = None) -> None:
        raise NotImplementedError

    def _on_exit(self, exc: BaseException | None) -> None:
        if exc is not None:
            self._mark_exception(exc)

    # Guards are stateless: one per site and class, made once (they sit on the hot path of every span).
    _guard_start = _guard_end = _guard_detach = guarded("span")

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._guard_start = guarded(f"{cls._where} start")
        cls._guard_end = guarded(f"{cls._where} end")
        cls._guard_detach = guarded(f"{cls._where} detach")

    def _enter(self) -> None:
        with self._guard_start:
            self._start_span(now_ns())
            self._context_token = otel_context.attach(trace.set_span_in_context(self._span))

    def _exit(self, exc: BaseException | None, end_time: int | None = None) -> None:
        with self._guard_end:
            self._on_exit(exc)
        with self._guard_end:
            self._span.end(end_time=end_time if end_time is not None else now_ns())
        token, self._context_token = self._context_token, None
        if token is not None:
            with self._guard_detach:
                otel_context.detach(token)

    def _mark_exception(self, exc: BaseException) -> None:
        error_type = self._error_type or type(exc).__name__
        self._span.set_attribute(n.ERROR_TYPE, error_type)
        self._span.record_exception(exc, escaped=True)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def _set_error(self, error_type: str | BaseException) -> None:
        with guarded(f"{self._where}.set_error"):
            text = type(error_type).__name__ if isinstance(error_type, BaseException) else str(error_type).strip()
            if not text:
                warn_once(("error_type", self._where), "taskcost_sdk: ignored an empty error type")
                return
            self._error_type = text
            self._span.set_attribute(n.ERROR_TYPE, text)
            self._span.set_status(Status(StatusCode.ERROR, text))

    def __enter__(self) -> Self:
        self._enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit(exc)

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


class TaskScope(SpanScope):
    """What a tool call needs of its task (``spans.Task`` is the one implementation)."""

    @property
    def id(self) -> str:
        raise NotImplementedError

    def _parent_context(self) -> Any:
        raise NotImplementedError
