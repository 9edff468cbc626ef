"""The dashboards in a real headless Chromium: Debian's chromium driven by Playwright (no browser download), against
the real `taskcost serve` on loopback ports, over a store the real demo filled and over an empty one.

The demo's database is made once per test run (every xdist worker waits for the first to make it) and each worker
serves its own copy (one process per DuckDB file). Every page a test opens is watched: a console error, a page
error or a failed Dash callback (HTTP >= 400 from ``_dash-update-component``) fails the test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.dashboards import CHROME_ARGS, CHROMIUM
from tests.browser.demo_data import demo_database
from tests.conftest import REPO, Server, free_port, start_server, stop_server

SCREENSHOTS = REPO / "tests" / "browser" / "screenshots"  # every page of every run (not committed)
README_IMAGES = REPO / "docs" / "img"  # the README's screenshots: refreshed with TASKCOST_UPDATE_README_IMAGES=1
UPDATE_README_IMAGES = os.environ.get("TASKCOST_UPDATE_README_IMAGES") == "1"
STORE = os.environ.get("TASKCOST_BROWSER_STORE", "duckdb")
"""The store the servers run on: ``duckdb`` (the default), or ``chdb`` (the ClickHouse store on an in-process chDB:
the demo's rows are copied into it, and the whole browser suite runs against it; ``make test-browser-clickhouse``)."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium, per test module: Playwright's sync API keeps an event loop running on this thread while it is
    open, and a test of another module that calls ``asyncio.run`` (the SDK's async client tests) must not meet it."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make install-browser` installs Debian's chromium (as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROME_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def demo_db() -> Path:
    """A database the real `taskcost demo` filled (a short run, fixed seed): made once per run, reused."""
    return demo_database()


def _chdb_copy(db: Path | None, directory: Path) -> str:
    """A chDB store at ``directory`` holding ``db``'s rows (created empty when None); its ``--store`` dsn. The store
    is closed again before the server opens it (chDB: one process per data directory)."""
    from bench.clickhouse import copy_rows
    from taskcost.store import DuckDBStore
    from taskcost.store.clickhouse._store import ClickHouseStore

    dsn = f"chdb://{directory}"
    with ClickHouseStore.open(dsn) as ch:
        if db is not None:
            with DuckDBStore.open(db, read_only=True) as duck:
                copy_rows(duck, ch, everything=True)
    return dsn


def serve_copy(db: Path | None, tmp: Path, env: dict[str, str] | None = None) -> Server:
    """The real server on a copy of ``db`` (an empty new file when None), on the store ``STORE`` names."""
    mine = tmp / "served.duckdb"
    if STORE == "chdb":
        args = ("--store", _chdb_copy(db, tmp / "ch"))
        return start_server(mine, free_port(), tmp / "server.log", env=env, args=args)
    if db is not None:
        shutil.copy(db, mine)
    return start_server(mine, free_port(), tmp / "server.log", env=env)


@pytest.fixture(scope="session")
def demo_server(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = serve_copy(demo_db, tmp_path_factory.mktemp("demo-server"))
    yield srv
    stop_server(srv)


@pytest.fixture(scope="session")
def empty_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = serve_copy(None, tmp_path_factory.mktemp("empty-server"))
    yield srv
    stop_server(srv)


@dataclass
class Watch:
    """What went wrong in the browser while a test ran."""

    errors: list[str] = field(default_factory=list)
    in_flight: set[Any] = field(default_factory=set)  # Dash requests sent and not yet answered or failed
    last_activity: float = 0.0
    _handlers: list[tuple[str, Any]] = field(default_factory=list)

    def _dash(self, request: Any, started: bool) -> None:
        if "/_dash-" in request.url:
            if started:
                self.in_flight.add(request)
            else:
                self.in_flight.discard(request)  # one sent before this watch began was never counted
            self.last_activity = time.monotonic()

    def _response(self, r: Any) -> None:
        if r.status >= 400 and "_dash-update-component" in r.url:
            self.errors.append(f"HTTP {r.status} {r.url}")

    def _console(self, m: Any) -> None:
        if m.type == "error":
            self.errors.append(f"console {m.type}: {m.text}")

    def attach(self, page: Any) -> None:
        self._handlers = [
            ("request", lambda r: self._dash(r, True)),
            ("requestfinished", lambda r: self._dash(r, False)),
            ("requestfailed", lambda r: self._dash(r, False)),
            ("console", self._console),
            ("pageerror", lambda e: self.errors.append(f"page error: {e}")),
            ("response", self._response),
        ]
        for event, handler in self._handlers:
            page.on(event, handler)

    def detach(self, page: Any) -> None:
        for event, handler in self._handlers:
            page.remove_listener(event, handler)
        self._handlers = []


@pytest.fixture(scope="module")
def _tab(browser: Any) -> Iterator[Any]:
    """One browser tab for a module's tests. A page opened in a new context cost Chromium about twice the CPU of the
    same page opened in a tab that had shown one before (4 of the demo's pages on 2 cores: 19-22 s against 9 s; in a
    new tab of the same context, 18 s): the renderer process and the scripts it compiled are kept. The browser tests
    are CPU-bound here, so each module's tests share one tab."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture
def page(_tab: Any) -> Iterator[Any]:
    """The module's tab, blank and without cookies, watched afresh: fails the test on any console error, page error
    or failed callback while it ran."""
    _tab.goto("about:blank")  # the last test's page and its requests end here, before this watch begins
    _tab.context.clear_cookies()
    watch = Watch()
    watch.attach(_tab)
    _tab.watch = watch
    try:
        yield _tab
    finally:
        watch.detach(_tab)
    assert not watch.errors, "\n".join(watch.errors)


# Dash's renderer keeps its state in a Redux store (window.store, which dash.testing reads too): its callbacks are
# queued there from the moment one is needed until its outputs are applied, a callback that another's answer starts
# included (it is queued before the answer leaves the queue)
_DASH_IDLE = """() => {
    const s = window.store && window.store.getState();
    if (!s || s.appLifecycle !== 'HYDRATED' || s.isLoading) return false;
    const queues = Object.assign({}, s.callbacks);
    delete queues.stored;
    delete queues.completed;
    return Object.values(queues).every(q => q.length === 0);
}"""


def settle(page: Any, timeout_s: float = 30.0, quiet_s: float = 0.25) -> None:
    """Wait until Dash's renderer has no callback queued or running, no Dash request (a callback, or a script it
    loads) has been in flight for ``quiet_s``, and no component is marked as loading."""
    watch: Watch = page.watch
    page.wait_for_load_state("load")
    deadline = time.monotonic() + timeout_s
    while True:
        page.wait_for_timeout(50)
        quiet = not watch.in_flight and time.monotonic() - watch.last_activity >= quiet_s
        idle = quiet and page.evaluate(_DASH_IDLE)
        if idle and page.locator('[data-dash-is-loading="true"]').count() == 0:
            return
        if time.monotonic() > deadline:
            if not quiet:
                why = f"{len(watch.in_flight)} Dash requests in flight"
            elif idle:
                why = "a component still marked as loading"
            elif page.evaluate("() => !window.store"):
                why = f"no Dash app on {page.url}"
            else:
                why = "Dash's callback queue not empty"
            raise AssertionError(f"the page did not settle in {timeout_s} s ({why})")


def open_page(page: Any, server: Server, path: str = "/") -> None:
    """Go to ``/dash<path>`` and wait for every callback to answer."""
    page.goto(f"{server.url}/dash{path}")
    settle(page)


# The tables wider than the box that scrolls them (a column off to the right: the reader must find the scrollbar)
_CUT_OFF_TABLES = """() => Array.from(document.querySelectorAll('table')).filter(t => {
    let box = t.parentElement;
    while (box && !['auto', 'scroll', 'hidden'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    return box && t.getBoundingClientRect().width > box.clientWidth + 1;
}).map(t => (t.closest('[id]') || {id: t.innerText.slice(0, 40)}).id)"""


def shot(page: Any, name: str, *, readme: bool = False, wide_tables: bool = False) -> Path:
    """A full-page screenshot under tests/browser/screenshots (and, with TASKCOST_UPDATE_README_IMAGES=1, docs/img for
    the README's: a test run leaves the tracked files alone); then every table must fit its box, unless ``wide_tables``
    (a user's query may have any number of columns)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if readme and UPDATE_README_IMAGES:
        README_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, README_IMAGES / f"{name}.png")
    if not wide_tables:
        cut = page.evaluate(_CUT_OFF_TABLES)
        assert not cut, f"{name}: tables wider than their box (see {path}): {cut}"
    return path


def number(text: str) -> float:
    """The first number in ``text`` (``$0.0123`` -> 0.0123, ``87.5%`` -> 87.5, ``1,204`` -> 1204)."""
    m = re.search(r"-?\d[\d,]*(?:\.\d+)?", text)
    if not m:
        raise AssertionError(f"no number in {text!r}")
    return float(m.group(0).replace(",", ""))


def control(page: Any, key: str) -> Any:
    """The URL-kept control ``key`` (Dash writes a dict id as sorted JSON)."""
    return page.locator(f"""[id='{{"key":"{key}","type":"tc-url"}}']""")


def choose(page: Any, key: str, value: str | None = None) -> str:
    """Pick ``value`` (default: the first option) in the URL-kept select ``key``; wait for the address to change
    (the URL writer's answer) and then for the page to render again. Returns the value picked."""
    before = page.url
    control(page, key).click()
    options = page.locator(".mantine-Select-option:visible, .mantine-Select-dropdown [role=option]:visible")
    option = options.filter(has_text=value).first if value else options.first
    picked = option.inner_text()
    option.click()
    with contextlib.suppress(Exception):  # picking the value already shown changes nothing
        page.wait_for_function("(before) => window.location.href !== before", arg=before, timeout=10_000)
    settle(page)
    return picked
