"""A request body is read only from a caller whose key was checked, and only up to `api_max_body_bytes`: a refused
body is never read. The real app in-process (through TestClient, and as an ASGI server drives it, counting what it
takes from the request), and the real server process over a raw socket."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.conftest import Server, free_port, run_cli, start_server, stop_server

ADMIN = "admin-token-for-tests-0123456789"
MiB = 1024 * 1024
SHAPE = {"code", "message", "status", "error"}


class Counted:
    """A request body that counts what was taken from it."""

    def __init__(self, total: int, chunk: int = MiB) -> None:
        self.total, self.chunk, self.taken = total, chunk, 0

    def __iter__(self) -> Iterator[bytes]:
        piece = b"x" * self.chunk
        while self.taken < self.total:
            self.taken += len(piece)
            yield piece


@pytest.fixture
def keyed(settings: Settings, store: DuckDBStore) -> Iterator[tuple[TestClient, str]]:
    """The app with authentication on (a key exists), and a read key."""
    _, read = store.create_key("alpha", "read")
    with TestClient(create_app(settings, store, dashboards=False, admin_token=ADMIN)) as c:
        yield c, read


@pytest.mark.parametrize("path", ["/api/sql", "/api/admin/keys", "/api/admin/reprice", "/api/no-such-route"])
def test_a_body_without_a_key_is_refused_unread(keyed: tuple[TestClient, str], path: str) -> None:
    client, read = keyed
    # no key; under /api/admin/, a read key is no key either (the admin token is)
    for headers in ({}, {"Authorization": f"Bearer {read}"}) if path.startswith("/api/admin/") else ({},):
        body = Counted(64 * MiB)
        r = client.post(path, content=body, headers={"Content-Type": "application/json", **headers})
        assert r.status_code == 401, r.text
        assert set(r.json()) == SHAPE and r.json()["error"] == "unauthenticated"
        assert body.taken == 0  # not one byte of it was read


def test_an_oversized_body_with_a_key_is_413(keyed: tuple[TestClient, str]) -> None:
    client, read = keyed
    big = json.dumps({"sql": "SELECT 1", "params": ["x" * (2 * MiB)]})
    r = client.post("/api/sql", content=big, headers={"Authorization": f"Bearer {read}"})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert f"exceeds the limit of {MiB} bytes" in r.json()["message"]
    small = client.post(
        "/api/sql", json={"sql": "SELECT ?", "params": ["x" * 1000]}, headers={"Authorization": f"Bearer {read}"}
    )
    assert small.status_code == 200


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 4318),
    }


def _drive(app: Any, path: str, headers: list[tuple[bytes, bytes]], chunks: int, chunk: int) -> tuple[int, int]:
    """Send ``chunks`` body messages as an ASGI server does, as the app asks for them: (status, bytes taken)."""
    taken = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal taken
        if taken >= chunks * chunk:
            await asyncio.sleep(3600)  # nothing more: a client that waits
        taken += chunk
        return {"type": "http.request", "body": b" " * chunk, "more_body": taken < chunks * chunk}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(_scope(path, headers), receive, send), 30))
    return sent[0]["status"], taken


def test_a_chunked_body_is_cut_at_the_limit(settings: Settings, store: DuckDBStore) -> None:
    app = create_app(settings, store, dashboards=False)  # no key: auth off, the size still counts
    status, taken = _drive(app, "/api/sql", [(b"transfer-encoding", b"chunked")], chunks=256, chunk=64 * 1024)
    assert status == 413
    assert taken <= MiB + 64 * 1024  # read up to the limit, not the 16 MiB sent


def test_a_declared_size_over_the_limit_is_413_before_reading(settings: Settings, store: DuckDBStore) -> None:
    app = create_app(settings, store, dashboards=False)
    status, taken = _drive(app, "/api/sql", [(b"content-length", str(300 * MiB).encode())], chunks=300, chunk=MiB)
    assert (status, taken) == (413, 0)
    store.create_key("alpha", "read")  # auth on now
    status, taken = _drive(
        app, "/api/admin/keys", [(b"content-length", str(300 * MiB).encode())], chunks=300, chunk=MiB
    )
    assert (status, taken) == (401, 0)  # the key first


def test_otlp_keeps_its_own_limit(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "o.duckdb", max_body_bytes=4 * MiB, decode_workers=0)
    with DuckDBStore.open(settings.db) as store, TestClient(create_app(settings, store, dashboards=False)) as c:
        r = c.post("/v1/traces", content=b"\xff" * (2 * MiB), headers={"Content-Type": "application/x-protobuf"})
        assert r.status_code == 400  # read (over api_max_body_bytes, under max_body_bytes) and refused as undecodable


def _raw(server: Server, head: str, then: bytes = b"", timeout: float = 5.0) -> tuple[str, float]:
    """Send a request's head (and ``then``) on a raw socket; the status line, and how long it took to come."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        started = time.monotonic()
        sock.sendall(head.encode() + then)
        answer = sock.recv(65536).decode("latin-1")
        return answer.split("\r\n", 1)[0], time.monotonic() - started


@pytest.fixture
def keyed_server(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    db = tmp_path / "keyed.duckdb"
    DuckDBStore.open(db).close()  # the server's database, before its keys
    secret = run_cli("keys", "create", "alpha", "--kind", "read", "--db", str(db)).stdout.strip()
    srv = start_server(db, free_port(), tmp_path / "server.log")
    yield srv, secret
    stop_server(srv)


def test_the_server_answers_before_reading_a_body(keyed_server: tuple[Server, str]) -> None:
    server, read = keyed_server
    head = "POST /api/sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {n}\r\n{auth}\r\n"
    # 300 MiB announced, not one byte sent: were the body read first, no answer would come
    status, took = _raw(server, head.format(n=300 * MiB, auth=""))
    assert status == "HTTP/1.1 401 Unauthorized" and took < 3
    status, took = _raw(server, head.format(n=300 * MiB, auth=f"Authorization: Bearer {read}\r\n"))
    assert status == "HTTP/1.1 413 Request Entity Too Large" and took < 3
    # chunked, with the key: 2 MiB sent, the body not ended; the answer comes once the limit is passed
    chunk = 64 * 1024
    body = (f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n") * 32
    chunked = "POST /api/sql HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer {read}\r\n\r\n"
    status, took = _raw(server, chunked.format(read=read), body)
    assert status == "HTTP/1.1 413 Request Entity Too Large" and took < 3
