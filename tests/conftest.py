"""Shared fixtures: real DuckDB files, the real app in-process, and the real server as a process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore

# Modules whose tests take a second or more each (real servers and clients, property runs): marked ``slow``, so
# ``pytest -m "not slow"`` is the quick loop while editing. ``make test`` runs everything, in parallel.
SLOW_MODULES = frozenset(
    {
        "test_end_to_end",
        "test_fuzz",
        "test_hostile_values",
        "test_interop_fold",
        "test_interop_grpc",
        "test_interop_js",
        "test_interop_llm_clients",
        "test_interop_providers",
        "test_interop_tasks",
        "test_reliability",
        "test_reprice_memory",
        "test_sdk_e2e_anthropic",
        "test_sdk_e2e_openai",
        "test_sdk_e2e_readme",
        "test_spool",
        "test_sql_isolation",
        "test_sql_limits",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if item.module is not None else ""
        # the browser tests (tests/browser/) are slow too: a real chromium and a real server per test session
        if module.rpartition(".")[2] in SLOW_MODULES or module.startswith("tests.browser."):
            item.add_marker(pytest.mark.slow)
    # The browser tests last (their order among themselves kept): most of them read the demo's database, which is
    # made in the background from the end of collection (``pytest_collection_finish``) and takes minutes. Collected
    # first (tests/browser/ sorts before tests/test_*.py), they had every worker wait for it, idle.
    items.sort(key=lambda item: item.nodeid.startswith("tests/browser/"))


REPO = Path(__file__).resolve().parent.parent


def pytest_collection_finish(session: pytest.Session) -> None:
    """The browser tests' demo database takes minutes to make, and the short demo run waits most of its minute for a
    GPU-hour window to end: start both now, while the other tests run."""
    if any(i.nodeid.startswith("tests/browser/") for i in session.items) and not os.environ.get(
        "TASKCOST_TEST_DEMO_DB"
    ):
        from tests.browser.demo_data import build_in_background

        build_in_background()
    from tests import demo_short_run

    if any(i.nodeid == demo_short_run.TEST_ID for i in session.items):
        demo_short_run.start()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty database with every migration applied, made once per test process: a test's new store starts
    from a copy of it (the same file a first open makes, without applying the migrations each time)."""
    path = tmp_path_factory.mktemp("migrated") / "empty.duckdb"
    DuckDBStore.open(path).close()
    assert not path.with_name(f"{path.name}.wal").exists()  # closed: everything is in the one file
    return path


def copy_of(migrated_db: Path, path: Path) -> Path:
    """``path``, a new copy of the empty migrated database."""
    shutil.copyfile(migrated_db, path)
    return path


@pytest.fixture
def store(tmp_path: Path, migrated_db: Path) -> Iterator[DuckDBStore]:
    st = DuckDBStore.open(copy_of(migrated_db, tmp_path / "t.duckdb"))
    yield st
    st.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # decode in-process: a TestClient app per test; the worker processes are tested by real servers and test_decoders
    return Settings(db=tmp_path / "t.duckdb", max_body_bytes=64 * 1024, decode_workers=0)


@pytest.fixture
def client(settings: Settings, store: DuckDBStore) -> Iterator[TestClient]:
    app = create_app(settings, store, dashboards=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@dataclass
class Server:
    url: str
    db: Path
    proc: subprocess.Popen[bytes]
    log: Path


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    for key in list(env):
        if key.startswith(("TASKCOST_", "OTEL_")):
            del env[key]
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "taskcost", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"taskcost {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def sql_json(db: Path, query: str) -> list[dict[str, Any]]:
    """The rows `taskcost sql --db <db> --format json <query>` prints, asked in this process (no command start-up
    per question): through the server that owns ``db`` when one runs, else from the file, read-only."""
    from taskcost._internal.jsonable import json_value
    from taskcost.cli._target import open_target

    target = open_target(db, None)
    try:
        res = target.query(query)
    finally:
        target.close()
    return [dict(zip(res.columns, (json_value(v) for v in row), strict=True)) for row in res.rows]


def start_server(
    db: Path, port: int, log: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> Server:
    """The real `taskcost serve` on a loopback port (``args``: more options); returns once /healthz answers."""
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskcost", "serve", "--db", str(db), "--port", str(port), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**cli_env(), "TASKCOST_GRPC_PORT": "0", **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"server exited early:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"server did not become healthy:\n{log.read_text()}")
        time.sleep(0.2)
    return Server(url, db, proc, log)


def stop_server(server: Server) -> None:
    if server.proc.poll() is None:
        server.proc.terminate()
        try:
            server.proc.wait(30)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The real `taskcost serve` on a free loopback port, with its own DuckDB file."""
    srv = start_server(tmp_path / "served.duckdb", free_port(), tmp_path / "server.log")
    yield srv
    stop_server(srv)
