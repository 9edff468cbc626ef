"""OTLP/gRPC intake with the real Python gRPC exporter and grpc channels: same rows as OTLP/HTTP, the spec's codes."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from taskcost.app import create_app
from taskcost.collector._grpc import EXPORT_METHOD, RETRY_INFO_TRAILER, STATUS_DETAILS_TRAILER, start_grpc_server
from taskcost.settings import Settings
from taskcost.store import DuckDBStore, PreparedBatch
from tests.conftest import free_port
from tests.interop.collectors import dump, grpc_collector

T0 = 1_796_000_000_000_000_000


def finished_spans() -> list[ReadableSpan]:
    """A task with an OpenLLMetry-style call, an OpenInference-style call and a tool, made by the real SDK."""
    mem = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "grpc-agent", "k8s.cluster.name": "eu-1"}))
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("interop")
    with tracer.start_as_current_span(
        "invoke_agent reviewer",
        start_time=T0,
        end_on_exit=False,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reviewer", "session.id": "s-1"},
    ) as root:
        s = tracer.start_span(
            "openai.chat",
            kind=SpanKind.CLIENT,
            start_time=T0 + 1_000_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.response.id": "chatcmpl-1",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.cache_read.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 300,
            },
        )
        s.end(end_time=T0 + 900_000_000)
        s = tracer.start_span(
            "ChatCompletion",
            start_time=T0 + 1_000_000_000,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.provider": "anthropic",
                "llm.model_name": "claude-sonnet-4-5",
                "llm.token_count.prompt": 2500,
                "llm.token_count.prompt_details.cache_read": 1800,
                "llm.token_count.completion": 120,
            },
        )
        s.set_status(Status(StatusCode.ERROR, "overloaded"))
        s.add_event("exception", {"exception.type": "anthropic.APIStatusError"}, timestamp=T0 + 1_500_000_000)
        s.end(end_time=T0 + 1_600_000_000)
        s = tracer.start_span(
            "execute_tool grep",
            start_time=T0 + 1_700_000_000,
            attributes={"openinference.span.kind": "TOOL", "tool.name": "grep"},
        )
        s.end(end_time=T0 + 1_800_000_000)
        root.end(end_time=T0 + 2_000_000_000)
    return list(mem.get_finished_spans())


def _via_http(tmp_path: Path, spans: list[ReadableSpan]) -> dict[str, list[tuple]]:
    with DuckDBStore.open(tmp_path / "http.duckdb") as st:
        with TestClient(create_app(Settings(db=st.path), st, dashboards=False)) as c:
            r = c.post(
                "/v1/traces",
                content=encode_spans(spans).SerializeToString(),
                headers={"Content-Type": "application/x-protobuf"},
            )
            assert r.status_code == 200, r.text
        return dump(st)


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_python_grpc_exporter_lands_like_otlp_http(tmp_path: Path, compression: Compression) -> None:
    spans = finished_spans()
    with grpc_collector(tmp_path / "grpc.duckdb") as col:
        exporter = OTLPSpanExporter(endpoint=col.grpc_endpoint, insecure=True, compression=compression, timeout=10)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        via_grpc = dump(col.store)
    assert via_grpc == _via_http(tmp_path, spans)
    assert len(via_grpc["spans"]) == 4
    with DuckDBStore.open(tmp_path / "grpc.duckdb", read_only=True) as st:
        rows = st.query(
            "SELECT provider, input_tokens, cache_read_tokens, status, error_type, task_id"
            " FROM llm_calls ORDER BY provider"
        ).rows
        assert rows == [
            ("anthropic", 2500, 1800, "error", "anthropic.APIStatusError", "s-1"),
            ("openai", 1200, 1000, "ok", None, "s-1"),
        ]
        assert st.query("SELECT task_id, kind, outcome FROM tasks").rows == [("s-1", "reviewer", "completed")]


def _raw_export(endpoint: str, body: bytes, timeout: float = 5) -> tuple[Any, grpc.RpcError | None]:
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        try:
            return call(body, timeout=timeout), None
        except grpc.RpcError as exc:
            return None, exc


def test_undecodable_body_is_invalid_argument_and_writes_nothing(tmp_path: Path) -> None:
    with grpc_collector(tmp_path / "g.duckdb") as col:
        _, err = _raw_export(col.grpc_endpoint, b"\xff\xff\xff\xffnot protobuf")
        assert err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "protobuf" in (err.details() or "")
        assert col.store.query("SELECT count(*) FROM spans").rows == [(0,)]


def test_empty_request_is_ok_without_partial_success(tmp_path: Path) -> None:
    with grpc_collector(tmp_path / "g.duckdb") as col, grpc.insecure_channel(col.grpc_endpoint) as ch:
        resp = trace_service_pb2_grpc.TraceServiceStub(ch).Export(
            trace_service_pb2.ExportTraceServiceRequest(), timeout=5
        )
        assert not resp.HasField("partial_success")


def test_bad_spans_are_a_partial_success_and_the_rest_is_stored(tmp_path: Path) -> None:
    req = encode_spans(finished_spans())
    bad = req.resource_spans[0].scope_spans[0].spans.add(name="broken", trace_id=b"\x01\x02", span_id=b"\x01" * 8)
    assert bad.name == "broken"
    with grpc_collector(tmp_path / "g.duckdb") as col, grpc.insecure_channel(col.grpc_endpoint) as ch:
        resp = trace_service_pb2_grpc.TraceServiceStub(ch).Export(req, timeout=5)
        assert resp.partial_success.rejected_spans == 1
        assert "broken" in resp.partial_success.error_message
        assert col.store.query("SELECT count(*) FROM spans").rows == [(4,)]


def test_oversized_message_is_resource_exhausted(tmp_path: Path) -> None:
    with grpc_collector(tmp_path / "g.duckdb", max_body_bytes=4096) as col:
        _, err = _raw_export(col.grpc_endpoint, b"\x00" * 5000)
        assert err is not None and err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_store_failure_is_unavailable_with_retry_info_in_both_places(tmp_path: Path) -> None:
    closed = DuckDBStore.open(tmp_path / "closed.duckdb")
    closed.close()  # a real store that cannot take writes
    receiver = start_grpc_server(closed, Settings(db=tmp_path / "x.duckdb", grpc_port=free_port()))
    assert receiver is not None
    try:
        _, err = _raw_export(f"127.0.0.1:{receiver.port}", encode_spans(finished_spans()).SerializeToString())
    finally:
        receiver.stop(1)
    assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE
    trailers = dict(err.trailing_metadata() or ())
    retry = error_details_pb2.RetryInfo.FromString(trailers[RETRY_INFO_TRAILER])
    assert retry.retry_delay.seconds == 2
    status = status_pb2.Status.FromString(trailers[STATUS_DETAILS_TRAILER])
    assert status.code == code_pb2.UNAVAILABLE and "retry later" in status.message
    [detail] = status.details
    unpacked = error_details_pb2.RetryInfo()
    assert detail.Unpack(unpacked) and unpacked == retry


class _Switch:
    """The real stores behind a switch: the first submit goes to one that is closed (a real failure), every later
    one to an open store. Records when each submit came."""

    keys_ever_created = False  # no key: the receiver requires none (auth = auto, on loopback)
    has_active_keys = False

    def __init__(self, first: DuckDBStore, then: DuckDBStore) -> None:
        self.stores = [first, then]
        self.times: list[float] = []

    def submit(self, batch: PreparedBatch) -> Future[Any]:
        self.times.append(time.monotonic())
        return self.stores[0 if len(self.times) == 1 else 1].submit(batch)

    def query(self, *a: Any, **kw: Any) -> Any:
        return self.stores[1].query(*a, **kw)

    def close(self) -> None:
        pass


def test_the_python_exporter_retries_after_the_advertised_delay(tmp_path: Path) -> None:
    closed = DuckDBStore.open(tmp_path / "closed.duckdb")
    closed.close()
    with DuckDBStore.open(tmp_path / "live.duckdb") as live:
        switch = _Switch(closed, live)
        receiver = start_grpc_server(switch, Settings(db=live.path, grpc_port=free_port()))  # type: ignore[arg-type]
        assert receiver is not None
        try:
            exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver.port}", insecure=True, timeout=10)
            assert exporter.export(finished_spans()) == SpanExportResult.SUCCESS
            exporter.shutdown()
        finally:
            receiver.stop(1)
        assert len(switch.times) == 2
        # its own first backoff would be 0.8-1.2 s; it waited the 2 s our RetryInfo asked for
        assert switch.times[1] - switch.times[0] >= 1.9
        assert live.query("SELECT count(*) FROM spans").rows == [(4,)]


def test_grpc_port_zero_is_off_and_a_taken_port_is_an_error(tmp_path: Path) -> None:
    with DuckDBStore.open(tmp_path / "s.duckdb") as st:
        assert start_grpc_server(st, Settings(db=st.path, grpc_port=0)) is None
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            with pytest.raises(OSError, match="cannot serve OTLP/gRPC"):
                start_grpc_server(st, Settings(db=st.path, grpc_port=port))


def test_concurrent_exports_all_land(tmp_path: Path) -> None:
    spans = finished_spans()
    with grpc_collector(tmp_path / "g.duckdb") as col:
        results: list[Any] = []

        def send() -> None:
            exporter = OTLPSpanExporter(endpoint=col.grpc_endpoint, insecure=True, timeout=10)
            results.append(exporter.export(spans))
            exporter.shutdown()

        threads = [threading.Thread(target=send) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert results == [SpanExportResult.SUCCESS] * 6
        # six exports of the same spans: stored once (the store recognises a re-sent span by its ids)
        assert col.store.query("SELECT count(*) FROM spans").rows == [(4,)]
        assert col.store.deduplicated_spans == 20


def test_once_keys_exist_grpc_needs_an_ingest_key_and_the_key_decides_the_project(tmp_path: Path) -> None:
    """The HTTP receiver's key check, on gRPC metadata."""
    body = encode_spans(finished_spans()).SerializeToString()
    with grpc_collector(tmp_path / "g.duckdb") as col:
        _, secret = col.store.create_key("team-a", "ingest")
        _, read_secret = col.store.create_key("team-a", "read")
        _, err = _raw_export(col.grpc_endpoint, body)
        assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED
        with grpc.insecure_channel(col.grpc_endpoint) as ch:
            call = ch.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
            with pytest.raises(grpc.RpcError) as refused:
                call(body, timeout=5, metadata=(("authorization", f"Bearer {read_secret}"),))
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            call(body, timeout=5, metadata=(("authorization", f"Bearer {secret}"),))
        # the real exporter passes OTEL_EXPORTER_OTLP_HEADERS-style headers as metadata
        exporter = OTLPSpanExporter(
            endpoint=col.grpc_endpoint, insecure=True, timeout=10, headers={"authorization": f"Bearer {secret}"}
        )
        assert exporter.export(finished_spans()) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert dump(col.store)["spans"]  # stored
        projects = col.store.query("SELECT DISTINCT project FROM spans")
        assert projects.rows == [("team-a",)]


def test_taskcost_serve_receives_otlp_grpc_beside_http(tmp_path: Path) -> None:
    """The real `taskcost serve` process with both receivers: the Python gRPC exporter in, the SQL API out."""
    import subprocess
    import sys

    import httpx

    from tests.conftest import cli_env, run_cli

    assert "--grpc-port" in run_cli("serve", "--help").stdout
    port, grpc_port = free_port(), free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "taskcost",
                "serve",
                "--db",
                str(tmp_path / "s.duckdb"),
                "--port",
                str(port),
                "--grpc-port",
                str(grpc_port),
                "--no-dashboards",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=cli_env(),
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{grpc_port}", insecure=True, timeout=10)
        assert exporter.export(finished_spans()) == SpanExportResult.SUCCESS
        exporter.shutdown()
        r = httpx.post(f"{url}/api/sql", json={"sql": "SELECT provider, input_tokens FROM llm_calls ORDER BY 1"})
        assert r.status_code == 200, r.text
        assert r.json()["rows"] == [["anthropic", 2500], ["openai", 1200]]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "spans committed this run" in log.read_text()  # a graceful stop: gRPC drained, store closed
