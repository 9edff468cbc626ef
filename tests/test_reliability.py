"""Lose nothing acknowledged, count nothing twice, survive overload: the real server process, the
real OpenTelemetry OTLP/HTTP exporter, kill -9 and restarts."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import free_port, run_cli, start_server, stop_server


def make_spans(n: int) -> list[ReadableSpan]:
    """n finished LLM-call spans (a task id per 10), made by the real SDK."""
    mem = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "load"}))
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("load")
    for i in range(n):
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={
                "taskcost.task.id": f"t{i // 10}",
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 100 + i % 50,
                "gen_ai.usage.output_tokens": 20,
                "seq": i,
            },
        ):
            pass
    return list(mem.get_finished_spans())


def _ids(spans: list[ReadableSpan]) -> set[tuple[str, str]]:
    return {(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in spans}


def _stored(db: Path) -> list[tuple[str, str, int]]:
    """(trace_id, span_id, copies) of every stored span, through `taskcost sql` as a user would ask."""
    out = run_cli(
        "sql", "--db", str(db), "--format", "json", "SELECT trace_id, span_id, count(*) AS n FROM spans GROUP BY ALL"
    )
    return [(r["trace_id"], r["span_id"], r["n"]) for r in json.loads(out.stdout)]


def test_kill_9_mid_run_loses_no_acknowledged_span_and_counts_none_twice(tmp_path: Path) -> None:
    db, port, log = tmp_path / "crash.duckdb", free_port(), tmp_path / "server.log"
    spans = make_spans(6_000)
    batches = [spans[i : i + 100] for i in range(0, len(spans), 100)]
    acked: list[ReadableSpan] = []
    server = start_server(db, port, log)
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=10)
    killed = threading.Event()
    pending = list(batches)
    restarted = None
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        batch = pending.pop(0)
        result = exporter.export(batch)
        if result is SpanExportResult.SUCCESS:
            acked.extend(batch)
        else:
            pending.append(batch)  # like a client that keeps what failed and sends it again
        if len(acked) >= 2_000 and not killed.is_set():  # a third of the way: acknowledged, maybe not committed
            os.kill(server.proc.pid, signal.SIGKILL)
            killed.set()
        elif killed.is_set() and restarted is None:
            server.proc.wait()
            restarted = start_server(db, port, log)
    exporter.shutdown()
    assert killed.is_set() and restarted is not None, "the server was not killed mid-run"
    try:
        assert not pending, f"{len(pending)} batches never acknowledged"
        rows = _stored(db)
    finally:
        stop_server(restarted)
    counts = {(t, s): n for t, s, n in rows}
    assert all(n == 1 for n in counts.values()), "a span was stored twice"
    assert _ids(acked) <= set(counts), "an acknowledged span is missing"
    assert len(counts) == 6_000
    assert "re-sent spans skipped" in log.read_text()


def _rss_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_overload_is_refused_with_503_and_every_span_arrives(tmp_path: Path) -> None:
    """Senders push far more than a deliberately small write queue takes: the collector slows them
    down (and answers 503 + Retry-After when a wait runs out), the real exporter retries, every span
    lands once, and memory stays bounded."""
    env = {"TASKCOST_MAX_QUEUED_SPANS": "1000", "TASKCOST_MAX_INFLIGHT_REQUESTS": "2"}
    server = start_server(tmp_path / "load.duckdb", free_port(), tmp_path / "server.log", env)
    senders, per_sender = 6, 4_000
    all_spans = make_spans(senders * per_sender)
    failures: list[int] = []

    def send(part: list[ReadableSpan]) -> None:
        exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=30)
        for i in range(0, len(part), 500):
            if exporter.export(part[i : i + 500]) is not SpanExportResult.SUCCESS:
                failures.append(i)
        exporter.shutdown()

    try:
        threads = [
            threading.Thread(target=send, args=(all_spans[k * per_sender : (k + 1) * per_sender],))
            for k in range(senders)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        metrics = httpx.get(f"{server.url}/metrics").text
        peak = _rss_peak_mb(server.proc.pid)
        out = run_cli(
            "sql",
            "--url",
            server.url,
            "--format",
            "csv",
            "SELECT count(*), count(DISTINCT trace_id || span_id) FROM spans",
        ).stdout
    finally:
        stop_server(server)
    assert not failures, f"{len(failures)} batches were dropped by the exporter"
    throttled = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith(("taskcost_requests_throttled_total", "taskcost_requests_refused_total"))
    )
    assert throttled > 0, "the load never exceeded the collector's capacity: the test proves nothing"
    total, distinct = (int(x) for x in out.splitlines()[1].split(","))
    assert total == distinct == senders * per_sender
    assert peak < 400, f"collector peak RSS {peak:.0f} MB"
