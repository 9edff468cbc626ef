"""Tasks, LLM calls and tool calls as OpenTelemetry spans.

Everything here follows one rule: SDK-internal work runs under ``guarded()`` (never raises into user
code), user exceptions pass through unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from datetime import datetime
from types import TracebackType
from typing import Literal, Self, TypedDict, Unpack

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import names as n
from .config import get_tracer
from .guard import guarded, warn_once
from .values import coerce_cost, coerce_count, coerce_seconds, override_span_attributes

Outcome = Literal["completed", "failed", "abandoned"]


class InfraOverrides(TypedDict, total=False):
    """Per-call infra tags; each becomes a span attribute that overrides the resource default."""

    engine: str
    engine_version: str
    quantization: str
    gpu_type: str
    gpu_count: int
    cluster_id: str
    deployment: Literal["api", "self_hosted"]
    server_address: str
    container_image_name: str
    container_image_tags: Sequence[str]
    k8s_cluster_name: str
    cloud_region: str
    harness_version: str


class RecordOptions(InfraOverrides, total=False):
    """Keyword arguments of record_llm_call() other than ``task``."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    ttft_s: float | None
    call_id: str | None
    attempt: int | None
    retry_of: LLMCall | None
    error_type: str | None
    response_model: str | None
    response_id: str | None
    start_time: datetime | int | None
    end_time: datetime | int | None
    duration_s: float | None


_current_task: ContextVar[Task | None] = ContextVar("taskcost_sdk_current_task", default=None)


def current_task() -> Task | None:
    """The innermost task entered in this context (thread / asyncio task), or None."""
    return _current_task.get()


class _SpanScope:
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

    def _enter(self) -> None:
        with guarded(f"{self._where} start"):
            self._start_span()
            self._context_token = otel_context.attach(trace.set_span_in_context(self._span))

    def _exit(self, exc: BaseException | None, end_time: int | None = None) -> None:
        with guarded(f"{self._where} end"):
            self._on_exit(exc)
        with guarded(f"{self._where} end"):
            self._span.end(end_time=end_time)
        token, self._context_token = self._context_token, None
        if token is not None:
            with guarded(f"{self._where} detach"):
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


class Task(_SpanScope):
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
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> None:
        super().__init__()
        self._kind = str(kind)
        self._id = str(id) if id is not None else uuid.uuid4().hex
        self._outcome: Outcome | None = None
        self._task_token: Token[Task | None] | None = None
        self._attributes: dict[str, AttributeValue] = {}
        # Attributes every LLM call of the task repeats (the contract allows them on calls too).
        self._inherited: dict[str, AttributeValue] = {}
        with guarded("task init"):
            self._attributes.update(attributes or {})
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
        retry_of: LLMCall | None = None,
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
        from .api import record_llm_call

        return record_llm_call(provider, model, task=self, **kwargs)

    def tool(self, name: str, *, cost_usd: object = None) -> ToolCall:
        """A tool call of this task, as a context manager (span ``execute_tool {name}``)."""
        return ToolCall(name, cost_usd=cost_usd, task=self)

    def _parent_context(self) -> otel_context.Context | None:
        """Where a child span hangs: the current span inside this task's block, else the task span."""
        if _current_task.get() is self:
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
            self._task_token = _current_task.set(self)
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
                    _current_task.reset(token)


def _resolve_call_id(call_id: str | None, attempt: object, retry_of: object) -> tuple[str, int]:
    previous_id, previous_attempt = None, 0
    if isinstance(retry_of, LLMCall):
        previous_id, previous_attempt = retry_of.call_id, retry_of.attempt
    elif retry_of is not None:
        warn_once("retry_of", "taskcost_sdk: ignored retry_of=%r: it must be an LLMCall", retry_of)
    resolved_id = str(call_id) if call_id is not None else previous_id or uuid.uuid4().hex
    resolved_attempt = previous_attempt + 1
    if attempt is not None:
        count = coerce_count(attempt)
        if count is not None and count >= 1:
            resolved_attempt = count
        else:
            warn_once("attempt", "taskcost_sdk: ignored attempt=%r: it must be an int >= 1", attempt)
    return resolved_id, resolved_attempt


class LLMCall(_SpanScope):
    """One attempt of one LLM call (span ``chat {model}``, kind CLIENT)."""

    _where = "llm_call"

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        call_id: str | None = None,
        attempt: int | None = None,
        retry_of: LLMCall | None = None,
        task: Task | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__()
        self._provider, self._model = str(provider), str(model)
        self._call_id, self._attempt = "", 1
        self._task: Task | None = None
        self._overrides = dict(overrides or {})
        with guarded("llm_call init"):
            self._call_id, self._attempt = _resolve_call_id(call_id, attempt, retry_of)
            if isinstance(task, Task):
                self._task = task
            elif task is not None:
                warn_once("task", "taskcost_sdk: ignored task=%r: it must be a Task", task)
        if not self._call_id:
            self._call_id = uuid.uuid4().hex

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
                counts[field] = count
                self._span.set_attribute(attribute, count)
            _check_usage(counts)

    def set_response(
        self,
        model: str | None = None,
        response_id: str | None = None,
        finish_reasons: Sequence[str] | None = None,
    ) -> None:
        """What the provider answered: the model that answered, its response id, finish reasons."""
        with guarded("llm_call.set_response"):
            if model is not None:
                self._span.set_attribute(n.GEN_AI_RESPONSE_MODEL, str(model))
            if response_id is not None:
                self._span.set_attribute(n.GEN_AI_RESPONSE_ID, str(response_id))
            if finish_reasons is not None:
                reasons = [finish_reasons] if isinstance(finish_reasons, str) else [str(r) for r in finish_reasons]
                self._span.set_attribute(n.GEN_AI_RESPONSE_FINISH_REASONS, reasons)

    def set_ttft(self, seconds: float) -> None:
        """Time to first token/chunk of a streamed answer, in seconds."""
        with guarded("llm_call.set_ttft"):
            value = coerce_seconds(seconds)
            if value is None:
                warn_once("ttft", "taskcost_sdk: dropped ttft=%r: it must be seconds >= 0", seconds)
                return
            self._span.set_attribute(n.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, value)

    def set_error(self, error_type: str | BaseException) -> None:
        """Mark the call failed with a low-cardinality error type ("timeout", "429", an exception)."""
        self._set_error(error_type)

    def _start_span(self, start_time: int | None = None) -> None:
        task = self._task if self._task is not None else _current_task.get()
        self._task = task
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_CHAT,
            n.GEN_AI_PROVIDER_NAME: self._provider,
            n.GEN_AI_REQUEST_MODEL: self._model,
            n.CALL_ID: self._call_id,
            n.CALL_ATTEMPT: self._attempt,
        }
        if task is not None:
            attributes[n.TASK_ID] = task.id
            attributes.update(task._inherited)
        attributes.update(override_span_attributes(self._overrides))
        self._span = get_tracer().start_span(
            f"chat {self._model}",
            context=task._parent_context() if task is not None else None,
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


class ToolCall(_SpanScope):
    """One tool execution (span ``execute_tool {name}``)."""

    _where = "tool"

    def __init__(self, name: str, *, cost_usd: object = None, task: Task | None = None) -> None:
        super().__init__()
        self._name = str(name)
        self._task = task if isinstance(task, Task) else None
        self._cost_usd = cost_usd

    @property
    def name(self) -> str:
        return self._name

    def set_cost(self, cost_usd: object) -> None:
        """Money the tool call cost in USD: Decimal, str, int or float (stored as a decimal string)."""
        with guarded("tool.set_cost"):
            cost = coerce_cost(cost_usd)
            if cost is None:
                warn_once("cost", "taskcost_sdk: dropped cost_usd=%r: it must be a decimal amount >= 0", cost_usd)
                return
            self._span.set_attribute(n.TOOL_COST_USD, cost)

    def set_error(self, error_type: str | BaseException) -> None:
        """Mark the tool call failed with a low-cardinality error type."""
        self._set_error(error_type)

    def _start_span(self, start_time: int | None = None) -> None:
        task = self._task if self._task is not None else _current_task.get()
        self._task = task
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: self._name,
        }
        if task is not None:
            attributes[n.TASK_ID] = task.id
        self._span = get_tracer().start_span(
            f"execute_tool {self._name}",
            context=task._parent_context() if task is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start_time,
        )
        if self._cost_usd is not None:
            self.set_cost(self._cost_usd)
