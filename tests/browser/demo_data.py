"""The database the real `taskcost demo` fills for the browser tests: made once per test run, in the background
from the moment collection ends (so the other tests run meanwhile), shared by every xdist worker."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tests.conftest import cli_env, free_port

DEMO_SEED = 7
# ten simulated minutes of 24 agents (two minutes at 5x speed): ~800 tasks, ~1,900 calls, both engine versions well
# sampled (one build: 824 and 1,915). The demo divides every latency by its speed and measures what it served by the
# clock, so a loaded machine's milliseconds weigh against latencies speed times smaller: at 20x, the engines page's
# ranking of the deployments was once two configurations 1.01x apart; at 5x they weigh a quarter as much. It is made
# while the other tests run (the browser tests come last); alone, the browser tests wait about 3 minutes for it.
DEMO_ARGS = ("--minutes", "2", "--speed", "5", "--agents", "24")


def shared_dir() -> Path:
    """A folder every worker of this test run sees (xdist names the run; a plain run is its own process)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    path = Path(tempfile.gettempdir()) / f"taskcost-browser-{run}"
    path.mkdir(exist_ok=True)
    return path


def demo_database() -> Path:
    """The demo's database, made now unless another worker (or the background build) made it or is making it."""
    if os.environ.get("TASKCOST_TEST_DEMO_DB"):  # while working on a page: a demo database made earlier
        return Path(os.environ["TASKCOST_TEST_DEMO_DB"])
    shared = shared_dir()
    db = shared / "demo.duckdb"
    with (shared / "demo.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not db.exists():
            work = shared / "demo-work.duckdb"
            work.unlink(missing_ok=True)
            cmd = [sys.executable, "-m", "taskcost", "demo", "--db", str(work), "--port", str(free_port())]
            cmd += [*DEMO_ARGS, "--seed", str(DEMO_SEED)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=400)
            if proc.returncode != 0:
                raise AssertionError(f"taskcost demo failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
            shutil.copy(work, db)
    return db


def build_in_background() -> None:
    """Start making the demo database on a thread (a failure shows when a test asks for it)."""

    def build() -> None:
        with contextlib.suppress(Exception):  # the fixture builds again and reports it
            demo_database()

    threading.Thread(target=build, name="browser-demo-build", daemon=True).start()
