"""`taskcost reprice` says whose pricing configuration it uses: the running server's (the one it was started with),
with a warning when this environment names another one (issue: `TASKCOST_PRICE_BOOK_FILE=... taskcost reprice`
printed `book none`, silently); the file's own run uses this environment's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from taskcost.cli import app
from taskcost.cli._reprice import config_differences
from tests.conftest import cli_env, free_port, start_server, stop_server
from tests.otlp_samples import sample_request

BOOK = 'version = "v1"\n\n[[discounts]]\nprovider = "openai"\npercent = "10"\n'


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "taskcost", *args],
        capture_output=True,
        text=True,
        env={**cli_env(), **(env or {})},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_through_a_server_its_configuration_is_used_and_a_different_local_one_is_named(tmp_path: Path) -> None:
    book = tmp_path / "book.toml"
    book.write_text(BOOK)
    db = tmp_path / "served.duckdb"
    server = start_server(db, free_port(), tmp_path / "server.log")  # started without a book
    try:
        body = sample_request().SerializeToString()
        resp = httpx.post(
            f"{server.url}/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}, timeout=60
        )
        assert resp.status_code == 200
        mine = {"TASKCOST_PRICE_BOOK_FILE": str(book), "TASKCOST_CLUSTER_WINDOW_S": "600"}
        run = _cli("reprice", "--db", str(db), env=mine)
        said = " ".join(run.stderr.split())  # (the console wraps long lines)
        assert f"re-pricing with the pricing configuration of the server at {server.url}" in said
        warning = "warning: this environment's pricing configuration differs from the server's, and the server's"
        assert f"{warning} is used" in said
        assert "price book: here v1 (" in said and "; on the server none" in said
        assert "cluster window (s): here 600; on the server 3600" in said
        assert "start the server with it" in said
        assert "re-priced all history with the server's configuration: genai-prices" in run.stdout
        assert "; book none; clusters none" in run.stdout and "0 with a new cost" in run.stdout
        # the same configuration here as on the server: no warning
        run = _cli("reprice", "--db", str(db))
        assert "re-pricing with the pricing configuration of the server" in " ".join(run.stderr.split())
        assert "warning" not in run.stderr
    finally:
        stop_server(server)
    # no server: the file is re-priced with this environment's configuration, the book applies
    run = _cli("reprice", "--db", str(db), env=mine)
    said = " ".join(run.stderr.split())
    assert f"no server runs on {db}: re-pricing the file with this environment's pricing configuration" in said
    assert "re-priced all history with this environment's configuration: genai-prices" in run.stdout
    assert "; book v1 (" in run.stdout and "2 with a new cost" in run.stdout


def test_a_local_configuration_that_does_not_load_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from taskcost.cli import _reprice
    from taskcost.cli._target import PricingServer
    from taskcost.settings import Settings

    book = tmp_path / "book.toml"
    book.write_text('version = "v1"\n\n[[discounts]]\nprovider = "openai"\npercent = "abc"\n')
    settings = Settings(db=tmp_path / "t.duckdb", price_book_file=book)
    status = {"prices": "genai-prices x", "book": None, "clusters": None}
    server = PricingServer("http://127.0.0.1:1", None)
    try:
        _reprice._say_whose(settings, server, status)
    finally:
        server.close()
    said = " ".join(capsys.readouterr().err.split())
    assert "this environment's pricing configuration does not load, and the server's is used" in said
    assert "discounts[0].percent" in said


def test_config_differences_compare_what_the_server_reports() -> None:
    here = {
        "prices": "genai-prices 1",
        "book": "v1 (abc)",
        "clusters": None,
        "cluster_window_s": 3600,
        "pricing_attributes": {"a": "service_tier"},
    }
    assert config_differences(here, dict(here)) == []
    older = {"prices": "genai-prices 1", "book": None, "clusters": "clusters v2 (def)"}  # no window or attributes
    assert config_differences(here, older) == [
        "price book: here v1 (abc); on the server none",
        "clusters file: here none; on the server clusters v2 (def)",
    ]
    server = {**here, "pricing_attributes": {"a": "service_tier", "b": "processing"}}
    assert config_differences(here, server) == [
        "pricing attributes: here a -> service_tier; on the server a -> service_tier, b -> processing"
    ]


def test_on_the_file_the_command_says_whose_configuration_it_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskcost.store import DuckDBStore

    for key in list(os.environ):
        if key.startswith("TASKCOST_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "t.duckdb"
    DuckDBStore.open(db).close()
    result = CliRunner().invoke(app, ["reprice", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "re-priced all history with this environment's configuration: genai-prices" in result.output
