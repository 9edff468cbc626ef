"""What a provider answered, normalised to the OpenTelemetry meaning of the token counts.

Works on the client libraries' response models and on plain decoded JSON alike (attribute or key access),
never imports them. OpenAI reports input inclusive of cached tokens; Anthropic reports ``input_tokens``
exclusive of cache reads and writes, so they are added back here. A llama.cpp server adds its own ``timings``
to chat completions (the body, or the last chunk of a stream): prefill and decode time, the prompt tokens it
computed and took from its cache, speculative draft and accepted tokens.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .guard import guarded

if TYPE_CHECKING:
    from .spans import LLMCall

__all__ = [
    "CONTENT",
    "HIDE",
    "AnthropicStream",
    "Answer",
    "ChatStream",
    "ResponsesStream",
    "anthropic_message",
    "engine_timings",
    "get",
    "openai_chat",
    "openai_responses",
]


CONTENT = 1  # the event carries output: the first one marks the time to first chunk
HIDE = 2  # the event exists only because the SDK asked for it: keep it from the application


def get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _seconds_of_millis(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    millis = float(value)
    return millis / 1000 if math.isfinite(millis) and millis >= 0 else None


# llama.cpp ``timings`` key -> LLMCall.set_engine_timings() keyword (see names.ENGINE_TIMING_*)
_TIMING_SECONDS = (("prompt_ms", "prefill_s"), ("predicted_ms", "decode_s"))
_TIMING_COUNTS = (
    ("prompt_n", "prefill_tokens"),
    ("cache_n", "cached_tokens"),
    ("predicted_n", "decode_tokens"),
    ("draft_n", "draft_tokens"),
    ("draft_n_accepted", "accepted_tokens"),
)


def engine_timings(timings: Any) -> dict[str, float | int] | None:
    """llama.cpp's ``timings`` object -> set_engine_timings() keywords; an odd value (a string, a negative
    number, NaN) is left out, the others are kept. None when nothing usable is there."""
    if timings is None:
        return None
    found: dict[str, float | int] = {}
    for key, keyword in _TIMING_SECONDS:
        seconds = _seconds_of_millis(get(timings, key))
        if seconds is not None:
            found[keyword] = seconds
    for key, keyword in _TIMING_COUNTS:
        count = _count(get(timings, key))
        if count is not None:
            found[keyword] = count
    return found or None


class Answer:
    """Usage and response metadata of one attempt (None: not reported)."""

    __slots__ = (
        "input_tokens",
        "output_tokens",
        "cache_read",
        "cache_write",
        "reasoning",
        "model",
        "response_id",
        "finish_reasons",
        "engine",
    )

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cache_read: int | None = None
        self.cache_write: int | None = None
        self.reasoning: int | None = None
        self.model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: list[str] | None = None
        self.engine: dict[str, float | int] | None = None  # the engine's own timings (llama.cpp)

    @property
    def has_usage(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None

    def apply(self, call: LLMCall) -> None:
        if self.has_usage:
            call.set_usage(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cache_read_tokens=self.cache_read,
                cache_write_tokens=self.cache_write,
                reasoning_tokens=self.reasoning,
            )
        if self.model is not None or self.response_id is not None or self.finish_reasons:
            call.set_response(model=self.model, response_id=self.response_id, finish_reasons=self.finish_reasons)
        if self.engine:
            call._set_engine_timings(self.engine)

    def identity(self, obj: Any) -> None:
        self.model = _text(get(obj, "model")) or self.model
        self.response_id = _text(get(obj, "id")) or self.response_id


# -- OpenAI chat completions ------------------------------------------------------------------------


def _chat_usage(answer: Answer, usage: Any) -> None:
    if usage is None:
        return
    answer.input_tokens = _count(get(usage, "prompt_tokens"))
    answer.output_tokens = _count(get(usage, "completion_tokens"))
    details = get(usage, "prompt_tokens_details")
    answer.cache_read = _count(get(details, "cached_tokens"))
    answer.cache_write = _count(get(details, "cache_write_tokens"))
    answer.reasoning = _count(get(get(usage, "completion_tokens_details"), "reasoning_tokens"))


def _chat_reasons(answer: Answer, choices: Any) -> None:
    for choice in choices if isinstance(choices, list) else ():
        reason = _text(get(choice, "finish_reason"))
        if reason is not None:
            answer.finish_reasons = [*(answer.finish_reasons or []), reason]


def openai_chat(result: Any) -> Answer:
    answer = Answer()
    answer.identity(result)
    _chat_reasons(answer, get(result, "choices"))
    _chat_usage(answer, get(result, "usage"))
    with guarded("engine timings"):  # a bug here costs the timings, never the call's usage
        answer.engine = engine_timings(get(result, "timings"))
    return answer


class ChatStream:
    """``chat.completion.chunk`` events. With ``hide_usage``, the usage-only chunk the SDK asked for
    (``stream_options.include_usage``) is read and kept from the application."""

    def __init__(self, hide_usage: bool) -> None:
        self.answer = Answer()
        self._hide_usage = hide_usage

    def feed(self, chunk: Any) -> int:
        flags = 0
        if self.answer.response_id is None:
            self.answer.identity(chunk)
        choices = get(chunk, "choices")
        if choices:
            flags |= CONTENT
            _chat_reasons(self.answer, choices)
        timings = get(chunk, "timings")
        if timings is not None:  # the latest wins (llama.cpp's timings_per_token sends running totals)
            with guarded("engine timings"):
                self.answer.engine = engine_timings(timings) or self.answer.engine
        usage = get(chunk, "usage")
        if usage is not None:
            _chat_usage(self.answer, usage)
            if self._hide_usage and not choices:
                flags |= HIDE
        return flags


# -- OpenAI responses -------------------------------------------------------------------------------


def openai_responses(result: Any, answer: Answer | None = None) -> Answer:
    answer = answer if answer is not None else Answer()
    answer.identity(result)
    status = _text(get(result, "status"))
    if status == "incomplete":
        status = _text(get(get(result, "incomplete_details"), "reason")) or status
    if status is not None and status != "in_progress":
        answer.finish_reasons = [status]
    usage = get(result, "usage")
    if usage is not None:
        answer.input_tokens = _count(get(usage, "input_tokens"))
        answer.output_tokens = _count(get(usage, "output_tokens"))
        details = get(usage, "input_tokens_details")
        answer.cache_read = _count(get(details, "cached_tokens"))
        answer.cache_write = _count(get(details, "cache_write_tokens"))
        answer.reasoning = _count(get(get(usage, "output_tokens_details"), "reasoning_tokens"))
    return answer


class ResponsesStream:
    """Responses API stream events: output deltas, then ``response.completed`` with the usage."""

    def __init__(self) -> None:
        self.answer = Answer()

    def feed(self, event: Any) -> int:
        kind = get(event, "type")
        if not isinstance(kind, str):
            return 0
        if kind.endswith(".delta"):
            return CONTENT
        if kind.startswith("response.") and (response := get(event, "response")) is not None:
            openai_responses(response, self.answer)
        return 0


# -- Anthropic messages -----------------------------------------------------------------------------


class _AnthropicUsage:
    __slots__ = ("input", "cache_read", "cache_write", "output", "thinking")

    def __init__(self) -> None:
        self.input: int | None = None
        self.cache_read: int | None = None
        self.cache_write: int | None = None
        self.output: int | None = None
        self.thinking: int | None = None

    def update(self, usage: Any) -> None:
        """Take every field present (a ``message_delta`` repeats the running totals it has)."""
        for field, key in (
            ("input", "input_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
            ("output", "output_tokens"),
        ):
            value = _count(get(usage, key))
            if value is not None:
                setattr(self, field, value)
        thinking = _count(get(get(usage, "output_tokens_details"), "thinking_tokens"))
        if thinking is not None:
            self.thinking = thinking

    def into(self, answer: Answer) -> None:
        if self.input is not None:  # exclusive of cache on the wire: OpenTelemetry's input includes it
            answer.input_tokens = self.input + (self.cache_read or 0) + (self.cache_write or 0)
        answer.output_tokens = self.output
        answer.cache_read = self.cache_read
        answer.cache_write = self.cache_write
        answer.reasoning = self.thinking


def anthropic_message(result: Any) -> Answer:
    answer = Answer()
    answer.identity(result)
    reason = _text(get(result, "stop_reason"))
    answer.finish_reasons = [reason] if reason is not None else None
    usage = get(result, "usage")
    if usage is not None:
        counts = _AnthropicUsage()
        counts.update(usage)
        counts.into(answer)
    return answer


class AnthropicStream:
    """Message stream events: usage from ``message_start``, final counts from ``message_delta``."""

    def __init__(self) -> None:
        self.answer = Answer()
        self._usage = _AnthropicUsage()
        self._seen_usage = False

    def feed(self, event: Any) -> int:
        kind = get(event, "type")
        if kind == "content_block_delta":
            return CONTENT
        if kind == "message_start":
            message = get(event, "message")
            self.answer.identity(message)
            if (usage := get(message, "usage")) is not None:
                self._usage.update(usage)
                self._usage.output = None  # a placeholder until message_delta
                self._seen_usage = True
        elif kind == "message_delta":
            if (usage := get(event, "usage")) is not None:
                self._usage.update(usage)
                self._seen_usage = True
            reason = _text(get(get(event, "delta"), "stop_reason"))
            if reason is not None:
                self.answer.finish_reasons = [reason]
        if self._seen_usage:
            self._usage.into(self.answer)
        return 0
