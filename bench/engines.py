"""The engine view's costs: engine spans and engine metrics through intake, the writer's match of engine spans to
calls, and the ``engines`` question over large histories.

Intake (per span, per sample; medians of ``repeats`` in one process): the normaliser over requests of client call spans
alone, and over the same requests with a vLLM server span beside each call (the difference, per engine span, is what
recognising and reading one costs); the Prometheus text of a vLLM server (tests/data/engine_captures) parsed and mapped;
an OTLP metrics request of the same samples decoded and mapped.

History (DuckDB store): the query bench's history (``bench.query.load_history``, one task in five self-hosted) with, for
each self-hosted call, a vLLM server span parented by it and the call's engine and topology record, loaded behind the
writer as the history is (its matches decided by the roll-ups' rebuild); then the ``engine_calls`` view read whole and
the ``engines`` question asked; then live traffic written into it, without and with engine spans (the writer's cost of
matching them as it commits).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench.analytics import _median
from bench.query import load_history
from bench.traffic import requests

__all__ = ["load_engine_history", "run_engine_history", "run_engine_intake"]

VLLM_METRICS = Path(__file__).resolve().parent.parent / "tests" / "data" / "engine_captures" / "vllm-metrics.txt"

_ENGINE_SPANS = """
INSERT INTO engine_span_rows BY NAME
SELECT project, trace_id, lpad(to_hex(hash(span_id) >> 1), 16, '0') AS span_id, span_id AS parent_span_id,
    'req-' || span_id AS request_id, response_model, 'vllm' AS engine, cluster_id,
    input_tokens AS prompt_tokens, output_tokens AS completion_tokens, cache_read_tokens AS cached_tokens,
    0.002 + (hash(span_id) % 100) / 1000.0 AS queue_s, ttft_s * 0.8 AS ttft_s, 0.7 AS e2e_s,
    ttft_s * 0.7 AS prefill_s, 0.7 - ttft_s * 0.8 AS decode_s, 0.69 AS inference_s,
    start_ns + 50000000 AS start_ns, end_ns - 50000000 AS end_ns, 0 AS received_ns
FROM llm_call_rows WHERE deployment = 'self_hosted'
"""
_CALL_ENGINES = """
INSERT INTO llm_call_engine_rows BY NAME
SELECT project, trace_id, span_id, [1, 2, 4][1 + (hash(task_id) % 3)::INTEGER]::INTEGER AS tp_size, 1 AS pp_size,
    1 AS dp_size, gpu_type = 'H100' AS pd_disaggregated,
    CASE WHEN engine_version = '0.7.0' THEN 'eagle' ELSE 'none' END AS spec_method,
    CASE WHEN engine_version = '0.7.0' THEN (output_tokens * 0.6)::BIGINT END AS spec_draft_tokens,
    CASE WHEN engine_version = '0.7.0' THEN (output_tokens * 0.45)::BIGINT END AS spec_accepted_tokens,
    0 AS received_ns
FROM llm_call_rows WHERE deployment = 'self_hosted'
"""

_READ_ALL = "SELECT count(*), sum(decode_s), sum(queue_s), count(spec_method) FROM engine_calls"


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def _with_engine_spans(req: ExportTraceServiceRequest) -> tuple[ExportTraceServiceRequest, int]:
    """``req`` with a vLLM server span (another resource, as vLLM sends it) parented by each call span; and how many."""
    out = ExportTraceServiceRequest()
    out.CopyFrom(req)
    rs = out.resource_spans.add()
    rs.resource.attributes.extend([_kv("service.name", "vllm"), _kv("taskcost.cluster.id", "gpu-a")])
    ss = rs.scope_spans.add()
    ss.scope.name = "vllm.llm_engine"
    n = 0
    for r in req.resource_spans:
        for s in r.scope_spans:
            for span in s.spans:
                if not any(a.key == "gen_ai.request.model" for a in span.attributes):
                    continue
                e = ss.spans.add()
                e.trace_id, e.parent_span_id = span.trace_id, span.span_id
                e.span_id = (int.from_bytes(span.span_id, "big") ^ 0xFFFF).to_bytes(8, "big")
                e.name, e.kind = "llm_request", Span.SPAN_KIND_SERVER
                e.start_time_unix_nano, e.end_time_unix_nano = span.start_time_unix_nano, span.end_time_unix_nano
                e.attributes.extend(
                    [
                        _kv("gen_ai.request.id", f"req-{n}"),
                        _kv("gen_ai.response.model", "Qwen/Qwen3-32B"),
                        _kv("gen_ai.usage.prompt_tokens", 1200),
                        _kv("gen_ai.usage.completion_tokens", 300),
                        _kv("gen_ai.latency.time_in_queue", 0.01),
                        _kv("gen_ai.latency.time_to_first_token", 0.2),
                        _kv("gen_ai.latency.e2e", 2.1),
                        _kv("gen_ai.latency.time_in_model_prefill", 0.15),
                        _kv("gen_ai.latency.time_in_model_decode", 1.9),
                    ]
                )
                n += 1
    return out, n


def _otlp_metrics(text_samples: list[Any]) -> bytes:
    """An OTLP metrics request of the same samples, as an OpenTelemetry Collector's prometheus receiver sends them."""
    req = ExportMetricsServiceRequest()
    rm = req.resource_metrics.add()
    rm.resource.attributes.extend([_kv("taskcost.cluster.id", "gpu-a"), _kv("taskcost.engine.name", "vllm")])
    sm = rm.scope_metrics.add()
    for s in text_samples:
        m = sm.metrics.add()
        m.name = s.source_metric
        if s.kind == "counter":
            m.sum.is_monotonic = True
            m.sum.aggregation_temporality = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
            p = m.sum.data_points.add()
        else:
            p = m.gauge.data_points.add()
        p.time_unix_nano, p.as_double = s.ts_ns, s.value
        p.attributes.append(_kv("model_name", s.model or "Qwen/Qwen3-32B"))
    return req.SerializeToString()


def run_engine_intake(spans: int = 40_000, repeats: int = 5) -> dict[str, float]:
    """Microseconds: per client span normalised, per engine span added to the same requests, per sample of Prometheus
    text and of OTLP metrics; and the counts they are over."""
    from taskcost.collector._engine_metrics import decode_metrics_request, samples_from_otlp, samples_from_text
    from taskcost.normalize import normalize_request

    plain = list(requests(spans, seed=5))
    both = [_with_engine_spans(r) for r in plain]
    n_plain = sum(len(s.spans) for r in plain for rs in r.resource_spans for s in rs.scope_spans)
    n_engine = sum(n for _, n in both)
    t_plain = _median(lambda: [normalize_request(r) for r in plain], repeats)
    t_both = _median(lambda: [normalize_request(r) for r, _ in both], repeats)
    text = VLLM_METRICS.read_text()
    parsed = samples_from_text(text, cluster_id="gpu-a", engine="vllm", model=None, scraped_ns=time.time_ns())
    kept = len(parsed.samples)
    t_text = _median(
        lambda: samples_from_text(text, cluster_id="gpu-a", engine="vllm", model=None, scraped_ns=1), repeats * 20
    )
    body = _otlp_metrics(parsed.samples)
    t_otlp = _median(lambda: samples_from_otlp(decode_metrics_request(body, protobuf=True)), repeats * 20)
    return {
        "client_spans": n_plain,
        "engine_spans": n_engine,
        "us_per_client_span": t_plain / n_plain * 1e6,
        "us_per_engine_span": (t_both - t_plain) / n_engine * 1e6,
        "samples": kept,
        "us_per_text_sample": t_text / kept * 1e6,
        "us_per_otlp_sample": t_otlp / kept * 1e6,
    }


def _writer_cost(store: Any, spans: int, pairs: int = 3) -> tuple[float, float]:
    """Writer microseconds (wall) per span of live traffic into ``store`` (as the collector hands it over: prepared
    batches, grouped into commits by the writer), and per engine span of traffic of the same kind with a vLLM server
    span beside each call: what matching and storing one adds (its row, the lookups of its call and of the engine
    spans of the commit's calls, the call's figures). Medians of ``pairs`` runs of each, alternated, each of new
    traffic (another seed), after one run to warm up."""
    from taskcost.normalize import normalize_request
    from taskcost.store import prepare_batch

    def run(seed: int, engine_spans: bool) -> tuple[float, int, int]:
        reqs = [_with_engine_spans(r) if engine_spans else (r, 0) for r in requests(spans, seed=seed)]
        batches = [prepare_batch(normalize_request(r), 1) for r, _ in reqs]
        t = time.perf_counter()
        for f in [store.submit(b) for b in batches]:
            f.result(600)
        return time.perf_counter() - t, sum(b.span_count for b in batches), sum(n for _, n in reqs)

    run(100, False)
    client, engine = [], []
    for k in range(pairs):
        t_plain, n_plain, _ = run(101 + 2 * k, False)
        t_both, n_both, n_engine = run(102 + 2 * k, True)
        per_span = t_plain / n_plain
        client.append(per_span * 1e6)
        engine.append((t_both - per_span * (n_both - n_engine)) / n_engine * 1e6)
    return statistics.median(client), statistics.median(engine)


def load_engine_history(store: Any, calls: int) -> int:
    """``calls`` calls of history (one task in five self-hosted), each self-hosted call with its vLLM server span and
    its engine record; returns the engine spans loaded."""
    # matched to their calls as the rest is rolled up
    load_history(store, calls, self_hosted=True, then=(_ENGINE_SPANS, _CALL_ENGINES))
    return int(store.admin_query("SELECT count(*) FROM engine_span_rows").rows[0][0])


def run_engine_history(sizes: tuple[int, ...], repeats: int = 3) -> dict[tuple[str, int], float]:
    """Median seconds per (what, size): the ``engine_calls`` view read whole, the ``engines`` question (when it is
    registered); and (``"engine_spans"``, size) the engine spans loaded."""
    from taskcost.analytics import QUESTIONS, Filters
    from taskcost.store import DuckDBStore

    out: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            with DuckDBStore.open(Path(tmp) / f"e{size}.duckdb") as store:
                out[("engine_spans", size)] = load_engine_history(store, size)
                out[("engine_calls view", size)] = _median(lambda s=store: s.query(_READ_ALL, timeout_s=600), repeats)
                q = QUESTIONS.get("engines")
                if q is not None:
                    options = q.options()
                    out[("engines question", size)] = _median(
                        lambda s=store, q=q, o=options: q.run(s, Filters(), o), repeats
                    )
                out[("writer us per client span", size)], out[("writer us per engine span", size)] = _writer_cost(
                    store, 20_000
                )
                print(f"  engines at {size:,}: " + ", ".join(f"{k} {v:.3f}" for (k, n), v in out.items() if n == size))
            (Path(tmp) / f"e{size}.duckdb").unlink(missing_ok=True)
    return out
