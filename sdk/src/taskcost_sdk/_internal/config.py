"""configure(), shutdown(), force_flush(): the SDK's own TracerProvider and its export pipeline."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.util.types import AttributeValue

from .guard import guarded, internal_error, logger, reset_once
from .names import HARNESS_VERSION, INFRA_ATTRIBUTES, INFRA_ENV_VARS, SERVICE_NAME
from .pipeline import Counters, CountingExporter, ExportStats, GuardProcessor
from .profiles import EMPTY, ProfileTable, parse_profiles, profiles_from_env
from .values import coerce_infra, coerce_infra_text, infra_resource_attributes

DEFAULT_TRACES_ENDPOINT = "http://localhost:4318/v1/traces"
TRACES_PATH = "/v1/traces"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
DEFAULT_SHUTDOWN_TIMEOUT_MILLIS = 5_000
INSTRUMENTATION_NAME = "taskcost_sdk"

_NOOP_TRACER = trace.NoOpTracer()
_ATTRIBUTE_TO_INFRA_KEY = {attribute: key for key, attribute in INFRA_ATTRIBUTES.items()}


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.provider: TracerProvider | None = None
        self.tracer: trace.Tracer | None = None
        self.atexit_registered = False
        self.counters = Counters()
        self.profiles: ProfileTable = EMPTY
        self.id_generator: IdGenerator | None = None  # deterministic ids under taskcost_sdk.testing


_state = _State()


def get_tracer() -> trace.Tracer:
    """The SDK's tracer, or OpenTelemetry's no-op tracer when configure() has not been called."""
    tracer = _state.tracer
    return tracer if tracer is not None else _NOOP_TRACER


def is_configured() -> bool:
    return _state.tracer is not None


def profiles() -> ProfileTable:
    """The infra profiles of the current set-up (base URL -> infra tags)."""
    return _state.profiles


def export_stats() -> ExportStats:
    """What the export pipeline did since configure(): spans exported, failed, dropped, duplicates suppressed."""
    return _state.counters.snapshot()


def build_profiles(
    infra_profiles: Mapping[str, Mapping[str, object]] | None, env: Mapping[str, str] | None = None
) -> ProfileTable:
    """``TASKCOST_INFRA_PROFILES`` (JSON) < ``infra_profiles=``, per base URL. Raises on an invalid profile."""
    env = os.environ if env is None else env
    from_env = profiles_from_env(env)
    from_args = parse_profiles(infra_profiles, "infra_profiles=")
    given = {p.endpoint for p in from_args}
    merged = from_args + [p for p in from_env if p.endpoint not in given]
    merged.sort(key=lambda p: len(p.endpoint.path), reverse=True)
    return ProfileTable(merged)


def _sdk_version() -> str:
    try:
        return metadata.version("taskcost-sdk")
    except metadata.PackageNotFoundError:
        return "unknown"


def _join_traces_path(base: str) -> str:
    base = base.strip().rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def resolve_traces_endpoint(endpoint: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The full OTLP/HTTP traces URL to export to.

    Precedence: ``endpoint`` argument (a base URL; ``/v1/traces`` is appended unless already there)
    > ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as-is) > ``OTEL_EXPORTER_OTLP_ENDPOINT`` (+ ``/v1/traces``)
    > ``http://localhost:4318/v1/traces``. Raises ValueError for a URL that is not http(s)://host...
    """
    env = os.environ if env is None else env
    if endpoint is not None and endpoint.strip():
        url, source = _join_traces_path(endpoint), "endpoint argument"
    elif traces := env.get(ENV_TRACES_ENDPOINT, "").strip():
        url, source = traces, ENV_TRACES_ENDPOINT
    elif base := env.get(ENV_ENDPOINT, "").strip():
        url, source = _join_traces_path(base), ENV_ENDPOINT
    else:
        return DEFAULT_TRACES_ENDPOINT
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"taskcost_sdk: {source} must be an http(s):// URL, got {url!r}")
    return url


def build_resource(
    *,
    service_name: str | None = None,
    resource_attributes: Mapping[str, AttributeValue] | None = None,
    infra: Mapping[str, Any] | None = None,
    harness_version: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Resource:
    """The resource for every span. Later sources win: OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME
    < TASKCOST_* env vars < resource_attributes < infra < harness_version / service_name arguments.
    Raises ValueError/TypeError for an invalid infra tag (set-up errors fail fast)."""
    env = os.environ if env is None else env
    attributes: dict[str, AttributeValue] = {}
    for var, key in INFRA_ENV_VARS.items():
        raw = env.get(var, "").strip()
        if raw:
            try:
                attributes[INFRA_ATTRIBUTES[key]] = coerce_infra_text(key, raw)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"taskcost_sdk: invalid environment variable {var}: {exc}") from None
    for name, value in (resource_attributes or {}).items():
        if name in _ATTRIBUTE_TO_INFRA_KEY and value is not None:
            value = coerce_infra(_ATTRIBUTE_TO_INFRA_KEY[name], value)
        attributes[name] = value
    if infra is not None:
        attributes.update(infra_resource_attributes(infra))
    if harness_version is not None:
        attributes[HARNESS_VERSION] = coerce_infra("harness_version", harness_version)
    if service_name is not None:
        attributes[SERVICE_NAME] = str(service_name)
    return Resource.create(attributes)


def configure(
    *,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    service_name: str | None = None,
    resource_attributes: Mapping[str, AttributeValue] | None = None,
    infra: Mapping[str, Any] | None = None,
    harness_version: str | None = None,
    infra_profiles: Mapping[str, Mapping[str, Any]] | None = None,
    exporter: SpanExporter | None = None,
    span_processor: SpanProcessor | None = None,
    set_global: bool = False,
) -> None:
    """Set up export of taskcost spans. Call once at start-up; calling again replaces the previous set-up.

    ``infra_profiles`` maps an inference endpoint's base URL to its infra tags (auto-instrumented calls).
    Invalid arguments or TASKCOST_* env vars raise ValueError/TypeError. See the README for the details.
    """
    if exporter is not None and span_processor is not None:
        raise ValueError("taskcost_sdk: pass exporter= or span_processor=, not both")
    if (exporter is not None or span_processor is not None) and (endpoint is not None or headers is not None):
        raise ValueError("taskcost_sdk: endpoint= and headers= only apply to the default OTLP exporter")
    resource = build_resource(
        service_name=service_name,
        resource_attributes=resource_attributes,
        infra=infra,
        harness_version=harness_version,
    )
    url = resolve_traces_endpoint(endpoint) if exporter is None and span_processor is None else None
    profile_table = build_profiles(infra_profiles)

    with guarded("configure"):
        counters = Counters()
        if span_processor is None:
            if exporter is None:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                exporter = OTLPSpanExporter(endpoint=url, headers=dict(headers) if headers else None)
            span_processor = BatchSpanProcessor(CountingExporter(exporter, counters))
        provider = TracerProvider(resource=resource, shutdown_on_exit=False, id_generator=_state.id_generator)
        provider.add_span_processor(GuardProcessor(span_processor, counters))
        tracer = provider.get_tracer(INSTRUMENTATION_NAME, _sdk_version())
        with _state.lock:
            previous = _state.provider
            _state.provider, _state.tracer = provider, tracer
            _state.counters, _state.profiles = counters, profile_table
            if not _state.atexit_registered:
                atexit.register(_shutdown_at_exit)
                _state.atexit_registered = True
        if previous is not None:
            _bounded(previous.shutdown, DEFAULT_SHUTDOWN_TIMEOUT_MILLIS, "shutdown of the previous set-up")
        if set_global:
            trace.set_tracer_provider(provider)


def _bounded(fn: Callable[[], object], timeout_millis: float, what: str) -> bool:
    """Run fn in a daemon thread for at most timeout_millis. True if it finished and did not return False."""
    outcome: list[object] = []
    errors: list[Exception] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, name=f"taskcost-sdk {what}", daemon=True)
    worker.start()
    worker.join(max(timeout_millis, 0) / 1000)
    if worker.is_alive():
        logger.warning("taskcost_sdk: %s did not finish within %d ms; unsent spans may be lost", what, timeout_millis)
        return False
    if errors:
        internal_error(what, errors[0])
        return False
    return outcome[0] is not False


def force_flush(timeout_millis: int = 30_000) -> bool:
    """Export every finished span now. Blocks at most ~timeout_millis; True if everything was flushed."""
    provider = _state.provider
    if provider is None:
        return True
    return _bounded(lambda: provider.force_flush(timeout_millis), timeout_millis, "force_flush")


def shutdown(timeout_millis: int = DEFAULT_SHUTDOWN_TIMEOUT_MILLIS) -> None:
    """Flush and shut down the export pipeline, blocking at most ~timeout_millis. The SDK is a no-op after."""
    with _state.lock:
        provider = _state.provider
        _state.provider = _state.tracer = None
        _state.profiles = EMPTY
    if provider is not None:
        _bounded(provider.shutdown, timeout_millis, "shutdown")


def _shutdown_at_exit() -> None:
    try:
        shutdown(DEFAULT_SHUTDOWN_TIMEOUT_MILLIS)
    except Exception:  # never fail interpreter exit
        logger.warning("taskcost_sdk: error while flushing at exit", exc_info=True)


def reset_for_tests() -> None:
    """Back to the unconfigured state, with the once-only warnings re-armed. For test fixtures."""
    shutdown(DEFAULT_SHUTDOWN_TIMEOUT_MILLIS)
    reset_once()
