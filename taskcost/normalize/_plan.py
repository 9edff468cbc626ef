"""The key table of a call span: for the set of attribute names a span (over its resource) carries, which one name
each canonical field is read from, worked out once per such set and reused by every span of that shape.

The conventions (_conventions) list several names per field, in precedence order; most spans carry one convention,
so probing every name of every field for every span costs far more than the read itself. Spans of one
instrumentation carry the same names in the same order, so the names a span carries (a tuple, cheap to hash)
choose a ``Plan``: per field, the first of its names present (None for none: the read is then ``None`` at once), and
whether the rarer fallbacks (a response id in OpenInference's output, a TTFT from a stream flag, a server address
from an API base URL, an agent named by Traceloop's span kind, pricing, prompt fingerprint and engine-timing names)
can apply at all. A value at the chosen name that is absent or not of its usual type is read by the general,
precedence-ordered reader (``Attrs``), which gives the same answer and reason; so the table only skips the
look-ups that cannot find anything.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from taskcost.normalize import _conventions as C
from taskcost.normalize import _names as N
from taskcost.normalize._engine import TIMING_NAMES

__all__ = ["CALL_FIELDS", "ENGINE_TIMINGS", "PROMPT_NAMES", "Plan", "call_plan"]

CALL_FIELDS: tuple[tuple[str, ...], ...] = (
    C.INPUT_TOKENS,
    C.OUTPUT_TOKENS,
    C.CACHE_READ_TOKENS,
    C.CACHE_WRITE_TOKENS,
    C.REASONING_TOKENS,
    C.TOTAL_TOKENS,
    (N.CALL_ATTEMPT,),
    (N.CALL_ID,),
    C.PROVIDER,
    C.REQUEST_MODEL,
    C.RESPONSE_MODEL,
    C.RESPONSE_ID,
    C.TTFT,
    C.SERVER_ADDRESS,
    C.CONVERSATION_ID,
    C.AGENT_NAME,
)
"""The fields a call reads, in the order of ``Plan.keys``; each with its names in precedence order."""

ENGINE_TIMINGS = frozenset(TIMING_NAMES)
PROMPT_NAMES = frozenset(
    {N.PROMPT_BLOCK_CHARS, N.PROMPT_BLOCK_KINDS, N.PROMPT_STABLE_PREFIX_CHARS, N.PROMPT_PREFIX_BREAK_BLOCK}
)
_TTFT_FALLBACK = frozenset({*C.STREAM_FLAGS, C.OPENLIT_TTFT})
# distinct shapes remembered (a shape is a span's names over its resource's): a fleet sends a few dozen; a client
# sending a new shape per span only churns it, and it holds at most this many name tuples (attribute_count names each)
_PLANS = 256


@dataclass(frozen=True, slots=True)
class Plan:
    keys: tuple[str | None, ...]  # per CALL_FIELDS entry: the first of its names present, else None (never a key)
    pricing: tuple[str, ...]  # the pricing attributes present, in the rules' order
    prompt: bool  # a prompt fingerprint name is present
    timings: bool  # an engine timing name is present
    output_value: bool  # OpenInference's output.value is present (a response id may be in it)
    ttft_flags: bool  # a stream flag or OpenLIT's TTFT is present
    api_base: bool  # OpenLLMetry's API base URL is present (a server address may be in it)
    traceloop_kind: bool  # Traceloop's span kind is present (it may name the agent)


@functools.lru_cache(maxsize=_PLANS)
def call_plan(names: tuple[str, ...], pricing: tuple[str, ...]) -> Plan:
    """The plan of a call span carrying ``names`` (its own over its resource's, as read), with the rules' pricing
    attribute names ``pricing``."""
    present = frozenset(names)
    return Plan(
        tuple(next((n for n in field if n in present), None) for field in CALL_FIELDS),
        tuple(n for n in pricing if n in present),
        not present.isdisjoint(PROMPT_NAMES),
        not present.isdisjoint(ENGINE_TIMINGS),
        C.OI_OUTPUT_VALUE in present,
        not present.isdisjoint(_TTFT_FALLBACK),
        C.OPENAI_API_BASE in present,
        C.TRACELOOP_SPAN_KIND in present,
    )
