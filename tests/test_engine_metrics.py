"""Engine metrics: Prometheus text and OTLP metrics -> canonical samples -> the ``engine_metrics`` view.

Fixtures (tests/data/engine_captures/): ``llama-server-metrics*.txt`` were captured from a real llama.cpp server
(``llama-server`` build b1-0c1e570 with ``--metrics``, serving SmolLM2-135M-Instruct Q4_1 on CPU; the second with
speculative decoding against a draft model). ``vllm-metrics.txt`` and ``sglang-metrics.txt`` are written by
prometheus-client, the library both engines expose their metrics with, under their metric names, help texts and
labels (vLLM: ``model_name``, ``engine``, and ``_created`` series beside each counter; SGLang: ``model_name``, in
multiprocess mode, without ``_created``).
"""

from __future__ import annotations

import gzip
import http.server
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from taskcost.app import create_app
from taskcost.collector._engine_metrics import (
    MAPPING,
    SeriesLimit,
    engine_rows,
    samples_from_otlp,
    samples_from_text,
)
from taskcost.collector._grpc import METRICS_EXPORT_METHOD
from taskcost.settings import Settings
from taskcost.store import DuckDBStore, PreparedBatch
from tests.conftest import Server, free_port, start_server, stop_server

DATA = Path(__file__).parent / "data" / "engine_captures"
DOCS = Path(__file__).resolve().parent.parent / "docs"
PB = {"Content-Type": "application/x-protobuf"}
T0 = 1_790_000_000_000_000_000


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _table(parsed: Any) -> dict[tuple[str, str], tuple[str, float, str | None, str]]:
    """(metric, labels) -> (source_metric, value, model, kind)."""
    out = {}
    for s in parsed.samples:
        key = (s.metric, s.labels)
        assert key not in out, f"two samples of {key}"
        out[key] = (s.source_metric, s.value, s.model, s.kind)
    return out


# -- Prometheus text -> samples ------------------------------------------------------------------------------------


def test_llama_cpp_capture_maps_to_exact_canonical_samples() -> None:
    parsed = samples_from_text(
        _text("llama-server-metrics.txt"), cluster_id="cpu", engine="llamacpp", model="smollm2", scraped_ns=T0
    )
    assert parsed.rejected == 0
    assert {s.ts_ns for s in parsed.samples} == {T0}
    assert {(s.cluster_id, s.engine) for s in parsed.samples} == {("cpu", "llamacpp")}
    pt, cached = "llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"
    assert _table(parsed) == {
        # llama.cpp's prompt count excludes the cached tokens: prompt_tokens is all of them (482 + 5882)
        ("prompt_tokens", "{}"): (f"{pt}+{cached}", 6364.0, "smollm2", "counter"),
        ("cached_prompt_tokens", "{}"): (cached, 5882.0, "smollm2", "counter"),
        ("prompt_seconds", "{}"): ("llamacpp:prompt_seconds_total", 1.72263, "smollm2", "counter"),
        ("generation_tokens", "{}"): ("llamacpp:tokens_predicted_total", 345.0, "smollm2", "counter"),
        ("decode_seconds", "{}"): ("llamacpp:tokens_predicted_seconds_total", 2.74974, "smollm2", "counter"),
        ("spec_drafts", "{}"): ("llamacpp:spec_decode_num_drafts_total", 0.0, "smollm2", "counter"),
        ("spec_draft_tokens", "{}"): ("llamacpp:spec_decode_num_draft_tokens_total", 0.0, "smollm2", "counter"),
        ("spec_accepted_tokens", "{}"): ("llamacpp:spec_decode_num_accepted_tokens_total", 0.0, "smollm2", "counter"),
        ("requests_running", "{}"): ("llamacpp:requests_processing", 0.0, "smollm2", "gauge"),
        ("requests_waiting", "{}"): ("llamacpp:requests_deferred", 0.0, "smollm2", "gauge"),
    }
    # what is not mapped is left out, counted: n_decode, n_tokens_max, two throughput gauges, busy slots
    assert parsed.ignored == 5


def test_llama_cpp_speculative_capture_keeps_the_position_label() -> None:
    parsed = samples_from_text(
        _text("llama-server-metrics-speculative.txt"), cluster_id="cpu", engine="llamacpp", model=None, scraped_ns=T0
    )
    table = _table(parsed)
    assert table[("spec_drafts", "{}")][1] == 18.0
    assert table[("spec_draft_tokens", "{}")][1] == 123.0
    assert table[("spec_accepted_tokens", "{}")][1] == 123.0
    per_pos = {
        json.loads(lab)["position"]: v[1]
        for (m, lab), v in table.items()
        if m == "spec_accepted_tokens" and lab != "{}"
    }
    assert per_pos == {"0": 18.0, **{str(i): 15.0 for i in range(1, 8)}}
    assert sum(per_pos.values()) == table[("spec_accepted_tokens", "{}")][1]  # the positions add up to the total
    assert table[("prompt_tokens", "{}")][1] == 59.0 + 70.0
    assert {s.model for s in parsed.samples} == {None}  # llama.cpp names no model, none was configured


def test_vllm_exposition_maps_to_exact_canonical_samples() -> None:
    parsed = samples_from_text(_text("vllm-metrics.txt"), cluster_id="h100", engine="vllm", model="x", scraped_ns=T0)
    assert parsed.rejected == 0
    assert {s.model for s in parsed.samples} == {"Qwen/Qwen3-0.6B"}  # the model_name label wins
    e0 = '{"engine_index":"0"}'
    got = {(m, lab): v[:2] for (m, lab), v in _table(parsed).items()}
    assert got == {
        ("requests_running", e0): ("vllm:num_requests_running", 3.0),
        ("requests_waiting", e0): ("vllm:num_requests_waiting", 2.0),
        ("kv_cache_usage", e0): ("vllm:kv_cache_usage_perc", 0.25),  # not the deprecated alias beside it
        ("preemptions", e0): ("vllm:num_preemptions_total", 1.0),
        ("prompt_tokens", e0): ("vllm:prompt_tokens_total", 18211.0),
        ("generation_tokens", e0): ("vllm:generation_tokens_total", 4096.0),
        ("requests_finished", '{"engine_index":"0","finished_reason":"abort"}'): ("vllm:request_success_total", 1.0),
        ("requests_finished", '{"engine_index":"0","finished_reason":"length"}'): ("vllm:request_success_total", 4.0),
        ("requests_finished", '{"engine_index":"0","finished_reason":"stop"}'): ("vllm:request_success_total", 35.0),
        ("prefix_cache_queries", e0): ("vllm:prefix_cache_queries_total", 18211.0),
        ("prefix_cache_hits", e0): ("vllm:prefix_cache_hits_total", 12288.0),
        ("spec_drafts", e0): ("vllm:spec_decode_num_drafts_total", 1000.0),
        ("spec_draft_tokens", e0): ("vllm:spec_decode_num_draft_tokens_total", 3000.0),
        ("spec_accepted_tokens", e0): ("vllm:spec_decode_num_accepted_tokens_total", 2100.0),
        **{
            ("spec_accepted_tokens", f'{{"engine_index":"0","position":"{p}"}}'): (
                "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                v,
            )
            for p, v in (("0", 900.0), ("1", 700.0), ("2", 500.0))
        },
        ("ttft_seconds_sum", e0): ("vllm:time_to_first_token_seconds_sum", 0.8),
        ("ttft_seconds_count", e0): ("vllm:time_to_first_token_seconds_count", 3.0),
        ("e2e_seconds_sum", e0): ("vllm:e2e_request_latency_seconds_sum", 8.0),
        ("e2e_seconds_count", e0): ("vllm:e2e_request_latency_seconds_count", 3.0),
        ("queue_seconds_sum", e0): ("vllm:request_queue_time_seconds_sum", 0.875),
        ("queue_seconds_count", e0): ("vllm:request_queue_time_seconds_count", 3.0),
        ("prefill_seconds_sum", e0): ("vllm:request_prefill_time_seconds_sum", 0.75),
        ("prefill_seconds_count", e0): ("vllm:request_prefill_time_seconds_count", 3.0),
        ("decode_seconds_sum", e0): ("vllm:request_decode_time_seconds_sum", 6.5),
        ("decode_seconds_count", e0): ("vllm:request_decode_time_seconds_count", 3.0),
    }


def test_vllm_deprecated_alias_alone_is_kept() -> None:
    text = (
        "# HELP vllm:gpu_prefix_cache_hits_total GPU prefix cache hits.\n"
        "# TYPE vllm:gpu_prefix_cache_hits_total counter\n"
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 77.0\n'
    )
    (sample,) = samples_from_text(text, cluster_id="c", engine="vllm", model=None, scraped_ns=T0).samples
    assert (sample.metric, sample.source_metric, sample.value) == (
        "prefix_cache_hits",
        "vllm:gpu_prefix_cache_hits_total",
        77.0,
    )


def test_sglang_exposition_maps_to_exact_canonical_samples() -> None:
    parsed = samples_from_text(
        _text("sglang-metrics.txt"), cluster_id="h100", engine="sglang", model=None, scraped_ns=T0
    )
    assert parsed.rejected == 0
    assert {s.model for s in parsed.samples} == {"meta-llama/Llama-3.1-8B-Instruct"}
    assert {m: v[:2] for (m, lab), v in _table(parsed).items() if lab == "{}"} == {
        "prompt_tokens": ("sglang:prompt_tokens_total", 52000.0),
        "generation_tokens": ("sglang:generation_tokens_total", 12000.0),
        "cached_prompt_tokens": ("sglang:cached_tokens_total", 31000.0),
        "requests_finished": ("sglang:num_requests_total", 400.0),
        "requests_running": ("sglang:num_running_reqs", 7.0),
        "requests_waiting": ("sglang:num_queue_reqs", 4.0),
        "kv_cache_usage": ("sglang:token_usage", 0.5),
        "cache_hit_rate": ("sglang:cache_hit_rate", 0.625),
        "spec_accept_length": ("sglang:spec_accept_length", 2.75),
        "spec_accept_rate": ("sglang:spec_accept_rate", 0.5),
        "ttft_seconds_sum": ("sglang:time_to_first_token_seconds_sum", 0.375),
        "ttft_seconds_count": ("sglang:time_to_first_token_seconds_count", 2.0),
        "e2e_seconds_sum": ("sglang:e2e_request_latency_seconds_sum", 5.0),
        "e2e_seconds_count": ("sglang:e2e_request_latency_seconds_count", 2.0),
    }
    assert len(parsed.samples) == 14


def test_an_odd_line_in_the_text_costs_only_itself() -> None:
    text = _text("llama-server-metrics.txt")
    text = text.replace("llamacpp:requests_deferred 0", "llamacpp:requests_deferred not-a-number")
    text = text.replace("llamacpp:prompt_seconds_total 1.72263", "llamacpp:prompt_seconds_total -1")
    text = text.replace("llamacpp:requests_processing 0", "llamacpp:requests_processing NaN")
    parsed = samples_from_text(text, cluster_id="cpu", engine="llamacpp", model=None, scraped_ns=T0)
    assert parsed.rejected == 3
    assert {m for m, _ in _table(parsed)} == {
        "prompt_tokens",
        "cached_prompt_tokens",
        "generation_tokens",
        "decode_seconds",
        "spec_drafts",
        "spec_draft_tokens",
        "spec_accepted_tokens",
    }
    why = " | ".join(parsed.messages)
    assert "not-a-number" in why and "negative" in why and "not finite" in why


# -- OTLP metrics -> samples ----------------------------------------------------------------------------------------


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _request(resource: dict[str, str], ts: int = T0) -> ExportMetricsServiceRequest:
    """What an OpenTelemetry Collector's prometheus receiver sends for a scrape of vLLM (names without ``_total``)."""
    req = ExportMetricsServiceRequest()
    rm = req.resource_metrics.add()
    rm.resource.attributes.extend(_kv(k, v) for k, v in resource.items())
    sm = rm.scope_metrics.add()
    sm.scope.name = "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver"
    labels = [_kv("model_name", "Qwen/Qwen3-0.6B"), _kv("engine", "0")]

    m = sm.metrics.add(name="vllm:prompt_tokens")  # renamed from vllm:prompt_tokens_total
    m.sum.is_monotonic = True
    m.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    m.sum.data_points.add(time_unix_nano=ts, as_double=18211.0).attributes.extend(labels)

    m = sm.metrics.add(name="vllm:prefix_cache_hits_total")  # the name kept as exposed: read as well
    m.sum.is_monotonic = True
    m.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    m.sum.data_points.add(time_unix_nano=ts, as_int=12288).attributes.extend(labels)

    m = sm.metrics.add(name="vllm:kv_cache_usage_perc")
    m.gauge.data_points.add(time_unix_nano=ts, as_double=0.25).attributes.extend(labels)
    stale = m.gauge.data_points.add(time_unix_nano=ts + 1, as_double=math.nan, flags=1)  # a staleness marker
    stale.attributes.extend(labels)

    m = sm.metrics.add(name="vllm:request_queue_time_seconds")
    m.histogram.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    m.histogram.data_points.add(
        time_unix_nano=ts, count=3, sum=0.875, bucket_counts=[1, 2, 0], explicit_bounds=[0.3, 0.5]
    ).attributes.extend(labels)

    m = sm.metrics.add(name="vllm:spec_decode_num_accepted_tokens_per_pos")
    m.sum.is_monotonic = True
    m.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    m.sum.data_points.add(time_unix_nano=ts, as_double=900.0).attributes.extend([*labels, _kv("position", "0")])

    m = sm.metrics.add(name="process_cpu_seconds")  # not an engine's metric: left out
    m.sum.data_points.add(time_unix_nano=ts, as_double=1.0)
    return req


def test_otlp_metrics_map_by_the_same_table() -> None:
    parsed = samples_from_otlp(_request({"taskcost.cluster.id": "h100-fp8", "service.name": "vllm-job"}))
    assert parsed.rejected == 0 and parsed.ignored == 1
    e0 = '{"engine_index":"0"}'
    assert {(m, lab): v for (m, lab), v in _table(parsed).items()} == {
        ("prompt_tokens", e0): ("vllm:prompt_tokens_total", 18211.0, "Qwen/Qwen3-0.6B", "counter"),
        ("prefix_cache_hits", e0): ("vllm:prefix_cache_hits_total", 12288.0, "Qwen/Qwen3-0.6B", "counter"),
        ("kv_cache_usage", e0): ("vllm:kv_cache_usage_perc", 0.25, "Qwen/Qwen3-0.6B", "gauge"),
        ("queue_seconds_sum", e0): ("vllm:request_queue_time_seconds_sum", 0.875, "Qwen/Qwen3-0.6B", "counter"),
        ("queue_seconds_count", e0): ("vllm:request_queue_time_seconds_count", 3.0, "Qwen/Qwen3-0.6B", "counter"),
        ("spec_accepted_tokens", '{"engine_index":"0","position":"0"}'): (
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            900.0,
            "Qwen/Qwen3-0.6B",
            "counter",
        ),
    }
    assert {(s.cluster_id, s.engine, s.ts_ns) for s in parsed.samples} == {("h100-fp8", "vllm", T0)}


@pytest.mark.parametrize(
    ("resource", "cluster", "engine"),
    [
        ({"k8s.cluster.name": "k8s-a", "service.name": "job"}, "k8s-a", "vllm"),
        ({"service.name": "job"}, "job", "vllm"),
        (
            {"taskcost.cluster.id": "c1", "k8s.cluster.name": "k8s-a", "taskcost.engine.name": "vllm-fork"},
            "c1",
            "vllm-fork",
        ),
    ],
)
def test_otlp_cluster_and_engine_from_the_resource(resource: dict[str, str], cluster: str, engine: str) -> None:
    parsed = samples_from_otlp(_request(resource))
    assert {(s.cluster_id, s.engine) for s in parsed.samples} == {(cluster, engine)}


def test_otlp_odd_points_cost_only_themselves() -> None:
    req = _request({"taskcost.cluster.id": "c"})
    metrics = req.resource_metrics[0].scope_metrics[0].metrics
    metrics[0].sum.data_points.add(time_unix_nano=T0 + 5, as_double=-3.0)  # a negative counter
    metrics[2].gauge.data_points.add(time_unix_nano=T0 + 5, as_double=math.inf)  # not finite
    metrics[2].gauge.data_points.add(time_unix_nano=T0 + 6)  # no value at all
    metrics[2].gauge.data_points.add(time_unix_nano=0, as_double=0.5)  # no time
    delta = metrics.add(name="vllm:generation_tokens")
    delta.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    delta.sum.data_points.add(time_unix_nano=T0, as_double=10.0)
    nowhere = req.resource_metrics.add()  # a resource that names no cluster at all
    nowhere.scope_metrics.add().metrics.add(name="vllm:num_requests_running").gauge.data_points.add(
        time_unix_nano=T0, as_double=1.0
    )
    parsed = samples_from_otlp(req)
    assert parsed.rejected == 6
    assert len(parsed.samples) == 6  # the good ones, all of them
    why = " | ".join(parsed.messages)
    assert "negative" in why and "not finite" in why and "no numeric value" in why and "timestamp" in why


def test_the_series_cap_keeps_known_series_and_drops_new_ones() -> None:
    parsed = samples_from_text(
        _text("llama-server-metrics.txt"), cluster_id="cpu", engine="llamacpp", model=None, scraped_ns=T0
    )
    limit = SeriesLimit(4)
    kept, dropped = limit.admit("p", parsed.samples)
    assert (len(kept), dropped) == (4, len(parsed.samples) - 4)
    again, dropped_again = limit.admit("p", parsed.samples)  # the same series later: the same four pass
    assert [s.series for s in again] == [s.series for s in kept] and dropped_again == dropped
    other, none = limit.admit("q", parsed.samples[:4])  # another project has its own cap
    assert len(other) == 4 and none == 0
    assert limit.series("p") == 4


# -- through the real collector -------------------------------------------------------------------------------------


class _Engine(http.server.BaseHTTPRequestHandler):
    """A stand-in engine's /metrics: the real llama.cpp capture; /down answers 500."""

    body = _text("llama-server-metrics-speculative.txt").encode()

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)
        else:
            self.send_error(500)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, int]]:
    engine = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{engine.server_address[1]}"
    targets = [
        {"url": f"{base}/metrics", "cluster_id": "cpu-spec", "engine": "llamacpp", "model": "smollm2", "interval_s": 1},
        {"url": f"{base}/down", "cluster_id": "down", "engine": "vllm", "interval_s": 1},
    ]
    tmp = tmp_path_factory.mktemp("engines")
    grpc_port = free_port()
    srv = start_server(
        tmp / "engines.duckdb",
        free_port(),
        tmp / "server.log",
        env={
            "TASKCOST_ENGINE_SCRAPE": json.dumps(targets),
            "TASKCOST_DECODE_WORKERS": "0",
            "TASKCOST_GRPC_PORT": str(grpc_port),
        },
    )
    yield srv, grpc_port
    stop_server(srv)
    engine.shutdown()


def _sql(srv: Server, sql: str) -> list[list[Any]]:
    r = httpx.post(f"{srv.url}/api/sql", json={"sql": sql}, timeout=30)
    assert r.status_code == 200, r.text
    rows: list[list[Any]] = r.json()["rows"]
    return rows


def test_the_server_scrapes_its_targets_and_one_failing_does_not_stop_the_other(served: tuple[Server, int]) -> None:
    srv, _ = served
    expected = samples_from_text(
        _text("llama-server-metrics-speculative.txt"),
        cluster_id="cpu-spec",
        engine="llamacpp",
        model="smollm2",
        scraped_ns=1,
    )
    deadline = time.monotonic() + 20
    while True:
        scrapes = _sql(srv, "SELECT count(DISTINCT ts_ns) FROM engine_metrics WHERE cluster_id = 'cpu-spec'")[0][0]
        if scrapes >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert scrapes >= 2, srv.log.read_text()
    rows = _sql(
        srv,
        "SELECT metric, labels, value, engine, model, kind, source, source_metric FROM engine_metrics "
        "WHERE cluster_id = 'cpu-spec' "
        "AND ts_ns = (SELECT min(ts_ns) FROM engine_metrics WHERE cluster_id = 'cpu-spec')",
    )
    got = {(r[0], r[1]): (r[7], r[2], r[4], r[5]) for r in rows}
    assert got == _table(expected)
    assert {(r[3], r[6]) for r in rows} == {("llamacpp", "scrape")}
    metrics = httpx.get(f"{srv.url}/metrics", timeout=10).text
    failed = re.search(r'taskcost_engine_scrapes_total\{cluster_id="down",outcome="failed"\} (\d+)', metrics)
    ok = re.search(r'taskcost_engine_scrapes_total\{cluster_id="cpu-spec",outcome="ok"\} (\d+)', metrics)
    assert failed and ok and float(failed.group(1)) >= 2 and float(ok.group(1)) >= 2, metrics
    log = srv.log.read_text()
    assert log.count("/down (cluster down) fails") == 1  # once per change of state, not once per scrape


def test_otlp_http_protobuf_and_json_are_stored_and_read_back(served: tuple[Server, int]) -> None:
    srv, _ = served
    body = _request({"taskcost.cluster.id": "h100-http"}).SerializeToString()
    for _ in range(2):  # sent twice (a retry): each sample shows once
        r = httpx.post(f"{srv.url}/v1/metrics", content=body, headers=PB, timeout=30)
        assert r.status_code == 200, r.text
        assert ExportMetricsServiceResponse.FromString(r.content).partial_success.rejected_data_points == 0
    doc = json_format.MessageToDict(
        _request({"taskcost.cluster.id": "h100-json"}, ts=T0 + 1), use_integers_for_enums=True
    )
    r = httpx.post(
        f"{srv.url}/v1/metrics",
        content=gzip.compress(json.dumps(doc).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=30,
    )
    assert r.status_code == 200 and r.json() == {}, r.text
    rows = _sql(
        srv,
        "SELECT cluster_id, metric, labels, value, model, kind, source, ts_ns FROM engine_metrics "
        "WHERE cluster_id LIKE 'h100-%' ORDER BY cluster_id, metric, labels",
    )
    expected = samples_from_otlp(_request({"taskcost.cluster.id": "x"}))
    want = sorted((s.metric, s.labels, s.value, s.model, s.kind) for s in expected.samples)
    for cluster, ts in (("h100-http", T0), ("h100-json", T0 + 1)):
        mine = [r for r in rows if r[0] == cluster]
        assert sorted((r[1], r[2], r[3], r[4], r[5]) for r in mine) == want
        assert {(r[6], r[7]) for r in mine} == {("otlp", ts)}
    raw = _sql(srv, "SELECT count(*) FROM engine_metrics WHERE cluster_id = 'h100-http'")[0][0]
    assert raw == len(want)


def test_otlp_http_odd_points_and_a_request_of_only_odd_points(served: tuple[Server, int]) -> None:
    srv, _ = served
    req = _request({"taskcost.cluster.id": "odd"})
    req.resource_metrics[0].scope_metrics[0].metrics[2].gauge.data_points.add(time_unix_nano=T0 + 9, as_double=math.inf)
    r = httpx.post(f"{srv.url}/v1/metrics", content=req.SerializeToString(), headers=PB, timeout=30)
    assert r.status_code == 200
    partial = ExportMetricsServiceResponse.FromString(r.content).partial_success
    assert partial.rejected_data_points == 1 and "not finite" in partial.error_message
    assert _sql(srv, "SELECT count(*) FROM engine_metrics WHERE cluster_id = 'odd'")[0][0] == 6
    bad = ExportMetricsServiceRequest()
    m = bad.resource_metrics.add().scope_metrics.add().metrics.add(name="vllm:num_requests_running")
    m.gauge.data_points.add(time_unix_nano=T0, as_double=2.0)  # no resource names a cluster
    m.gauge.data_points.add(time_unix_nano=T0, as_double=math.nan)
    r = httpx.post(f"{srv.url}/v1/metrics", content=bad.SerializeToString(), headers=PB, timeout=30)
    assert r.status_code == 400
    r = httpx.post(
        f"{srv.url}/v1/metrics",
        json=json_format.MessageToDict(bad),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 400 and r.json()["error"] == "bad_request"
    assert "no data point of this request could be stored (2)" in r.json()["message"]
    assert "taskcost.cluster.id" in r.json()["message"]
    r = httpx.post(f"{srv.url}/v1/metrics", content=b"\xff\xfenot protobuf", headers=PB, timeout=30)
    assert r.status_code == 400
    r = httpx.post(f"{srv.url}/v1/metrics", content=b"{}", headers={"Content-Type": "text/plain"}, timeout=30)
    assert r.status_code == 415


def test_otlp_grpc_metrics_service(served: tuple[Server, int]) -> None:
    srv, grpc_port = served
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        export = channel.unary_unary(METRICS_EXPORT_METHOD)
        answer = ExportMetricsServiceResponse.FromString(
            export(_request({"taskcost.cluster.id": "h100-grpc"}).SerializeToString(), timeout=30)
        )
        assert answer.partial_success.rejected_data_points == 0
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\xff\xfe garbage", timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    rows = _sql(
        srv, "SELECT metric, value FROM engine_metrics WHERE cluster_id = 'h100-grpc' AND metric = 'prompt_tokens'"
    )
    assert rows == [["prompt_tokens", 18211.0]]


def test_the_series_cap_through_the_http_route(tmp_path: Path) -> None:
    settings = Settings.model_validate({"db": tmp_path / "cap.duckdb", "decode_workers": 0, "engine_max_series": 4})
    with DuckDBStore.open(settings.db) as store, TestClient(create_app(settings, store, dashboards=False)) as client:
        r = client.post("/v1/metrics", content=_request({"taskcost.cluster.id": "c"}).SerializeToString(), headers=PB)
        assert r.status_code == 200
        partial = ExportMetricsServiceResponse.FromString(r.content).partial_success
        assert partial.rejected_data_points == 2 and "engine_max_series" in partial.error_message
        assert store.query("SELECT count(*) FROM engine_metrics").rows == [(4,)]
        text = client.get("/metrics").text
        assert 'taskcost_engine_samples_total{outcome="over_series_cap"} 2.0' in text
        assert 'taskcost_engine_samples_total{outcome="stored"} 4.0' in text


# -- the docs and the other store -----------------------------------------------------------------------------------


def _section() -> str:
    doc = (DOCS / "schema.md").read_text()
    return doc[doc.index("## `engine_metrics`") :].split("\n## ")[0]


def test_engine_metrics_columns_and_names_are_documented(tmp_path: Path) -> None:
    section = _section()
    columns_table = section.split("| canonical `metric`")[0]
    documented = re.findall(r"^\| `(\w+)` \| (\w+) \|", columns_table, re.M)
    with DuckDBStore.open(tmp_path / "d.duckdb") as st:
        described = [(r[0], r[1]) for r in st.query("DESCRIBE engine_metrics").rows]
        # the example in the docs runs as it is written
        example = section.split("```sql\n")[1].split("```")[0]
        assert st.query(example).columns == ["cluster_id", "decode_tokens_per_s", "prefix_cache_hit_rate"]
    assert documented == described
    canonical = {n.metric for n in MAPPING.values() if not n.metric.startswith("_")}
    assert all(f"`{m}`" in section for m in canonical), canonical
    assert all(
        f"`{source}`" in section or source.removesuffix("_sum").removesuffix("_count") in section for source in MAPPING
    )


def test_clickhouse_holds_the_same_rows_as_duckdb(tmp_path: Path) -> None:
    pytest.importorskip("chdb")
    from taskcost.store.clickhouse import ClickHouseStore

    parsed = samples_from_text(_text("vllm-metrics.txt"), cluster_id="h100", engine="vllm", model=None, scraped_ns=T0)
    llama = samples_from_text(
        _text("llama-server-metrics.txt"), cluster_id="cpu", engine="llamacpp", model=None, scraped_ns=T0
    )

    def batch(samples: list[Any], project: str, received_ns: int) -> PreparedBatch:
        cols = engine_rows(samples, project=project, source="scrape", received_ns=received_ns)
        return PreparedBatch(columns={"engine_metric_rows": cols}, span_count=0, sample_count=len(samples))

    batches = [batch(parsed.samples, "p1", 1), batch(parsed.samples, "p1", 2), batch(llama.samples, "p2", 3)]
    with DuckDBStore.open(tmp_path / "d.duckdb") as duck, ClickHouseStore.open(f"chdb://{tmp_path / 'ch'}") as ch:
        for b in batches:
            duck.write(b)
            ch.write(b)  # the second is re-sent: shown once, the first received
        for st in (duck, ch):
            rows = st.query("SELECT metric, labels, value, received_ns FROM engine_metrics", project="p1").rows
            assert sorted((r[0], r[1], r[2]) for r in rows) == sorted(
                (s.metric, s.labels, s.value) for s in parsed.samples
            )
            assert {r[3] for r in rows} == {1}
            assert st.query("SELECT count(*) FROM engine_metrics", project="p3").rows == [(0,)]
        want, got = (st.arrow("SELECT * FROM engine_metrics") for st in (duck, ch))
        assert got.schema == want.schema
        order = [(c, "ascending") for c in ("project", "cluster_id", "metric", "labels")]
        assert got.sort_by(order).to_pylist() == want.sort_by(order).to_pylist()
        assert want.num_rows == len(parsed.samples) + len(llama.samples)
