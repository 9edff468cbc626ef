"""OTLP/HTTP intake: POST /v1/traces, and POST /v1/metrics (engine metrics), protobuf or JSON, optionally gzip/deflate.

A 200 is sent once the batch is durable: fsynced to the intake spool (the default; the writer commits it to DuckDB
behind it, and a restart replays it), or committed to DuckDB with ``spool = false``. An acknowledged span survives
a crash; a re-sent batch is recognised by its span ids and stored once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import zlib
from concurrent.futures import Future

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

from taskcost.collector._auth import AuthPolicy, authenticate
from taskcost.collector._body import read_body
from taskcost.collector._decoders import DecodePool, DecodersUnavailable
from taskcost.collector._engine_metrics import Parsed, decode_metrics_request, samples_from_otlp
from taskcost.collector._engine_scrape import EngineIntake, metrics_export_response
from taskcost.collector._errors import PROTOBUF, ApiError
from taskcost.collector._ingest import (
    OUT_OF_MEMORY,
    RETRY_AFTER_S,
    STORE_FAILED,
    Ingested,
    Intake,
    decode_executor,
    export_response,
    store_schemas,
)
from taskcost.collector._metrics import Metrics
from taskcost.normalize import DecodedTooLarge, DecodeError, IntakeLimits
from taskcost.store import DEFAULT_PROJECT, CommitInfo, PreparedBatch, Store, StoreBusyError

__all__ = ["otlp_router"]

log = logging.getLogger("taskcost.collector")
JSON = "application/json"
_BUSY = {"Retry-After": "1"}


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """The decompressed body, whole: every member of a multi-member gzip stream (RFC 1952) is read; bytes after
    the last member, or after a deflate stream, are a 400, never silently dropped."""
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise ApiError(415, f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    parts: list[bytes] = []
    size, rest = 0, body
    while True:
        d = zlib.decompressobj(wbits)
        try:
            part = d.decompress(rest, limit - size + 1)
        except zlib.error as exc:
            raise ApiError(400, f"body is not valid {encoding} data: {exc}") from None
        size += len(part)
        if size > limit or d.unconsumed_tail:
            raise ApiError(413, f"decompressed body exceeds the limit of {limit} bytes")
        if not d.eof:
            raise ApiError(400, f"{encoding} body is truncated")
        parts.append(part)
        rest = d.unused_data
        if not rest:
            return b"".join(parts)
        if encoding != "gzip" or not rest.startswith(b"\x1f\x8b"):
            raise ApiError(400, f"{len(rest)} bytes follow the end of the {encoding} stream")


def _response(ctype: str, ingested: Ingested) -> Response:
    msg = export_response(ingested)
    if ctype == PROTOBUF:
        return Response(msg.SerializeToString(), media_type=PROTOBUF)
    body = json_format.MessageToJson(msg, indent=None) if msg.ByteSize() else "{}"
    return Response(body, media_type=JSON)


async def _decode(
    decoders: DecodePool | None, body: bytes, ctype: str, intake: Intake, project: str | None, store: Store
) -> Ingested:
    """Decode, normalise, price and type as the store's tables, in a worker process, else on this process's decode
    thread."""
    protobuf = ctype == PROTOBUF
    try:
        if decoders is not None:
            return await decoders.decode(body, protobuf=protobuf, project=project)
        work = functools.partial(intake.prepare, body, protobuf=protobuf, project=project, schemas=store_schemas(store))
        return await asyncio.get_running_loop().run_in_executor(decode_executor(), work)
    except DecodedTooLarge as exc:
        raise ApiError(413, str(exc)) from None
    except DecodeError as exc:
        raise ApiError(400, str(exc)) from None
    except RecursionError:
        raise ApiError(400, "body is nested too deeply to decode") from None
    except DecodersUnavailable as exc:
        raise ApiError(503, f"{exc}; retry shortly", headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    except MemoryError:  # decoding in this process, which ran out of memory (its limit, or other work's share)
        raise ApiError(503, OUT_OF_MEMORY, headers={"Retry-After": str(RETRY_AFTER_S)}) from None


def otlp_router(
    store: Store,
    *,
    auth: AuthPolicy,
    max_body_bytes: int,
    max_inflight: int,
    backpressure_wait_s: float,
    intake: Intake,
    metrics: Metrics,
    decoders: DecodePool | None = None,
    engines: EngineIntake | None = None,
) -> APIRouter:
    """Back-pressure, in two steps: a request first waits (up to ``backpressure_wait_s``) for one of
    ``max_inflight`` decoding slots -- its body stays unread, in the client's socket -- then, decoded,
    for room in the store's write queue. Only if a wait runs out is it refused with 503 + Retry-After,
    so a client within its usual 10 s export deadline is slowed down rather than turned away."""
    router = APIRouter()
    inflight = asyncio.Semaphore(max_inflight)
    engines = engines or EngineIntake(10_000, metrics)

    async def acquire_slot() -> None:
        if not inflight.locked():
            await inflight.acquire()
            return
        metrics.throttled.labels("in_flight").inc()
        try:
            await asyncio.wait_for(inflight.acquire(), timeout=backpressure_wait_s)
        except TimeoutError:
            metrics.refused.labels("too_many_in_flight").inc()
            raise ApiError(503, f"more than {max_inflight} requests in flight; retry shortly", headers=_BUSY) from None

    async def submit(batch: PreparedBatch) -> Future[CommitInfo]:
        """Queue ``batch`` for the store, waiting up to ``backpressure_wait_s`` for room (503 + Retry-After past it)."""
        try:
            return store.submit(batch)
        except StoreBusyError:
            metrics.throttled.labels("queue_full").inc()
            try:
                return await run_in_threadpool(store.submit, batch, backpressure_wait_s)
            except StoreBusyError as exc:
                metrics.refused.labels("queue_full").inc()
                raise ApiError(503, f"{exc}; nothing of this batch was kept, retry shortly", headers=_BUSY) from None

    async def committed(future: Future[CommitInfo], what: str) -> None:
        """Wait for the store's commit of a submitted batch (``what`` it held, for the log); 503 when it failed."""
        try:
            await asyncio.wrap_future(future)
        except Exception as exc:
            log.error("batch of %s not committed: %s", what, exc)
            metrics.refused.labels("store_failed").inc()
            raise ApiError(503, STORE_FAILED, headers={"Retry-After": str(RETRY_AFTER_S)}) from None

    @router.post("/v1/traces", include_in_schema=False)
    async def export_traces(request: Request) -> Response:
        caller = authenticate(auth, request, "ingest")  # before the body is read
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in (PROTOBUF, JSON):
            raise ApiError(415, f"unsupported Content-Type {ctype or '(none)'!r}; send {PROTOBUF} or {JSON}")
        await acquire_slot()
        try:
            body = await read_body(request, max_body_bytes)
            encoding = request.headers.get("content-encoding", "").strip().lower()
            body = _inflate(body, encoding, max_body_bytes)
            try:
                ingested = await _decode(decoders, body, ctype, intake, caller.project, store)
            except ApiError as exc:
                if exc.status == 413:
                    metrics.limited.labels("requests_too_large").inc()
                raise
            prepared = ingested.prepared
            metrics.received.inc(prepared.span_count + ingested.rejected_spans)
            if ingested.rejected_spans:
                metrics.rejected.labels("invalid_span").inc(ingested.rejected_spans)
            if ingested.ignored_values:
                metrics.ignored_values.inc(ingested.ignored_values)
            metrics.on_limits(ingested.cut)
            future = None
            if prepared.span_count:
                future = await submit(prepared)
        finally:
            inflight.release()
        if future is not None:
            await committed(future, f"{prepared.span_count} spans")
        return _response(ctype, ingested)

    @router.post("/v1/metrics", include_in_schema=False)
    async def export_metrics(request: Request) -> Response:
        """Engine metrics (docs/schema.md, ``engine_metrics``): the same checks, limits and answers as traces."""
        caller = authenticate(auth, request, "ingest")  # before the body is read
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in (PROTOBUF, JSON):
            raise ApiError(415, f"unsupported Content-Type {ctype or '(none)'!r}; send {PROTOBUF} or {JSON}")
        project = caller.project or DEFAULT_PROJECT
        await acquire_slot()
        future = batch = None
        try:
            body = await read_body(request, max_body_bytes)
            body = _inflate(body, request.headers.get("content-encoding", "").strip().lower(), max_body_bytes)
            work = functools.partial(_parse_metrics, body, ctype == PROTOBUF, intake.rules.limits)
            try:
                parsed = await asyncio.get_running_loop().run_in_executor(decode_executor(), work)
            except DecodedTooLarge as exc:
                metrics.limited.labels("requests_too_large").inc()
                raise ApiError(413, str(exc)) from None
            except DecodeError as exc:
                raise ApiError(400, str(exc)) from None
            except RecursionError:
                raise ApiError(400, "body is nested too deeply to decode") from None
            except MemoryError:
                raise ApiError(503, OUT_OF_MEMORY, headers={"Retry-After": str(RETRY_AFTER_S)}) from None
            batch, over = engines.batch(parsed, project=project, source="otlp")  # (counts what was refused)
            if parsed.rejected and not parsed.samples:
                why = "; ".join(parsed.messages)
                raise ApiError(400, f"no data point of this request could be stored ({parsed.rejected}): {why}")
            if over:
                parsed.rejected += over
                parsed.messages.append(f"{over} sample(s) over the project's series cap (engine_max_series)")
            if batch is not None:
                future = await submit(batch)
        finally:
            inflight.release()
        if future is not None and batch is not None:
            await committed(future, f"{batch.sample_count} engine metric samples")
            engines.stored(batch)
        return _metrics_response(ctype, metrics_export_response(parsed))

    return router


def _parse_metrics(body: bytes, protobuf: bool, limits: IntakeLimits) -> Parsed:
    return samples_from_otlp(decode_metrics_request(body, protobuf=protobuf, limits=limits))


def _metrics_response(ctype: str, msg: ExportMetricsServiceResponse) -> Response:
    if ctype == PROTOBUF:
        return Response(msg.SerializeToString(), media_type=PROTOBUF)
    body = json_format.MessageToJson(msg, indent=None) if msg.ByteSize() else "{}"
    return Response(body, media_type=JSON)
