"""OTLP intake limits: what one span, one list of attributes, one value and one request may hold once decoded.

The counts follow the OpenTelemetry SDK's attribute limits (``OTEL_ATTRIBUTE_COUNT_LIMIT``,
``OTEL_SPAN_EVENT_COUNT_LIMIT``, ``OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT``, ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``): past a
count, attributes and events are dropped and counted (OTLP's ``dropped_attributes_count`` and
``dropped_events_count`` on the span and event); a longer string value is truncated, as the SDK truncates it. The
span stays; a batch is never refused for what one span carries. When a list is over its count, the attributes the
normaliser reads (``keep``) are kept first, then the others in the order sent.

What a whole request may expand into once decoded (``decoded_bytes``) is estimated from counts already known, before
each step that would allocate it: the body's size and, for large bodies only, a count of the bytes that can start a
JSON object or array or a protobuf message (C-speed ``bytes.count``/``translate``), before parsing; the spans,
attributes and events kept, span by span, while normalising. Over it, the request is refused (``DecodedTooLarge``,
413). The figures per unit are measured (docs/security.md, "Intake").
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

from taskcost.normalize import _conventions as C

__all__ = ["Cuts", "DecodedTooLarge", "IntakeLimits", "dropped_count", "kept_attributes", "kept_events"]

MiB = 1024 * 1024

# What one unit of a decoded request costs a decode worker, in bytes, measured on this project's machine (peak RSS of
# a worker decoding bodies made of that unit, docs/security.md), rounded up: a span's records and Python objects, an
# attribute kept (its dict entry, JSON text, and its share of the Arrow tables), an event, and each byte of the body
# (parsed copy, Python strings, JSON text, Arrow). Each span row also carries its resource's attributes as JSON
# (``RESOURCE_COPIES`` copies of it: the Arrow column, its IPC stream and the bytes sent on).
SPAN_BYTES = 2_048
ATTRIBUTE_BYTES = 192
EVENT_BYTES = 192
BODY_FACTOR = 4
RESOURCE_COPIES = 3
# Before parsing: json.loads makes a dict (about 232 bytes with its entries) of every '{' and a list of every '[';
# upb makes a message (about 54 bytes with its slot) of every field that starts with one of the 15 length-delimited
# tags of fields 1-15 (every message of the trace schema has such a tag). Besides, the body is there several times
# (``JSON_BODY_COPIES``, ``PB_BODY_COPIES``: as it reached a decode worker, unpickled, parsed into protobuf or written
# as its wire form). Counted only in bodies large enough to matter.
JSON_OBJECT_BYTES = 232
JSON_ARRAY_BYTES = 64
JSON_BODY_COPIES = 4
PB_MESSAGE_BYTES = 64
PB_BODY_COPIES = 3
_PB_TAGS = bytes((n << 3) | 2 for n in range(1, 16))
_PB_NOT_TAGS = bytes(b for b in range(256) if b not in _PB_TAGS)
_UINT32_MAX = 2**32 - 1
# Events the normaliser reads: the first that marks the first chunk (time to first token), the last exception (its
# error type).
_FIRST_CHUNK_EVENTS = frozenset(C.FIRST_CHUNK_EVENTS)


class DecodedTooLarge(ValueError):
    """The request would decode into more than ``max_decoded_bytes``: refused whole (413), nothing kept."""


@dataclass(frozen=True, slots=True)
class IntakeLimits:
    """The limits (settings ``attribute_count_limit`` ...); the defaults are the settings' defaults."""

    attribute_count: int = 1024  # attributes of one span, resource or scope; elements of one array or map value
    event_attribute_count: int = 128  # attributes of one span event
    span_event_count: int = 1024  # events of one span
    attribute_value_length: int = MiB  # characters of one string value (longer ones are truncated)
    decoded_bytes: int = 512 * MiB  # what one request may expand into once decoded (estimated)
    # the attribute names kept first when a list is over its count: those the normaliser reads (NormalizeRules)
    keep: frozenset[str] = field(default=frozenset(), compare=False)


class Cuts:
    """One request's limits and what they cut, counted as they are applied; and its estimated decoded size so far
    (``spend`` raises DecodedTooLarge past ``decoded_bytes``). Filled by the JSON decoder and by the normaliser."""

    __slots__ = (
        "attributes",
        "budget",
        "events",
        "limits",
        "max_attributes",
        "max_events",
        "max_length",
        "pending",
        "spent",
        "values",
    )

    def __init__(self, limits: IntakeLimits) -> None:
        self.limits = limits
        # the limits the normaliser checks for every span, one attribute read away
        self.max_attributes = limits.attribute_count
        self.max_events = limits.span_event_count
        self.max_length = limits.attribute_value_length
        self.budget = limits.decoded_bytes
        self.attributes = 0  # attributes dropped (of spans, resources, scopes, events, map values)
        self.events = 0  # span events dropped
        self.values = 0  # values truncated (strings past the length, arrays past the count)
        self.spent = 0  # estimated bytes of the decoded request
        self.pending = 0  # attributes the last limited list dropped, for its message's dropped_attributes_count

    def counts(self) -> tuple[int, int, int, int, int]:
        """What has been counted so far (``restore`` puts it back: a decoder that reads a body again)."""
        return self.attributes, self.events, self.values, self.spent, self.pending

    def restore(self, counts: tuple[int, int, int, int, int]) -> None:
        self.attributes, self.events, self.values, self.spent, self.pending = counts

    def spend(self, n: int) -> None:
        self.spent += n
        if self.spent > self.budget:
            self.over()

    def over(self) -> None:
        """Raise DecodedTooLarge: ``spent`` is past the budget."""
        raise DecodedTooLarge(
            f"this request would decode into more than {self.limits.decoded_bytes} bytes (max_decoded_bytes, "
            "estimated from its spans, attributes and size); send it in smaller batches"
        )

    def truncate(self, text: str) -> str:
        """``text`` cut to the value length limit (counted)."""
        self.values += 1
        return text[: self.limits.attribute_value_length]

    def check_json(self, body: bytes) -> None:
        """Before json.loads: its objects and arrays (an upper bound: braces in strings count too) would not take
        more than the request may. Counted only when the body is large enough that they could."""
        limit = self.limits.decoded_bytes
        if len(body) * (JSON_OBJECT_BYTES // 2 + JSON_BODY_COPIES) <= limit:  # a '{' takes 2 bytes at least
            return
        objects, arrays = body.count(b"{"), body.count(b"[")
        estimate = JSON_BODY_COPIES * len(body) + JSON_OBJECT_BYTES * objects + JSON_ARRAY_BYTES * arrays
        if estimate > limit:
            raise DecodedTooLarge(
                f"this JSON body would parse into about {estimate} bytes, more than {limit} (max_decoded_bytes); "
                "send it in smaller batches"
            )

    def check_protobuf(self, body: bytes) -> None:
        """Before the protobuf parse: the messages it can hold (an upper bound) would not take more than the request
        may. Counted only when the body is large enough that they could."""
        limit = self.limits.decoded_bytes
        if len(body) * (PB_MESSAGE_BYTES // 2 + PB_BODY_COPIES) <= limit:  # a message takes 2 bytes at least
            return
        estimate = PB_BODY_COPIES * len(body) + PB_MESSAGE_BYTES * len(body.translate(None, _PB_NOT_TAGS))
        if estimate > limit:
            raise DecodedTooLarge(
                f"this protobuf body would parse into up to {estimate} bytes, more than {limit} (max_decoded_bytes); "
                "send it in smaller batches"
            )


def dropped_count(sent: int, dropped: int) -> int:
    """A dropped_*_count field: what the sender dropped plus what this collector dropped (uint32)."""
    return min(sent + dropped, _UINT32_MAX)


def kept_attributes(keys: Iterable[object], limit: int, keep: Container[str]) -> list[int]:
    """The indexes to keep of a list of attributes over ``limit``, in order: every attribute named in ``keep`` (the
    last of each name: a later one overrides an earlier one), then the others in order while there is room."""
    last: dict[str, int] = {}
    others: list[int] = []
    for i, key in enumerate(keys):
        if type(key) is str and key in keep:
            last[key] = i
        elif len(others) < limit:
            others.append(i)
    room = max(0, limit - len(last))
    return sorted([*last.values(), *others[:room]])


def kept_events(names: Iterable[object], limit: int) -> list[int]:
    """The indexes to keep of a span's events over ``limit``, in order: the first that marks the first chunk and the
    last exception (what the normaliser reads), then the others in order while there is room."""
    first_chunk = last_exception = -1
    others: list[int] = []  # the first limit + 1 of the rest (the last exception may be one of them)
    for i, name in enumerate(names):
        if name == C.EXCEPTION_EVENT:
            last_exception = i
        if first_chunk < 0 and type(name) is str and name in _FIRST_CHUNK_EVENTS:
            first_chunk = i
        elif len(others) <= limit:
            others.append(i)
    first = [i for i in (first_chunk, last_exception) if i >= 0]
    rest = [i for i in others if i != last_exception][: max(0, limit - len(first))]
    return sorted({*first, *rest})
