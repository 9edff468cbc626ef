"""Analytics: every question over stores of 1M and 10M synthetic calls (bench/query.py's history: ~100k / 1M
tasks), timed three ways, medians of repeated runs:

- library: the question's function on the open store (what the dashboards call);
- HTTP: ``GET /api/analytics/<question>`` end to end, from a client to the real server (uvicorn, in this process)
  and back, JSON included;
- CLI: ``taskcost <question> --url ... --format json`` end to end, a fresh process each time (start-up included;
  such a command takes the CLI's quick path, taskcost/cli/_quick.py).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.query import load_history

__all__ = ["DOORS", "PARAMS", "run_analytics"]

DOORS = ("library", "HTTP", "CLI")
# The history starts 2026-11-30 00:53 UTC, one call a second: 1M calls span 11.6 days, 10M calls 116 days.
PARAMS: dict[str, dict[str, str]] = {
    "cost": {"by": "model"},
    "per-token": {},
    "cache": {"by": "kind"},
    "canary": {"dimension": "engine_version", "baseline": "0.6.0", "candidate": "0.7.0"},
    "breakeven": {"gpu_type": "H100", "usd_per_gpu_hour": "2.50", "tokens_per_s": "2000"},
    "changes": {"since": "2026-12-05T00:00:00", "until": "2026-12-06T00:00:00"},
}


class _Server:
    """The real app (uvicorn) on a free loopback port, in a thread of this process, over an open store."""

    def __init__(self, store: Any, db: Path) -> None:
        import uvicorn

        from taskcost.app import create_app
        from taskcost.settings import Settings

        app = create_app(Settings(db=db, decode_workers=0, grpc_port=0), store, dashboards=False)
        self.config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def _median(fn: Any, repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_analytics(
    sizes: tuple[int, ...] = (1_000_000, 10_000_000), repeats: int = 5, cli_repeats: int = 7
) -> dict[tuple[str, int, str], float]:
    """Median seconds per (question, size, door)."""
    from taskcost.analytics import QUESTIONS, Filters
    from taskcost.settings import Settings
    from taskcost.store import DuckDBStore

    out: dict[tuple[str, int, str], float] = {}
    fields = set(Filters.model_fields)
    with tempfile.TemporaryDirectory() as tmp:
        # The CLI runs as an installed package does: with its compiled bytecode cached (pip compiles it at install;
        # the first, warming run writes it here), whatever PYTHONDONTWRITEBYTECODE says in this shell.
        cli_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cli_env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        for size in sizes:
            db = Path(tmp) / f"a{size}.duckdb"
            t = time.perf_counter()
            with DuckDBStore.open(db) as store:
                load_history(store, size, self_hosted=True)
            print(f"  loaded {size:,} calls in {time.perf_counter() - t:.1f} s", flush=True)
            with (
                DuckDBStore.open(
                    db,
                    memory_limit=Settings().server_memory_limit(),
                    threads=Settings().server_duckdb_threads(),
                ) as store,
                _Server(store, db) as url,
                httpx.Client(timeout=120) as client,
            ):
                for name, params in PARAMS.items():
                    q = QUESTIONS[name]
                    filters = Filters.model_validate({k: v for k, v in params.items() if k in fields})
                    options = q.options.model_validate({k: v for k, v in params.items() if k not in fields})

                    def http(name: str = name, params: dict[str, str] = params) -> None:
                        r = client.get(f"{url}/api/analytics/{name}", params=params)
                        assert r.status_code == 200, r.text

                    args = [f"--{k.replace('_', '-')}={v}" for k, v in params.items()]

                    def cli(name: str = name, args: list[str] = args) -> None:
                        cmd = [sys.executable, "-m", "taskcost", name, "--url", url, *args, "--format", "json"]
                        done = subprocess.run(cmd, capture_output=True, timeout=300, env=cli_env)
                        assert done.returncode in (0, 1, 3), done.stderr  # canary: 1 fail, 3 not enough data

                    out[(name, size, "library")] = _median(
                        lambda q=q, f=filters, o=options: q.run(store, f, o), repeats
                    )
                    out[(name, size, "HTTP")] = _median(http, repeats)
                    out[(name, size, "CLI")] = _median(cli, cli_repeats)
                    print(
                        f"  {name} at {size:,}: " + ", ".join(f"{d} {out[(name, size, d)]:.3f} s" for d in DOORS),
                        flush=True,
                    )
            db.unlink(missing_ok=True)
    return out
