"""Re-pricing: the whole history priced again, at 1M and 10M stored calls (each with its span), in a fresh process
opened as the server opens the file (its default DuckDB memory limit and threads). Reports the time, the
process's peak RSS (VmHWM), the memory DuckDB says it holds at the end, and whether the writer folded the
re-price's task cost changes into the task roll-up afterwards (the delta rows left: 0 when it did).

The history is bench/query.py's (synthetic costs, so every priced call changes), plus a span per call carrying
what instrumentations send (about 400 bytes of attributes), which the re-price reads for pricing attributes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RepriceRun", "run_reprice"]

_SPANS = """
INSERT INTO spans BY NAME
SELECT project, trace_id, span_id, 'chat ' || request_model AS name, 3 AS kind, start_ns, end_ns, 0 AS status_code,
    service_name, ('{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "' || provider
        || '", "gen_ai.request.model": "' || request_model || '", "gen_ai.usage.input_tokens": ' || input_tokens
        || ', "taskcost.task.id": "' || task_id || '", "note": "' || repeat('n', 250) || '"}')::JSON AS attributes,
    '{"service.name": "review-bot", "k8s.cluster.name": "prod-eu"}'::JSON AS resource_attributes,
    '[]'::JSON AS events, received_ns
FROM llm_call_rows
"""

_LOAD = """
import sys
from bench.query import load_history
from bench.reprice import _SPANS
from taskcost.store import DuckDBStore
with DuckDBStore.open(sys.argv[1], memory_limit="4GB") as store:
    load_history(store, int(sys.argv[2]))
    store.admin_query(_SPANS)
    store.admin_query("CHECKPOINT")
"""

_RUN = """
import json, sys, time
from taskcost.pricing import default_pricer
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
s = Settings(db=sys.argv[1])
with DuckDBStore.open(s.db, memory_limit=s.server_memory_limit(), threads=s.server_duckdb_threads()) as store:
    t = time.perf_counter()
    report = store.reprice(default_pricer(), now_ns=time.time_ns())
    seconds = time.perf_counter() - t
    duck = store.admin_query("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").rows[0][0]
    left = store.admin_query("SELECT count(*) FROM task_rollup_delta").rows[0][0]
    limit = s.server_memory_limit()
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"calls": report.calls, "changed": report.changed, "seconds": seconds, "peak_rss_mb": hwm / 1024,
                  "duckdb_mb": duck / 2**20, "memory_limit": limit,
                  "delta_left": left}))
"""


@dataclass(frozen=True)
class RepriceRun:
    calls: int
    changed: int
    seconds: float
    peak_rss_mb: float
    duckdb_mb: float
    memory_limit: str
    delta_left: int  # task roll-up delta rows the writer had not folded in after the re-price (0: all folded)


def run_reprice(sizes: tuple[int, ...]) -> list[RepriceRun]:
    """One re-price of each history size, each in a fresh process."""
    root = Path(__file__).resolve().parent.parent
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            db = str(Path(tmp) / f"r{size}.duckdb")
            subprocess.run([sys.executable, "-c", _LOAD, db, str(size)], check=True, cwd=root, timeout=3600)
            proc = subprocess.run(
                [sys.executable, "-c", _RUN, db], check=True, cwd=root, timeout=7200, capture_output=True, text=True
            )
            out.append(RepriceRun(**json.loads(proc.stdout.strip().splitlines()[-1])))
            Path(db).unlink()
            print(
                f"  {size:,} calls: {out[-1].seconds:,.1f} s, peak RSS {out[-1].peak_rss_mb:,.0f} MB,"
                f" roll-up delta left {out[-1].delta_left:,}",
                flush=True,
            )
    return out
