"""Dashboards: every page the app lists in its navigation, opened in headless Chromium (Debian's, driven by
Playwright) against the real `taskcost serve` (a process of its own, with its defaults) over the analytics history of
1M and 10M synthetic calls (bench/query.py's, self-hosted calls included: ~100k / 1M tasks).

Each page is loaded once to warm, then ``repeats`` times; every ``_dash-update-component`` request of a load is timed
by the browser (request start to response end: the server's callback, its queries and the JSON, over loopback), and
so is the load as a whole (navigation to the last callback's answer). Reported per page: the median of each callback
over the loads, the slowest of those, and the median load. The pages are read from the navigation, so a new page is
measured without a change here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.query import load_history

__all__ = ["CHROME_ARGS", "CHROMIUM", "PageTiming", "run_dashboards"]

CHROMIUM = Path(os.environ.get("TASKCOST_TEST_CHROMIUM", "/usr/lib/chromium/chromium"))
# headless, as root too (--no-sandbox), off the network (every host but loopback unresolvable), quiet; the browser
# tests start chromium the same way
CHROME_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-pings",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,NetworkTimeServiceQuerying",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
]
_CALLBACK = "/_dash-update-component"
_QUIET_S = 0.5  # a load is over when no callback has been in flight for this long (not counted in its time)
_LOAD_TIMEOUT_S = 300.0


@dataclass
class PageTiming:
    """One page at one store size: seconds per callback (its ``output``) and per load, over the repeated loads."""

    path: str
    calls: int
    callbacks: dict[str, list[float]] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    errors_shown: int = 0  # error boxes on the page ("Cannot show this") in the timed loads

    def medians(self) -> dict[str, float]:
        return {name: statistics.median(times) for name, times in self.callbacks.items()}

    def slowest(self) -> tuple[str, float]:
        """The callback whose median is the largest, and that median."""
        name, median = max(self.medians().items(), key=lambda kv: kv[1], default=("-", float("nan")))
        return name, median

    def load(self) -> float:
        return statistics.median(self.loads) if self.loads else float("nan")

    def per_load(self) -> float:
        """Callback requests per load (the router's, the page's own, and those their answers start)."""
        return sum(len(t) for t in self.callbacks.values()) / max(1, len(self.loads))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serve(db: Path, log: Path) -> Iterator[str]:
    """The real `taskcost serve` on ``db`` (no keys: auth off, loopback), its defaults; its URL once healthy."""
    port = _free_port()
    env = {**os.environ, "TASKCOST_GRPC_PORT": "0"}
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskcost", "serve", "--db", str(db), "--port", str(port)],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"taskcost serve exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"taskcost serve did not become healthy:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Loads:
    """Watches one page's callback requests: how many are in flight, each one's time and output."""

    def __init__(self, page: Any) -> None:
        self.in_flight = 0
        self.last = time.monotonic()
        self.done: list[Any] = []
        self.failed: list[str] = []
        page.on("request", self._start)
        page.on("requestfinished", self._finish)
        page.on("requestfailed", self._fail)

    def _start(self, request: Any) -> None:
        if _CALLBACK in request.url:
            self.in_flight += 1
            self.last = time.monotonic()

    def _finish(self, request: Any) -> None:
        if _CALLBACK in request.url:
            self.in_flight -= 1
            self.last = time.monotonic()
            self.done.append(request)

    def _fail(self, request: Any) -> None:
        if _CALLBACK in request.url:
            self.in_flight -= 1
            self.last = time.monotonic()
            self.failed.append(f"{request.url}: {request.failure}")

    def settle(self, page: Any) -> None:
        page.wait_for_load_state("load")
        deadline = time.monotonic() + _LOAD_TIMEOUT_S
        while True:
            page.wait_for_timeout(50)
            quiet = self.in_flight == 0 and time.monotonic() - self.last >= _QUIET_S
            if quiet and self.done and page.locator('[data-dash-is-loading="true"]').count() == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{page.url} did not settle in {_LOAD_TIMEOUT_S:.0f} s")


def _output(request: Any) -> str:
    """A callback's name: its first output (``overview-body.children``; a pattern id by its values), and how many
    more it has."""
    try:
        outputs = json.loads(request.post_data or "{}").get("outputs", [])
    except ValueError:
        return "?"
    outputs = outputs if isinstance(outputs, list) else [outputs]
    if not outputs or not isinstance(outputs[0], dict):
        return "?"
    first = outputs[0]
    ident = first.get("id")
    if isinstance(ident, dict):
        ident = "{" + ",".join(f"{k}:{v}" for k, v in sorted(ident.items())) + "}"
    more = f" (+{len(outputs) - 1} outputs)" if len(outputs) > 1 else ""
    return f"{ident}.{first.get('property')}{more}"


def _load(page: Any, loads: _Loads, url: str) -> tuple[list[tuple[str, float]], float, int]:
    """One load of ``url``: (callback output, seconds) of each callback request, the load's seconds (navigation to
    the last callback's response end, by the browser's clock), and the error boxes the page shows."""
    loads.done.clear()
    loads.failed.clear()
    start_ms = time.time() * 1000
    page.goto(url)
    loads.settle(page)
    if loads.failed:
        raise RuntimeError(f"a callback of {url} failed: {loads.failed}")
    timed: list[tuple[str, float]] = []
    ends: list[float] = []
    for request in loads.done:
        response = request.response()
        if response is None or response.status >= 400:
            raise RuntimeError(f"a callback of {url} answered {response and response.status}: {_output(request)}")
        t = request.timing
        timed.append((_output(request), t["responseEnd"] / 1000))
        ends.append(t["startTime"] + t["responseEnd"])
    return timed, (max(ends) - start_ms) / 1000, page.locator(".tc-error").count()


def _pages(page: Any, loads: _Loads, url: str) -> list[str]:
    """The pages the app lists in its navigation, as paths under /dash."""
    page.goto(f"{url}/dash/")
    loads.settle(page)
    hrefs = [a.get_attribute("href") for a in page.locator("a[id^='nav-']").all()]
    paths = [h.removeprefix("/dash") or "/" for h in hrefs if h]
    if not paths:
        raise RuntimeError("the dashboards list no page")
    return paths


def run_dashboards(sizes: tuple[int, ...] = (1_000_000, 10_000_000), repeats: int = 5) -> list[PageTiming]:
    """Each page at each size (``PageTiming`` per page and size, pages in navigation order within a size)."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: `make install-browser` installs Debian's chromium (as root)")
    from playwright.sync_api import sync_playwright

    from taskcost.store import DuckDBStore

    out: list[PageTiming] = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROME_ARGS)
        try:
            for size in sizes:
                db = Path(tmp) / f"d{size}.duckdb"
                t = time.perf_counter()
                with DuckDBStore.open(db) as store:  # a bulk load needs more than the server's memory limit
                    load_history(store, size, self_hosted=True)
                print(f"  loaded {size:,} calls in {time.perf_counter() - t:.1f} s", flush=True)
                t = time.perf_counter()
                with _serve(db, Path(tmp) / f"serve-{size}.log") as url:
                    print(f"  taskcost serve healthy in {time.perf_counter() - t:.1f} s", flush=True)
                    context = browser.new_context(viewport={"width": 1440, "height": 1000})
                    page = context.new_page()
                    loads = _Loads(page)
                    for path in _pages(page, loads, url):
                        timing = PageTiming(path, size)
                        _load(page, loads, f"{url}/dash{path}")  # warm: the page's assets and the store's cache
                        for _ in range(repeats):
                            timed, took, errors = _load(page, loads, f"{url}/dash{path}")
                            for name, seconds in timed:
                                timing.callbacks.setdefault(name, []).append(seconds)
                            timing.loads.append(took)
                            timing.errors_shown += errors
                        name, slowest = timing.slowest()
                        print(
                            f"  {path} at {size:,}: load {timing.load():.3f} s, {timing.per_load():.0f} callbacks,"
                            f" slowest {slowest:.3f} s ({name})"
                            + (f", {timing.errors_shown} error boxes shown" if timing.errors_shown else ""),
                            flush=True,
                        )
                        out.append(timing)
                    context.close()
                db.unlink(missing_ok=True)
                shutil.rmtree(db.with_name(db.name + ".tmp"), ignore_errors=True)
        finally:
            browser.close()
    return out
