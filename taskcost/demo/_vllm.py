"""The demo's vLLM deployments, as the fake model server plays them: what each vLLM server itself would report about
the requests it served.

- **Its server span** for each request it finished: ``llm_request``, kind SERVER, scope ``vllm.llm_engine`` (what
  vLLM started with ``--otlp-traces-endpoint`` sends), parented by the request's W3C ``traceparent`` header (the
  taskcost SDK injects it, so the span's parent is the client's call span), sent by a real OpenTelemetry
  ``TracerProvider`` and OTLP/HTTP exporter of its own, with the resource an operator would give it
  (``service.name=vllm``, the cluster's id, engine and version). Its ``gen_ai.latency.*`` figures are the timeline
  the server really served: queue and prefill as simulated, decode up to the last byte; queue + prefill + decode is
  the engine's e2e, which the client's own latency contains. A request the client abandoned has no span (vLLM
  traces finished requests only).
- **Its Prometheus page** (``/metrics``): vLLM V1's metric names, labels ``model_name`` and ``engine``, from a
  prometheus-client ``CollectorRegistry`` of its own: prompt and generation tokens, prefix-cache queries and hits
  (tokens), speculative-decoding drafts, draft tokens and accepted tokens (with the per-position counts; only when
  the deployment speculates, as vLLM registers them), requests running and waiting, KV-cache usage, preemptions,
  finished requests by reason, and the latency histograms (queue, prefill, decode, inference, TTFT, e2e) with vLLM's
  buckets.

prometheus-client is a dependency of taskcost; OpenTelemetry's SDK and OTLP/HTTP exporter come with the demo extra
(taskcost-sdk) and are imported only when spans are sent.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

__all__ = [
    "METRICS_CONTENT_TYPE",
    "SCOPE",
    "SPAN_NAME",
    "Drafts",
    "Served",
    "Speculation",
    "VLLMDeployment",
]

SCOPE = "vllm.llm_engine"
SPAN_NAME = "llm_request"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what vLLM's /metrics answers a scraper with
ENGINE_INDEX = "0"  # vLLM's ``engine`` label: the engine core's index (one per deployment here)
FINISH_REASONS = ("stop", "length", "abort")  # vLLM's FinishReason values, each a labelled series from the start
# vLLM's buckets (vllm/v1/metrics/loggers.py)
_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)  # fmt: skip
_REQUEST_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip


@dataclass(frozen=True)
class Drafts:
    """What speculative decoding did for one request: verification steps (= drafts), tokens drafted and accepted,
    and how many were accepted at each draft position."""

    steps: int
    draft_tokens: int
    accepted: int
    per_position: tuple[int, ...]


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding as a deployment is configured (``--speculative-config``): ``tokens`` drafted at each
    step, the i-th accepted with probability ``accept[i]`` when the ones before it were; a step costs
    ``1 + tokens * draft_cost`` plain decode steps (the draft model's passes)."""

    method: str
    draft_model: str | None
    tokens: int
    accept: tuple[float, ...]
    draft_cost: float

    @property
    def step_cost(self) -> float:
        return 1.0 + self.tokens * self.draft_cost

    def decode(self, rng: random.Random, output_tokens: int, ease: float = 1.0) -> Drafts:
        """The steps that emit ``output_tokens`` (the first comes from prefill); ``ease`` scales the acceptance
        (structured, predictable text is accepted more often)."""
        per_position = [0] * self.tokens
        steps = accepted = 0
        emitted = 1
        chances = [min(0.97, p * ease) for p in self.accept[: self.tokens]]
        while emitted < output_tokens:
            taken = 0
            for p in chances:
                if rng.random() >= p:
                    break
                taken += 1
            taken = min(taken, output_tokens - emitted - 1)  # the answer ends within this step
            for i in range(taken):
                per_position[i] += 1
            steps += 1
            accepted += taken
            emitted += 1 + taken
        return Drafts(steps, steps * self.tokens, accepted, tuple(per_position))


@dataclass
class Served:
    """One request a deployment took: what it counted at admission, and what it reports when it ends."""

    deployment: VLLMDeployment
    request_id: str
    model: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    finish_reason: str  # "stop" or "length"
    arrival: float  # epoch seconds (when the server had read the request)
    queue_s: float  # wall seconds, as served (the demo's speed applied)
    prefill_s: float
    decode_s: float  # expected; the span reports the decode actually served
    preempted: bool = False
    drafts: Drafts | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)  # max_tokens, temperature, top_p, n as requested

    def done(self, ended: float, whole: bool) -> None:
        """``Reply.on_done``: the answer was sent (``whole``) or the request was abandoned."""
        self.deployment.finish(self, ended, whole)


class VLLMDeployment:
    """One vLLM deployment (one cluster): its Prometheus registry and its tracer. Thread-safe."""

    def __init__(
        self,
        *,
        cluster_id: str,
        model: str,
        version: str,
        kv_cache_tokens: int,
        speculation: Speculation | None = None,
        traces_url: str | None = None,
        resource: Mapping[str, str] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.model = model
        self.version = version
        self.kv_cache_tokens = kv_cache_tokens
        self.speculation = speculation
        self._lock = threading.Lock()
        self._in_flight: dict[int, Served] = {}
        self.spans = 0  # server spans ended (handed to the exporter)
        self.registry = CollectorRegistry()
        self._metrics(speculation)
        self._provider: TracerProvider | None = None
        self._tracer: Tracer | None = None
        if traces_url is not None:
            self._tracing(traces_url, resource or {})

    # -- set-up ------------------------------------------------------------------------------------------------------

    def _metrics(self, speculation: Speculation | None) -> None:
        names = ["model_name", "engine"]
        label = (self.model, ENGINE_INDEX)
        r = self.registry

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=r).labels(*label)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, names, registry=r, buckets=buckets).labels(*label)

        for index, (name, doc) in enumerate(
            (
                ("vllm:num_requests_running", "Number of requests in model execution batches."),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
            )
        ):
            gauge = Gauge(name, doc, names, registry=r).labels(*label)
            gauge.set_function(functools.partial(self._gauge, index))  # read at each scrape
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success", "Count of successfully processed requests.", [*names, "finished_reason"], registry=r
        )
        self.success = {reason: success.labels(*label, reason) for reason in FINISH_REASONS}
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _TTFT_BUCKETS
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", _REQUEST_BUCKETS
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", _REQUEST_BUCKETS
        )
        self.inference = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            _REQUEST_BUCKETS,
        )
        self.prefill = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            _REQUEST_BUCKETS,
        )
        self.decode = histogram(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", _REQUEST_BUCKETS
        )
        self.spec: tuple[Counter, Counter, Counter, list[Counter]] | None = None
        if speculation is not None:  # vLLM registers these only when it speculates
            per_position = Counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                [*names, "position"],
                registry=r,
            )
            self.spec = (
                counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
                counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
                counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."),
                [per_position.labels(*label, str(i)) for i in range(speculation.tokens)],
            )

    def _tracing(self, traces_url: str, resource: Mapping[str, str]) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create(dict(resource)))
        exporter = OTLPSpanExporter(endpoint=traces_url, timeout=30)
        provider.add_span_processor(
            BatchSpanProcessor(exporter, max_queue_size=50_000, schedule_delay_millis=1_000, max_export_batch_size=512)
        )
        self._provider = provider
        self._tracer = provider.get_tracer(SCOPE)

    # -- requests ----------------------------------------------------------------------------------------------------

    def load(self) -> int:
        """Requests in flight now (running or waiting)."""
        with self._lock:
            return len(self._in_flight)

    def admit(self, served: Served) -> Served:
        """A request arrives: vLLM counts its prompt and prefix-cache lookup when it schedules it."""
        with self._lock:
            self._in_flight[id(served)] = served
        self.prompt_tokens.inc(served.prompt_tokens)
        self.prefix_queries.inc(served.prompt_tokens)
        self.prefix_hits.inc(served.cached_tokens)
        return served

    def finish(self, served: Served, ended: float, whole: bool) -> None:
        with self._lock:
            if self._in_flight.pop(id(served), None) is None:
                return  # told twice
        if not whole:
            self.success["abort"].inc()
            return
        e2e = max(0.0, ended - served.arrival)
        queue = min(served.queue_s, e2e)
        prefill = min(served.prefill_s, e2e - queue)
        decode = e2e - queue - prefill
        self.generation_tokens.inc(served.output_tokens)
        self.success[served.finish_reason].inc()
        if served.preempted:
            self.preemptions.inc()
        for histogram, value in (
            (self.ttft, queue + prefill),
            (self.e2e, e2e),
            (self.queue, queue),
            (self.prefill, prefill),
            (self.decode, decode),
            (self.inference, prefill + decode),
        ):
            histogram.observe(value)
        if self.spec is not None and served.drafts is not None:
            drafts, draft_tokens, accepted, per_position = self.spec
            drafts.inc(served.drafts.steps)
            draft_tokens.inc(served.drafts.draft_tokens)
            accepted.inc(served.drafts.accepted)
            for position, n in zip(per_position, served.drafts.per_position, strict=True):
                position.inc(n)
        self._span(served, ended, queue, prefill, decode)

    def _span(self, served: Served, ended: float, queue: float, prefill: float, decode: float) -> None:
        if self._tracer is None:
            return
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract(dict(served.headers))
        attributes: dict[str, Any] = {
            "gen_ai.response.model": served.model,
            "gen_ai.request.id": served.request_id,
            "gen_ai.usage.prompt_tokens": served.prompt_tokens,
            "gen_ai.usage.completion_tokens": served.output_tokens,
            "gen_ai.usage.cached_tokens": served.cached_tokens,
            "gen_ai.latency.time_in_queue": queue,
            "gen_ai.latency.time_to_first_token": queue + prefill,
            "gen_ai.latency.e2e": queue + prefill + decode,
            "gen_ai.latency.time_in_model_prefill": prefill,
            "gen_ai.latency.time_in_model_decode": decode,
            "gen_ai.latency.time_in_model_inference": prefill + decode,
        }
        for key in ("max_tokens", "temperature", "top_p", "n"):
            if served.params.get(key) is not None:
                attributes[f"gen_ai.request.{key}"] = served.params[key]
        span = self._tracer.start_span(
            SPAN_NAME,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attributes,
            start_time=int(served.arrival * 1e9),
        )
        span.end(end_time=int(ended * 1e9))
        with self._lock:
            self.spans += 1

    # -- the scheduler's state, as the gauges show it ----------------------------------------------------------------

    def _state(self) -> tuple[int, int, float]:
        """(running, waiting, KV-cache usage 0-1) now: a request waits until its queue time has passed, then holds
        its prompt's and its output so far's KV blocks."""
        now = time.time()
        running = waiting = 0
        tokens = 0.0
        with self._lock:
            flights = list(self._in_flight.values())
        for s in flights:
            started = s.arrival + s.queue_s
            if now < started:
                waiting += 1
                continue
            running += 1
            decoding = now - started - s.prefill_s
            share = 0.0 if decoding <= 0 or s.decode_s <= 0 else min(1.0, decoding / s.decode_s)
            tokens += s.prompt_tokens + share * s.output_tokens
        return running, waiting, min(1.0, tokens / self.kv_cache_tokens)

    def _gauge(self, index: int) -> float:
        return float(self._state()[index])

    def metrics_page(self) -> bytes:
        """The Prometheus text a scrape of this deployment's ``/metrics`` reads."""
        return generate_latest(self.registry)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Send the spans still queued and stop the exporter; False when they could not all be sent in time."""
        if self._provider is None:
            return True
        flushed = self._provider.force_flush(int(timeout_s * 1000))
        self._provider.shutdown()
        self._provider = None
        self._tracer = None
        return flushed
