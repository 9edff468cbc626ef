"""The intake path every receiver shares: decode -> normalise -> price and lay out. The caller submits the result
to the store and answers in its own protocol (OTLP/HTTP in _otlp, OTLP/gRPC in _grpc)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from taskcost.normalize import (
    DEFAULT_RULES,
    Cuts,
    IntakeLimits,
    NormalizeRules,
    json_wire,
    normalize_wire,
    protobuf_wire,
)
from taskcost.pricing import Pricer, PricingSource
from taskcost.settings import Settings
from taskcost.store import PreparedBatch, prepare_batch, typed_tables

__all__ = [
    "OUT_OF_MEMORY",
    "RETRY_AFTER_S",
    "STORE_FAILED",
    "Ingested",
    "Intake",
    "decode_and_prepare",
    "decode_executor",
    "export_response",
    "intake_from_settings",
    "limits_from_settings",
    "rules_from_settings",
    "store_schemas",
    "typed",
]

_MAX_MESSAGES = 5  # in one answer's partial_success.error_message
RETRY_AFTER_S = 2  # what a client should wait before retrying a batch the store could not take
STORE_FAILED = "the store could not commit this batch; nothing of it was kept, retry later"
OUT_OF_MEMORY = "the server ran out of memory decoding this batch; nothing of it was kept, retry shortly"


@dataclass(slots=True)
class Ingested:
    prepared: PreparedBatch
    rejected_spans: int = 0
    messages: list[str] = field(default_factory=list)
    ignored_values: int = 0  # attribute values read as absent (their spans kept): see docs/conventions.md
    # what the intake limits cut, their spans kept (docs/security.md, "Intake")
    dropped_attributes: int = 0
    dropped_events: int = 0
    truncated_values: int = 0

    @property
    def cut(self) -> tuple[int, int, int]:
        """(attributes dropped, span events dropped, values truncated) by the intake limits."""
        return self.dropped_attributes, self.dropped_events, self.truncated_values


def decode_and_prepare(
    body: bytes,
    *,
    protobuf: bool,
    rules: NormalizeRules = DEFAULT_RULES,
    project: str | None = None,
    pricer: Pricer | None = None,
) -> Ingested:
    """Decode one ExportTraceServiceRequest body and turn it into rows priced by ``pricer`` (None: the bundled prices),
    within ``rules.limits``. Raises DecodeError on bad input, DecodedTooLarge for a request over
    ``max_decoded_bytes``."""
    cuts = Cuts(rules.limits)
    wire = protobuf_wire(body, cuts) if protobuf else json_wire(body, cuts)
    batch = normalize_wire(wire, rules, cuts)
    del wire
    now = time.time_ns()
    if project is None:
        prepared = prepare_batch(batch, now, pricer=pricer)
    else:
        prepared = prepare_batch(batch, now, project, pricer)
    return Ingested(
        prepared,
        batch.rejected_spans,
        batch.messages,
        batch.ignored_values,
        batch.dropped_attributes,
        batch.dropped_events,
        batch.truncated_values,
    )


def store_schemas(store: object) -> Mapping[str, pa.Schema] | None:
    """The Arrow schemas of ``store``'s tables, to type a batch's rows by before it is submitted (None: a store, such
    as a test's stand-in, that does not say; its writer types them)."""
    schemas: Mapping[str, pa.Schema] | None = getattr(store, "arrow_schemas", None)
    return schemas


def typed(ingested: Ingested, schemas: Mapping[str, pa.Schema]) -> Ingested:
    """``ingested`` with its rows typed as the store's tables (``typed_tables``): a span with a value the store cannot
    hold is rejected alone, through partial success, never the batch."""
    prepared, reasons = typed_tables(ingested.prepared, schemas)
    lost = ingested.prepared.span_count - prepared.span_count
    messages = (ingested.messages + reasons)[:_MAX_MESSAGES] if reasons else ingested.messages
    return Ingested(prepared, ingested.rejected_spans + lost, messages, ingested.ignored_values, *ingested.cut)


@dataclass(frozen=True)
class Intake:
    """How this process turns a request body into rows: the normaliser's rules and the prices (a source that follows
    its files). Built once where the app is assembled, and once in each decode worker."""

    rules: NormalizeRules = DEFAULT_RULES
    pricing: PricingSource | None = None  # None: the bundled prices, no book

    def prepare(
        self,
        body: bytes,
        *,
        protobuf: bool,
        project: str | None = None,
        schemas: Mapping[str, pa.Schema] | None = None,
    ) -> Ingested:
        """Decode, normalise and price ``body``; with ``schemas`` (the store's), also type its rows as Arrow tables
        (``typed``), so that a value the store cannot hold costs its span, never the batch."""
        pricer = self.pricing.current() if self.pricing is not None else None
        ingested = decode_and_prepare(body, protobuf=protobuf, rules=self.rules, project=project, pricer=pricer)
        return ingested if schemas is None else typed(ingested, schemas)


def intake_from_settings(settings: Settings, pricing: PricingSource | None = None) -> Intake:
    """The intake ``settings`` configure, pricing with ``pricing`` (else a source built from the settings)."""
    return Intake(rules_from_settings(settings), pricing or PricingSource(settings.pricing_config()))


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def decode_executor() -> ThreadPoolExecutor:
    """The one thread this process decodes OTLP/HTTP bodies in (created on first use).

    Decoding is pure Python and holds the GIL, so more threads would not decode faster; they would only make the
    store's writer thread wait longer for the GIL between its DuckDB calls (each GIL hand-off can take a switch
    interval), and the writer is what every acknowledgement waits for. Requests in flight beyond this one wait
    for it with their bodies read (``max_inflight_requests`` bounds how many).
    """
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="taskcost-decode")
        return _executor


def export_response(ingested: Ingested) -> ExportTraceServiceResponse:
    """Success, with `partial_success` set only when spans were rejected or there is a warning (the spec's rule)."""
    msg = ExportTraceServiceResponse()
    if ingested.rejected_spans or ingested.messages:
        msg.partial_success.rejected_spans = ingested.rejected_spans
        msg.partial_success.error_message = "; ".join(ingested.messages)
    return msg


def limits_from_settings(settings: Settings) -> IntakeLimits:
    """The OTLP intake limits the settings configure."""
    return IntakeLimits(
        attribute_count=settings.attribute_count_limit,
        event_attribute_count=settings.event_attribute_count_limit,
        span_event_count=settings.span_event_count_limit,
        attribute_value_length=settings.attribute_value_length_limit,
        decoded_bytes=settings.max_decoded_bytes,
    )


def rules_from_settings(settings: Settings) -> NormalizeRules:
    """The normaliser's task rules and intake limits from the settings that configure them (defaults where a setting
    is absent)."""
    return NormalizeRules.build(
        task_id_attributes=settings.task_id_attributes,
        outcome_attribute=settings.task_outcome_attribute,
        outcome_values=settings.task_outcome_values,
        implicit_tasks=settings.implicit_tasks,
        fold_duplicates=settings.fold_duplicate_spans,
        pricing_attributes=settings.pricing_attributes,
        limits=limits_from_settings(settings),
    )
