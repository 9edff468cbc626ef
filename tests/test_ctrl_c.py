"""Ctrl-C in the terminal that runs `taskcost serve` (`make run`): the server stops cleanly, with no traceback from
its decode workers (the terminal signals the whole process group; each worker printed a KeyboardInterrupt)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import cli_env, free_port
from tests.otlp_samples import sample_request


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _ignores_sigint(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    return False


def test_ctrl_c_stops_the_server_and_its_workers_without_a_traceback(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskcost", "serve", "--db", str(tmp_path / "c.duckdb"), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**cli_env(), "TASKCOST_GRPC_PORT": "0", "TASKCOST_DECODE_WORKERS": "2"},
        start_new_session=True,  # its own process group, as a terminal's job is
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        body = sample_request().SerializeToString()  # a request: the decode workers start
        r = httpx.post(f"{url}/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
        assert r.status_code == 200
        # once started, every process of the server but itself ignores SIGINT (its decode workers, multiprocessing's
        # resource tracker): the serving process alone stops, and stops them
        deadline = time.monotonic() + 30
        while not (children := _children(proc.pid)) or not all(_ignores_sigint(c) for c in children):
            assert time.monotonic() < deadline, [(c, _ignores_sigint(c)) for c in children]
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: every process of the group
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = output.decode()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
