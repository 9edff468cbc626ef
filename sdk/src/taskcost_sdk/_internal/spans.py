"""Tasks, LLM calls and tool calls as OpenTelemetry spans.

Everything here follows one rule: SDK-internal work runs under ``guarded()`` (never raises into user
code), user exceptions pass through unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextvars import Token
from types import TracebackType
from typing import Self, Unpack

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import names as n
from .clock import new_id, now_ns
from .config import get_tracer
from .fingerprint import Fingerprint, PromptBlocks, prompt_attributes
from .guard import guarded, warn_once
from .kinds import InfraOverrides, Outcome, RecordOptions
from .retry import CallRef, RetryScope, current_retry_scope
from .scope import CURRENT_CALL, CURRENT_TASK, SpanScope, TaskScope
from .tools import ToolCall
from .values import (
    coerce_count,
    coerce_seconds,
    engine_timing_attributes,
    override_span_attributes,
    resolve_times,
)

__all__ = [
    "InfraOverrides",
    "LLMCall",
    "Outcome",
    "RecordOptions",
    "Task",
    "current_call",
    "current_task",
    "last_call",
    "retry",
]

# record_llm_call()'s own keywords; the rest of its keywords are infra overrides
_RECORD_FIELDS = frozenset(RecordOptions.__annotations__) - frozenset(InfraOverrides.__annotations__)


def current_task() -> Task | None:
    """The innermost task entered in this context (thread / asyncio task), or None."""
    return CURRENT_TASK.get()


def current_call() -> LLMCall | None:
    """The innermost ``llm_call`` block entered in this context, or None (auto-instrumentation fills it)."""
    return CURRENT_CALL.get()


def last_call() -> CallRef | None:
    """The latest LLM call attempt of the current task (for ``retry_of=``), or None."""
    task = CURRENT_TASK.get()
    return task.last_call if task is not None else None


def retry(of: LLMCall | CallRef | None = None, *, reason: str | None = None) -> RetryScope:
    """LLM calls made inside ``with retry(...):`` are further attempts of ``of`` (default: the current task's
    latest call): same call id, attempt numbers continuing. ``reason`` ("invalid_json") is recorded on them."""
    task = CURRENT_TASK.get()
    if task is not None:
        return task.retry(of, reason=reason)
    ref = _ref(of)
    return RetryScope(ref.call_id if ref else None, ref.attempt if ref else 0, _reason(reason), None)


def _ref(of: object) -> CallRef | None:
    if isinstance(of, CallRef):
        return of
    if isinstance(of, LLMCall):
        return CallRef(of.call_id, of.attempt)
    if of is not None:
        warn_once("retry_of", "taskcost_sdk: ignored retry of %r: it must be an LLMCall or a CallRef", of)
    return None


def _reason(reason: object) -> str | None:
    if reason is None:
        return None
    text = str(reason).strip()
    return text or None


class Task(TaskScope):
    """One unit of account (span ``task {kind}``). Use once, as ``with task(...) as t:`` or ``async with``."""

    _where = "task"

    def __init__(
        self,
        kind: str,
        id: str | None = None,
        *,
        conversation_id: str | None = None,
        agent_name: str | None = None,
        agent_version: str | None = None,
        golden: bool = False,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> None:
        super().__init__()
        self._kind = str(kind).strip() if kind is not None else ""
        if not self._kind:
            warn_once("task kind", "taskcost_sdk: task without a kind; recorded as 'unknown'")
            self._kind = "unknown"
        self._id = str(id) if id is not None else new_id()
        self._outcome: Outcome | None = None
        # LLM call bookkeeping: the latest attempt, the highest attempt per call id (for retries), and the
        # latest prompt fingerprint per (provider, model) (for the stable-prefix comparison).
        self._last: tuple[str, int] | None = None
        self._attempts: dict[str, int] = {}
        self._prompts: dict[tuple[str, ...], Fingerprint] = {}
        self._lock = threading.Lock()
        self._task_token: Token[Task | None] | None = None
        self._attributes: dict[str, AttributeValue] = {}
        # Attributes every LLM call of the task repeats (the contract allows them on calls too).
        self._inherited: dict[str, AttributeValue] = {}
        with guarded("task init"):
            self._attributes.update(attributes or {})
            if golden:
                self._attributes[n.TASK_GOLDEN] = True
            for name, value in (
                (n.GEN_AI_CONVERSATION_ID, conversation_id),
                (n.GEN_AI_AGENT_NAME, agent_name),
                (n.GEN_AI_AGENT_VERSION, agent_version),
            ):
                if value is not None:
                    self._inherited[name] = str(value)

    @property
    def id(self) -> str:
        return self._id

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def last_call(self) -> CallRef | None:
        """The latest LLM call attempt recorded in this task (manual or auto-instrumented), or None."""
        last = self._last
        return CallRef(last[0], last[1]) if last is not None else None

    def retry(self, of: LLMCall | CallRef | None = None, *, reason: str | None = None) -> RetryScope:
        """``with t.retry(reason="invalid_json"):`` -- the LLM calls inside are further attempts of ``of``
        (default: this task's latest call): same call id, attempt numbers continuing after the highest one
        used so far. Use it when the harness calls again after a bad answer."""
        ref = _ref(of) if of is not None else self.last_call
        return RetryScope(ref.call_id if ref else None, ref.attempt if ref else 0, _reason(reason), self)

    def _note(self, call_id: str, attempt: int) -> None:
        with self._lock:
            self._last = (call_id, attempt)
            if attempt > self._attempts.get(call_id, 0):
                self._attempts[call_id] = attempt

    def _max_attempt(self, call_id: str) -> int:
        with self._lock:
            return self._attempts.get(call_id, 0)

    def _swap_prompt(self, key: tuple[str, ...], fingerprint: Fingerprint) -> Fingerprint | None:
        """Remember this call's prompt fingerprint; return the previous one for the same provider and model."""
        with self._lock:
            previous = self._prompts.get(key)
            self._prompts[key] = fingerprint
            return previous

    def set_outcome(self, outcome: Outcome) -> None:
        """Declare the outcome ("completed" by default). An exception leaving the block means "failed"."""
        if outcome in n.OUTCOMES:
            self._outcome = outcome
        else:
            warn_once(("outcome", repr(outcome)), "taskcost_sdk: ignored invalid task outcome %r", outcome)

    def llm_call(
        self,
        provider: str,
        model: str,
        *,
        call_id: str | None = None,
        attempt: int | None = None,
        retry_of: LLMCall | CallRef | None = None,
        **infra_overrides: Unpack[InfraOverrides],
    ) -> LLMCall:
        """An LLM call of this task, as a context manager. See :func:`taskcost_sdk.llm_call`."""
        return LLMCall(
            provider,
            model,
            call_id=call_id,
            attempt=attempt,
            retry_of=retry_of,
            task=self,
            overrides=infra_overrides,
        )

    def record_llm_call(self, provider: str, model: str, **kwargs: Unpack[RecordOptions]) -> LLMCall:
        """Record a finished LLM call of this task. Same arguments as :func:`taskcost_sdk.record_llm_call`."""
        return LLMCall.record(provider, model, task=self, **kwargs)

    def tool(self, name: str, *, cost_usd: object = None, tool_call_id: str | None = None) -> ToolCall:
        """A tool call of this task, as a context manager (span ``execute_tool {name}``)."""
        return ToolCall(name, cost_usd=cost_usd, tool_call_id=tool_call_id, task=self)

    def _parent_context(self) -> otel_context.Context | None:
        """Where a child span hangs: the current span inside this task's block, else the task span."""
        if CURRENT_TASK.get() is self:
            return None
        return trace.set_span_in_context(self._span)

    def _start_span(self, start_time: int | None = None) -> None:
        attributes = {**self._attributes, n.TASK_ID: self._id, n.TASK_KIND: self._kind, **self._inherited}
        self._span = get_tracer().start_span(
            f"task {self._kind}", kind=SpanKind.INTERNAL, attributes=attributes, start_time=start_time
        )

    def _on_exit(self, exc: BaseException | None) -> None:
        if exc is not None:
            outcome: Outcome = "failed"
            self._mark_exception(exc)
        else:
            outcome = self._outcome or "completed"
            if outcome == "failed":
                self._span.set_status(Status(StatusCode.ERROR, "task failed"))
        self._span.set_attribute(n.TASK_OUTCOME, outcome)

    def __enter__(self) -> Self:
        with guarded("task start"):
            self._task_token = CURRENT_TASK.set(self)
        self._enter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._exit(exc)
        finally:
            token, self._task_token = self._task_token, None
            if token is not None:
                with guarded("task end"):
                    CURRENT_TASK.reset(token)


def _resolve_call_id(call_id: str | None, attempt: object, retry_of: object) -> tuple[str, int, str | None]:
    """(call id, attempt, retry reason). Explicit arguments win; else a ``retry(...)`` block in scope; else new."""
    if call_id is None and attempt is None and retry_of is None:
        scope = current_retry_scope()
        if scope is not None and (next_attempt := scope.next_attempt()) is not None:
            return next_attempt[0], next_attempt[1], scope.reason
        return new_id(), 1, None
    previous_id, previous_attempt = None, 0
    if isinstance(retry_of, LLMCall | CallRef):
        previous_id, previous_attempt = retry_of.call_id, retry_of.attempt
        if isinstance(retry_of, LLMCall) and retry_of.task is not None:
            previous_attempt = max(previous_attempt, retry_of.task._max_attempt(previous_id))
    elif retry_of is not None:
        warn_once("retry_of", "taskcost_sdk: ignored retry_of=%r: it must be an LLMCall or a CallRef", retry_of)
    resolved_id = str(call_id) if call_id is not None else previous_id or new_id()
    resolved_attempt = previous_attempt + 1
    if attempt is not None:
        count = coerce_count(attempt)
        if count is not None and count >= 1:
            resolved_attempt = count
        else:
            warn_once("attempt", "taskcost_sdk: ignored attempt=%r: it must be an int >= 1", attempt)
    return resolved_id, resolved_attempt, None


def _text(value: object, what: str) -> str:
    if value is None or (text := str(value).strip()) == "":
        warn_once(("missing", what), "taskcost_sdk: llm_call without a %s; recorded without it", what)
        return ""
    return text


class LLMCall(SpanScope):
    """One attempt of one LLM call (span ``chat {model}``, kind CLIENT)."""

    _where = "llm_call"

    @classmethod
    def record(
        cls, provider: str, model: str, *, task: Task | None = None, **options: Unpack[RecordOptions]
    ) -> LLMCall:
        """An LLM call that already happened, as one finished span (``taskcost_sdk.record_llm_call`` and
        ``Task.record_llm_call``); ``task`` defaults to the current task."""
        o = options
        overrides = {k: v for k, v in o.items() if k not in _RECORD_FIELDS}
        call = cls(
            provider,
            model,
            call_id=o.get("call_id"),
            attempt=o.get("attempt"),
            retry_of=o.get("retry_of"),
            task=task,
            overrides=overrides,
        )
        end_ns: int | None = None
        with guarded("record_llm_call"):
            start_ns, end_ns = resolve_times(o.get("start_time"), o.get("end_time"), o.get("duration_s"), now_ns())
            call._start_span(start_time=start_ns)
            call.set_usage(
                input_tokens=o.get("input_tokens"),
                output_tokens=o.get("output_tokens"),
                cache_read_tokens=o.get("cache_read_tokens", 0),
                cache_write_tokens=o.get("cache_write_tokens", 0),
                reasoning_tokens=o.get("reasoning_tokens", 0),
            )
            ttft_s = o.get("ttft_s")
            if ttft_s is not None:
                call.set_ttft(ttft_s)
            response_model, response_id = o.get("response_model"), o.get("response_id")
            if response_model is not None or response_id is not None:
                call.set_response(model=response_model, response_id=response_id)
            error_type = o.get("error_type")
            if error_type is not None:
                call.set_error(error_type)
        call._exit(None, end_time=end_ns)
        return call

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        call_id: str | None = None,
        attempt: int | None = None,
        retry_of: LLMCall | CallRef | None = None,
        task: Task | None = None,
        overrides: Mapping[str, object] | None = None,
        parent: otel_context.Context | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> None:
        super().__init__()
        self._provider, self._model = "", ""
        self._call_id, self._attempt, self._retry_reason = "", 1, None
        self._task: Task | None = None
        self._overrides = overrides
        self._parent = parent
        self._extra = attributes
        self._claimed = False
        self._call_token: Token[LLMCall | None] | None = None
        with guarded("llm_call init"):
            self._provider, self._model = _text(provider, "provider"), _text(model, "model")
            self._call_id, self._attempt, self._retry_reason = _resolve_call_id(call_id, attempt, retry_of)
            if isinstance(task, Task):
                self._task = task
            elif task is not None:
                warn_once("task", "taskcost_sdk: ignored task=%r: it must be a Task", task)
        if not self._call_id:
            self._call_id = new_id()

    @property
    def call_id(self) -> str:
        """Logical call id, shared by every attempt (retry) of the call."""
        return self._call_id

    @property
    def attempt(self) -> int:
        """1 for the first try, 2 for the first retry, ..."""
        return self._attempt

    @property
    def task(self) -> Task | None:
        return self._task

    def set_usage(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> None:
        """Token counts, OpenTelemetry meaning: ``input_tokens`` is ALL input, including cache reads and
        cache writes (add them yourself if your provider, like Anthropic, reports them separately);
        ``output_tokens`` includes ``reasoning_tokens``. Invalid values are dropped with a warning."""
        with guarded("llm_call.set_usage"):
            counts: dict[str, int] = {}
            attributes: dict[str, AttributeValue] = {}
            for field, attribute, value in (
                ("input_tokens", n.GEN_AI_USAGE_INPUT_TOKENS, input_tokens),
                ("output_tokens", n.GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens),
                ("cache_read_tokens", n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache_read_tokens),
                ("cache_write_tokens", n.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, cache_write_tokens),
                ("reasoning_tokens", n.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, reasoning_tokens),
            ):
                if value is None:
                    continue
                count = coerce_count(value)
                if count is None:
                    warn_once(
                        ("tokens", field),
                        "taskcost_sdk: dropped %s=%r: token counts are ints >= 0",
                        field,
                        value,
                    )
                    continue
                counts[field] = attributes[attribute] = count
            if attributes:
                self._span.set_attributes(attributes)  # one lock round-trip, not one per count
                _check_usage(counts)

    def set_response(
        self,
        model: str | None = None,
        response_id: str | None = None,
        finish_reasons: Sequence[str] | None = None,
    ) -> None:
        """What the provider answered: the model that answered, its response id, finish reasons."""
        with guarded("llm_call.set_response"):
            attributes: dict[str, AttributeValue] = {}
            if model is not None:
                attributes[n.GEN_AI_RESPONSE_MODEL] = str(model)
            if response_id is not None:
                attributes[n.GEN_AI_RESPONSE_ID] = str(response_id)
            if finish_reasons is not None:
                if isinstance(finish_reasons, str):
                    attributes[n.GEN_AI_RESPONSE_FINISH_REASONS] = [finish_reasons]
                elif isinstance(finish_reasons, Sequence):
                    attributes[n.GEN_AI_RESPONSE_FINISH_REASONS] = [str(r) for r in finish_reasons]
                else:
                    warn_once("finish_reasons", "taskcost_sdk: ignored finish_reasons=%r: use a list", finish_reasons)
            if attributes:
                self._span.set_attributes(attributes)

    def set_ttft(self, seconds: float) -> None:
        """Time to first token/chunk of a streamed answer, in seconds."""
        with guarded("llm_call.set_ttft"):
            value = coerce_seconds(seconds)
            if value is None:
                warn_once("ttft", "taskcost_sdk: dropped ttft=%r: it must be seconds >= 0", seconds)
                return
            self._span.set_attribute(n.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, value)

    def set_engine_timings(
        self,
        *,
        prefill_s: float | None = None,
        decode_s: float | None = None,
        prefill_tokens: int | None = None,
        cached_tokens: int | None = None,
        decode_tokens: int | None = None,
        draft_tokens: int | None = None,
        accepted_tokens: int | None = None,
    ) -> None:
        """What the inference engine itself reported for this call (llama.cpp's ``timings``: ``prompt_ms``/1000,
        ``predicted_ms``/1000, ``prompt_n``, ``cache_n``, ``predicted_n``, ``draft_n``, ``draft_n_accepted``).
        Auto-instrumentation reads them from the response. Invalid values are dropped with a warning."""
        self._set_engine_timings(
            {
                "prefill_s": prefill_s,
                "decode_s": decode_s,
                "prefill_tokens": prefill_tokens,
                "cached_tokens": cached_tokens,
                "decode_tokens": decode_tokens,
                "draft_tokens": draft_tokens,
                "accepted_tokens": accepted_tokens,
            }
        )

    def _set_engine_timings(self, timings: Mapping[str, object]) -> None:
        with guarded("llm_call.set_engine_timings"):
            attributes = engine_timing_attributes(timings)
            if attributes:
                self._span.set_attributes(attributes)

    def set_error(self, error_type: str | BaseException) -> None:
        """Mark the call failed with a low-cardinality error type ("timeout", "429", an exception)."""
        self._set_error(error_type)

    def set_prompt(
        self,
        messages: Sequence[object] | None = None,
        *,
        system: object = None,
        tools: Sequence[object] | None = None,
    ) -> None:
        """Fingerprint the prompt (hashes and sizes of its blocks; the content never leaves the process) and
        lint it for cache breakers. Auto-instrumented calls do this on their own."""
        with guarded("llm_call.set_prompt"):
            blocks = PromptBlocks.from_parts(system=system, tools=tools, messages=messages)
            self._set_attributes(prompt_attributes(blocks, self._task, (self._provider, self._model, "manual")))

    def _set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        if attributes and self._span.is_recording():
            self._span.set_attributes(attributes)

    def _claim(self) -> bool:
        """Auto-instrumentation: take this open block to record a client call into (once)."""
        if self._claimed or not self._span.is_recording():
            return False
        self._claimed = True
        return True

    def _renumber(self, attempt: int) -> None:
        """Auto-instrumentation: failed HTTP attempts went before this one, so its number moves up."""
        self._attempt = attempt
        self._span.set_attribute(n.CALL_ATTEMPT, attempt)
        if self._task is not None:
            self._task._note(self._call_id, attempt)

    def __enter__(self) -> Self:
        self._enter()
        with self._guard_start:
            self._call_token = CURRENT_CALL.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token, self._call_token = self._call_token, None
        if token is not None:
            with self._guard_end:
                CURRENT_CALL.reset(token)
        self._exit(exc)

    def _start_span(self, start_time: int | None = None) -> None:
        task = self._task if self._task is not None else CURRENT_TASK.get()
        self._task = task
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_CHAT,
            n.CALL_ID: self._call_id,
            n.CALL_ATTEMPT: self._attempt,
        }
        if self._provider:
            attributes[n.GEN_AI_PROVIDER_NAME] = self._provider
        if self._model:
            attributes[n.GEN_AI_REQUEST_MODEL] = self._model
        if self._retry_reason:
            attributes[n.CALL_RETRY_REASON] = self._retry_reason
        if task is not None:
            attributes[n.TASK_ID] = task.id
            attributes.update(task._inherited)
            task._note(self._call_id, self._attempt)
        if self._overrides:
            attributes.update(override_span_attributes(self._overrides))
        if self._extra:
            attributes.update(self._extra)
        if self._parent is not None:
            parent: otel_context.Context | None = self._parent
        else:
            parent = task._parent_context() if task is not None else None
        self._span = get_tracer().start_span(
            f"chat {self._model}" if self._model else "chat",
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start_time,
        )


def _check_usage(counts: Mapping[str, int]) -> None:
    if "input_tokens" in counts:
        cached = counts.get("cache_read_tokens", 0) + counts.get("cache_write_tokens", 0)
        if cached > counts["input_tokens"]:
            warn_once(
                "cache_exceeds_input",
                "taskcost_sdk: cache tokens (%d) exceed input_tokens (%d); input_tokens must include cache "
                "reads and writes (Anthropic reports them separately: add them)",
                cached,
                counts["input_tokens"],
            )
    if "output_tokens" in counts and counts.get("reasoning_tokens", 0) > counts["output_tokens"]:
        warn_once("reasoning_exceeds_output", "taskcost_sdk: output_tokens must include reasoning_tokens")
