"""OTLP/HTTP trace intake: POST /v1/traces, protobuf or JSON, optionally gzip/deflate."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from taskcost.collector._errors import PROTOBUF, ApiError
from taskcost.normalize import DecodeError, decode_json, decode_protobuf, normalize_request
from taskcost.store import PreparedBatch, Store, prepare_batch

__all__ = ["otlp_router"]

log = logging.getLogger("taskcost.collector")
JSON = "application/json"
RETRY_AFTER_S = "2"


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        d = zlib.decompressobj(zlib.MAX_WBITS)
    else:
        raise ApiError(415, f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ApiError(400, f"body is not valid {encoding} data: {exc}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise ApiError(413, f"decompressed body exceeds the limit of {limit} bytes")
    if not d.eof:
        raise ApiError(400, f"{encoding} body is truncated")
    return out


def _decode_and_prepare(body: bytes, ctype: str) -> tuple[PreparedBatch, int, list[str]]:
    try:
        req = decode_protobuf(body) if ctype == PROTOBUF else decode_json(body)
    except DecodeError as exc:
        raise ApiError(400, str(exc)) from None
    batch = normalize_request(req)
    return prepare_batch(batch, time.time_ns()), batch.rejected_spans, batch.messages


def _response(ctype: str, rejected: int, messages: list[str]) -> Response:
    msg = ExportTraceServiceResponse()
    if rejected or messages:
        msg.partial_success.rejected_spans = rejected
        msg.partial_success.error_message = "; ".join(messages)
    if ctype == PROTOBUF:
        return Response(msg.SerializeToString(), media_type=PROTOBUF)
    body = json_format.MessageToJson(msg, indent=None) if msg.ByteSize() else "{}"
    return Response(body, media_type=JSON)


def otlp_router(store: Store, max_body_bytes: int) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/traces", include_in_schema=False)
    async def export_traces(request: Request) -> Response:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in (PROTOBUF, JSON):
            raise ApiError(415, f"unsupported Content-Type {ctype or '(none)'!r}; send {PROTOBUF} or {JSON}")
        body = await _read_body(request, max_body_bytes)
        encoding = request.headers.get("content-encoding", "").strip().lower()
        body = _inflate(body, encoding, max_body_bytes)
        prepared, rejected, messages = await run_in_threadpool(_decode_and_prepare, body, ctype)
        if prepared.span_count:
            try:
                await asyncio.wrap_future(store.submit(prepared))
            except Exception as exc:
                log.error("batch of %d spans not committed: %s", prepared.span_count, exc)
                raise ApiError(
                    503,
                    "the store could not commit this batch; nothing of it was kept, retry later",
                    headers={"Retry-After": RETRY_AFTER_S},
                ) from None
        return _response(ctype, rejected, messages)

    return router
