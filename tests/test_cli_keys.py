"""Keys from the command line, against the real server process: create through the running server,
send with the real exporter's standard header variable, read back scoped by project."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, Server, cli_env, run_cli


def _agent(server: Server, headers: str | None) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": server.url}
    if headers:
        env["OTEL_EXPORTER_OTLP_HEADERS"] = headers
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart_agent.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _count(server: Server, *extra: str) -> int:
    out = run_cli("sql", "--db", str(server.db), *extra, "--format", "json", "SELECT count(*) AS n FROM spans")
    return int(json.loads(out.stdout)[0]["n"])


def test_keys_through_the_running_server(server: Server) -> None:
    info = server.db.with_name(server.db.name + ".serve.json")
    assert oct(info.stat().st_mode & 0o777) == "0o600"  # it holds the admin token

    made = run_cli("keys", "create", "team-a", "--kind", "ingest", "--db", str(server.db))
    ingest = made.stdout.strip()
    assert f"on the server at {server.url} (database {server.db})" in made.stderr  # which one it changed
    read = run_cli("keys", "create", "team-a", "--kind", "read", "--db", str(server.db)).stdout.strip()
    other = run_cli("keys", "create", "team-b", "--kind", "read", "--db", str(server.db)).stdout.strip()
    assert ingest.startswith("tc_ingest_") and read.startswith("tc_read_")

    # auth is on now: the agent without a key is refused (and never breaks), with its key it lands
    assert _agent(server, None).returncode == 1  # it says nothing was accepted
    assert _count(server) == 0
    assert _agent(server, f"authorization=Bearer%20{ingest}").returncode == 0
    assert _count(server) == 5  # the local owner (admin token) sees every project
    assert _count(server, "--url", server.url, "--key", read) == 5
    assert _count(server, "--url", server.url, "--key", other) == 0  # team-b sees none of team-a's rows
    refused = run_cli("sql", "--url", server.url, "SELECT 1", check=False)
    assert refused.returncode == 1 and "API key is required" in refused.stderr

    listed = run_cli("keys", "list", "--db", str(server.db)).stdout
    assert listed.count("team-a") == 2 and "team-b" in listed and ingest not in listed
    key_id = next(line.split()[1] for line in listed.splitlines() if "ingest" in line)
    run_cli("keys", "revoke", key_id, "--db", str(server.db))
    assert _agent(server, f"authorization=Bearer%20{ingest}").returncode == 1
    assert _count(server) == 5  # the revoked key's spans were refused


def test_keys_in_the_file_when_no_server_runs(tmp_path: Path) -> None:
    from taskcost.store import DuckDBStore

    db = tmp_path / "offline.duckdb"
    # a typo in --db: refused (exit 2), and no database is made (a key in it would turn nothing on)
    for command in (("create", "p1", "--kind", "read"), ("list",)):
        typo = run_cli("keys", *command, "--db", str(db), check=False)
        assert typo.returncode == 2 and f"no database at {db}" in typo.stderr and not db.exists()
    made = run_cli("keys", "create", "p1", "--kind", "read", "--db", str(db), "--create")  # on purpose: made
    assert made.stdout.startswith("tc_read_") and f"in {db} (no server runs on it)" in made.stderr
    DuckDBStore.open(db).close()
    secret = run_cli("keys", "create", "p1", "--kind", "read", "--db", str(db)).stdout.strip()
    assert secret.startswith("tc_read_")
    assert "p1" in run_cli("keys", "list", "--db", str(db)).stdout
    bad = run_cli("keys", "create", "bad name", "--db", str(db), check=False)
    assert bad.returncode == 1 and "project names" in bad.stderr


def test_public_bind_without_keys_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "public.duckdb"
    proc = run_cli("serve", "--db", str(db), "--host", "0.0.0.0", "--port", "1", check=False)
    assert proc.returncode == 1
    assert "refusing to serve 0.0.0.0 without authentication" in proc.stderr
