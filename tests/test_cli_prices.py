"""The pricing commands as a user runs them: `prices missing|update|status|reset|check|gpus|clusters`,
`explain-cost` and `reprice`, on the file, and through a running server."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from taskcost.cli import app
from taskcost.store import DuckDBStore
from tests.builders.pricing import call, ingest
from tests.conftest import free_port, run_cli, sql_json, start_server, stop_server
from tests.otlp_samples import sample_request
from tests.test_pricing_data import NEWER

M = Decimal(1_000_000)
DEC2 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
GPT4O = {"input_tokens": 10_000, "cache_read": 6_000, "output_tokens": 500}
LIST = (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25") + 500 * 10) / M


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    for key in list(os.environ):
        if key.startswith("TASKCOST_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    yield CliRunner()


def run(cli: CliRunner, *args: str, code: int = 0) -> str:
    result = cli.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.duckdb"
    with DuckDBStore.open(path) as store:
        ingest(
            store,
            [
                call("a1", DEC2, **GPT4O),
                call("u1", DEC2, model="acme-private-7b", input_tokens=1_200, output_tokens=300),
                call("u2", DEC2 + timedelta(minutes=1), model="acme-private-7b", input_tokens=800, output_tokens=100),
            ],
        )
    return path


def test_prices_missing_counts_unknown_models_and_shows_coverage(cli: CliRunner, db: Path) -> None:
    out = run(cli, "prices", "missing", "--db", str(db))
    assert "acme-private-7b" in out and "2,000" in out and "400" in out  # 2 calls: 2,000 in / 400 out tokens
    assert f"total cost of priced calls: ${LIST:,.6f}" in out
    assert "coverage: 1 of 3 call attempts priced (33.3%); 2 unpriced, excluded from the total" in out
    out = run(cli, "prices", "missing", "--db", str(db), "--since", "2026-12-03")
    assert "every call is priced" in out and "coverage: no LLM calls" in out
    out = run(cli, "tasks", "--db", str(db))
    assert "coverage: 1 of 3 call attempts priced" in out


def test_explain_cost_shows_rates_and_arithmetic(cli: CliRunner, db: Path) -> None:
    out = run(cli, "explain-cost", "a1", "--db", str(db))
    assert "4,000 input" in out and "$2.5/M" in out and "6,000 cache_read" in out and "$1.25/M" in out
    assert "= total (cost_usd) $0.022500000000" in out and "genai-prices" in out
    out = run(cli, "explain-cost", "u1", "--db", str(db))
    assert "unpriced: unknown to the price data" in out and "excluded from cost totals" in out
    run(cli, "explain-cost", "nope", "--db", str(db), code=1)


def test_update_status_reset_and_reprice_on_the_file(cli: CliRunner, db: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(NEWER))
    out = run(cli, "prices", "update", "--from", str(data), "--db", str(db))
    assert "loaded 1 providers, 1 models" in out and "run `taskcost reprice`" in out
    assert (tmp_path / "t.duckdb.prices" / "current.json").is_file()
    assert ", data " in run(cli, "prices", "status", "--db", str(db))
    out = run(cli, "reprice", "--db", str(db), "--dry-run")
    assert "dry run, nothing changed" in out
    out = run(cli, "reprice", "--db", str(db))
    # the newer file prices gpt-4o from 2026-12-01 at $2 / $1 cached / $8
    new = (4_000 * 2 + 6_000 * 1 + 500 * 8) / M
    assert f"before ${LIST:,.6f}, after ${new:,.6f}" in out
    with DuckDBStore.open(db, read_only=True) as store:
        assert store.query("SELECT cost_usd FROM llm_calls WHERE span_id = 'a1'").rows[0][0] == new
    assert "using the bundled data" in run(cli, "prices", "reset", "--db", str(db))
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert "not loaded, nothing changed" in run(cli, "prices", "update", "--from", str(bad), "--db", str(db), code=1)


def test_check_reports_the_line_and_field(cli: CliRunner, db: Path, tmp_path: Path) -> None:
    book = tmp_path / "book.toml"
    book.write_text('version = "v1"\n\n[[discounts]]\nprovider = "openai"\npercent = "abc"\n')
    out = run(cli, "prices", "check", "--db", str(db))  # no book configured yet
    assert "price book: none" in out and out.rstrip().endswith("ok")
    book_env = {"TASKCOST_PRICE_BOOK_FILE": str(book)}
    result = cli.invoke(app, ["prices", "check", "--db", str(db)], env=book_env)
    assert result.exit_code == 1 and "line 5, discounts[0].percent" in result.output
    book.write_text('version = "v1"\n\n[[discounts]]\nprovider = "openai"\npercent = "10"\n')
    result = cli.invoke(app, ["prices", "check", "--db", str(db)], env=book_env)
    assert result.exit_code == 0 and "price book: v1 (" in result.output and "1 discount(s)" in result.output


def test_gpus_and_cluster_costs(cli: CliRunner, db: Path, tmp_path: Path) -> None:
    out = run(cli, "prices", "gpus")
    assert "runpod-1x-h100-sxm" in out and "2.99" in out
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[[clusters]]\nid = "gpu-east"\ngpu_count = 2\nusd_per_gpu_hour = "2.99"\n'
        "effective_from = 2026-12-02T09:00:00Z\neffective_to = 2026-12-02T11:00:00Z\n"
    )
    with DuckDBStore.open(db) as store:
        sh = {"deployment": "self_hosted", "cluster": "gpu-east", "model": "qwen3"}
        ingest(store, [call("s1", DEC2, duration_s=900, **sh)])
    env = {"TASKCOST_CLUSTERS_FILE": str(clusters)}
    result = cli.invoke(app, ["reprice", "--db", str(db)], env=env)
    assert result.exit_code == 0, result.output
    assert "2 window(s), bill $11.960000 = attributed $1.495000 + idle $10.465000" in result.output
    out = run(cli, "prices", "clusters", "--db", str(db))
    assert "gpu-east: bill $11.960000 = attributed to calls $1.495000 + idle $10.465000" in out
    out = run(cli, "explain-cost", "s1", "--db", str(db))
    assert "cluster gpu-east: 2 x GPU at $2.99/GPU-hour (clusters file)" in out
    assert "bill $5.980000000000, busy 900 s; this call 900.0 s -> $1.495000000000" in out


def test_through_a_running_server(tmp_path: Path) -> None:
    """The server owns the file: `reprice`, `explain-cost` and `prices status` go through it."""
    book = tmp_path / "book.toml"
    book.write_text('version = "v1"\n')
    db = tmp_path / "served.duckdb"
    server = start_server(db, free_port(), tmp_path / "server.log", env={"TASKCOST_PRICE_BOOK_FILE": str(book)})
    try:
        body = sample_request().SerializeToString()
        resp = httpx.post(f"{server.url}/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
        assert resp.status_code == 200
        before = _total(db)
        book.write_text('version = "v2"\n\n[[discounts]]\nprovider = "openai"\npercent = "10"\n')
        later = time.time() + 5
        os.utime(book, (later, later))
        out = run_cli("reprice", "--db", str(db)).stdout
        assert "book v2 (" in out and "2 with a new cost" in out
        assert _total(db) == before * Decimal("0.9")
        out = run_cli("prices", "status", "--db", str(db)).stdout
        assert f"server {server.url}:" in out and "book v2 (" in out
        span = sql_json(db, "SELECT span_id FROM llm_calls")
        out = run_cli("explain-cost", span[0]["span_id"], "--db", str(db)).stdout
        assert "discount discounts[0]: 10% off -$" in out
    finally:
        stop_server(server)


def _total(db: Path) -> Decimal:
    rows = sql_json(db, "SELECT sum(cost_usd) AS c FROM llm_calls")
    return Decimal(rows[0]["c"])


def test_a_bad_or_reversed_time_is_a_usage_error(cli: CliRunner, db: Path) -> None:
    # as the questions say it: exit 2 (reprice said 1, and a reversed range re-priced nothing, exit 0)
    assert "is not an ISO date" in run(cli, "reprice", "--db", str(db), "--since", "yesterday", code=2)
    assert "must be before --until" in run(
        cli, "reprice", "--db", str(db), "--since", "2026-12-03", "--until", "2026-12-01", code=2
    )
    assert "is out of range" in run(cli, "prices", "missing", "--db", str(db), "--since", "0001-01-01", code=2)
