"""Run emitter subprocesses against a collector and read back what landed."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from typing import Any

import httpx

from tests.conftest import REPO, cli_env

CALL_COLUMNS = (
    "service_name",
    "provider",
    "model",
    "response_id",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_usd",
    "priced_provider",
    "priced_model",
    "unpriced_reason",
    "task_id",
    "status",
)


def run_modes(modes: list[str], collector_url: str, fake_llm_url: str, timeout: float = 90) -> None:
    """Start one emitter process per mode (in parallel), wait for all; each exits after its spans were accepted."""
    env = {
        **cli_env(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector_url,
        "FAKE_LLM_URL": fake_llm_url,
        "OTEL_PYTHON_LOG_LEVEL": "error",
    }
    procs = {
        m: subprocess.Popen(
            [sys.executable, "-m", "tests.interop.emit_llm", m],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for m in modes
    }
    failures = []
    for mode, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            failures.append(f"{mode}: timed out\n{err}")
            continue
        if proc.returncode != 0:
            failures.append(f"{mode}: exit {proc.returncode}\n{out}\n{err}")
    assert not failures, "\n\n".join(failures)


def sql(collector_url: str, query: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    r = httpx.post(f"{collector_url}/api/sql", json={"sql": query, "params": params or []}, timeout=30)
    assert r.status_code == 200, r.text
    doc = r.json()
    return [dict(zip(doc["columns"], row, strict=True)) for row in doc["rows"]]


def calls_by_service(collector_url: str) -> dict[str, list[dict[str, Any]]]:
    rows = sql(collector_url, f"SELECT {', '.join(CALL_COLUMNS)} FROM llm_calls ORDER BY service_name, start_time")
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["cost_usd"] is not None:
            r["cost_usd"] = Decimal(r["cost_usd"])
        out.setdefault(r["service_name"], []).append(r)
    return out


def priced(row: dict[str, Any]) -> tuple[Any, ...]:
    """What must agree between emitters for one call: tokens, model priced, cost."""
    return (
        row["input_tokens"],
        row["cache_read_tokens"],
        row["cache_write_tokens"],
        row["output_tokens"],
        row["priced_provider"],
        row["priced_model"],
        row["cost_usd"],
    )
