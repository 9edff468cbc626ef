"""The same spans from the OpenTelemetry JavaScript SDK (OTLP/HTTP JSON and protobuf, run with node) and from the
Python SDK (OTLP/gRPC and OTLP/HTTP) land as identical rows.

The JS half needs node and the npm packages of tests/interop/js installed (`npm ci --prefix tests/interop/js`);
without them it is skipped with that reason. The Python half always runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from taskcost.store import DuckDBStore
from tests.conftest import REPO, cli_env
from tests.interop.collectors import dump, grpc_collector, http_collector
from tests.interop.scenario import TRACE_FOREIGN, emit_python, scenario

JS_DIR = REPO / "tests" / "interop" / "js"
JS_PACKAGES = ("exporter-trace-otlp-http", "exporter-trace-otlp-proto", "sdk-trace-base", "resources", "api", "core")


def _js_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed: the JavaScript SDK cannot run here"
    missing = [p for p in JS_PACKAGES if not (JS_DIR / "node_modules" / "@opentelemetry" / p).is_dir()]
    if missing:
        return f"npm packages not installed ({', '.join(missing)}): run `npm ci --prefix tests/interop/js`"
    return None


def _rows(store: DuckDBStore) -> dict[str, list[tuple]]:
    # resource attributes differ by SDK (each adds its own telemetry.sdk.*); everything else must be identical
    return dump(store, drop=("received_ns", "resource_attributes"))


def _check_content(store: DuckDBStore) -> None:
    """What the scenario means, so identical rows are also right rows."""
    q = store.admin_query
    calls = q(
        "SELECT task_id, provider, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, status, "
        "error_type, ttft_s FROM llm_call_rows ORDER BY start_ns, task_id"
    ).rows
    assert calls == [
        ("review-7", "openai", 12000, 8000, None, 600, "ok", None, None),
        ("sess-42", "openai", 1200, 1000, None, 300, "ok", None, 0.25),
        ("sess-42", "anthropic", 2500, 1800, 500, 120, "ok", None, None),  # two spans, one call
        ("sess-42", "openai", None, None, None, None, "error", "openai.BadRequestError", None),
    ]
    tasks = q("SELECT task_id, kind, outcome FROM task_rows ORDER BY task_id").rows
    assert tasks == [("review-7", "code_review", "completed"), ("sess-42", "reviewer", "completed")]
    tools = q("SELECT task_id, tool_name, cost_usd FROM tool_call_rows ORDER BY task_id").rows
    assert tools == [("review-7", "web_search", Decimal("0.005")), ("sess-42", "grep", None)]
    attrs = q("SELECT attributes FROM spans WHERE trace_id = ? AND parent_span_id IS NULL", [TRACE_FOREIGN]).rows
    assert json.loads(attrs[0][0])["test.big_int"] == 2**53 - 1


def _python(tmp_path: Path) -> dict[str, dict[str, list[tuple]]]:
    doc = scenario()
    out = {}
    with grpc_collector(tmp_path / "py-grpc.duckdb") as col:
        assert emit_python(doc, GrpcExporter(endpoint=col.grpc_endpoint, insecure=True, timeout=10)) == (
            SpanExportResult.SUCCESS
        )
        _check_content(col.store)
        out["python grpc"] = _rows(col.store)
    with http_collector(tmp_path / "py-http.duckdb") as col:
        assert emit_python(doc, HttpExporter(endpoint=f"{col.url}/v1/traces", timeout=10)) == SpanExportResult.SUCCESS
        out["python http/protobuf"] = _rows(col.store)
    return out


def test_python_sdk_over_grpc_and_http_lands_identically(tmp_path: Path) -> None:
    got = _python(tmp_path)
    assert got["python grpc"] == got["python http/protobuf"]
    assert len(got["python grpc"]["spans"]) == 9


def test_javascript_sdk_over_json_and_protobuf_lands_like_python_over_grpc(tmp_path: Path) -> None:
    reason = _js_missing()
    if reason:
        pytest.skip(reason)
    doc = tmp_path / "scenario.json"
    doc.write_text(json.dumps(scenario()))
    got = {}
    for encoding in ("json", "proto"):
        with http_collector(tmp_path / f"js-{encoding}.duckdb") as col:
            proc = subprocess.run(
                ["node", str(JS_DIR / "emit.mjs"), str(doc), encoding, col.url],
                cwd=JS_DIR,
                env=cli_env(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.returncode == 0, f"node emit.mjs {encoding} failed:\n{proc.stdout}\n{proc.stderr}"
            _check_content(col.store)
            got[f"js {encoding}"] = _rows(col.store)
            resource = col.store.query("SELECT resource_attributes FROM spans LIMIT 1").rows[0][0]
            assert json.loads(resource)["service.name"] == "interop-agent"
    got.update(_python(tmp_path))
    reference = got["python grpc"]
    for name, rows in got.items():
        assert rows == reference, f"{name} differs from python grpc"
