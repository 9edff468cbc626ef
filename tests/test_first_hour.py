"""The first hour of a new user and of an operator, as the README tells it: `docker compose up` on an empty volume,
`make run` on other ports, the quick-start agent against the server it is pointed at, and what they see on the way
(the start-up banner, `--help`, a test run's output). Real parts only: the real `taskcost serve` process, started with
the command line the compose file or the Makefile gives, the real exporter, real DuckDB files."""

from __future__ import annotations

import json
import re
import shlex
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
import typer.main
import yaml

from tests.conftest import REPO, cli_env, free_port, run_cli

pytestmark = pytest.mark.slow

CONTAINER_DATA = "/data"


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    log: Path
    url: str

    def text(self) -> str:
        return self.log.read_text()


def _start(argv: list[str], env: dict[str, str], log: Path, url: str, healthy: Any, cwd: Path = REPO) -> Served:
    """``argv`` as a process serving ``url`` (output to ``log``), once ``healthy()`` is true; fails with the log if it
    exits first."""
    with log.open("ab") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    deadline = time.monotonic() + 120
    while not healthy():
        if proc.poll() is not None:
            raise AssertionError(f"{argv} exited ({proc.returncode}) before it was healthy:\n{log.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{argv} did not become healthy:\n{log.read_text()}")
        time.sleep(0.3)
    return Served(proc, log, url)


def _stop(served: Served) -> None:
    if served.proc.poll() is None:
        served.proc.terminate()
        try:
            served.proc.wait(30)
        except subprocess.TimeoutExpired:
            served.proc.kill()
            served.proc.wait()


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _quickstart(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart_agent.py"), *args],
        env={**cli_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- 1. docker compose up on an empty volume ---------------------------------------------------------------------------


def _dockerfile() -> tuple[dict[str, str], list[str]]:
    """The image's ENV and CMD, from the Dockerfile."""
    logical = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    env: dict[str, str] = {}
    cmd: list[str] = []
    for line in logical.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
        elif word == "CMD":
            cmd = json.loads(rest)
    assert cmd, "the Dockerfile has no CMD"
    return env, cmd


@dataclass
class Container:
    """What `docker compose up` runs, as this machine can run it: the compose service's command and environment (the
    image's ENV under the compose file's), with the volume's mount point moved to a directory and the ports moved to
    free ones (a container has its own network; here they would clash)."""

    argv: list[str]
    env: dict[str, str]
    healthcheck: list[str]
    http_port: int
    grpc_port: int
    workdir: Path  # the image's WORKDIR holds no taskcost.toml: nor does this


def _container(data_dir: Path) -> Container:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    # the default profile: one container on DuckDB (the scale profile's services name their profile)
    [service] = [s for s in compose["services"].values() if not s.get("profiles")]
    image_env, cmd = _dockerfile()
    env = {**image_env, **{k: str(v) for k, v in service.get("environment", {}).items()}}
    command = service.get("command", cmd)
    command = shlex.split(command) if isinstance(command, str) else list(command)
    assert command[0] == "taskcost"
    assert f"taskcost-data:{CONTAINER_DATA}" in service["volumes"]
    assert service["restart"] == "unless-stopped"  # a crash at start would loop: the first start must come up

    # the published ports are the ones the process serves on
    published = {int(p.rsplit(":", 1)[1]) for p in service["ports"]}  # host side: ${TASKCOST_HOST_PORT:-4318}
    http_port, grpc_port = int(env["TASKCOST_PORT"]), int(env.get("TASKCOST_GRPC_PORT", "4317"))
    assert published == {http_port, grpc_port}
    [kind, *check] = service["healthcheck"]["test"]
    assert kind == "CMD" and check[0] == "python"
    probe = check[-1]
    assert f"127.0.0.1:{http_port}/healthz" in probe, "the health check asks another port than TASKCOST_PORT"

    new_http, new_grpc = free_port(), free_port()
    workdir = data_dir.parent / "app"
    workdir.mkdir(exist_ok=True)
    env = {
        k: v.replace(CONTAINER_DATA, str(data_dir), 1) if v.startswith(CONTAINER_DATA) else v for k, v in env.items()
    }
    env.update(TASKCOST_PORT=str(new_http), TASKCOST_GRPC_PORT=str(new_grpc))
    probe = probe.replace(f"127.0.0.1:{http_port}/", f"127.0.0.1:{new_http}/")
    return Container(
        argv=[sys.executable, "-m", "taskcost", *command[1:]],
        env={**cli_env(), **env},
        healthcheck=[sys.executable, *check[1:-1], probe],
        http_port=new_http,
        grpc_port=new_grpc,
        workdir=workdir,
    )


def _readme_log(container: Container, data_dir: Path) -> list[re.Pattern[str]]:
    """The log the README's Docker section shows, as patterns for this run's log lines ("…" stands for anything, the
    ports and the volume's mount point as moved here)."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("$ docker compose logs taskcost\n", 1)[1].split("```", 1)[0]
    patterns = []
    for shown in block.strip("\n").splitlines():
        line = re.sub(r"^taskcost-1 +\| ", "", shown)  # docker compose logs: the container's name before each line
        pattern = re.escape(line).replace("…", ".*?")
        pattern = re.sub(r"key_[0-9a-f]+", r"key_\\w+", pattern)
        pattern = pattern.replace("4318", str(container.http_port)).replace("4317", str(container.grpc_port))
        patterns.append(re.compile(pattern.replace(re.escape(CONTAINER_DATA), re.escape(str(data_dir)))))
    assert len(patterns) >= 6
    return patterns


def _up(container: Container, log: Path) -> Served:
    def healthy() -> bool:
        return subprocess.run(container.healthcheck, capture_output=True, timeout=30).returncode == 0

    url = f"http://127.0.0.1:{container.http_port}"
    return _start(container.argv, container.env, log, url, healthy, cwd=container.workdir)


def test_compose_up_on_an_empty_volume_comes_up_healthy_and_says_how_to_get_in(tmp_path: Path) -> None:
    data = tmp_path / "volume"
    data.mkdir()
    container = _container(data)
    assert container.env["TASKCOST_HOST"] == "0.0.0.0"  # the case that refused to start while no key existed

    first = _up(container, tmp_path / "first.log")
    try:
        log = first.text()
        assert "created the first keys of project 'default'" in log
        ingest = re.search(r"ingest key key_\w+: (tc_ingest_\S+)", log)
        read = re.search(r"read key key_\w+: (tc_read_\S+)", log)
        assert ingest and read, log
        assert f"dashboards {first.url}/dash/" in log and "OTEL_EXPORTER_OTLP_HEADERS=" in log
        assert "API keys required" in log
        for pattern in _readme_log(container, data):  # the README shows what the operator sees
            assert any(pattern.fullmatch(line) for line in log.splitlines()), (pattern.pattern, log)

        # the way in that the log shows: send with the ingest key, read with the read key
        refused = _quickstart(OTEL_EXPORTER_OTLP_ENDPOINT=first.url)
        assert refused.returncode == 1 and "401" in refused.stderr and "OTEL_EXPORTER_OTLP_HEADERS" in refused.stderr
        sent = _quickstart(
            OTEL_EXPORTER_OTLP_ENDPOINT=first.url,
            OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer%20{ingest.group(1)}",
        )
        assert sent.returncode == 0, sent.stderr
        rows = run_cli("sql", "--url", first.url, "--key", read.group(1), "--format", "json", "SELECT * FROM tasks")
        [task] = json.loads(rows.stdout)
        assert task["outcome"] == "completed" and task["cost_usd"].startswith("0.0727")
        dash = httpx.get(f"{first.url}/dash/", auth=("anyone", read.group(1)), timeout=30)
        assert dash.status_code == 200
    finally:
        _stop(first)

    # restarted (restart: unless-stopped, or docker compose restart): the keys exist, none is made, none printed
    again = _up(container, tmp_path / "again.log")
    try:
        log = again.text()
        assert "created the first keys" not in log and "tc_ingest_" not in log
        assert "API keys required" in log
    finally:
        _stop(again)


def test_what_the_image_copies_exists() -> None:
    copied = [src for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("COPY ")
              for src in shlex.split(line)[1:-1]]  # fmt: skip
    assert "taskcost" in copied and "sdk" in copied
    for source in copied:
        assert (REPO / source).exists(), f"the Dockerfile copies {source}, which does not exist"


def test_docker_compose_reads_the_compose_file() -> None:
    """`docker compose config` where the compose plugin exists (the CI step this machine allows)."""
    if shutil.which("docker") is None:
        pytest.skip("no docker client here")
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("the docker compose plugin is not installed here")
    proc = subprocess.run(["docker", "compose", "config", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# -- 2. make run on other ports ----------------------------------------------------------------------------------------


def _make_run(**variables: str) -> list[str]:
    """The command `make run VAR=value ...` runs (the venv taken as installed)."""
    if shutil.which("make") is None:
        pytest.skip("no make here")
    assigned = [f"{k}={v}" for k, v in variables.items()]
    # as a user's shell runs it: no variables of an outer make (MAKEFLAGS carries its command line's) or of this shell
    env = {
        k: v for k, v in cli_env().items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PORT", "GRPC_PORT", "DB")
    }
    proc = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", ".venv/.installed", "run", *assigned],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    [line] = [x for x in proc.stdout.splitlines() if " serve " in x]
    argv = shlex.split(line)
    assert argv[:2] == [".venv/bin/taskcost", "serve"], line
    return [sys.executable, "-m", "taskcost", *argv[1:]]


def test_make_run_takes_both_ports() -> None:
    plain = _make_run()
    assert "--port" not in plain and "--grpc-port" not in plain  # unset: TASKCOST_PORT, taskcost.toml, else defaults
    moved = _make_run(PORT="4319", GRPC_PORT="4316")
    assert moved[moved.index("--port") + 1] == "4319" and moved[moved.index("--grpc-port") + 1] == "4316"
    assert _make_run(GRPC_PORT="0")[-2:] == ["--grpc-port", "0"]


@pytest.mark.parametrize("taken", ["PORT", "GRPC_PORT"])
def test_a_taken_port_says_how_to_choose_another(tmp_path: Path, taken: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        ports = {"PORT": str(free_port()), "GRPC_PORT": str(free_port()), taken: str(busy)}
        argv = _make_run(DB=str(tmp_path / "t.duckdb"), **ports)
        proc = subprocess.run(argv, env=cli_env(), capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    assert not (tmp_path / "t.duckdb").exists()  # refused before the database is made
    message = " ".join(proc.stderr.split())
    assert f"127.0.0.1:{busy}" in message
    if taken == "PORT":
        assert (
            "cannot serve OTLP/HTTP" in message and "--port N (TASKCOST_PORT=N; with make: make run PORT=N)" in message
        )
    else:
        assert "cannot serve OTLP/gRPC" in message
        assert "--grpc-port N (TASKCOST_GRPC_PORT=N; with make: make run GRPC_PORT=N)" in message


# -- 3. the quick start, against the server it is pointed at -----------------------------------------------------------


@pytest.fixture
def moved_server(tmp_path: Path) -> Iterator[Served]:
    """`make run PORT=... GRPC_PORT=...` (both moved off their defaults), on a fresh file, no keys."""
    http, grpc = free_port(), free_port()
    argv = _make_run(DB=str(tmp_path / "moved.duckdb"), PORT=str(http), GRPC_PORT=str(grpc))
    url = f"http://127.0.0.1:{http}"
    served = _start(argv, cli_env(), tmp_path / "moved.log", url, lambda: _http_ok(f"{url}/healthz"))
    assert f"OTLP/gRPC 127.0.0.1:{grpc}" in served.text()
    yield served
    _stop(served)


def test_quickstart_sends_where_it_is_told_and_each_run_is_a_task(moved_server: Served) -> None:
    url = moved_server.url
    first = _quickstart(OTEL_EXPORTER_OTLP_ENDPOINT=url)
    assert first.returncode == 0, first.stderr
    assert f"spans sent to {url}/v1/traces; the collector accepted them all" in first.stdout
    shown = re.search(r"`(task review-[0-9a-f]{8}: [^`]*)`", (REPO / "README.md").read_text())
    assert shown, "the README shows what the agent prints"

    def same(text: str) -> str:
        return re.sub(r"http://\S+/v1/traces", "URL", re.sub(r"review-[0-9a-f]{8}", "ID", text.strip()))

    assert same(shown.group(1)) == same(first.stdout)
    second = _quickstart(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{url}/v1/traces")  # the whole URL, as-is
    assert second.returncode == 0, second.stderr
    assert f"sent to {url}/v1/traces" in second.stdout

    db = str(moved_server.log.with_name("moved.duckdb"))
    tasks = json.loads(run_cli("sql", "--db", db, "--format", "json", "SELECT task_id, cost_usd FROM tasks").stdout)
    assert len(tasks) == 2 and len({t["task_id"] for t in tasks}) == 2  # two runs, two tasks (not one merged)
    assert {t["cost_usd"][:6] for t in tasks} == {"0.0727"}
    summary = run_cli("tasks", "--db", db).stdout
    assert "cost per completed task" in summary and "$0.072700" in summary  # the README's figure, run after run

    # the banner says how auth works, not a state read once (a key made now turns auth on; the line stays)
    banner = moved_server.text()
    assert "no auth (no API key exists)" not in banner
    assert "no auth until the first API key is created" in banner


def test_quickstart_fails_when_nothing_is_accepted() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    proc = _quickstart(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_EXPORTER_OTLP_TIMEOUT="1")
    assert proc.returncode == 1
    assert f"the collector at http://127.0.0.1:{port}/v1/traces accepted 0 spans" in proc.stderr
    named = _quickstart("--task-id", "review-42", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                        OTEL_EXPORTER_OTLP_TIMEOUT="1")  # fmt: skip
    assert "task review-42:" in named.stderr


# -- 7. what a user sees on the way ------------------------------------------------------------------------------------


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _commands(sub, (*path, name))


def test_help_shows_flags_plainly_and_keeps_the_env_hints() -> None:
    from typer.testing import CliRunner

    from taskcost.cli import app

    runner = CliRunner()
    seen = 0
    for path, command in _commands(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0, (path, result.output)
        text = " ".join(result.output.split())
        assert "<bool>" not in text, (path, result.output)  # flags take no value: none is shown
        assert "--help Show this message and exit." in text, (path, result.output)
        for param in getattr(command, "params", []):
            for hint in re.findall(r"\[env [^\]]*\]", getattr(param, "help", None) or ""):
                assert hint in text, (path, hint, result.output)  # written in the help, so shown in it
        seen += 1
    assert seen > 15
    serve = " ".join(runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "100"}).output.split())
    assert "--allow-unauthenticated Bind" in serve and "--dashboards / --no-dashboards" in serve
    assert "[env TASKCOST_PORT; default 4318]" in serve and "[env TASKCOST_GRPC_PORT; default 4317]" in serve
