"""Decoding in worker processes (decode_workers > 0): the same rows as decoding in the serving process, the same
errors, the workers' own prices, and a worker that dies costs only the requests it held."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from fastapi.testclient import TestClient
from google.rpc import error_details_pb2

from bench.traffic import requests, to_json
from taskcost.app import create_app
from taskcost.collector._grpc import EXPORT_METHOD, RETRY_INFO_TRAILER, start_grpc_server
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.conftest import free_port, start_server
from tests.otlp_samples import sample_request, to_otlp_json

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
_COMPARED = "SELECT * EXCLUDE (received_ns) FROM {table} ORDER BY trace_id, span_id"


@pytest.fixture
def apps(tmp_path: Path) -> Iterator[dict[str, tuple[TestClient, DuckDBStore, Any]]]:
    """Two servers over two files, identical but for where they decode: in-process, and in one worker process."""
    book = {"version": "b1", "discounts": [{"provider": "openai", "percent": "10"}]}
    out: dict[str, tuple[TestClient, DuckDBStore, Any]] = {}
    for name, workers in (("inproc", 0), ("worker", 1)):
        settings = Settings(db=tmp_path / f"{name}.duckdb", decode_workers=workers, price_book=book)
        store = DuckDBStore.open(settings.db)
        app = create_app(settings, store, dashboards=False)
        out[name] = (TestClient(app, raise_server_exceptions=False).__enter__(), store, app.state.decoders)
    try:
        yield out
    finally:
        for client, store, decoders in out.values():
            client.__exit__(None, None, None)
            if decoders is not None:
                decoders.close()
            store.close()


def _bodies() -> list[tuple[bytes, dict[str, str]]]:
    out = []
    for i, req in enumerate(requests(3_000, seed=11)):
        out.append((to_json(req), JS) if i % 2 else (req.SerializeToString(), PB))
    out.append((sample_request().SerializeToString(), PB))
    return out


def test_a_worker_stores_exactly_what_in_process_decoding_stores(apps: dict[str, Any]) -> None:
    assert apps["inproc"][2] is None and apps["worker"][2] is not None
    for body, headers in _bodies():
        answers = [apps[name][0].post("/v1/traces", content=body, headers=headers) for name in ("inproc", "worker")]
        assert [a.status_code for a in answers] == [200, 200]
        assert answers[0].content == answers[1].content  # partial success messages included
    for table in ("spans", "llm_call_rows", "tool_call_rows", "task_rows"):
        rows = [apps[name][1].admin_query(_COMPARED.format(table=table)).rows for name in ("inproc", "worker")]
        assert rows[0] == rows[1], table
        assert rows[0], f"{table} is empty: the comparison would prove nothing"
    # the worker priced with the configured price book (its discount), not with bare list prices
    books = apps["worker"][1].admin_query(
        "SELECT count(*) FROM llm_call_rows WHERE provider = 'openai' AND price_book_version LIKE 'b1 (%'"
        " AND json_extract_string(price_detail, '$.discount.percent') = '10'"
    )
    assert books.rows[0][0] > 0


def test_bad_bodies_get_the_same_errors(apps: dict[str, Any]) -> None:
    bad: list[tuple[bytes, dict[str, str]]] = [
        (b"\x0a\x05garbage", PB),
        (b"{not json", JS),
        (json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}).encode(), JS),
    ]
    for body, headers in bad:
        answers = [apps[name][0].post("/v1/traces", content=body, headers=headers) for name in ("inproc", "worker")]
        assert [a.status_code for a in answers] == [400, 400]
        assert answers[0].content == answers[1].content  # the error, in the request's content type
        assert len(answers[0].content) > 10


def _workers(decoders: Any) -> list[int]:
    """The decode workers of ``decoders``'s current pool that are alive: children of this process's fork server (the
    child that runs it) that the pool started. (The fork server lives as long as this process: another test's app
    in it may have left workers of its own there.)"""
    pool = decoders._pool
    mine = set(pool._processes or {}) if pool is not None else set()
    servers = [p for p in _children(os.getpid()) if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return [p for s in servers for p in _children(s) if p in mine and _alive(p)]


def test_a_dead_worker_fails_only_what_it_held_and_is_replaced(apps: dict[str, Any]) -> None:
    client, store, decoders = apps["worker"]
    body = json.dumps(to_otlp_json(sample_request())).encode()  # JSON: errors come back as JSON
    assert client.post("/v1/traces", content=body, headers=JS).status_code == 200
    (pid,) = _workers(decoders)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    statuses = []
    while time.monotonic() < deadline:
        r = client.post("/v1/traces", content=body, headers=JS)
        statuses.append(r.status_code)
        if r.status_code == 200:
            break
        assert r.status_code == 503 and r.headers["Retry-After"]
        assert "nothing of it was kept" in r.json()["message"]
    assert statuses[0] == 503 and statuses[-1] == 200, statuses  # the request it held failed; the next pool took over
    assert _workers(decoders) and pid not in _workers(decoders)
    # the same spans twice (before and after the death): stored once
    n = store.admin_query("SELECT count(*) FROM spans").rows[0][0]
    assert n == len(sample_request().resource_spans[0].scope_spans[0].spans)


def test_the_pool_stops_with_the_apps_lifespan(tmp_path: Path) -> None:
    """An app that started its decode workers (on its first request) stops them when its lifespan ends: an app made
    with create_app and served by anything but `taskcost serve` leaves no process behind. Served again (another
    lifespan of the same app), it starts new ones; closed, it refuses with a 503 that says why."""
    settings = Settings(db=tmp_path / "l.duckdb", decode_workers=1)
    with DuckDBStore.open(settings.db) as store:
        app = create_app(settings, store, dashboards=False)
        decoders = app.state.decoders
        pids = []
        for _ in range(2):
            with TestClient(app) as client:
                sent = client.post("/v1/traces", content=sample_request().SerializeToString(), headers=PB)
                assert sent.status_code == 200
                pids += _workers(decoders)
            assert decoders._pool is None and not any(_alive(p) for p in pids)
        assert len(set(pids)) == 2  # one worker each time
        spans = len(sample_request().resource_spans[0].scope_spans[0].spans)  # (new ids in each sample)
        assert store.admin_query("SELECT count(*) FROM spans").rows[0][0] == 2 * spans
        decoders.close()
        with TestClient(app, raise_server_exceptions=False) as client:
            refused = client.post("/v1/traces", content=sample_request().SerializeToString(), headers=PB)
        assert refused.status_code == 503 and "stopping" in refused.text


def _grpc_export(endpoint: str, body: bytes) -> grpc.RpcError | None:
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        try:
            call(body, timeout=30)
        except grpc.RpcError as exc:
            return exc
    return None


def test_grpc_is_decoded_by_the_workers_too(apps: dict[str, Any]) -> None:
    """Given the app's pool, the gRPC receiver decodes in its worker (the pool starts with the first gRPC call): the
    same rows as HTTP decoded in-process; a dead worker is UNAVAILABLE with a RetryInfo, and the next call lands."""
    _, store, decoders = apps["worker"]
    assert decoders._pool is None  # nothing has used the pool yet
    receiver = start_grpc_server(store, Settings(db=store.path, grpc_port=free_port()), decoders=decoders)
    assert receiver is not None
    endpoint = f"127.0.0.1:{receiver.port}"
    try:
        bodies = [req.SerializeToString() for req in requests(1_500, seed=12)]
        for body in bodies:
            assert _grpc_export(endpoint, body) is None
            assert apps["inproc"][0].post("/v1/traces", content=body, headers=PB).status_code == 200
        (pid,) = _workers(decoders)  # the gRPC calls started the worker
        for table in ("spans", "llm_call_rows", "tool_call_rows", "task_rows"):
            rows = [apps[name][1].admin_query(_COMPARED.format(table=table)).rows for name in ("inproc", "worker")]
            assert rows[0] == rows[1], table
            assert rows[0], f"{table} is empty: the comparison would prove nothing"
        before = store.admin_query("SELECT count(*) FROM spans").rows[0][0]
        os.kill(pid, signal.SIGKILL)
        body = sample_request().SerializeToString()
        deadline, errors = time.monotonic() + 30, []
        while time.monotonic() < deadline:
            err = _grpc_export(endpoint, body)
            if err is None:
                break
            errors.append(err)
            assert err.code() == grpc.StatusCode.UNAVAILABLE, err
            assert "nothing of it was kept" in (err.details() or "")
            trailers = dict(err.trailing_metadata() or ())
            assert error_details_pb2.RetryInfo.FromString(trailers[RETRY_INFO_TRAILER]).retry_delay.seconds > 0
        assert errors and err is None, errors  # the call the dead worker held failed; the next pool took it
        assert _workers(decoders) and pid not in _workers(decoders)
    finally:
        receiver.stop(1)
    added = store.admin_query("SELECT count(*) FROM spans").rows[0][0] - before
    assert added == len(sample_request().resource_spans[0].scope_spans[0].spans)  # the failed call kept nothing


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_leave_with_a_server_killed_by_sigkill(tmp_path: Path) -> None:
    server = start_server(tmp_path / "k.duckdb", free_port(), tmp_path / "server.log")
    try:
        body = sample_request().SerializeToString()
        r = httpx.post(f"{server.url}/v1/traces", content=body, headers=PB, timeout=60)
        assert r.status_code == 200  # decoded by a worker: the pool is up
        workers = _children(server.proc.pid)
        assert workers, "the server started no worker process"
    finally:
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
    deadline = time.monotonic() + 15
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(w) for w in workers), "a decode worker outlived its server"


def test_a_decode_worker_loads_no_database_web_framework_or_grpc() -> None:
    """What a worker process imports to decode (its memory is per worker)."""
    code = (
        "import sys, taskcost.collector._decoders\n"
        "print(sorted({'duckdb', 'fastapi', 'grpc', 'uvicorn', 'dash', 'polars'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("env", "expected"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_a_decode_worker_allocates_arrow_buffers_with_malloc_unless_told_otherwise(
    tmp_path: Path, env: str | None, expected: str
) -> None:
    """mimalloc, pyarrow's default, kept about 15-20 MB more per worker (docs/configuration.md); the environment's
    ARROW_DEFAULT_MEMORY_POOL still wins."""
    code = (
        "import os, pyarrow as pa\n"
        "from taskcost.collector._decoders import _init\n"
        "from taskcost.settings import Settings\n"
        f"_init(Settings(db={str(tmp_path / 'w.duckdb')!r}), {{}}, os.getppid())\n"
        "print(pa.default_memory_pool().backend_name)"
    )
    environ = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if env is not None:
        environ["ARROW_DEFAULT_MEMORY_POOL"] = env
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=environ
    )
    assert out.stdout.strip() == expected
