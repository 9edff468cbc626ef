"""One JSON error shape across the HTTP API (a superset of google.rpc.Status in JSON)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from taskcost.collector import error_body

SHAPE = {"code", "message", "status", "error"}


def _assert_shape(resp, status: int, slug: str) -> dict:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == SHAPE
    assert body["status"] == status and body["error"] == slug
    assert isinstance(body["code"], int) and isinstance(body["message"], str) and body["message"]
    return body


def test_error_body_is_pinned() -> None:
    assert error_body(400, "nope") == {"code": 3, "message": "nope", "status": 400, "error": "bad_request"}
    assert error_body(503, "later") == {"code": 14, "message": "later", "status": 503, "error": "unavailable"}


def test_every_error_path_uses_the_shape(client: TestClient) -> None:
    _assert_shape(
        client.post("/v1/traces", content=b"x", headers={"Content-Type": "text/csv"}),
        415,
        "unsupported_media_type",
    )
    _assert_shape(
        client.post("/v1/traces", content=b"[", headers={"Content-Type": "application/json"}),
        400,
        "bad_request",
    )
    _assert_shape(client.get("/no/such/path"), 404, "not_found")
    _assert_shape(client.get("/v1/traces"), 405, "method_not_allowed")
    _assert_shape(client.post("/api/sql", json={}), 422, "invalid_request")
    body = _assert_shape(client.post("/api/sql", json={"sql": "DELETE FROM spans"}), 400, "bad_request")
    assert "only read-only SELECT" in body["message"]


def test_sql_api_returns_money_as_strings(client: TestClient) -> None:
    r = client.post("/api/sql", json={"sql": "SELECT 1.25::DECIMAL(38,12) AS usd, 2 AS n, ? AS p", "params": ["x"]})
    assert r.status_code == 200
    doc = r.json()
    assert doc["columns"] == ["usd", "n", "p"]
    assert doc["types"][0] == "DECIMAL(38,12)"
    assert doc["rows"] == [["1.250000000000", 2, "x"]]
    assert doc["truncated"] is False
