"""Checking and converting user-supplied values. Record-time helpers return None for nonsense."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation

from opentelemetry.util.types import AttributeValue

from .guard import warn_once
from .names import (
    CALL_OVERRIDE_ATTRIBUTES,
    DEPLOYMENTS,
    ENGINE_TIMING_COUNTS,
    ENGINE_TIMING_SECONDS,
    FLAGS,
    INFRA_ATTRIBUTES,
    PARALLEL_SIZES,
    SPEC_METHODS,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# What an OTLP exporter can encode: an int attribute is an int64, a span time below 2^64 ns (the collector takes
# times below 2^63, the year 2262). One value beyond fails the encoding of the whole export batch, every span in it.
_MAX_INT = 2**63 - 1
# Money: the collector keeps amounts below 10^15 USD, to 12 decimal places rounded half to even (docs/conventions.md).
MAX_COST = Decimal(10) ** 15
_PLACES = Decimal(1).scaleb(-12)
_MAX_SENT_PLACES = 30  # more decimal places than this are rounded to the collector's 12 before sending
_WIDE = Context(prec=60)  # not the caller's decimal context: any amount below MAX_COST at 12 places fits
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
_FLAG_TEXT = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def coerce_count(value: object) -> int | None:
    """A token count: an int >= 0 (an integral float or a digit string is accepted) that fits an OTLP int64;
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        value = int(value) if value.is_integer() else None  # (inf and NaN are not integers)
    elif isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if text.isascii() and text.isdigit() else None
        except ValueError:  # more digits than int() reads
            value = None
    if isinstance(value, int):
        return value if 0 <= value <= _MAX_INT else None
    return None


def coerce_seconds(value: object) -> float | None:
    """A duration in seconds: a finite number >= 0; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def coerce_cost(value: object) -> str | None:
    """Money as a plain decimal string ("0.005"), from Decimal, str, int or float; else None.

    Exact: a float by its shortest representation (0.1 * 3 is "0.30000000000000004"), a Decimal, int or string
    as it is; the collector rounds to 12 places, half to even. An amount with more than 30 decimal places is
    rounded to those 12 here (the same result, in a short text). None for a negative, NaN, infinite amount, or one
    of 10^15 USD or more (the collector would keep no such amount)."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, Decimal):
            amount = value
        elif isinstance(value, int):
            amount = Decimal(value)
        elif isinstance(value, float):
            amount = Decimal(str(value))
        elif isinstance(value, str):
            amount = Decimal(value.strip())
        else:
            return None
    except (InvalidOperation, ValueError):
        return None
    if not amount.is_finite() or amount < 0 or amount >= MAX_COST:
        return None
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -_MAX_SENT_PLACES:
        amount = amount.quantize(_PLACES, rounding=ROUND_HALF_EVEN, context=_WIDE)
    return format(amount.copy_abs() if amount.is_zero() else amount, "f")


def to_epoch_ns(value: object) -> int | None:
    """A point in time as epoch nanoseconds, from a datetime (naive = local time) or an int (ns), from 1970 to
    2262 (what OTLP and the collector hold)."""
    if isinstance(value, bool):
        return None
    ns = None
    if isinstance(value, int):
        ns = value
    elif isinstance(value, datetime):
        try:
            aware = value if value.tzinfo is not None else value.astimezone()
        except (OverflowError, ValueError, OSError):  # a naive time the platform cannot place (year 1 or 9999)
            return None
        delta = aware - _EPOCH
        ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return ns if ns is not None and 0 <= ns <= _MAX_INT else None


def coerce_infra(key: str, value: object) -> AttributeValue:
    """Convert one infra tag to its attribute value; raise ValueError/TypeError when it is invalid."""
    if key not in CALL_OVERRIDE_ATTRIBUTES:
        known = ", ".join(sorted(CALL_OVERRIDE_ATTRIBUTES))
        raise ValueError(f"unknown infra tag {key!r}; known tags: {known}")
    if key == "gpu_count":
        count = coerce_count(value)
        if count is None:
            raise ValueError(f"gpu_count must be an int >= 0, got {value!r}")
        return count
    if key in PARALLEL_SIZES:
        size = coerce_count(value)
        if size is None or size < 1:
            raise ValueError(f"{key} must be an int >= 1, got {value!r}")
        return size
    if key in FLAGS:
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be a bool (true or false), got {value!r}")
        return value
    if key == "container_image_tags":
        if isinstance(value, str):
            return [value]
        if isinstance(value, Sequence) and all(isinstance(tag, str) for tag in value):
            return list(value)
        raise TypeError(f"container_image_tags must be a list of strings, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"{key} must be a string, got {type(value).__name__}")
    text = str(value).strip()
    if not text:
        raise ValueError(f"{key} must not be empty")
    if key == "deployment" and text not in DEPLOYMENTS:
        raise ValueError(f"deployment must be one of {sorted(DEPLOYMENTS)}, got {value!r}")
    if key == "spec_method" and not _IDENTIFIER.fullmatch(text):
        known = ", ".join(SPEC_METHODS)
        raise ValueError(f"spec_method must be one of {known} or another lower-case identifier, got {value!r}")
    return text


def coerce_infra_text(key: str, text: str) -> AttributeValue:
    """An infra tag given as text (an environment variable): a yes/no tag reads true/false, 1/0, yes/no."""
    if key in FLAGS:
        flag = _FLAG_TEXT.get(text.strip().lower())
        if flag is None:
            raise ValueError(f"{key} must be true or false, got {text!r}")
        return flag
    return coerce_infra(key, text)


def infra_resource_attributes(infra: Mapping[str, object]) -> dict[str, AttributeValue]:
    """configure(infra=...) -> resource attributes. Set-up time: raises on any invalid tag."""
    attributes: dict[str, AttributeValue] = {}
    for key, value in infra.items():
        if value is None:
            continue
        if key not in INFRA_ATTRIBUTES:
            known = ", ".join(sorted(INFRA_ATTRIBUTES))
            raise ValueError(f"unknown infra tag {key!r}; known tags: {known}")
        attributes[INFRA_ATTRIBUTES[key]] = coerce_infra(key, value)
    return attributes


def override_span_attributes(overrides: Mapping[str, object]) -> dict[str, AttributeValue]:
    """Per-call infra overrides -> span attributes. Record time: invalid tags are dropped with a warning."""
    attributes: dict[str, AttributeValue] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        try:
            attributes[CALL_OVERRIDE_ATTRIBUTES[key]] = coerce_infra(key, value)
        except (ValueError, TypeError) as exc:
            warn_once(("override", key), "taskcost_sdk: dropped per-call infra override: %s", exc)
    return attributes


def engine_timing_attributes(timings: Mapping[str, object]) -> dict[str, AttributeValue]:
    """set_engine_timings() keywords -> span attributes. Record time: an invalid value is dropped with a
    warning, the others are kept; accepted draft tokens above the draft tokens are dropped."""
    attributes: dict[str, AttributeValue] = {}
    counts: dict[str, int] = {}
    for keyword, value in timings.items():
        if value is None:
            continue
        if keyword in ENGINE_TIMING_SECONDS:
            seconds = coerce_seconds(value)
            if seconds is not None:
                attributes[ENGINE_TIMING_SECONDS[keyword]] = seconds
                continue
        elif keyword in ENGINE_TIMING_COUNTS:
            count = coerce_count(value)
            if count is not None:
                counts[keyword] = count
                continue
        warn_once(("engine", keyword), "taskcost_sdk: dropped engine timing %s=%r", keyword, value)
    accepted, drafted = counts.get("accepted_tokens"), counts.get("draft_tokens")
    if accepted is not None and drafted is not None and accepted > drafted:
        warn_once("engine accepted", "taskcost_sdk: dropped accepted_tokens: more than the draft_tokens")
        del counts["accepted_tokens"]
    attributes.update({ENGINE_TIMING_COUNTS[keyword]: count for keyword, count in counts.items()})
    return attributes


def resolve_times(start: object, end: object, duration_s: object, now_ns: int) -> tuple[int, int]:
    """(start, end) in epoch ns for a call recorded after the fact. Explicit start/end win over the
    duration; a missing end is ``now_ns``; a missing start is end - duration, else end."""
    start_ns = end_ns = duration_ns = None
    if start is not None and (start_ns := to_epoch_ns(start)) is None:
        warn_once("start_time", "taskcost_sdk: ignored start_time=%r: use a datetime or epoch ns", start)
    if end is not None and (end_ns := to_epoch_ns(end)) is None:
        warn_once("end_time", "taskcost_sdk: ignored end_time=%r: use a datetime or epoch ns", end)
    if duration_s is not None:
        seconds = coerce_seconds(duration_s)
        if seconds is None or seconds * 1e9 > _MAX_INT:
            warn_once(
                "duration_s", "taskcost_sdk: ignored duration_s=%r: it must be seconds >= 0 (< 292 years)", duration_s
            )
        else:
            duration_ns = round(seconds * 1e9)
    if end_ns is None:
        end_ns = start_ns + duration_ns if start_ns is not None and duration_ns is not None else now_ns
    if start_ns is None:
        start_ns = end_ns - duration_ns if duration_ns is not None else end_ns
    if not 0 <= start_ns <= end_ns <= _MAX_INT and duration_ns is not None:  # a duration of centuries
        warn_once("duration_range", "taskcost_sdk: duration_s=%r goes beyond 1970..2262; clamped", duration_s)
        start_ns, end_ns = max(0, start_ns), min(end_ns, _MAX_INT)
    if start_ns > end_ns:
        warn_once("time_order", "taskcost_sdk: start_time is after end_time; using end_time for both")
        start_ns = end_ns
    return start_ns, end_ns
