"""API keys, projects and the admin API, in-process against a real DuckDB file."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.builders.dash import menu_options, page_render
from tests.otlp_samples import sample_request

PB = {"Content-Type": "application/x-protobuf"}
ADMIN = "admin-token-for-tests-0123456789"


@pytest.fixture
def app_client(settings: Settings, store: DuckDBStore) -> Iterator[TestClient]:
    with TestClient(create_app(settings, store, admin_token=ADMIN)) as c:
        yield c


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


BODY = sample_request().SerializeToString()  # the same spans every time: a re-send is stored once per project


def _send(client: TestClient, headers: dict[str, str]) -> int:
    return client.post("/v1/traces", content=BODY, headers={**PB, **headers}).status_code


def _sql(client: TestClient, sql: str, headers: dict[str, str]) -> list[list]:
    r = client.post("/api/sql", json={"sql": sql}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["rows"]


def test_without_keys_nothing_is_required(app_client: TestClient, store: DuckDBStore) -> None:
    assert not store.keys_ever_created
    assert _send(app_client, {}) == 200
    assert _sql(app_client, "SELECT DISTINCT project FROM spans", {}) == [["default"]]


def test_keys_decide_the_project_and_who_sees_what(app_client: TestClient, store: DuckDBStore) -> None:
    _, ingest_a = store.create_key("alpha", "ingest")
    _, ingest_b = store.create_key("beta", "ingest")
    _, read_a = store.create_key("alpha", "read")
    assert store.keys_ever_created

    r = app_client.post("/v1/traces", content=b"", headers=PB)
    assert r.status_code == 401 and "WWW-Authenticate" in r.headers
    assert _send(app_client, _bearer("tc_ingest_not-a-real-key")) == 401
    assert _send(app_client, _bearer(read_a)) == 403  # a read key cannot send
    assert _send(app_client, _bearer(ingest_a)) == 200
    basic = base64.b64encode(f"taskcost:{ingest_b}".encode()).decode()
    assert _send(app_client, {"Authorization": f"Basic {basic}"}) == 200
    assert _send(app_client, {"X-Taskcost-Key": ingest_b}) == 200  # same spans again: stored once

    assert app_client.post("/api/sql", json={"sql": "SELECT 1"}).status_code == 401
    wrong = app_client.post("/api/sql", json={"sql": "SELECT 1"}, headers=_bearer(ingest_a))
    assert wrong.status_code == 403
    assert wrong.json()["message"] == "this is an ingest key; this endpoint needs a read key"
    for view in ("spans", "llm_calls", "tool_calls", "tasks"):
        assert _sql(app_client, f"SELECT DISTINCT project FROM {view}", _bearer(read_a)) == [["alpha"]]
    assert _sql(app_client, "SELECT count(*) FROM spans", _bearer(read_a)) == [[4]]
    # the admin token reads everything
    assert _sql(app_client, "SELECT project, count(*) FROM spans GROUP BY ALL ORDER BY 1", _bearer(ADMIN)) == [
        ["alpha", 4],
        ["beta", 4],
    ]


def test_revoked_keys_are_refused_at_once(app_client: TestClient, store: DuckDBStore) -> None:
    key, secret = store.create_key("alpha", "ingest")
    store.create_key("alpha", "read")
    assert _send(app_client, _bearer(secret)) == 200
    assert store.revoke_key(key.id)
    assert _send(app_client, _bearer(secret)) == 401


def test_dashboards_need_a_read_key_and_show_its_project_only(app_client: TestClient, store: DuckDBStore) -> None:
    _, ingest_a = store.create_key("alpha", "ingest")
    _, read_b = store.create_key("beta", "read")
    assert _send(app_client, _bearer(ingest_a)) == 200
    refused = app_client.get("/dash/")
    assert refused.status_code == 401
    # nor does a refused caller make the server build them (the key is checked first: building costs CPU and memory)
    for path in ("/dash/", "/dash/_dash-layout", "/dash/_dash-update-component"):
        assert app_client.post(path, headers=_bearer("tc_read_not-a-real-key")).status_code == 401
    assert app_client.get("/dash/", headers=_bearer(ingest_a)).status_code == 403  # an ingest key cannot read
    assert app_client.app.state.dashboards.app is None  # type: ignore[attr-defined]
    # one scheme, Basic: Chromium reads only the first scheme of a challenge, and a Bearer-first one never prompts
    assert refused.headers["WWW-Authenticate"].startswith("Basic ")
    assert (
        "," not in refused.headers["WWW-Authenticate"].split('"')[0]
        and "Bearer" not in refused.headers["WWW-Authenticate"]
    )
    _, read_a = store.create_key("alpha", "read")

    def basic(secret: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"u:{secret}".encode()).decode()}

    assert app_client.get("/dash/", headers=basic(read_b)).status_code == 200

    def projects_listed(secret: str) -> list[str]:
        # the page rendered from its address; a client-sent project header is ignored: the server sets it from the key
        headers = {**basic(secret), "X-Taskcost-Project": "alpha"}
        r = app_client.post("/dash/_dash-update-component", json=page_render("/dash/"), headers=headers)
        assert r.status_code == 200, r.text
        return menu_options(r.json()["response"]["_pages_content"]["children"], "project")

    assert projects_listed(read_a) == ["alpha"]
    assert projects_listed(read_b) == []  # beta's key sees none of alpha's rows, not even its name in a menu


def test_admin_api_manages_keys(app_client: TestClient, store: DuckDBStore) -> None:
    assert app_client.get("/api/admin/keys").status_code == 401
    assert app_client.get("/api/admin/keys", headers=_bearer("wrong-token-0123456789")).status_code == 401
    r = app_client.post("/api/admin/keys", json={"project": "alpha", "kind": "read"}, headers=_bearer(ADMIN))
    assert r.status_code == 201
    created = r.json()
    assert created["secret"].startswith("tc_read_") and created["project"] == "alpha"
    listed = app_client.get("/api/admin/keys", headers=_bearer(ADMIN)).json()
    assert [k["id"] for k in listed] == [created["id"]] and listed[0]["secret"] is None
    bad = app_client.post("/api/admin/keys", json={"project": "no spaces", "kind": "read"}, headers=_bearer(ADMIN))
    assert bad.status_code == 400 and "project names" in bad.json()["message"]
    r = app_client.delete(f"/api/admin/keys/{created['id']}", headers=_bearer(ADMIN))
    assert r.status_code == 200 and r.json()["revoked_at"] is not None
    assert app_client.delete(f"/api/admin/keys/{created['id']}", headers=_bearer(ADMIN)).status_code == 404
    # the secret is stored hashed only
    stored = store.admin_query("SELECT secret_sha256 FROM api_keys").rows[0][0]
    assert created["secret"] not in stored and len(stored) == 64


def test_operations_endpoints(app_client: TestClient) -> None:
    assert app_client.get("/readyz").json()["status"] == "ready"
    assert _send(app_client, {}) == 200
    assert _send(app_client, {}) == 200
    text = app_client.get("/metrics").text
    assert "taskcost_spans_received_total 8.0" in text
    assert "taskcost_spans_accepted_total 4.0" in text
    assert "taskcost_spans_deduplicated_total 4.0" in text
    assert "taskcost_write_queue_spans 0.0" in text
    assert "taskcost_write_seconds_count 2.0" in text
