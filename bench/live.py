"""`make live-check`: the newcomer's path while data flows.

``taskcost demo`` runs in the background (its own database and port, in a scratch directory) while headless Chromium
opens every page the dashboards list, every 30 s, until the demo's fleet has stopped and its GPU-hours are shared
out (one last round then). A page that shows an error box, a traceback, ``None`` or ``NaN``, a failed or 5xx
callback, or a console error is a problem; the run exits 1 when there is one.

``python -m bench.live --minutes 5`` (the demo's own length by default; shorter for a quick look).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.dashboards import CHROME_ARGS, CHROMIUM, _free_port, _Loads, _pages

_BAD = re.compile(r"Cannot show this|Traceback|\bNone\b|\bNaN\b")
_EVERY_S = 30.0


def _check(page: Any, loads: _Loads, url: str, errors: list[str]) -> list[str]:
    """The problems of one load of ``url``."""
    errors.clear()
    loads.done.clear()
    loads.failed.clear()
    page.goto(url)
    try:
        loads.settle(page)
    except RuntimeError as exc:
        return [str(exc)]
    found = [f"callback failed: {f}" for f in loads.failed]
    for request in loads.done:
        response = request.response()
        if response is None or response.status >= 500:
            found.append(f"callback answered {response and response.status}")
    text = page.inner_text("body")
    if m := _BAD.search(text):
        found.append("shows: " + text[max(0, m.start() - 120) : m.end() + 120].replace("\n", " "))
    found += [f"console: {e}" for e in errors]
    return found


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live")
    ap.add_argument("--minutes", type=float, default=5.0, help="the demo's fleet runs this long")
    args = ap.parse_args()
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: `make install-browser` installs Debian's chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    problems: list[tuple[int, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        log = Path(tmp) / "demo.log"
        cmd = [sys.executable, "-m", "taskcost", "demo", "--port", str(port), "--minutes", str(args.minutes)]
        cmd.append("--keep-serving")  # the last round runs after the fleet, the tasks in hand and the GPU-hours
        with log.open("wb") as fh:
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
            demo = subprocess.Popen(cmd, cwd=tmp, stdout=fh, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                if demo.poll() is not None or time.monotonic() > deadline:
                    print(log.read_text()[-3000:], file=sys.stderr)
                    return 2
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROME_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                loads = _Loads(page)
                paths = _pages(page, loads, url)
                last, rnd = False, 0
                while not last:
                    last = demo.poll() is not None or "the fleet stopped; still serving" in log.read_text()
                    started = time.monotonic()
                    for path in paths:
                        problems += [(rnd, path, p) for p in _check(page, loads, f"{url}/dash{path}", errors)]
                    print(
                        f"round {rnd}: {len(paths)} pages in {time.monotonic() - started:.1f} s;"
                        f" problems so far {len(problems)}",
                        flush=True,
                    )
                    rnd += 1
                    time.sleep(max(0.0, _EVERY_S - (time.monotonic() - started)))
                browser.close()
        finally:
            if demo.poll() is None:
                demo.send_signal(signal.SIGINT)
                try:
                    demo.wait(60)
                except subprocess.TimeoutExpired:
                    demo.kill()
    for rnd, path, what in problems:
        print(f"round {rnd} {path}: {what}")
    print(f"{len(problems)} problem(s) over {rnd} round(s) of {len(paths)} pages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
