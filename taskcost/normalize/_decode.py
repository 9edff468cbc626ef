"""Decoding OTLP/HTTP bodies (binary protobuf and the OTLP JSON mapping) into one message type."""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError as _PbDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from taskcost.normalize._json import JsonShapeError, request_wire
from taskcost.normalize._limits import BODY_FACTOR, Cuts

__all__ = [
    "DecodeError",
    "decode_json",
    "decode_protobuf",
    "encode_json",
    "json_wire",
    "key_value",
    "protobuf_wire",
    "to_any_value",
]


class DecodeError(ValueError):
    """The body is not a valid ExportTraceServiceRequest."""


def decode_protobuf(body: bytes, cuts: Cuts | None = None) -> ExportTraceServiceRequest:
    """The request in ``body``; with ``cuts``, refused (DecodedTooLarge) when it could parse into more than the
    request's limit, and the body's share of its decoded size counted (the per-span limits are the normaliser's:
    the parse is protobuf's, whole)."""
    if cuts is not None:
        cuts.check_protobuf(body)
    msg = ExportTraceServiceRequest()
    try:
        msg.ParseFromString(body)
    except (_PbDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid protobuf ExportTraceServiceRequest: {exc}") from None
    if cuts is not None:
        cuts.spend(BODY_FACTOR * len(body))
    return msg


def protobuf_wire(body: bytes, cuts: Cuts) -> bytes:
    """A protobuf body as the normaliser reads it (``normalize_wire``): refused (DecodedTooLarge) when it could parse
    into more than the request's limit, and the body's share of its decoded size counted."""
    cuts.check_protobuf(body)
    cuts.spend(BODY_FACTOR * len(body))
    return body


# Where orjson and the json module read a body differently, json_wire uses json: orjson refuses what json accepts
# (lone surrogates, NaN and Infinity, numbers past a double's range, UTF-16 and UTF-32, nesting past 1024: its error
# sends the body to json), and reads an integer outside [-2**63, 2**64) as a float. Such a float fails the range
# check of every integer field as the integer would, except one a hair below -2**63, which rounds to it: a body with
# that number's first digits goes to json.
_NEAR_INT64_MIN = b"-922337203685477"
_UNREAD = object()


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise DecodeError("JSON is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of more than 4300 digits
        raise DecodeError(f"body is not valid JSON: {exc}") from None


def _wire(doc: Any, cuts: Cuts | None) -> bytes:
    if not isinstance(doc, dict):
        raise DecodeError("body must be a JSON object (ExportTraceServiceRequest)")
    try:
        return request_wire(doc, cuts)
    except JsonShapeError as exc:
        raise DecodeError(f"JSON is not an OTLP ExportTraceServiceRequest: {exc}") from None


def json_wire(body: bytes, cuts: Cuts | None = None) -> bytes:
    """An OTLP/JSON body as the protobuf wire form of its request (what ``decode_json`` parses, and the normaliser
    reads: ``normalize_wire``). The same checks and limits as ``decode_json``.

    The body is parsed by orjson (about twice as fast) where it reads it as the json module does; a body it refuses
    or might read otherwise, and every body whose request is refused, is parsed by json, so that what is accepted
    and the errors given are json's. (One difference is left: a body nested between about 1000 and 1024 deep, past
    json's recursion limit, in a field the request ignores, is accepted.)"""
    if cuts is not None:
        cuts.check_json(body)
    doc: Any = _UNREAD
    if _NEAR_INT64_MIN not in body:
        with contextlib.suppress(orjson.JSONDecodeError):
            doc = orjson.loads(body)
    wire = None
    if doc is not _UNREAD:
        counted = None if cuts is None else cuts.counts()
        with contextlib.suppress(DecodeError):
            wire = _wire(doc, cuts)
        # refused: the error json's reading gives (the same, but for a number orjson read as a float). Here, out of
        # the handler, nothing holds the first reading any more (the error's frames did): one parse at a time
        del doc
        if wire is None and cuts is not None and counted is not None:
            cuts.restore(counted)
    if wire is None:
        wire = _wire(_loads(body), cuts)
    if cuts is not None:
        cuts.spend(BODY_FACTOR * len(body))
    return wire


def decode_json(body: bytes, cuts: Cuts | None = None) -> ExportTraceServiceRequest:
    """Decode the OTLP JSON mapping: hex ids, integer enums, int64 as strings or numbers.

    Accepts and rejects what ``json_format.ParseDict(..., ignore_unknown_fields=True)`` did (with the hex ids
    turned into base64 first), about ten times faster: see ``_json``. With ``cuts``, within the request's limits:
    refused (DecodedTooLarge) before parsing when its JSON could take more than the request may; attributes and
    events past their counts are left out of the message (counted in ``cuts`` and the dropped counts)."""
    return ExportTraceServiceRequest.FromString(json_wire(body, cuts))


def encode_json(req: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP/JSON mapping of a request (lowerCamelCase keys, hex ids, integer enums, int64 as
    strings): the inverse of ``decode_json``, for tools and tests that speak OTLP/JSON."""
    doc = json_format.MessageToDict(req, use_integers_for_enums=True)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = base64.b64decode(link[key]).hex()
    return doc


def to_any_value(value: Any) -> AnyValue:
    """A Python value as an OTLP AnyValue (bool, int, float, str, sequences): the inverse of reading one."""
    v = AnyValue()
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    elif isinstance(value, (list, tuple)):
        v.array_value.values.extend(to_any_value(x) for x in value)
    else:
        v.string_value = str(value)
    return v


def key_value(key: str, value: Any) -> KeyValue:
    """One OTLP attribute, for tools and tests that build requests by hand."""
    return KeyValue(key=key, value=to_any_value(value))
