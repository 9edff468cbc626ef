"""Engine server spans tied to the calls they served, and engine/topology data per call.

Through the real collector (``taskcost serve`` on a loopback port) with the real OpenTelemetry SDK and OTLP/HTTP
exporter: an agent's call spans, and vLLM-shaped server spans (scope ``vllm.llm_engine``, kind SERVER, the
``gen_ai.latency.*`` attributes vLLM sets) whose parent comes from the W3C ``traceparent`` the client injected, as
vLLM started with ``--otlp-traces-endpoint`` reports them. The normaliser's own rules are tested on hand-built
requests below.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry import propagate
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Tracer, set_span_in_context

from taskcost.app import create_app
from taskcost.normalize import normalize_request
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.conftest import Server, free_port, start_server, stop_server
from tests.interop.otlp import S, request, span_hex

T0 = 1_796_000_000_000_000_000
MS = 1_000_000
TASK = "eng-task"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _vllm_attrs(request_id: str, *, e2e: float, prefill: float, decode: float, cached: int) -> dict[str, Any]:
    """What vLLM's ``llm_request`` span carries (vllm/tracing.py's SpanAttributes), seconds as doubles."""
    return {
        "gen_ai.request.id": request_id,
        "gen_ai.response.model": MODEL,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.usage.prompt_tokens": 900,
        "gen_ai.usage.completion_tokens": 64,
        "gen_ai.usage.cached_tokens": cached,
        "gen_ai.latency.time_in_queue": 0.012,
        "gen_ai.latency.time_to_first_token": 0.045,
        "gen_ai.latency.e2e": e2e,
        "gen_ai.latency.time_in_model_prefill": prefill,
        "gen_ai.latency.time_in_model_decode": decode,
        "gen_ai.latency.time_in_model_inference": prefill + decode,
    }


class _Sent(SpanExporter):
    """Keeps what was exported (to send one span again, as a client retry would)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _provider(url: str, resource: dict[str, Any], sent: _Sent) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create(resource))
    # one export request per span, in the order they end: an engine span ends (and is sent) before its call
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10)))
    provider.add_span_processor(SimpleSpanProcessor(sent))
    return provider


def _call_attrs(call_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,
        "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 64,
        "taskcost.task.id": TASK,
        "taskcost.call.id": call_id,
        **extra,
    }


def _server_span(vllm: Tracer, carrier: dict[str, str] | None, attrs: dict[str, Any], at_ms: int, end_ms: int) -> None:
    ctx = propagate.extract(carrier) if carrier is not None else None
    span = vllm.start_span("llm_request", context=ctx, kind=SpanKind.SERVER, start_time=T0 + at_ms * MS)
    span.set_attributes(attrs)
    span.end(end_time=T0 + end_ms * MS)


def _traffic(url: str) -> dict[str, Any]:
    """The agent's task and calls, and the engine's spans; returns what the test checks against."""
    agent_sent, engine_sent = _Sent(), _Sent()
    agent = _provider(url, {"service.name": "agent", "taskcost.cluster.id": "gpu-east"}, agent_sent)
    engine = _provider(url, {"service.name": "vllm"}, engine_sent)
    tracer = agent.get_tracer("taskcost_sdk")
    vllm = engine.get_tracer("vllm.llm_engine")
    ids: dict[str, Any] = {}
    task = tracer.start_span(
        "task", start_time=T0, attributes={"taskcost.task.kind": "review", "taskcost.task.id": TASK}
    )
    in_task = set_span_in_context(task)
    # 1. a call whose request carried its traceparent: vLLM's span is its child (and is sent before it)
    c1 = tracer.start_span(
        "chat",
        context=in_task,
        start_time=T0 + 10 * MS,
        attributes=_call_attrs(
            "c1",
            **{
                "taskcost.parallel.tensor": 4,
                "taskcost.parallel.pipeline": 2,
                "taskcost.pd.disaggregated": True,
                "taskcost.pd.prefill_gpu_type": "H100",
                "taskcost.pd.decode_gpu_type": "L40S",
                "taskcost.spec.method": "EAGLE3",
                "taskcost.spec.draft_model": "eagle3-llama-8b",
            },
        ),
    )
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=set_span_in_context(c1))
    _server_span(vllm, carrier, _vllm_attrs("cmpl-1", e2e=0.4, prefill=0.05, decode=0.3, cached=512), 30, 430)
    c1.end(end_time=T0 + 510 * MS)
    ids["c1"] = format(c1.get_span_context().span_id, "016x")
    # 2. a call stored first, whose engine span came without a traceparent: matched by vLLM's request id; the
    # response's own timings (llama.cpp style) are there too, the engine span's win where both say
    c2 = tracer.start_span(
        "chat",
        context=in_task,
        start_time=T0 + 600 * MS,
        attributes=_call_attrs(
            "c2",
            **{
                "gen_ai.response.id": "chatcmpl-req-2",
                "taskcost.engine.prefill_s": 0.25,
                "taskcost.engine.decode_s": 0.5,
                "taskcost.engine.cached_tokens": 100,
                "taskcost.spec.draft_tokens": 40,
                "taskcost.spec.accepted_tokens": 30,
            },
        ),
    )
    c2.end(end_time=T0 + 1400 * MS)
    ids["c2"] = format(c2.get_span_context().span_id, "016x")
    agent.force_flush()
    _server_span(vllm, None, _vllm_attrs("req-2", e2e=0.7, prefill=0.1, decode=0.55, cached=256), 650, 1350)
    # 3. an engine span no stored call served
    _server_span(vllm, None, _vllm_attrs("nobody", e2e=0.2, prefill=0.05, decode=0.1, cached=0), 1500, 1700)
    # 4. a call with only its own timings and odd values (each costs only itself)
    c3 = tracer.start_span(
        "chat",
        context=in_task,
        start_time=T0 + 2000 * MS,
        attributes=_call_attrs(
            "c3",
            **{
                "taskcost.engine.prefill_s": -1.0,
                "taskcost.engine.decode_s": math.nan,
                "taskcost.engine.decode_tokens": 64,
                "taskcost.parallel.tensor": "four",
                "taskcost.parallel.data": 2,
                "taskcost.pd.disaggregated": "maybe",
                "taskcost.spec.accepted_tokens": 12,
            },
        ),
    )
    c3.end(end_time=T0 + 2600 * MS)
    ids["c3"] = format(c3.get_span_context().span_id, "016x")
    # 5. a call without any engine data
    c4 = tracer.start_span("chat", context=in_task, start_time=T0 + 2700 * MS, attributes=_call_attrs("c4"))
    c4.end(end_time=T0 + 2800 * MS)
    task.end(end_time=T0 + 3000 * MS)
    # 6. vLLM's span of call 1, sent again (a retry of the export): stored once
    resent = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10)
    assert resent.export([engine_sent.spans[0]]) == SpanExportResult.SUCCESS
    agent.shutdown()
    engine.shutdown()
    ids["engine_spans"] = [format(s.context.span_id, "016x") for s in engine_sent.spans if s.context is not None]
    return ids


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Any]]]:
    tmp: Path = tmp_path_factory.mktemp("engines")
    srv = start_server(tmp / "served.duckdb", free_port(), tmp / "server.log")
    try:
        yield srv, _traffic(srv.url)
    finally:
        stop_server(srv)


def _sql(server: Server, sql: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{server.url}/api/sql", json={"sql": sql}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    return [dict(zip(body["columns"], row, strict=True)) for row in body["rows"]]


def test_engine_spans_are_matched_by_parent_or_request_id_and_kept_when_unmatched(
    served: tuple[Server, dict[str, Any]],
) -> None:
    srv, ids = served
    rows = _sql(srv, "SELECT * FROM engine_spans ORDER BY start_ns")
    assert [r["span_id"] for r in rows] == ids["engine_spans"]  # each once: the re-sent one too
    assert [(r["request_id"], r["matched"], r["call_id"], r["task_id"]) for r in rows] == [
        ("cmpl-1", True, "c1", TASK),
        ("req-2", True, "c2", TASK),
        ("nobody", False, None, None),
    ]
    first = rows[0]
    assert (first["parent_span_id"], first["engine"], first["response_model"]) == (ids["c1"], "vllm", MODEL)
    assert (first["prompt_tokens"], first["completion_tokens"], first["cached_tokens"]) == (900, 64, 512)
    assert (first["queue_s"], first["ttft_s"], first["e2e_s"]) == (0.012, 0.045, 0.4)
    assert (first["prefill_s"], first["decode_s"], first["inference_s"]) == (0.05, 0.3, 0.05 + 0.3)
    assert (first["start_ns"], first["end_ns"], first["attempt"]) == (T0 + 30 * MS, T0 + 430 * MS, 1)


def test_an_engine_span_is_never_a_call_of_the_task(served: tuple[Server, dict[str, Any]]) -> None:
    srv, _ = served
    [task] = _sql(srv, f"SELECT llm_calls, attempts, input_tokens FROM tasks WHERE task_id = '{TASK}'")
    assert task == {"llm_calls": 4, "attempts": 4, "input_tokens": 4 * 900}
    assert _sql(srv, "SELECT count(*) AS n FROM llm_calls") == [{"n": 4}]
    # the raw spans keep every engine span as received
    assert _sql(srv, "SELECT count(*) AS n FROM spans WHERE name = 'llm_request'") == [{"n": 3}]


def test_engine_calls_take_the_engine_span_first_and_the_calls_own_tags(
    served: tuple[Server, dict[str, Any]],
) -> None:
    srv, ids = served
    rows = {r["call_id"]: r for r in _sql(srv, "SELECT * FROM engine_calls")}
    assert sorted(rows) == ["c1", "c2", "c3"]  # c4 has no engine data
    c1 = rows["c1"]
    assert (c1["span_id"], c1["engine_source"], c1["start_ns"], c1["model"]) == (
        ids["c1"],
        "engine_span",
        T0 + 10 * MS,
        MODEL,
    )
    assert (c1["queue_s"], c1["prefill_s"], c1["decode_s"], c1["engine_ttft_s"], c1["engine_e2e_s"]) == (
        0.012,
        0.05,
        0.3,
        0.045,
        0.4,
    )
    assert c1["latency_s"] == 0.5 and c1["client_overhead_s"] == pytest.approx(0.5 - 0.4, abs=1e-12)
    assert (c1["engine"], c1["cluster_id"], c1["engine_cached_tokens"]) == ("vllm", "gpu-east", 512)
    topology = ("tp_size", "pp_size", "dp_size", "pd_disaggregated", "prefill_gpu_type", "decode_gpu_type")
    assert tuple(c1[k] for k in topology) == (4, 2, None, True, "H100", "L40S")
    assert (c1["spec_method"], c1["spec_draft_model"]) == ("eagle3", "eagle3-llama-8b")
    # both sources: the engine span's value wins where it has one, the response's fills the rest
    c2 = rows["c2"]
    assert (c2["engine_source"], c2["prefill_s"], c2["decode_s"], c2["engine_cached_tokens"]) == (
        "engine_span",
        0.1,
        0.55,
        256,
    )
    assert (c2["spec_draft_tokens"], c2["spec_accepted_tokens"], c2["engine_e2e_s"]) == (40, 30, 0.7)
    assert c2["client_overhead_s"] == pytest.approx(0.8 - 0.7, abs=1e-12)
    # the response's timings alone; odd values lost one by one
    c3 = rows["c3"]
    assert (c3["engine_source"], c3["queue_s"], c3["engine_e2e_s"], c3["client_overhead_s"]) == (
        "response",
        None,
        None,
        None,
    )
    assert (c3["prefill_s"], c3["decode_s"], c3["spec_accepted_tokens"]) == (None, None, 12)
    assert (c3["tp_size"], c3["dp_size"], c3["pd_disaggregated"]) == (None, 2, None)
    assert (c3["input_tokens"], c3["output_tokens"], c3["latency_s"]) == (900, 64, 0.6)


# -- the normaliser, on hand-built requests ---------------------------------------------------------------------------

CALL = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 64}
VLLM = {
    "gen_ai.request.id": "cmpl-abc",
    "gen_ai.usage.prompt_tokens": 900,
    "gen_ai.usage.completion_tokens": 64,
    "gen_ai.latency.e2e": 0.4,
}


def test_a_vllm_span_with_usage_is_an_engine_span_not_a_second_call() -> None:
    batch = normalize_request(
        request(
            S("chat", 2, attrs=CALL, end_ms=500),
            S("llm_request", 3, parent=2, scope="vllm.llm_engine", attrs=VLLM, start_ms=20, end_ms=480),
        )
    )
    assert len(batch.spans) == 2 and len(batch.llm_calls) == 1 and batch.llm_calls[0].span_id == span_hex(2)
    [engine] = batch.engine_spans
    assert (engine.parent_span_id, engine.request_id, engine.prompt_tokens, engine.e2e_s) == (
        batch.llm_calls[0].span_id,
        "cmpl-abc",
        900,
        0.4,
    )
    # alone in its request (the engine exports on its own), still no call
    alone = normalize_request(request(S("llm_request", 3, parent=2, scope="vllm.llm_engine", attrs=VLLM)))
    assert alone.llm_calls == [] and alone.tasks == [] and len(alone.engine_spans) == 1


@pytest.mark.parametrize(
    ("scope", "resource", "attrs", "engine"),
    [
        ("vllm.llm_engine", {}, {"gen_ai.usage.prompt_tokens": 9}, "vllm"),  # the scope alone
        ("other", {"vllm.instrumenting_module_name": "vllm.llm_engine"}, {}, "vllm"),  # vLLM's resource mark
        ("other", {"service.name": "sglang-east"}, {"gen_ai.latency.e2e": 0.3}, "sglang-east"),  # the latencies
        ("other", {"taskcost.engine.name": "vllm-fork"}, {"gen_ai.latency.time_in_queue": 0.1}, "vllm-fork"),
        ("vllm.llm_engine", {"service.name": "unknown_service:python"}, {}, "vllm"),
    ],
)
def test_an_engine_span_is_recognised_and_names_its_engine(
    scope: str, resource: dict[str, Any], attrs: dict[str, Any], engine: str
) -> None:
    batch = normalize_request(request(S("llm_request", 3, scope=scope, attrs=attrs), resource=resource))
    assert batch.llm_calls == [] and [e.engine for e in batch.engine_spans] == [engine]


def test_odd_engine_values_cost_only_themselves() -> None:
    odd = {**VLLM, "gen_ai.latency.e2e": -0.4, "gen_ai.latency.time_in_queue": "soon", "gen_ai.usage.cached_tokens": 7}
    batch = normalize_request(request(S("llm_request", 3, scope="vllm.llm_engine", attrs=odd)))
    [engine] = batch.engine_spans
    assert (engine.e2e_s, engine.queue_s, engine.cached_tokens, engine.prompt_tokens) == (None, None, 7, 900)
    assert batch.ignored_values == 2 and sum("ignored gen_ai.latency" in m for m in batch.messages) == 2
    call = {**CALL, "taskcost.parallel.tensor": 0, "taskcost.spec.draft_tokens": 1.5, "taskcost.engine.decode_s": 2}
    batch = normalize_request(request(S("chat", 2, attrs=call)))
    [detail] = batch.call_engines
    assert (detail.tp_size, detail.spec_draft_tokens, detail.decode_s) == (None, None, 2.0)
    assert batch.ignored_values == 2 and len(batch.llm_calls) == 1


def test_topology_comes_from_the_resource_unless_the_span_says() -> None:
    resource = {"taskcost.parallel.tensor": 8, "taskcost.spec.method": "ngram"}
    batch = normalize_request(
        request(
            S("chat", 2, attrs=CALL),
            S("chat", 3, attrs={**CALL, "taskcost.parallel.tensor": 2}, start_ms=200, end_ms=300),
            resource=resource,
        )
    )
    got = {d.span_id[-1]: (d.tp_size, d.spec_method) for d in batch.call_engines}
    assert got == {"2": (8, "ngram"), "3": (2, "ngram")}
    # no engine name at all: no per-call record (the common case costs nothing)
    assert normalize_request(request(S("chat", 2, attrs=CALL))).call_engines == []


def test_engine_views_keep_to_their_project(settings: Settings, store: DuckDBStore) -> None:
    """A read key sees its own project's engine spans and calls only, and an engine span never matches a call of
    another project (the same request id in both)."""
    keys = {p: (store.create_key(p, "ingest")[1], store.create_key(p, "read")[1]) for p in ("alpha", "beta")}
    call = {**CALL, "gen_ai.response.id": "chatcmpl-shared", "taskcost.parallel.tensor": 2}
    engine = {**VLLM, "gen_ai.request.id": "shared"}  # in both projects: matches alpha's call only
    sent = {
        "alpha": request(S("chat", 2, attrs=call), S("llm_request", 3, trace=2, scope="vllm.x", attrs=engine)),
        "beta": request(S("llm_request", 4, trace=3, scope="vllm.x", attrs=engine)),
    }
    with TestClient(create_app(settings, store, dashboards=False)) as client:
        for project, req in sent.items():
            headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {keys[project][0]}"}
            assert client.post("/v1/traces", content=req.SerializeToString(), headers=headers).status_code == 200

        def ask(project: str, sql: str) -> list[list[Any]]:
            r = client.post("/api/sql", json={"sql": sql}, headers={"Authorization": f"Bearer {keys[project][1]}"})
            assert r.status_code == 200, r.text
            return list(r.json()["rows"])

        spans = "SELECT project, span_id, matched FROM engine_spans"
        assert ask("alpha", spans) == [["alpha", span_hex(3), True]]
        assert ask("beta", spans) == [["beta", span_hex(4), False]]
        calls = "SELECT project, span_id, tp_size, engine_source FROM engine_calls"
        assert ask("alpha", calls) == [["alpha", span_hex(2), 2, "engine_span"]]
        assert ask("beta", calls) == []
