"""Projects in the CLI, as README.md ("Keys and projects") and docs/security.md describe them: `taskcost tasks`
answers per project (never adding projects together) and takes `--project`; what was sent before the first key is in
project `default`, which no other project's read key sees, and which a read key of project `default` does."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from typer.testing import CliRunner

from taskcost.cli import app
from tests.conftest import REPO, Server
from tests.otlp_samples import sample_request

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("TASKCOST_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def run_cli(*args: str) -> SimpleNamespace:
    """The CLI in this process (as fast as it gets; the server is the real one): its stdout and stderr."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return SimpleNamespace(stdout=result.stdout, stderr=result.stderr)


def _send(server: Server, key: str | None = None) -> None:
    headers = {**PROTOBUF, **({"Authorization": f"Bearer {key}"} if key else {})}
    resp = httpx.post(
        f"{server.url}/v1/traces", content=sample_request().SerializeToString(), headers=headers, timeout=60
    )
    assert resp.status_code == 200, resp.text


def _key(server: Server, project: str, kind: str) -> str:
    return run_cli("keys", "create", project, "--kind", kind, "--db", str(server.db)).stdout.strip()


def _rows(table: str) -> list[list[str]]:
    """The data rows of a rich table: its cells, stripped."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]


def test_tasks_per_project_and_the_data_sent_before_the_first_key(server: Server) -> None:
    assert run_cli("tasks", "--db", str(server.db)).stdout.strip() == "no tasks"
    _send(server)  # no key exists yet: project `default`
    one = run_cli("tasks", "--db", str(server.db))
    assert [r[:3] for r in _rows(one.stdout)] == [["default", "completed", "1"]]
    assert "projects, each" not in one.stderr  # one project: nothing to say about projects
    ingest, read = _key(server, "team-a", "ingest"), _key(server, "team-a", "read")
    _send(server, ingest)  # the same task id, in another project: another task

    # the owner (the admin token, found beside the file) sees every project, each on its own
    run = run_cli("tasks", "--db", str(server.db))
    assert [r[:3] for r in _rows(run.stdout)] == [["default", "completed", "1"], ["team-a", "completed", "1"]]
    assert "project default\n  tasks: 1, completed: 1\n" in run.stdout
    assert "project team-a\n  tasks: 1, completed: 1\n" in run.stdout
    per = re.findall(r"cost per completed task \(all spend / completed tasks\): (\$[\d.]+)", run.stdout)
    assert len(per) == 2 and per[0] == per[1]  # per project, never the two added together
    assert "2 projects, each with its own cost per completed task" in run.stderr
    only = run_cli("tasks", "--db", str(server.db), "--project", "team-a").stdout
    assert [r[0] for r in _rows(only)] == ["team-a"] and "project default" not in only
    assert run_cli("tasks", "--db", str(server.db), "--project", "elsewhere").stdout.strip() == (
        "no tasks in project 'elsewhere'"
    )

    # a read key of team-a: its own project; what was sent before the first key is not there
    mine = run_cli("tasks", "--url", server.url, "--key", read).stdout
    assert [r[:3] for r in _rows(mine)] == [["team-a", "completed", "1"]]
    none = run_cli("tasks", "--url", server.url, "--key", read, "--project", "default").stdout
    assert "no tasks in project 'default' visible to this key (a read key sees its own project's only)" in none
    sql = run_cli("sql", "--url", server.url, "--key", read, "--format", "json", "SELECT DISTINCT project FROM tasks")
    assert json.loads(sql.stdout) == [{"project": "team-a"}]

    # the README's way to read it with a key: a read key of project `default`
    readme = (REPO / "README.md").read_text()
    assert "taskcost keys create default --kind read" in readme
    earlier = _key(server, "default", "read")
    theirs = run_cli("tasks", "--url", server.url, "--key", earlier).stdout
    assert [r[:3] for r in _rows(theirs)] == [["default", "completed", "1"]]
