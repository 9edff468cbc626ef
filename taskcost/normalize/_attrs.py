"""Attribute values: OTLP AnyValue -> Python, and typed, validated reads over span and resource attributes."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["MAX_MONEY", "MAX_TOKENS", "Attrs", "any_value", "attributes_dict", "to_decimal", "to_int", "to_money"]

# A token count above this is not a real request; it is treated as absent (and counted as a warning).
MAX_TOKENS = 10**12
# Money is stored as DECIMAL(38, 12): 12 places after the point, and below 10^26 dollars.
_CENT_FRACTION = Decimal(1).scaleb(-12)
MAX_MONEY = Decimal(10) ** 26
_WIDE = Context(prec=60)  # enough digits for any amount below MAX_MONEY at 12 places


def any_value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "string_value":  # by far the most common: first
        return v.string_value
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return attributes_dict(v.kvlist_value.values)
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def attributes_dict(kvs: Any) -> dict[str, Any]:
    # the hot loop of ingest: scalar values read inline (one function call less per attribute); a non-empty
    # string_value is the member set (values are a oneof), which saves asking which member is set for most values
    out: dict[str, Any] = {}
    for kv in kvs:
        v = kv.value
        text = v.string_value
        if text:
            out[kv.key] = text
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
            out[kv.key] = any_value(v)
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


def to_decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        d = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() and d >= 0 else None


def to_money(value: Any, warn: Callable[[str], None] | None = None, key: str = "amount") -> Decimal | None:
    """A non-negative amount of money as the store keeps it: rounded to 12 places, half to even (0.1*3 sent as
    0.30000000000000004 is 0.300000000000); None for what is not one (negative, NaN, infinite, not a number) or
    does not fit (10^26 and more), with a warning that names it."""
    d = to_decimal(value)
    if d is None or d >= MAX_MONEY:
        if value is not None and warn is not None:
            why = "10^26 or more" if d is not None else "not an amount >= 0"
            warn(f"ignored {key}={str(value)[:40]!r}: {why}")
        return None
    return d.quantize(_CENT_FRACTION, rounding=ROUND_HALF_EVEN, context=_WIDE)


class Attrs:
    """Span attributes over resource attributes: the span wins. Reads take names in precedence order."""

    __slots__ = ("span", "resource", "warn", "get")

    def __init__(
        self, span: dict[str, Any], resource: dict[str, Any], warn: Callable[[str], None] | None = None
    ) -> None:
        self.span = span
        self.resource = resource
        self.warn = warn
        # one merged mapping, built once per span: every read is then a single C-level dict lookup
        merged = resource | span if resource else span
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
        """The first key with a whole number in [0, limit]; out-of-range values are skipped with a warning."""
        get = self.get
        for key in keys:
            value = get(key)
            if value is None:
                continue
            if type(value) is not int:  # an int (not a bool) as it is; anything else through to_int
                value = to_int(value)
            if value is not None:
                if 0 <= value <= limit:
                    return value
                if self.warn is not None:
                    self.warn(f"ignored out-of-range {key}={value}")
        return None

    def number(self, *keys: str) -> float | None:
        for key in keys:
            value = self.get(key)
            if isinstance(value, bool) or value is None:
                continue
            try:
                f = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(f) and f >= 0:
                return f
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
