"""Attribute values: OTLP AnyValue -> Python, and typed, validated reads over span and resource attributes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from taskcost.normalize._limits import Cuts, kept_attributes

__all__ = [
    "MAX_MONEY",
    "MAX_TOKENS",
    "Attrs",
    "any_value",
    "attributes_dict",
    "limited",
    "pricing_value",
    "to_decimal",
    "to_int",
    "to_money",
]

# Every typed value the normaliser reads is converted here, to what the store can hold and add up: a value outside
# these bounds is not real data, and is read as absent (NULL), with a reason (``Attrs.ignore``), never an error.
#
# A token count above this is not a real request. (Counts are BIGINT; sums of them stay below 2^63 up to nine
# million such calls in one task.)
MAX_TOKENS = 10**12
# Money is stored as DECIMAL(38, 12): 12 places after the point. One amount of a quadrillion dollars or more is
# not real; below it, the sums the store keeps (a task's cost, over up to 10^11 such amounts) stay below 10^26,
# where DECIMAL(38, 12) ends -- a single amount near 10^26 would fit, but two of them in one task would fail the
# commit of the batch that carries them.
MAX_MONEY = Decimal(10) ** 15
_CENT_FRACTION = Decimal(1).scaleb(-12)
_WIDE = Context(prec=60)  # enough digits for any amount below MAX_MONEY at 12 places
_SHOWN = 40  # characters of an ignored value quoted in its reason
_NO_LIMIT = 2**63


def any_value(v: AnyValue, cuts: Cuts | None = None) -> Any:
    """An AnyValue as Python; with ``cuts``, within the request's limits: a string or bytes (as hex) value longer than
    the value length is truncated, an array past the attribute count keeps its first elements (counted as one
    truncated value), a map past it keeps its attributes as a span's list would (counted as dropped)."""
    which = v.WhichOneof("value")
    if which == "string_value":  # by far the most common: first
        text = v.string_value
        return text if cuts is None or len(text) <= cuts.max_length else cuts.truncate(text)
    if which is None:
        return None
    if which == "array_value":
        values = v.array_value.values
        if cuts is not None and len(values) > cuts.limits.attribute_count:
            cuts.values += 1
            values = values[: cuts.limits.attribute_count]
        return [any_value(x, cuts) for x in values]
    if which == "kvlist_value":
        kvs = v.kvlist_value.values
        if cuts is not None and len(kvs) > cuts.limits.attribute_count:
            kvs = limited(kvs, cuts.limits.attribute_count, cuts)
            cuts.pending = 0  # a map has no dropped count of its own: counted in ``cuts.attributes`` only
        return attributes_dict(kvs, cuts)
    if which == "bytes_value":
        text = v.bytes_value.hex()
        return text if cuts is None or len(text) <= cuts.max_length else cuts.truncate(text)
    return getattr(v, which)


def limited(kvs: Sequence[KeyValue], limit: int, cuts: Cuts) -> list[KeyValue]:
    """Attributes ``kvs``, over ``limit``, cut to it: those the normaliser reads first, then the others in order
    (``kept_attributes``); what is dropped is counted in ``cuts`` (``attributes``, and ``pending`` for the caller)."""
    keep = kept_attributes((kv.key for kv in kvs), limit, cuts.limits.keep)
    cuts.pending = len(kvs) - len(keep)
    cuts.attributes += cuts.pending
    return [kvs[i] for i in keep]


def attributes_dict(kvs: Any, cuts: Cuts | None = None) -> dict[str, Any]:
    """Attributes as a dict (a later key overrides an earlier one); with ``cuts``, string values longer than the
    value length limit truncated (the caller applies the count limit: ``limited``)."""
    # the hot loop of ingest: scalar values read inline (one function call less per attribute); a non-empty
    # string_value is the member set (values are a oneof), which saves asking which member is set for most values
    out: dict[str, Any] = {}
    longest = cuts.max_length if cuts is not None else _NO_LIMIT
    for kv in kvs:
        v = kv.value
        text = v.string_value
        if text:
            out[kv.key] = text if len(text) <= longest else cuts.truncate(text)  # type: ignore[union-attr]
            continue
        which = v.WhichOneof("value")
        if which == "int_value":
            out[kv.key] = v.int_value
        elif which == "double_value":
            out[kv.key] = v.double_value
        elif which == "bool_value":
            out[kv.key] = v.bool_value
        elif which == "string_value":
            out[kv.key] = text
        else:
            out[kv.key] = any_value(v, cuts)
    return out


def to_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _to_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def to_decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() and d >= 0 else None


def to_money(value: Any, ignore: Callable[[str], None] | None = None, key: str = "amount") -> Decimal | None:
    """A non-negative amount of money as the store keeps it: rounded to 12 places, half to even (0.1*3 sent as
    0.30000000000000004 is 0.300000000000); None for what is not one (negative, NaN, infinite, not a number) or
    is a quadrillion dollars or more, with a reason that names it (``ignore``)."""
    d = to_decimal(value)
    if d is not None and d < MAX_MONEY:
        d = d.quantize(_CENT_FRACTION, rounding=ROUND_HALF_EVEN, context=_WIDE)
        if d < MAX_MONEY:  # (999999999999999.9999999999999 rounds up to it)
            return d
    if value is not None and ignore is not None:
        ignore(_reason(key, value, "10^15 or more" if d is not None else "not an amount >= 0"))
    return None


def pricing_value(value: Any, ignore: Callable[[str], None] | None = None, key: str = "value") -> Any:
    """An attribute value as pricing may read it (a price variant's name, or a count of 1h cache writes): as sent,
    but for a float that is not finite (no count, no name), which is None with a reason."""
    if type(value) is float and not math.isfinite(value):
        if ignore is not None:
            ignore(_reason(key, value, "not a finite number"))
        return None
    return value


def _reason(key: str, value: Any, why: str) -> str:
    shown = repr(value) if isinstance(value, str | float | int) else type(value).__name__
    return f"ignored {key}={shown[:_SHOWN]}: {why}"


class Attrs:
    """Span attributes over resource attributes: the span wins. Reads take names in precedence order.

    ``warn``: a message for the client (partial success); ``ignore``: the same for a value a typed read skipped
    (counted as such); without ``ignore``, ``warn`` takes both. ``read``: the resource attributes reads may ask for
    (``NormalizeRules.read_names``; default: all of them), what each span's merged mapping copies: a resource's
    other attributes are never read, and copying them for every span would cost their number times the spans."""

    __slots__ = ("span", "resource", "warn", "ignore", "get", "merged")

    def __init__(
        self,
        span: dict[str, Any],
        resource: dict[str, Any],
        warn: Callable[[str], None] | None = None,
        ignore: Callable[[str], None] | None = None,
        read: dict[str, Any] | None = None,
    ) -> None:
        self.span = span
        self.resource = resource
        self.warn = warn
        self.ignore = ignore if ignore is not None else warn
        # one merged mapping, built once per span: every read is then a single C-level dict lookup
        base = resource if read is None else read
        merged = base | span if base else span
        self.merged = merged  # its names choose a call span's key table (_plan)
        self.get: Callable[[str], Any] = merged.get

    def has(self, *keys: str) -> bool:
        return any(self.get(k) is not None for k in keys)

    def text(self, *keys: str) -> str | None:
        get = self.get
        for key in keys:
            value = get(key)
            if type(value) is str:
                if value:  # an empty string counts as absent
                    return value
            elif value is not None and not isinstance(value, (list, dict)):
                return str(value)
        return None

    def integer(self, *keys: str, limit: int = MAX_TOKENS) -> int | None:
        """The first key with a whole number in [0, limit]; any other value is skipped, with a reason."""
        get = self.get
        for key in keys:
            value = get(key)
            if value is None:
                continue
            if type(value) is int and 0 <= value <= limit:  # nearly every value: an int (not a bool) in range
                return value
            number = to_int(value)
            if number is not None and 0 <= number <= limit:
                return number
            if self.ignore is not None:
                why = "not a whole number" if number is None else ("negative" if number < 0 else f"above {limit}")
                self.ignore(_reason(key, value, why))
        return None

    def number(self, *keys: str) -> float | None:
        """The first key with a finite number >= 0; any other value is skipped, with a reason."""
        for key in keys:
            value = self.get(key)
            if value is None:
                continue
            f = None if isinstance(value, bool) else _to_float(value)
            if f is not None and math.isfinite(f) and f >= 0:
                return f
            if self.ignore is not None:
                self.ignore(_reason(key, value, "not a finite number >= 0"))
        return None

    def flag(self, *keys: str) -> bool:
        for key in keys:
            value = self.get(key)
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
        return False

    def text_list(self, key: str) -> list[str] | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, list):
            return [str(x) for x in value]
        return [str(value)]
