"""The OTLP/JSON decoder taskcost had before normalize._json (json.loads, hex ids -> base64, json_format.ParseDict),
kept as the oracle the decode_json tests compare against, and small document builders."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from taskcost.normalize import DecodeError, decode_json

# --- the oracle: decode_json as it was (json.loads, hex ids -> base64, json_format.ParseDict) ------------------
# Two changes, both marked: (1) the hex-id fix-up and the object checks visit resourceSpans/scopeSpans under both
# spellings (before, only the lowerCamelCase one when present, so ids under a second, snake_case spelling of the
# same field were read as base64); (2) exceptions that used to escape (OverflowError from "kind": Infinity or a
# 400-digit doubleValue, ValueError from a 5000-digit number, SystemError from upb looking up a field name with an
# unpaired surrogate) are DecodeErrors.

_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


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


def oracle(body: bytes) -> ExportTraceServiceRequest:
    try:
        doc = json.loads(body)
    except RecursionError:
        raise DecodeError("JSON is nested too deeply") from None
    except ValueError as exc:  # change (2): was (UnicodeDecodeError, json.JSONDecodeError)
        raise DecodeError(f"body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise DecodeError("body must be a JSON object (ExportTraceServiceRequest)")
    for rs_key in ("resourceSpans", "resource_spans"):  # change (1): was doc.get("resourceSpans", doc.get(...))
        for r, rs in enumerate(_list(doc.get(rs_key), "resourceSpans")):
            if not isinstance(rs, dict):
                raise DecodeError(f"resourceSpans[{r}] must be an object")
            for ss_key in ("scopeSpans", "scope_spans"):  # change (1)
                for s, ss in enumerate(_list(rs.get(ss_key), f"resourceSpans[{r}].scopeSpans")):
                    if not isinstance(ss, dict):
                        raise DecodeError(f"resourceSpans[{r}].scopeSpans[{s}] must be an object")
                    where = f"resourceSpans[{r}].scopeSpans[{s}].spans"
                    _fix_ids(_list(ss.get("spans"), where), where)
    msg = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(doc, msg, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise DecodeError(f"JSON is not an OTLP ExportTraceServiceRequest: {exc}") from None
    except (OverflowError, SystemError) as exc:  # change (2)
        raise DecodeError(f"JSON is not an OTLP ExportTraceServiceRequest: {exc}") from None
    return msg


def outcome(decode: Any, body: bytes) -> bytes | str:
    """The decoded message's deterministic encoding (NaN-safe, unlike ==), or "DecodeError"."""
    try:
        msg = decode(body)
    except DecodeError:
        return "DecodeError"
    assert isinstance(msg, ExportTraceServiceRequest)
    return bytes(msg.SerializeToString(deterministic=True))


def assert_same(body: bytes) -> bytes | str:
    got, want = outcome(decode_json, body), outcome(oracle, body)
    assert got == want, f"decode_json and the ParseDict oracle differ on {body[:2000]!r}"
    return got


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()  # NaN / Infinity literals; lone surrogates as \ud800 escapes


def span_doc(span: Any, *, scope: Any = None) -> dict[str, Any]:
    ss: dict[str, Any] = {"spans": [span]}
    if scope is not None:
        ss["scope"] = scope
    return {"resourceSpans": [{"scopeSpans": [ss]}]}


def attr_doc(value: Any) -> dict[str, Any]:
    return span_doc({"attributes": [{"key": "k", "value": value}]})
