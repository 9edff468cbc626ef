"""One auto-instrumented client call (``client.chat.completions.create(...)`` and friends).

Every HTTP attempt the client library makes (its own retries included) is one ``chat {model}`` span with
the call's ``taskcost.call.id`` and its attempt number; a failed attempt carries its HTTP status. The
answer (usage, model, finish reasons, TTFT of a stream) lands on the attempt that succeeded. Inside a
``with llm_call(...)`` block the call is recorded into that block's span instead of a new one (so one
provider call is never costed twice), and inside ``with retry(...)`` it continues the retried call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from . import names as n
from .clock import new_id, now_ns
from .config import INSTRUMENTATION_NAME, profiles
from .fingerprint import PromptBlocks, prompt_attributes
from .guard import guarded
from .retry import current_retry_scope
from .spans import LLMCall, current_call, current_task
from .usage import (
    CONTENT,
    HIDE,
    Answer,
    AnthropicStream,
    ChatStream,
    ResponsesStream,
    anthropic_message,
    openai_chat,
    openai_responses,
)

__all__ = [
    "ANTHROPIC_MESSAGES",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "Api",
    "AutoCall",
    "active_call",
    "stream_usage_options",
]

ANTHROPIC_SCOPE = "com.anthropic.sdk.python"
_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_W3C = TraceContextTextMapPropagator()

_active: ContextVar[AutoCall | None] = ContextVar("taskcost_sdk_auto_call", default=None)


def active_call() -> AutoCall | None:
    return _active.get()


@dataclass(frozen=True, slots=True)
class Api:
    name: str
    blocks: Callable[[Mapping[str, Any]], PromptBlocks]
    answer: Callable[[Any], Answer]
    stream: Callable[[bool], ChatStream | ResponsesStream | AnthropicStream]


OPENAI_CHAT = Api("chat.completions", PromptBlocks.from_openai_chat, openai_chat, ChatStream)
OPENAI_RESPONSES = Api(
    "responses", PromptBlocks.from_openai_responses, openai_responses, lambda hide: ResponsesStream()
)
ANTHROPIC_MESSAGES = Api("messages", PromptBlocks.from_anthropic, anthropic_message, lambda hide: AnthropicStream())


class _Attempt:
    __slots__ = ("start", "end", "status", "error", "resend", "first_chunk", "span_call")

    def __init__(self, resend: int) -> None:
        self.start = now_ns()
        self.end: int | None = None
        self.status: int | None = None
        self.error: str | None = None
        self.resend = resend
        self.first_chunk: int | None = None
        self.span_call: LLMCall | None = None  # the live span (not used inside an llm_call block)


class AutoCall:
    """State of one client call across its HTTP attempts; created by the client hooks."""

    def __init__(
        self,
        api: Api,
        provider: str,
        model: str,
        base_url: str,
        body: Mapping[str, Any] | None,
        *,
        stream: bool,
        hide_usage: bool,
        fingerprint: bool,
        per_attempt: bool = True,
    ) -> None:
        self.api = api
        self.per_attempt = per_attempt  # False: the client has no attempt hook; one span per call
        self.hide_usage = hide_usage
        self.stream = stream
        self.start = now_ns()
        self.parent = otel_context.get_current()
        self.task = current_task()
        open_block = current_call()
        self.adopted = open_block if open_block is not None and open_block._claim() else None
        profile_provider, endpoint = profiles().lookup(base_url)
        self.provider = profile_provider or provider
        self.model = model
        attributes: dict[str, AttributeValue] = dict(endpoint)
        if stream:
            attributes[n.GEN_AI_REQUEST_STREAM] = True
        self.scope = current_retry_scope()
        if self.scope is not None and self.scope.reason:
            attributes[n.CALL_RETRY_REASON] = self.scope.reason
        if fingerprint and body is not None:
            with guarded("prompt fingerprint"):
                attributes.update(prompt_attributes(api.blocks(body), self.task, (self.provider, model, api.name)))
        self.attributes = attributes
        self._reserved: int | None
        if self.adopted is not None:
            self.call_id, self._reserved = self.adopted.call_id, self.adopted.attempt
            self.adopted._set_attributes(attributes)
        else:
            reserved = self.scope.next_attempt() if self.scope is not None else None
            self.call_id, self._reserved = reserved if reserved is not None else (new_id(), 1)
        self._last = self._reserved - 1
        self.sent = 0
        self.current: _Attempt | None = None
        self.pending: _Attempt | None = None  # a failed attempt inside an llm_call block, not yet emitted
        self._done = False
        self.mark_duplicate(trace.get_current_span())

    # -- attempts ---------------------------------------------------------------------------------

    def _take_number(self) -> int:
        if self._reserved is not None:
            number, self._reserved = self._reserved, None
        elif self.scope is not None and (reserved := self.scope.next_attempt()) is not None:
            number = reserved[1]
        else:
            number = self._last + 1
        self._last = number
        return number

    def _new_span(self, attempt: _Attempt, number: int, parent: otel_context.Context) -> LLMCall:
        attributes = self.attributes
        if attempt.resend:
            attributes = {**attributes, n.HTTP_REQUEST_RESEND_COUNT: attempt.resend}
        call = LLMCall(
            self.provider,
            self.model,
            call_id=self.call_id,
            attempt=number,
            task=self.task,
            parent=parent,
            attributes=attributes,
        )
        call._start_span(attempt.start)
        return call

    def begin_attempt(self) -> _Attempt:
        if self.current is not None:  # the previous attempt ended without us seeing how
            self._failed(self.current, "unknown", None)
        attempt = _Attempt(self.sent)
        self.sent += 1
        if self.adopted is not None:
            if self.pending is not None:
                self._emit(self.pending)
                self.pending = None
        else:
            attempt.span_call = self._new_span(attempt, self._take_number(), self.parent)
        self.current = attempt
        if self.sent == 1:
            self.mark_duplicate(trace.get_current_span())  # e.g. the anthropic client's own span
        return attempt

    def inject(self, carrier: MutableMapping[str, str], attempt: _Attempt) -> None:
        """W3C ``traceparent`` for the HTTP request, so an engine's own server spans join the task's trace."""
        if any(key.lower() == "traceparent" for key in carrier):
            return
        target = attempt.span_call if attempt.span_call is not None else self.adopted
        if target is not None and target.span.get_span_context().is_valid:
            _W3C.inject(carrier, context=trace.set_span_in_context(target.span))

    def attempt_response(self, attempt: _Attempt, status: int) -> None:
        attempt.status = status
        if status >= 400:
            self._failed(attempt, str(status), status)

    def attempt_error(self, attempt: _Attempt, exc: BaseException) -> None:
        self._failed(attempt, _error_name(exc), None)

    def _failed(self, attempt: _Attempt, error: str, status: int | None) -> None:
        attempt.error, attempt.status, attempt.end = error, status, now_ns()
        if self.current is attempt:
            self.current = None
        if attempt.span_call is not None:
            self._close(attempt.span_call, attempt, None)
        else:
            self.pending = attempt

    def _emit(self, attempt: _Attempt) -> None:
        """Inside an llm_call block: a failed attempt that was retried becomes a span of its own."""
        assert self.adopted is not None
        call = self._new_span(attempt, self._take_number(), trace.set_span_in_context(self.adopted.span))
        self._close(call, attempt, None)

    def _close(self, call: LLMCall, attempt: _Attempt, answer: Answer | None, *, end: bool = True) -> None:
        if attempt.status is not None:
            call._set_attributes({n.HTTP_RESPONSE_STATUS_CODE: attempt.status})
        if answer is not None:
            answer.apply(call)
        if attempt.first_chunk is not None:
            call.set_ttft((attempt.first_chunk - attempt.start) / 1e9)
        if attempt.error is not None:
            call.set_error(attempt.error)
        if end:
            call._exit(None, end_time=attempt.end if attempt.end is not None else now_ns())

    def _settle(self, attempt: _Attempt | None, answer: Answer | None) -> None:
        """The call is over: record the final attempt (and its answer)."""
        if self._done:
            return
        self._done = True
        if self.adopted is not None:
            final = attempt if attempt is not None else self.pending
            self.pending = None
            if final is None:
                final = _Attempt(0)
                final.start = self.start
            number = self._take_number()
            if number != self.adopted.attempt:
                self.adopted._renumber(number)
            if final.resend:
                self.adopted._set_attributes({n.HTTP_REQUEST_RESEND_COUNT: final.resend})
            self._close(self.adopted, final, answer, end=False)
            return
        if attempt is None:
            return
        if attempt.span_call is None:  # no attempt hook ran: one span for the whole call
            attempt.span_call = self._new_span(attempt, self._take_number(), self.parent)
        self._close(attempt.span_call, attempt, answer)

    # -- the call's outcome -----------------------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        """The client call raised (its retries are over)."""
        attempt = self.current
        self.current = None
        if attempt is not None:
            attempt.error, attempt.end = _error_name(exc), now_ns()
        elif self.adopted is not None and self.pending is not None:
            pass  # the last failed attempt goes into the llm_call block's span
        elif self.per_attempt and (self.sent == 0 or self.adopted is None):
            # Nothing was sent (the client failed before sending), or the last attempt is already recorded.
            self._done = True
            return
        else:
            attempt = _Attempt(0)
            attempt.start, attempt.error = self.start, _error_name(exc)
        self._settle(attempt, None)

    def finish(self, result: Any) -> Any:
        """The client call returned ``result``. Streams are observed as the application reads them."""
        attempt = self.current
        self.current = None
        if attempt is None:
            attempt = _Attempt(0)
            attempt.start = self.start
        if self.stream:
            iterator = getattr(result, "_iterator", None)
            if iterator is not None:
                return self._observe(result, iterator, attempt)
            self._settle(attempt, None)  # a raw streamed response: the body is not ours to read
            return result
        attempt.end = now_ns()
        self._settle(attempt, self._answer(result))
        return result

    def _answer(self, result: Any) -> Answer:
        raw = getattr(result, "http_response", None)
        if raw is None and hasattr(result, "status_code") and hasattr(result, "json"):
            raw = result
        if raw is not None:  # .with_raw_response: read the (already read) body
            return self.api.answer(raw.json())
        return self.api.answer(result)

    # -- streams ----------------------------------------------------------------------------------

    def _observe(self, stream: Any, iterator: Any, attempt: _Attempt) -> Any:
        accumulator = self.api.stream(self.hide_usage)
        if hasattr(iterator, "__anext__"):
            stream._iterator = self._events_async(iterator, accumulator, attempt)
            close = stream.close

            async def close_async() -> None:
                try:
                    await close()
                finally:
                    with guarded("stream close"):
                        self._stream_end(attempt, accumulator.answer, None)

            stream.close = close_async
        else:
            stream._iterator = self._events(iterator, accumulator, attempt)
            close_sync = stream.close

            def close_now() -> None:
                try:
                    close_sync()
                finally:
                    with guarded("stream close"):
                        self._stream_end(attempt, accumulator.answer, None)

            stream.close = close_now
        return stream

    def _feed(self, accumulator: Any, item: Any, attempt: _Attempt) -> int:
        flags = 0
        with guarded("stream event"):
            flags = accumulator.feed(item)
            if flags & CONTENT and attempt.first_chunk is None:
                attempt.first_chunk = now_ns()
        return flags

    def _events(self, source: Iterator[Any], accumulator: Any, attempt: _Attempt) -> Iterator[Any]:
        error: BaseException | None = None
        try:
            for item in source:
                if not self._feed(accumulator, item, attempt) & HIDE:
                    yield item
        except BaseException as exc:
            error = exc
            raise
        finally:
            with guarded("stream end"):
                self._stream_end(attempt, accumulator.answer, error)

    async def _events_async(self, source: AsyncIterator[Any], accumulator: Any, attempt: _Attempt) -> Any:
        error: BaseException | None = None
        try:
            async for item in source:
                if not self._feed(accumulator, item, attempt) & HIDE:
                    yield item
        except BaseException as exc:
            error = exc
            raise
        finally:
            with guarded("stream end"):
                self._stream_end(attempt, accumulator.answer, error)

    def _stream_end(self, attempt: _Attempt, answer: Answer, error: BaseException | None) -> None:
        if self._done:
            return
        attempt.end = now_ns()
        if error is not None and not isinstance(error, GeneratorExit):
            attempt.error = _error_name(error)
        self._settle(attempt, answer)

    # -- other instrumentations -------------------------------------------------------------------

    def mark_duplicate(self, span: trace.Span) -> None:
        """A third-party LLM span around this call (the anthropic client's own, OpenLLMetry, ...) records the
        same provider call: tag it so no pipeline costs it twice (ours drops it)."""
        if not span.is_recording():
            return
        scope = getattr(getattr(span, "instrumentation_scope", None), "name", None)
        if scope == INSTRUMENTATION_NAME:
            return
        attributes = getattr(span, "attributes", None) or {}
        if (
            scope == ANTHROPIC_SCOPE
            or attributes.get(n.GEN_AI_OPERATION_NAME) in _LLM_OPERATIONS
            or n.GEN_AI_REQUEST_MODEL in attributes
            or attributes.get("openinference.span.kind") == "LLM"
        ):
            span.set_attribute(n.CALL_DUPLICATE_OF, self.call_id)


def _error_name(exc: BaseException) -> str:
    return type(exc).__name__


def stream_usage_options(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The chat request body with ``stream_options.include_usage`` turned on, or None if it already is."""
    options = body.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage"):
        return None
    merged = dict(options) if isinstance(options, Mapping) else {}
    merged["include_usage"] = True
    return {**body, "stream_options": merged}
