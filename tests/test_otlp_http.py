"""OTLP/HTTP intake against a real DuckDB file: encodings, compression, and the spec's answers."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from fastapi.testclient import TestClient
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.otlp_samples import sample_request, to_otlp_json

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}
TABLES = ("spans", "llm_call_rows", "tool_call_rows", "task_rows")


def _count(store: DuckDBStore) -> int:
    return sum(store.admin_query(f"SELECT count(*) FROM {t}").rows[0][0] for t in TABLES)


def _dump(store: DuckDBStore) -> dict[str, list[tuple]]:
    out = {}
    for t in TABLES:
        cols = [r[0] for r in store.admin_query(f"DESCRIBE {t}").rows if r[0] != "received_ns"]
        res = store.admin_query(f"SELECT {', '.join(cols)} FROM {t} ORDER BY ALL")
        out[t] = res.rows
    return out


def _ingest(tmp_path: Path, name: str, body: bytes, headers: dict[str, str]) -> dict[str, list[tuple]]:
    with DuckDBStore.open(tmp_path / f"{name}.duckdb") as st:
        with TestClient(create_app(Settings(db=st.path), st, dashboards=False)) as c:
            r = c.post("/v1/traces", content=body, headers=headers)
            assert r.status_code == 200, r.text
        return _dump(st)


def test_json_and_gzip_protobuf_give_identical_rows(tmp_path: Path) -> None:
    req = sample_request()
    as_pb_gzip = _ingest(tmp_path, "pb", gzip.compress(req.SerializeToString()), {**PB, "Content-Encoding": "gzip"})
    as_json = _ingest(tmp_path, "json", json.dumps(to_otlp_json(req)).encode(), JS)
    as_pb = _ingest(tmp_path, "plain", req.SerializeToString(), PB)
    assert as_pb_gzip == as_json == as_pb
    assert len(as_json["spans"]) == 4
    assert len(as_json["llm_call_rows"]) == 2
    assert len(as_json["tool_call_rows"]) == 1
    assert len(as_json["task_rows"]) == 1


def test_json_quirks_of_other_sdks_are_accepted(tmp_path: Path) -> None:
    """Upper-case hex ids, int64 as JSON numbers, explicit defaults (the JS exporter's habits)."""
    req = sample_request()
    doc = to_otlp_json(req)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["traceId"] = span["traceId"].upper()
                span["startTimeUnixNano"] = int(span["startTimeUnixNano"])
                span.setdefault("links", [])
                span["droppedAttributesCount"] = 0
                for kv in span.get("attributes", []):
                    if "intValue" in kv["value"]:
                        kv["value"]["intValue"] = int(kv["value"]["intValue"])
    rows = _ingest(tmp_path, "quirks", json.dumps(doc).encode(), {"Content-Type": "application/json; charset=utf-8"})
    plain = _ingest(tmp_path, "plain", req.SerializeToString(), PB)
    assert rows == plain


def test_success_answer_is_an_empty_response_in_the_request_content_type(client: TestClient) -> None:
    body = sample_request().SerializeToString()
    r = client.post("/v1/traces", content=body, headers=PB)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-protobuf"
    msg = ExportTraceServiceResponse.FromString(r.content)
    assert not msg.HasField("partial_success")
    r = client.post("/v1/traces", content=json.dumps(to_otlp_json(sample_request())), headers=JS)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {}


def test_empty_request_is_a_success(client: TestClient, store: DuckDBStore) -> None:
    assert client.post("/v1/traces", content=b"", headers=PB).status_code == 200
    assert client.post("/v1/traces", content=b"{}", headers=JS).status_code == 200
    assert _count(store) == 0


def test_deflate_is_accepted(client: TestClient, store: DuckDBStore) -> None:
    body = zlib.compress(sample_request().SerializeToString())
    r = client.post("/v1/traces", content=body, headers={**PB, "Content-Encoding": "deflate"})
    assert r.status_code == 200, r.text
    assert store.query("SELECT count(*) FROM spans").rows[0][0] == 4


def test_wrong_content_type_is_415_and_writes_nothing(client: TestClient, store: DuckDBStore) -> None:
    body = sample_request().SerializeToString()
    r = client.post("/v1/traces", content=body, headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    assert "unsupported Content-Type 'text/plain'" in r.json()["message"]
    r = client.post("/v1/traces", content=body)
    assert r.status_code == 415
    r = client.post("/v1/traces", content=body, headers={**PB, "Content-Encoding": "br"})
    assert r.status_code == 415
    assert "unsupported Content-Encoding 'br'" in status_pb2.Status.FromString(r.content).message
    assert _count(store) == 0


def test_garbage_is_400_with_a_status_in_the_request_content_type(client: TestClient, store: DuckDBStore) -> None:
    r = client.post("/v1/traces", content=b"\xff\xff\xff\xffnot protobuf", headers=PB)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/x-protobuf"
    status = status_pb2.Status.FromString(r.content)
    assert status.code == 3 and "protobuf" in status.message
    r = client.post("/v1/traces", content=b"{not json", headers=JS)
    assert r.status_code == 400
    assert r.json()["code"] == 3 and "not valid JSON" in r.json()["message"]
    r = client.post(
        "/v1/traces",
        content=b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
        headers=JS,
    )
    assert r.status_code == 400 and "not hex" in r.json()["message"]
    r = client.post("/v1/traces", content=b"not gzip at all", headers={**PB, "Content-Encoding": "gzip"})
    assert r.status_code == 400
    assert _count(store) == 0


def test_oversized_body_is_413_and_writes_nothing(client: TestClient, store: DuckDBStore, settings: Settings) -> None:
    limit = settings.max_body_bytes
    r = client.post("/v1/traces", content=b"\x00" * (limit + 1), headers=PB)
    assert r.status_code == 413
    assert f"limit of {limit} bytes" in status_pb2.Status.FromString(r.content).message
    # a small gzip body that inflates past the limit (a "zip bomb") is refused the same way
    bomb = gzip.compress(b"\x00" * (limit * 50))
    assert len(bomb) < limit
    r = client.post("/v1/traces", content=bomb, headers={**JS, "Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert "decompressed body exceeds" in r.json()["message"]
    assert _count(store) == 0


def test_spans_with_bad_ids_are_rejected_as_partial_success(client: TestClient, store: DuckDBStore) -> None:
    req = sample_request()
    bad = req.resource_spans[0].scope_spans[0].spans.add()
    bad.name = "broken"
    bad.trace_id = b"\x01\x02"
    bad.span_id = b"\x01" * 8
    r = client.post("/v1/traces", content=req.SerializeToString(), headers=PB)
    assert r.status_code == 200
    msg = ExportTraceServiceResponse.FromString(r.content)
    assert msg.partial_success.rejected_spans == 1
    assert "broken" in msg.partial_success.error_message
    assert store.query("SELECT count(*) FROM spans").rows[0][0] == 4
