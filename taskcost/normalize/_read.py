"""A request's wire form read into the tuples the normaliser works on (the compiled reader, ``_wire``, or the same
through protobuf's messages, ``_wire_py``), and the parts a reader hands back raw read within the intake limits:
attributes over their count, a span's events over theirs, array and map values."""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from taskcost.normalize._attrs import any_value, attributes_dict, limited
from taskcost.normalize._decode import DecodeError
from taskcost.normalize._limits import Cuts, dropped_count, kept_attributes, kept_events

try:  # compiled at install (Cython); where it could not be, the same read through protobuf's messages
    from taskcost.normalize._wire import WireError, read_request  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - the compiled reader is built by every install the tests run on
    from taskcost.normalize._wire_py import WireError, read_request

__all__ = ["cut_attributes", "cut_events", "read_request", "read_wire"]

_M = TypeVar("_M", bound=Message)


def read_wire(data: bytes, cuts: Cuts) -> list[tuple[Any, list[tuple[str, str, int, list[tuple[Any, ...]]]]]]:
    """The request's resources, scopes and spans as tuples (``_wire_py`` lays them out), within ``cuts``' limits."""

    def nested(raw: bytes) -> Any:  # an array or map value, and a value sent in two parts: protobuf merges them
        return any_value(_message(AnyValue, raw), cuts)

    limits = cuts.limits
    try:
        return read_request(
            data,
            cuts.max_attributes,
            limits.attribute_count,
            limits.event_attribute_count,
            cuts.max_events,
            cuts.max_length,
            cuts.truncate,
            nested,
        )
    except (WireError, _PbDecodeError) as exc:
        raise DecodeError(f"body is not a valid protobuf ExportTraceServiceRequest: {exc}") from None


def cut_attributes(pairs: list[tuple[str, bytes]], limit: int, cuts: Cuts) -> dict[str, Any]:
    """Attributes over ``limit`` as (key, AnyValue bytes), cut to it: those the normaliser reads first, then the
    others in order (``kept_attributes``); what is dropped is counted in ``cuts`` (``attributes``, and ``pending``
    for the caller)."""
    keep = kept_attributes((key for key, _ in pairs), limit, cuts.limits.keep)
    cuts.pending = len(pairs) - len(keep)
    cuts.attributes += cuts.pending
    out: dict[str, Any] = {}
    for i in keep:
        key, raw = pairs[i]
        out[key] = any_value(_message(AnyValue, raw), cuts)
    return out


def _message(cls: type[_M], raw: bytes) -> _M:
    """The part of a request the wire reader hands back raw, parsed by protobuf (DecodeError when it is not one)."""
    try:
        return cls.FromString(raw)
    except (_PbDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid protobuf ExportTraceServiceRequest: {exc}") from None


def _event(e: Span.Event, cuts: Cuts) -> dict[str, Any]:
    """One event as stored: name, time and attributes (within the limits), and its dropped count when there is one."""
    kvs = e.attributes
    dropped = e.dropped_attributes_count
    limit = cuts.limits.event_attribute_count
    if len(kvs) > limit:
        kvs = limited(kvs, limit, cuts)
        dropped = dropped_count(dropped, cuts.pending)
    event = {"name": e.name, "time_ns": e.time_unix_nano, "attributes": attributes_dict(kvs, cuts)}
    if dropped:
        event["dropped_attributes_count"] = dropped
    return event


def cut_events(raws: list[bytes], cuts: Cuts) -> tuple[list[dict[str, Any]], int]:
    """A span's events (each Event's bytes) as stored, when they or one's attributes are over their count limits:
    the first-chunk and last exception events kept first (``kept_events``); and how many were dropped."""
    events = [_message(Span.Event, raw) for raw in raws]
    over = 0
    if len(events) > cuts.max_events:
        keep = kept_events((e.name for e in events), cuts.max_events)
        over = len(events) - len(keep)
        cuts.events += over
        events = [events[i] for i in keep]
    return [_event(e, cuts) for e in events], over
