"""Decoding OTLP/HTTP bodies (binary protobuf and the OTLP JSON mapping) into one message type."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError as _PbDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["DecodeError", "decode_json", "decode_protobuf", "encode_json", "key_value", "to_any_value"]

# Fields that OTLP/JSON encodes as hex where the protobuf JSON mapping expects base64.
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


class DecodeError(ValueError):
    """The body is not a valid ExportTraceServiceRequest."""


def decode_protobuf(body: bytes) -> ExportTraceServiceRequest:
    msg = ExportTraceServiceRequest()
    try:
        msg.ParseFromString(body)
    except (_PbDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid protobuf ExportTraceServiceRequest: {exc}") from None
    return msg


def _hex_to_b64(value: Any, where: str) -> Any:
    if not isinstance(value, str):
        raise DecodeError(f"{where} must be a hex string, got {type(value).__name__}")
    if value == "":
        return ""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise DecodeError(f"{where} is not hex: {value[:40]!r}") from None
    return base64.b64encode(raw).decode("ascii")


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{where} must be an array, got {type(value).__name__}")
    return value


def _fix_ids(spans: list[Any], where: str) -> None:
    for i, span in enumerate(spans):
        if not isinstance(span, dict):
            raise DecodeError(f"{where}[{i}] must be an object")
        for key in _ID_FIELDS:
            if key in span:
                span[key] = _hex_to_b64(span[key], f"{where}[{i}].{key}")
        for j, link in enumerate(_list(span.get("links"), f"{where}[{i}].links")):
            if not isinstance(link, dict):
                raise DecodeError(f"{where}[{i}].links[{j}] must be an object")
            for key in _ID_FIELDS:
                if key in link:
                    link[key] = _hex_to_b64(link[key], f"{where}[{i}].links[{j}].{key}")


def decode_json(body: bytes) -> ExportTraceServiceRequest:
    """Decode the OTLP JSON mapping: hex ids, integer enums, int64 as strings or numbers."""
    try:
        doc = json.loads(body)
    except RecursionError:
        raise DecodeError("JSON is nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DecodeError(f"body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise DecodeError("body must be a JSON object (ExportTraceServiceRequest)")
    for r, rs in enumerate(_list(doc.get("resourceSpans", doc.get("resource_spans")), "resourceSpans")):
        if not isinstance(rs, dict):
            raise DecodeError(f"resourceSpans[{r}] must be an object")
        scopes = _list(rs.get("scopeSpans", rs.get("scope_spans")), f"resourceSpans[{r}].scopeSpans")
        for s, ss in enumerate(scopes):
            if not isinstance(ss, dict):
                raise DecodeError(f"resourceSpans[{r}].scopeSpans[{s}] must be an object")
            where = f"resourceSpans[{r}].scopeSpans[{s}].spans"
            _fix_ids(_list(ss.get("spans"), where), where)
    msg = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(doc, msg, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise DecodeError(f"JSON is not an OTLP ExportTraceServiceRequest: {exc}") from None
    return msg


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
