"""Authentication fails closed: it is the `auth` setting's rule (a key ever created, revoked ones included, or a bind
beyond loopback), never "some active key exists". Revoking the last key locks everyone out but the admin token,
over HTTP and OTLP/gRPC; the CLI says so and says how to get back in. In-process against a real DuckDB file, the
real gRPC receiver, and the real server process and CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.cli._serve_auth import auth_notes, auth_refusal
from taskcost.collector._grpc import EXPORT_METHOD, start_grpc_server
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.conftest import Server, free_port, run_cli
from tests.otlp_samples import sample_request

ADMIN = "admin-token-for-tests-0123456789"
PB = {"Content-Type": "application/x-protobuf"}
BODY = sample_request().SerializeToString()


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _client(settings: Settings, store: DuckDBStore) -> TestClient:
    return TestClient(create_app(settings, store, dashboards=False, admin_token=ADMIN))


@pytest.fixture
def app_client(settings: Settings, store: DuckDBStore) -> Iterator[TestClient]:
    with _client(settings, store) as c:
        yield c


def test_revoking_every_key_locks_everyone_out(app_client: TestClient, store: DuckDBStore) -> None:
    ingest, ingest_secret = store.create_key("alpha", "ingest")
    read, read_secret = store.create_key("alpha", "read")
    assert app_client.post("/v1/traces", content=BODY, headers={**PB, **_bearer(ingest_secret)}).status_code == 200
    assert store.revoke_key(ingest.id) and store.revoke_key(read.id)  # no active key is left

    refused = app_client.post("/api/sql", json={"sql": "SELECT project, count(*) FROM spans GROUP BY ALL"})
    assert refused.status_code == 401, refused.text
    message = refused.json()["message"]
    assert "No active API key exists" in message and "taskcost keys create" in message  # the way back in
    assert "WWW-Authenticate" in refused.headers
    assert app_client.post("/api/sql", json={"sql": "SELECT 1"}, headers=_bearer(read_secret)).status_code == 401
    assert app_client.post("/v1/traces", content=BODY, headers=PB).status_code == 401
    for path in ("/metrics", "/api/analytics/cost", "/api/pricing/status", "/openapi.json"):
        assert app_client.get(path).status_code == 401, path

    # the admin token still reads, and creates the key that lets the others back in
    admin = app_client.post("/api/sql", json={"sql": "SELECT count(*) FROM spans"}, headers=_bearer(ADMIN))
    assert admin.status_code == 200 and admin.json()["rows"] == [[4]]
    created = app_client.post("/api/admin/keys", json={"project": "alpha", "kind": "read"}, headers=_bearer(ADMIN))
    assert created.status_code == 201
    again = app_client.post(
        "/api/sql", json={"sql": "SELECT count(*) FROM spans"}, headers=_bearer(created.json()["secret"])
    )
    assert again.status_code == 200 and again.json()["rows"] == [[4]]


def test_revoked_keys_keep_auth_on_after_a_restart(settings: Settings, tmp_path: Path) -> None:
    with DuckDBStore.open(settings.db) as first:
        key, _ = first.create_key("alpha", "read")
        first.revoke_key(key.id)
    with DuckDBStore.open(settings.db) as store, _client(settings, store) as c:
        assert c.post("/api/sql", json={"sql": "SELECT 1"}).status_code == 401


def _anonymous_sql(settings: Settings, store: DuckDBStore) -> int:
    with _client(settings, store) as c:
        return c.post("/api/sql", json={"sql": "SELECT 1"}).status_code


def test_the_auth_setting(settings: Settings, store: DuckDBStore) -> None:
    assert _anonymous_sql(settings, store) == 200  # auto, loopback, no key ever: open
    on = settings.model_copy(update={"auth": "on"})
    assert _anonymous_sql(on, store) == 401  # on: even before the first key
    public = settings.model_copy(update={"host": "0.0.0.0"})
    assert _anonymous_sql(public, store) == 401  # auto beyond loopback: on, whatever the keys
    allowed = public.model_copy(update={"allow_unauthenticated": True})
    assert _anonymous_sql(allowed, store) == 200  # ... unless allowed, while no key was ever created
    key, _ = store.create_key("alpha", "read")
    store.revoke_key(key.id)
    assert _anonymous_sql(allowed, store) == 401  # a key ever created: on for good
    assert _anonymous_sql(settings, store) == 401
    off = settings.model_copy(update={"auth": "off"})
    assert _anonymous_sql(off, store) == 200  # off on loopback: the keys are ignored (serve says so loudly)
    off_public = public.model_copy(update={"auth": "off"})
    assert _anonymous_sql(off_public, store) == 401  # off is never honoured beyond loopback


def _grpc_export(endpoint: str) -> grpc.StatusCode:
    with grpc.insecure_channel(endpoint) as ch:
        call = ch.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        try:
            call(BODY, timeout=10)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_grpc_intake_follows_the_same_rule(store: DuckDBStore) -> None:
    receiver = start_grpc_server(store, Settings(db=store.path, grpc_port=free_port(), decode_workers=0))
    assert receiver is not None
    try:
        endpoint = f"127.0.0.1:{receiver.port}"
        key, _ = store.create_key("alpha", "ingest")
        assert store.revoke_key(key.id)
        assert _grpc_export(endpoint) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        receiver.stop(1)
    assert store.query("SELECT count(*) FROM spans").rows == [(0,)]


def test_revoking_the_last_key_through_the_running_server(server: Server) -> None:
    db = str(server.db)
    read = run_cli("keys", "create", "team-a", "--kind", "read", "--db", db).stdout.strip()
    run_cli("keys", "create", "team-a", "--kind", "ingest", "--db", db)
    ids = [line.split()[1] for line in run_cli("keys", "list", "--db", db).stdout.splitlines() if "team-a" in line]
    assert len(ids) == 2
    first = run_cli("keys", "revoke", ids[0], "--db", db)
    assert "last active key" not in first.stderr
    last = run_cli("keys", "revoke", ids[1], "--db", db)
    assert "warning: that was the last active key" in last.stderr and "taskcost keys create" in last.stderr

    refused = httpx.post(f"{server.url}/api/sql", json={"sql": "SELECT 1"}, timeout=10)
    assert refused.status_code == 401 and "taskcost keys create" in refused.json()["message"]
    assert httpx.post(f"{server.url}/api/sql", json={"sql": "SELECT 1"}, headers=_bearer(read)).status_code == 401
    # the way back in: a new key, made with the admin token the CLI finds beside the server
    new = run_cli("keys", "create", "team-a", "--kind", "read", "--db", db).stdout.strip()
    ok = httpx.post(f"{server.url}/api/sql", json={"sql": "SELECT 1"}, headers=_bearer(new), timeout=10)
    assert ok.status_code == 200


def test_revoke_in_the_file_warns_too(tmp_path: Path) -> None:
    db = str(tmp_path / "offline.duckdb")
    DuckDBStore.open(Path(db)).close()  # the server's database
    run_cli("keys", "create", "p1", "--kind", "read", "--db", db)
    [key_id] = [line.split()[1] for line in run_cli("keys", "list", "--db", db).stdout.splitlines() if "p1" in line]
    proc = run_cli("keys", "revoke", key_id, "--db", db)
    assert "warning: that was the last active key" in proc.stderr and f"--db {db}" in proc.stderr


def test_serve_refuses_auth_off_beyond_loopback(tmp_path: Path) -> None:
    db = tmp_path / "public.duckdb"
    with DuckDBStore.open(db) as store:
        store.create_key("alpha", "read")
    proc = run_cli("serve", "--db", str(db), "--host", "0.0.0.0", "--port", "1", "--auth", "off", check=False)
    assert proc.returncode == 1
    assert "refusing to serve 0.0.0.0 with auth = off" in proc.stderr


def test_what_serve_refuses_at_start(tmp_path: Path) -> None:
    public = Settings(db=tmp_path / "p.duckdb", host="0.0.0.0")
    refusal = auth_refusal(public, keys_ever=False, first_keys=False)
    assert refusal is not None and "refusing to serve 0.0.0.0 without authentication" in refusal
    assert auth_refusal(public, keys_ever=True, first_keys=False) is None  # revoked keys count: auth on
    assert auth_refusal(public.model_copy(update={"auth": "on"}), keys_ever=False, first_keys=False) is None
    allowed = public.model_copy(update={"allow_unauthenticated": True})
    assert auth_refusal(allowed, keys_ever=False, first_keys=False) is None
    off = auth_refusal(allowed.model_copy(update={"auth": "off"}), keys_ever=False, first_keys=False)
    assert off is not None and "auth = off" in off  # --allow-unauthenticated does not make off acceptable
    loopback = Settings(db=tmp_path / "p.duckdb", auth="off")
    assert auth_refusal(loopback, keys_ever=True, first_keys=False) is None
    [note] = auth_notes(loopback, keys_ever=True, active=True, required=False)
    assert note.startswith("WARNING: AUTHENTICATION IS OFF")  # loudly


@pytest.mark.parametrize(
    "args",
    [
        ("sql", "--url", "http://127.0.0.1:9", "--key", "kéy", "SELECT 1"),
        ("cost", "--url", "http://127.0.0.1:9", "--key", "kéy"),
        ("tasks", "--url", "http://127.0.0.1:9", "--key", "k\u20acy"),
        ("keys", "list", "--url", "http://127.0.0.1:9", "--admin-token", "admin-tökén-0123456789"),
    ],
)
def test_a_non_ascii_key_is_a_usage_error(args: tuple[str, ...]) -> None:
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: --") and "ASCII" in proc.stderr
