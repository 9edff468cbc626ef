"""OTLP/gRPC trace intake: `opentelemetry.proto.collector.trace.v1.TraceService/Export` on `grpc_port` (4317).

The same path as OTLP/HTTP (_ingest: decode -> normalise -> price; in the decode worker processes when the server has
them, as HTTP bodies are), the same store, and the spec's answers in gRPC terms:

- a body that is not an ExportTraceServiceRequest: INVALID_ARGUMENT (not retryable). The request is decoded here,
  not by grpc, which would answer INTERNAL;
- a message above `max_body_bytes`: RESOURCE_EXHAUSTED (grpc's own limit, set to the same size as HTTP's); one that
  would decode into more than `max_decoded_bytes`: RESOURCE_EXHAUSTED too, without a RetryInfo (not retryable);
- the store could not commit, or the decode worker holding the request died: UNAVAILABLE with a RetryInfo, both in
  `grpc-status-details-bin` (google.rpc.Status, read by .NET and the Collector) and in the `google.rpc.retryinfo-bin`
  trailer (the only place the Python exporter reads it); nothing of the batch is kept;
- spans with bad ids: OK with `partial_success` (rejected count and message), the rest stored;
- while the server requires keys (the `auth` setting, the same rule as HTTP: `AuthPolicy`), the same ingest-key
  check as HTTP, on the call's metadata (`authorization: Bearer <key>`): no or a bad key is UNAUTHENTICATED, a key
  of the wrong kind PERMISSION_DENIED; the key decides the project.

OK is answered only after the batch is committed.

`opentelemetry.proto.collector.metrics.v1.MetricsService/Export` on the same port takes engine metrics (docs/schema.md,
`engine_metrics`) with the same key check and answers; a request whose every data point was refused is
INVALID_ARGUMENT (HTTP's 400), some refused: OK with `partial_success.rejected_data_points`.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from taskcost.collector._decoders import DecodersUnavailable
from taskcost.collector._engine_metrics import decode_metrics_request, samples_from_otlp
from taskcost.collector._engine_scrape import EngineIntake, metrics_export_response
from taskcost.collector._ingest import (
    OUT_OF_MEMORY,
    RETRY_AFTER_S,
    STORE_FAILED,
    Intake,
    export_response,
    intake_from_settings,
    store_schemas,
)
from taskcost.normalize import DecodedTooLarge, DecodeError
from taskcost.settings import Settings
from taskcost.store import DEFAULT_PROJECT, Store

if TYPE_CHECKING:
    from taskcost.collector._auth import AuthPolicy
    from taskcost.collector._decoders import DecodePool
    from taskcost.collector._metrics import Metrics

__all__ = ["EXPORT_METHOD", "METRICS_EXPORT_METHOD", "GrpcReceiver", "ingest_key_check", "start_grpc_server"]

log = logging.getLogger("taskcost.collector")

SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
EXPORT_METHOD = f"/{SERVICE}/Export"
METRICS_SERVICE = metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"].full_name
METRICS_EXPORT_METHOD = f"/{METRICS_SERVICE}/Export"
WORKERS = 4  # threads answering Export calls; the single store writer is the bottleneck anyway
MAX_CONCURRENT_RPCS = 64  # beyond this grpc answers RESOURCE_EXHAUSTED at once (bounded memory)
COMMIT_WAIT_S = 60.0  # longest wait for the store's commit when the client set no deadline
RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"
STATUS_DETAILS_TRAILER = "grpc-status-details-bin"

Authenticate = Callable[[Mapping[str, str]], "str | None"]
"""Given the call's metadata (keys lower-case), return the project the caller may write to (None: the default
project), or raise PermissionError to refuse with UNAUTHENTICATED."""

_AUTH_CODES = {401: grpc.StatusCode.UNAUTHENTICATED, 403: grpc.StatusCode.PERMISSION_DENIED}


class _Refused(PermissionError):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def ingest_key_check(auth: AuthPolicy) -> Authenticate:
    """The HTTP receiver's ingest-key check, on gRPC metadata (a no-op while the server requires no key)."""

    def check(metadata: Mapping[str, str]) -> str | None:
        from taskcost.collector._auth import authenticate
        from taskcost.collector._errors import ApiError

        try:
            return authenticate(auth, dict(metadata), "ingest").project
        except ApiError as exc:
            raise _Refused(_AUTH_CODES.get(exc.status, grpc.StatusCode.UNAUTHENTICATED), exc.message) from None

    return check


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    """A status with trailing metadata, for `abort_with_status` (the shape grpcio-status builds)."""


def unavailable_status(message: str, retry_after_s: int = RETRY_AFTER_S) -> Any:
    """UNAVAILABLE with a RetryInfo in both places clients look for it."""
    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=retry_after_s))
    detail = any_pb2.Any()
    detail.Pack(retry)
    rich = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[detail])
    return _Status(
        grpc.StatusCode.UNAVAILABLE,
        message,
        ((STATUS_DETAILS_TRAILER, rich.SerializeToString()), (RETRY_INFO_TRAILER, retry.SerializeToString())),
    )


class _TraceService:
    def __init__(
        self,
        store: Store,
        intake: Intake,
        authenticate: Authenticate | None,
        decoders: DecodePool | None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.intake = intake
        self.authenticate = authenticate
        self.decoders = decoders
        self.metrics = metrics

    def export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        project = None
        if self.authenticate is not None:
            metadata = {k.lower(): v for k, v in context.invocation_metadata() if isinstance(v, str)}
            try:
                project = self.authenticate(metadata)
            except PermissionError as exc:
                code = exc.code if isinstance(exc, _Refused) else grpc.StatusCode.UNAUTHENTICATED
                context.abort(code, str(exc) or "unauthenticated")
        try:
            if self.decoders is not None:
                ingested = self.decoders.decode_blocking(body, protobuf=True, project=project)
            else:
                ingested = self.intake.prepare(body, protobuf=True, project=project, schemas=store_schemas(self.store))
        except DecodedTooLarge as exc:
            if self.metrics is not None:
                self.metrics.limited.labels("requests_too_large").inc()
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except MemoryError:  # decoding in this process (no decode workers), which ran out of memory
            context.abort_with_status(unavailable_status(OUT_OF_MEMORY))
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except RecursionError:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "request is nested too deeply to decode")
        except DecodersUnavailable as exc:
            context.abort_with_status(unavailable_status(f"{exc}; retry shortly"))
        if self.metrics is not None:
            self.metrics.on_limits(ingested.cut)
        if ingested.prepared.span_count:
            remaining = context.time_remaining()
            wait = COMMIT_WAIT_S if remaining is None else max(0.0, min(remaining, COMMIT_WAIT_S))
            try:
                self.store.submit(ingested.prepared).result(timeout=wait)
            except Exception as exc:
                log.error("gRPC batch of %d spans not committed: %s", ingested.prepared.span_count, exc)
                context.abort_with_status(unavailable_status(STORE_FAILED))
        return bytes(export_response(ingested).SerializeToString())


def _caller_project(authenticate: Authenticate | None, context: grpc.ServicerContext) -> str | None:
    """The project the call's key may write to (None: the default), or the call is aborted."""
    if authenticate is None:
        return None
    metadata = {k.lower(): v for k, v in context.invocation_metadata() if isinstance(v, str)}
    try:
        return authenticate(metadata)
    except PermissionError as exc:
        code = exc.code if isinstance(exc, _Refused) else grpc.StatusCode.UNAUTHENTICATED
        context.abort(code, str(exc) or "unauthenticated")
    return None  # (not reached: abort raises)


class _MetricsService:
    """``MetricsService/Export``: engine metrics (docs/schema.md, ``engine_metrics``), answered as traces are; a
    request whose every data point was refused is INVALID_ARGUMENT (the HTTP route's 400)."""

    def __init__(self, store: Store, settings: Settings, authenticate: Authenticate | None, engines: EngineIntake):
        from taskcost.collector._ingest import limits_from_settings

        self.store = store
        self.limits = limits_from_settings(settings)
        self.authenticate = authenticate
        self.engines = engines

    def export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        project = _caller_project(self.authenticate, context) or DEFAULT_PROJECT
        try:
            parsed = samples_from_otlp(decode_metrics_request(body, protobuf=True, limits=self.limits))
        except DecodedTooLarge as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except MemoryError:
            context.abort_with_status(unavailable_status(OUT_OF_MEMORY))
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except RecursionError:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "request is nested too deeply to decode")
        batch, over = self.engines.batch(parsed, project=project, source="otlp")
        if parsed.rejected and not parsed.samples:
            why = "; ".join(parsed.messages)
            stored = f"no data point of this request could be stored ({parsed.rejected})"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{stored}: {why}")
        if over:
            parsed.rejected += over
            parsed.messages.append(f"{over} sample(s) over the project's series cap (engine_max_series)")
        if batch is not None:
            remaining = context.time_remaining()
            wait = COMMIT_WAIT_S if remaining is None else max(0.0, min(remaining, COMMIT_WAIT_S))
            try:
                self.store.submit(batch).result(timeout=wait)
            except Exception as exc:
                log.error("gRPC batch of %d engine metric samples not committed: %s", batch.sample_count, exc)
                context.abort_with_status(unavailable_status(STORE_FAILED))
            self.engines.stored(batch)
        return bytes(metrics_export_response(parsed).SerializeToString())


class GrpcReceiver:
    """A running OTLP/gRPC receiver. `stop(grace)` refuses new calls and lets running ones finish for `grace` s."""

    def __init__(self, server: grpc.Server, host: str, port: int) -> None:
        self._server = server
        self.host = host
        self.port = port

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def stop(self, grace: float | None = 5.0) -> None:
        self._server.stop(grace).wait()


def start_grpc_server(
    store: Store,
    settings: Settings,
    *,
    intake: Intake | None = None,
    authenticate: Authenticate | None = None,
    decoders: DecodePool | None = None,
    metrics: Metrics | None = None,
) -> GrpcReceiver | None:
    """Serve OTLP/gRPC on `settings.host:settings.grpc_port`; None when `grpc_port` is 0 (the receiver is off).

    `authenticate` defaults to the HTTP receiver's ingest-key check, under the same rule (`AuthPolicy` of the same
    settings and store). `decoders`: the HTTP app's decode pool
    (`app.state.decoders`), to decode in its worker processes (None: in the calling gRPC thread). `metrics`: the HTTP
    app's (`app.state.metrics`), to count what the intake limits cut. Raises OSError when the address cannot be bound
    (e.g. the port is taken)."""
    if settings.grpc_port == 0:
        return None
    if authenticate is None:
        from taskcost.collector._auth import AuthPolicy

        authenticate = ingest_key_check(AuthPolicy.from_settings(settings, store))
    check = authenticate
    service = _TraceService(store, intake or intake_from_settings(settings), check, decoders, metrics)
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        # no (de)serializers: the body is decoded by the shared path, so undecodable input is INVALID_ARGUMENT
        {"Export": grpc.unary_unary_rpc_method_handler(service.export)},
    )
    engine_metrics = _MetricsService(store, settings, check, EngineIntake.of(metrics, settings))
    metrics_handler = grpc.method_handlers_generic_handler(
        METRICS_SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(engine_metrics.export)}
    )
    server = grpc.server(
        ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="taskcost-grpc"),
        handlers=[handler, metrics_handler],
        options=[
            ("grpc.max_receive_message_length", settings.max_body_bytes),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
    )
    host = settings.host
    address = f"[{host}]:{settings.grpc_port}" if ":" in host else f"{host}:{settings.grpc_port}"
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"cannot serve OTLP/gRPC on {address}: {exc}") from None
    if not port:
        raise OSError(f"cannot serve OTLP/gRPC on {address} (is the port taken?)")
    server.start()
    log.info("OTLP/gRPC receiver on %s", address)
    return GrpcReceiver(server, host, port)
