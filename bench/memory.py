"""Where the collector's memory goes: the resident memory (RSS) that each step of starting a decode worker, then
the server, adds in a fresh interpreter. A library loaded by an earlier step is not counted again, so the worker's
steps come first and the server's steps add only what a worker does not load."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

__all__ = ["SERVER_STEPS", "WORKER_STEPS", "startup_steps"]

WORKER_STEPS: list[tuple[str, str]] = [
    ("the interpreter", "pass"),
    ("protobuf and the OTLP messages", "import opentelemetry.proto.collector.trace.v1.trace_service_pb2"),
    ("pyarrow", "import pyarrow"),
    ("genai-prices, and the pydantic it loads", "import genai_prices"),
    ("taskcost's normaliser, pricing and settings", "import taskcost.collector._decoders"),
    (
        "its start: the price data loaded",
        "import os; from taskcost.collector._decoders import _init; from taskcost.settings import Settings; "
        "_init(Settings(db=DB), {}, os.getppid())",
    ),
]
SERVER_STEPS: list[tuple[str, str]] = [
    ("duckdb", "import duckdb"),
    ("FastAPI, uvicorn, prometheus-client", "import fastapi, uvicorn, prometheus_client"),
    ("grpcio", "import grpc"),
    ("the CLI (typer, rich) and the collector", "import taskcost.cli, taskcost.collector"),
    ("the dashboards (Dash, Plotly)", "import dashboards"),
    (
        "DuckDB opens the (empty) file, with the server's memory_limit",
        "from taskcost.store import DuckDBStore; s = Settings(db=DB); store = DuckDBStore.open(s.db, spool=True, "
        "memory_limit=s.server_memory_limit(), threads=s.server_duckdb_threads())",
    ),
    (
        "the app, its dashboards built (as the first visit builds them), and the OTLP/gRPC receiver",
        "from taskcost.app import create_app; from taskcost.collector import start_grpc_server; "
        "import socket; sock = socket.socket(); sock.bind(('127.0.0.1', 0)); port = sock.getsockname()[1]; "
        "sock.close(); app = create_app(s, store, dashboards=True); app.state.dashboards.built(); "
        "g = start_grpc_server(store, s.model_copy(update={'grpc_port': port}))",
    ),
]

_RUNNER = """
import json, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
DB = sys.argv[1]
out = []
for label, code in json.loads(sys.stdin.read()):
    exec(code)
    out.append((label, rss()))
print(json.dumps(out))
"""


def startup_steps() -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(label, MB added) for a worker's steps, and for the server's further steps (the server loads all a worker
    loads, and more). The worker's steps add up to a worker's idle RSS, and all the steps to the server's, within a
    few MB."""
    with tempfile.TemporaryDirectory() as tmp:
        steps = WORKER_STEPS + SERVER_STEPS
        proc = subprocess.run(
            [sys.executable, "-c", _RUNNER, f"{tmp}/steps.duckdb"],
            input=json.dumps(steps),
            capture_output=True,
            text=True,
            timeout=300,
        )
    if proc.returncode:
        raise RuntimeError(f"a startup step failed:\n{proc.stderr[-2000:]}")
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    added, before = [], 0.0
    for label, mb in rows:
        added.append((label, mb - before))
        before = mb
    return added[: len(WORKER_STEPS)], added[len(WORKER_STEPS) :]
