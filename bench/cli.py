"""The CLI at a demo's size, with no server running: ``taskcost <question> --db <file>`` in a fresh process, as a
newcomer types it after ``make demo`` (start-up, the read-only open and the answer's table included).

The store is the query history's (``bench.query.load_history``) at about the demo's size (the demo writes ~1,900
calls over ~800 tasks). Each command runs once to warm the bytecode cache, then ``repeats`` times; the median is
reported against the target: < 1 s each.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.query import load_history

TARGET_S = 1.0
COMMANDS: list[list[str]] = [
    ["cost"],
    ["cost", "--by", "model"],
    ["per-token"],
    ["cache"],
    ["canary", "--dimension", "engine_version", "--baseline", "0.6.0", "--candidate", "0.7.0"],
    ["breakeven", "--gpu-type", "H100", "--usd-per-gpu-hour", "2.50"],
    ["changes"],
    ["reconcile"],
    ["tasks"],
    ["prices", "missing"],
    ["sql", "SELECT model, count(*) AS calls FROM llm_calls GROUP BY model"],
]


def run_cli(calls: int = 2_000, repeats: int = 5) -> dict[str, float]:
    """Median seconds per command line (as typed, without ``--db``)."""
    from taskcost.store import DuckDBStore

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo-size.duckdb"
        with DuckDBStore.open(db) as store:
            load_history(store, calls, self_hosted=True)
        # as an installed package runs: its bytecode cached (pip compiles it at install; the warming run writes it)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        env["COLUMNS"] = "120"
        for args in COMMANDS:
            cmd = [sys.executable, "-m", "taskcost", *args, "--db", str(db)]
            times = []
            for i in range(repeats + 1):
                t = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, timeout=120, env=env)
                if i:
                    times.append(time.perf_counter() - t)
                assert done.returncode in (0, 1, 3), done.stderr  # canary: 1 fail, 3 not enough data
            out[" ".join(args)] = statistics.median(times)
            print(f"  taskcost {' '.join(args)[:50]}: {out[' '.join(args)]:.3f} s", flush=True)
    return out
