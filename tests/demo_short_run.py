"""The short `taskcost demo` run ``test_demo`` checks, started in the background when collection ends.

Most of the run is a wait: for the last one-minute GPU-hour window to end and for the server to allocate it (25-80 s
depending on the clock). Started early, that wait passes while the other tests run, instead of holding a test worker.
One run per test run, shared by every xdist worker (a lock in the run's shared folder); it runs in a session of its
own with its exit code written to a file, so it finishes even when the worker that started it has ended."""

from __future__ import annotations

import fcntl
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.browser.demo_data import shared_dir
from tests.conftest import cli_env, free_port

TEST_ID = "tests/test_demo.py::test_a_short_demo_run_has_everything_the_demo_promises"
# 9 s at 30x: the H100 agent's tasks go round its five deployments; the time it takes is mostly the wait for the last
# one-minute GPU-hour window to end (the server's shortest window; it allocates it 3 s after its end)
ARGS = ("--minutes", "0.15")
SPEED = "30"


def command(db: Path, port: int, *args: str, speed: str = "10") -> list[str]:
    """``taskcost demo`` as the demo tests run it: 8 agents, seed 7, ``speed`` times faster, then ``args``."""
    cmd = [sys.executable, "-m", "taskcost", "demo", "--db", str(db), "--port", str(port), "--agents", "8"]
    return [*cmd, "--seed", "7", "--speed", speed, *args]


@dataclass(frozen=True)
class ShortRun:
    db: Path
    port: int
    returncode: int
    out: str
    err: str


def _folder() -> Path:
    path = shared_dir() / "short-demo"
    path.mkdir(exist_ok=True)
    return path


def start() -> None:
    """Start the run unless this test run has started it already (any worker)."""
    folder = _folder()
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "started.json").exists():
            return
        port = free_port()
        db = folder / "demo.duckdb"
        cmd = command(db, port, *ARGS, speed=SPEED)
        # the exit code is written by a shell around the demo: it outlives the worker that started it
        script = f"{shlex.join(cmd)} >out.txt 2>err.txt; echo $? >rc.tmp && mv rc.tmp rc"
        subprocess.Popen(
            ["sh", "-c", script], cwd=folder, env=cli_env(), start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        (folder / "started.json").write_text(json.dumps({"db": str(db), "port": port}))


def result(timeout_s: float = 280.0) -> ShortRun:
    """The run's outcome, once it ended (started now if collection did not start it)."""
    start()
    folder = _folder()
    started = json.loads((folder / "started.json").read_text())
    deadline = time.monotonic() + timeout_s
    while not (folder / "rc").exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the short demo run did not end in {timeout_s:.0f} s (see {folder})")
        time.sleep(0.5)
    return ShortRun(
        Path(started["db"]),
        int(started["port"]),
        int((folder / "rc").read_text()),
        (folder / "out.txt").read_text(),
        (folder / "err.txt").read_text(),
    )
