"""Reading canonical values out of one span, whatever convention wrote it (the table is in _conventions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from taskcost.normalize import _conventions as C
from taskcost.normalize import _names as N
from taskcost.normalize._attrs import Attrs

__all__ = [
    "Usage",
    "agent_name",
    "error_type_from_events",
    "operation",
    "provider",
    "provider_id",
    "response_id",
    "role",
    "server_address",
    "span_has_usage",
    "tool_name",
    "ttft",
    "usage",
    "usage_of",
]

_USAGE_NAMES = (*C.INPUT_TOKENS, *C.OUTPUT_TOKENS, *C.CACHE_READ_TOKENS, *C.CACHE_WRITE_TOKENS)
_MAX_OUTPUT_VALUE = 1_000_000  # characters of OpenInference output.value parsed for the response id, at most


def operation(a: Attrs) -> str | None:
    """`gen_ai.operation.name`, else derived from OpenInference's span kind, OpenLLMetry's request type or
    Traceloop's span kind."""
    op = a.text(C.OPERATION)
    if op:
        return op
    kind = a.text(C.OI_SPAN_KIND)
    if kind and kind.upper() in C.OI_SPAN_KIND_OPERATIONS:
        return C.OI_SPAN_KIND_OPERATIONS[kind.upper()]
    request_type = a.text(C.LLM_REQUEST_TYPE)
    if request_type and request_type.lower() in C.LLM_REQUEST_TYPE_OPERATIONS:
        return C.LLM_REQUEST_TYPE_OPERATIONS[request_type.lower()]
    tl_kind = a.text(C.TRACELOOP_SPAN_KIND)
    if tl_kind and tl_kind.lower() in C.TRACELOOP_SPAN_KIND_OPERATIONS:
        return C.TRACELOOP_SPAN_KIND_OPERATIONS[tl_kind.lower()]
    return None


def span_has_usage(span_attrs: dict[str, Any]) -> bool:
    return any(span_attrs.get(k) is not None for k in _USAGE_NAMES)


def _traceloop_entity(a: Attrs, kind: str) -> str | None:
    tl_kind = a.text(C.TRACELOOP_SPAN_KIND)
    return a.text(C.TRACELOOP_ENTITY_NAME) if tl_kind and tl_kind.lower() == kind else None


def tool_name(a: Attrs) -> str | None:
    return a.text(*C.TOOL_NAME) or _traceloop_entity(a, "tool")


def agent_name(a: Attrs) -> str | None:
    return a.text(*C.AGENT_NAME) or _traceloop_entity(a, "agent")


def role(span_attrs: dict[str, Any], op: str | None) -> str | None:
    """task, llm, tool or None, from the span's own attributes (never from its resource).

    An explicit operation decides; without one, token usage makes an LLM call and a tool name a tool call. Agent
    and workflow spans (invoke_agent, ...) are never LLM calls: their usage is the sum of the calls beneath them.
    """
    if N.TASK_KIND in span_attrs:
        return "task"
    if N.DUPLICATE_OF in span_attrs:
        return None  # another instrumentation's span of a call the taskcost SDK already recorded: raw only
    if op in N.LLM_OPERATIONS:
        return "llm"
    if op == N.TOOL_OPERATION:
        return "tool"
    if op in C.AGGREGATE_OPERATIONS:
        return None
    if span_has_usage(span_attrs):
        return "llm"
    if tool_name(Attrs(span_attrs, {})):
        return "tool"
    return None


def provider(a: Attrs) -> str | None:
    """The provider as an OpenTelemetry `gen_ai.provider.name` id (other conventions' names translated)."""
    return provider_id(a.text(*C.PROVIDER))


def provider_id(raw: str | None) -> str | None:
    """A provider name as sent -> its OpenTelemetry `gen_ai.provider.name` id."""
    if raw is None:
        return None
    raw = raw.strip()
    return C.PROVIDER_OTEL_IDS.get(raw.lower(), raw) or None


class Usage(NamedTuple):
    """A call's token counts (a tuple: made for every call, and a frozen dataclass costs several times more)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def present(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None

    @property
    def key(self) -> tuple[int | None, int | None]:
        return (self.input_tokens, self.output_tokens)


def usage(a: Attrs) -> Usage:
    """Token counts, first name present wins per field (never a sum over conventions).

    Input is inclusive of cache reads and writes in every convention. When a span's input is smaller than its cache
    reads plus writes it cannot be inclusive (an emitter passed Anthropic's raw, cache-exclusive count): the cache
    counts are added to it, with a warning. A missing input or output is derived from a total when one is given.
    """
    return usage_of(
        a,
        a.integer(*C.INPUT_TOKENS),
        a.integer(*C.OUTPUT_TOKENS),
        a.integer(*C.CACHE_READ_TOKENS),
        a.integer(*C.CACHE_WRITE_TOKENS),
        a.integer(*C.REASONING_TOKENS),
        a.integer(*C.TOTAL_TOKENS),
    )


def usage_of(
    a: Attrs,
    inp: int | None,
    out: int | None,
    read: int | None,
    write: int | None,
    reasoning: int | None,
    total: int | None,
) -> Usage:
    """``usage`` from the counts as read (each the first of its names with a count)."""
    if total is not None:
        if out is None and inp is not None and total >= inp:
            out = total - inp
        elif inp is None and out is not None and total >= out:
            inp = total - out
    cached = (read or 0) + (write or 0)
    if inp is not None and cached > inp:
        if a.warn is not None:
            a.warn(f"input tokens {inp} < cache read {read or 0} + write {write or 0}: counted as exclusive of cache")
        inp += cached
    return Usage(inp, out, read, write, reasoning)


def response_id(a: Attrs) -> str | None:
    rid = a.text(*C.RESPONSE_ID)
    if rid:
        return rid
    value = a.span.get(C.OI_OUTPUT_VALUE)
    mime = a.span.get(C.OI_OUTPUT_MIME)
    if not isinstance(value, str) or mime != "application/json" or len(value) > _MAX_OUTPUT_VALUE:
        return None
    if not value.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    found = doc.get("id") if isinstance(doc, dict) else None
    if isinstance(found, str) and 0 < len(found) <= 256 and not any(c.isspace() for c in found):
        return found
    return None


def server_address(a: Attrs) -> str | None:
    host = a.text(*C.SERVER_ADDRESS)
    if host:
        return host
    base = a.text(C.OPENAI_API_BASE)
    if base:
        try:
            return urlsplit(base).hostname or None
        except ValueError:
            return None
    return None


def ttft(a: Attrs, start_ns: int, events: Sequence[dict[str, Any]]) -> float | None:
    """Seconds to the first token: an attribute, else the first-chunk event's offset from the span's start
    ``start_ns`` (``events``: the span's, as stored and kept within the limits)."""
    value = a.number(*C.TTFT)
    if value is not None:
        return value
    if a.flag(*C.STREAM_FLAGS):
        value = a.number(C.OPENLIT_TTFT)
        if value is not None:
            return value
    for event in events:
        if event["name"] in C.FIRST_CHUNK_EVENTS and event["time_ns"] >= start_ns > 0:
            return (event["time_ns"] - start_ns) / 1e9
    return None


def error_type_from_events(events: Sequence[dict[str, Any]]) -> str | None:
    """`exception.type` of the last exception event of a span's ``events`` (as stored; OpenInference records errors
    only this way)."""
    for event in reversed(events):
        if event["name"] == C.EXCEPTION_EVENT:
            value = event["attributes"].get(C.EXCEPTION_TYPE)
            if isinstance(value, str) and value:
                return value
    return None
