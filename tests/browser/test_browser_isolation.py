"""Each project sees its own rows only, on every page of the dashboards, in a real browser: two projects send
distinctive data through the real SDK and OTLP exporter with their ingest keys; with project alpha's read key
(Playwright's own HTTP credentials) every page the app lists in its navigation is opened, its filter menus are
opened, and nothing of project bravo may appear: not in the page's text, its HTML, any menu's options, nor in
anything the server sent to the browser. Every value bravo sends contains the word ``bravo`` (and alpha's
``alpha``), so one search finds any of them.

The ``two_projects`` fixture (the server with keys in use and the two projects' data) is shared with
test_browser_auth.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Error as PlaywrightError

from dashboards._ui import FILTER_DIMENSIONS
from tests.browser.conftest import Watch, serve_copy, settle
from tests.conftest import Server, cli_env, run_cli, stop_server

__all__ = ["Projects", "keyed_page", "two_projects"]

TAGS = ("alpha", "bravo")
TASKS = {"alpha": 4, "bravo": 7}  # different counts: a figure that mixed the projects would show it
ALPHA_VALUES = {  # filter key -> a value of alpha's that its menu must list
    "project": "alpha-team",
    "kind": "alpha_review",
    "model": "alpha-model",
    "engine": "alpha-engine",
    "engine_version": "alpha-1.0",
    "gpu_type": "alpha-gpu-0",
    "cluster": "alpha-cluster",
}
_DASH_DATA = ("_dash-update-component", "_dash-layout", "_dash-dependencies")

# One project's agent, through the real SDK and its OTLP/HTTP exporter (endpoint and ingest key from the standard
# OTEL_EXPORTER_OTLP_* variables). Every value it sets names the project's tag: task ids and kinds, models,
# engines, versions, GPUs, clusters, tools, errors, service and harness. Tasks alternate between the project's own
# self-hosted model (no price: the pages that list unpriced models must list alpha's only) and gpt-4o by API (both
# projects use it: priced figures); every third task has a failed attempt and its retry, every fourth fails.
_AGENT = """
import sys
import time

import taskcost_sdk as tc

tag, tasks = sys.argv[1], int(sys.argv[2])
tc.configure(service_name=f"{tag}-service", harness_version=f"{tag}-harness")
now = time.time_ns()
for i in range(tasks):
    end = now - (tasks - i) * 60 * 10**9
    hosted = i % 2 == 0
    model = f"{tag}-model" if hosted else "gpt-4o"
    infra = dict(
        engine=f"{tag}-engine",
        engine_version=f"{tag}-{1 + i // 2 % 2}.0",
        gpu_type=f"{tag}-gpu-{i // 2 % 2}",
        cluster_id=f"{tag}-cluster",
        deployment="self_hosted",
    ) if hosted else {}
    with tc.task(f"{tag}_review", id=f"{tag}-task-{i}", agent_name=f"{tag}-agent") as t:
        t.record_llm_call(
            "openai", model, input_tokens=3_000 + 100 * i, cache_read_tokens=1_000, output_tokens=200,
            ttft_s=0.3, end_time=end - 5 * 10**9, duration_s=1.5, **infra,
        )
        first = t.record_llm_call(
            "openai", model, input_tokens=3_500, cache_read_tokens=2_000, output_tokens=150, ttft_s=0.2,
            end_time=end - 3 * 10**9, duration_s=1.0, error_type=f"{tag}_error" if i % 3 == 0 else None, **infra,
        )
        if i % 3 == 0:
            t.record_llm_call(
                "openai", model, input_tokens=3_600, cache_read_tokens=2_000, output_tokens=160, ttft_s=0.2,
                end_time=end, duration_s=1.0, retry_of=first, **infra,
            )
        with t.tool(f"{tag}_search", cost_usd="0.002"):
            pass
        if i % 4 == 3:
            t.set_outcome("failed")
tc.shutdown(timeout_millis=20_000)
"""


def calls(tag: str) -> int:
    """The LLM call attempts ``_AGENT`` sends for ``tag``."""
    n = TASKS[tag]
    return 2 * n + len(range(0, n, 3))


@dataclass(frozen=True)
class Projects:
    server: Server
    read: dict[str, str]  # tag -> read key
    ingest: dict[str, str]  # tag -> ingest key

    @staticmethod
    def project(tag: str) -> str:
        return f"{tag}-team"


def _sql(server: Server, key: str, sql: str) -> list[list[Any]]:
    r = httpx.post(f"{server.url}/api/sql", json={"sql": sql}, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    rows: list[list[Any]] = r.json()["rows"]
    return rows


@pytest.fixture(scope="session")
def two_projects(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Projects]:
    """The real server with keys in use: projects alpha-team and bravo-team, each with a read and an ingest key
    (made with `taskcost keys create` through the running server), each with its own data sent by ``_AGENT``."""
    tmp = tmp_path_factory.mktemp("two-projects")
    srv = serve_copy(None, tmp)
    try:
        made = [(tag, kind) for tag in TAGS for kind in ("ingest", "read")]
        with ThreadPoolExecutor(len(made)) as pool:  # `taskcost keys create`, through the running server
            secrets = list(
                pool.map(
                    lambda tk: run_cli("keys", "create", Projects.project(tk[0]), "--kind", tk[1], "--db", str(srv.db)),
                    made,
                )
            )
        keys = {tk: out.stdout.strip() for tk, out in zip(made, secrets, strict=True)}
        assert all(secret.startswith(f"tc_{kind}_") for (_, kind), secret in keys.items()), keys
        read = {tag: keys[(tag, "read")] for tag in TAGS}
        ingest = {tag: keys[(tag, "ingest")] for tag in TAGS}
        agents = [
            subprocess.Popen(
                [sys.executable, "-c", _AGENT, tag, str(TASKS[tag])],
                env={
                    **cli_env(),
                    "OTEL_EXPORTER_OTLP_ENDPOINT": srv.url,
                    "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{ingest[tag]}",
                    "TASKCOST_SDK_RAISE_INTERNAL": "1",
                },
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for tag in TAGS
        ]
        for agent in agents:
            _, err = agent.communicate(timeout=120)
            assert agent.returncode == 0, err
        deadline = time.monotonic() + 60
        for tag in TAGS:  # stored (each key sees its own project's), and queryable
            while _sql(srv, read[tag], "SELECT count(*) FROM llm_calls")[0][0] < calls(tag):
                assert time.monotonic() < deadline, f"{tag}'s calls were not all stored"
                time.sleep(0.2)
            assert _sql(srv, read[tag], "SELECT count(*) FROM tasks")[0][0] == TASKS[tag]
        yield Projects(srv, read, ingest)
    finally:
        stop_server(srv)


@contextmanager
def keyed_page(browser: Any, password: str | None, *, username: str = "taskcost") -> Iterator[Any]:
    """A page in a fresh browser context that answers the server's Basic challenge with ``password`` (Playwright's
    own credential handling: no header set by hand), watched as the ``page`` fixture's pages are (``page.watch``);
    the caller decides what the watch's errors mean."""
    creds = None if password is None else {"username": username, "password": password}
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, http_credentials=creds)
    try:
        pg = context.new_page()
        pg.watch = Watch()
        pg.watch.attach(pg)
        yield pg
    finally:
        context.close()


def nav_paths(page: Any) -> list[str]:
    """The pages the app lists in its navigation, as paths under /dash (``/``, ``/tasks``, ...)."""
    hrefs = [a.get_attribute("href") for a in page.locator("a[id^='nav-']").all()]
    paths = [h.removeprefix("/dash") or "/" for h in hrefs if h]
    assert paths and all(p.startswith("/") for p in paths), hrefs
    return paths


def menu_options(page: Any) -> dict[str, list[str]]:
    """Every select menu on the page opened in turn: its label (or id) -> the options it lists."""
    out: dict[str, list[str]] = {}
    menus = page.locator("input[aria-haspopup='listbox']:visible")
    for i in range(menus.count()):
        menu = menus.nth(i)
        label = menu.get_attribute("id") or str(i)
        labelled = page.locator(f"label[for='{label}']") if menu.get_attribute("id") else None
        if labelled is not None and labelled.count():
            label = labelled.first.inner_text()
        menu.click()
        options = page.locator("[role='listbox']:visible [role='option']")
        with suppress(PlaywrightError):  # an empty menu lists no option
            options.first.wait_for(state="attached", timeout=2_000)
        out[label] = [t.strip() for t in options.all_text_contents()]
        page.keyboard.press("Escape")
        page.locator("[role='listbox']:visible").first.wait_for(state="detached", timeout=2_000)
    return out


@dataclass
class Seen:
    """What one page showed: its text, its HTML, its menus' options, and what the server sent it."""

    path: str
    text: str
    html: str
    options: dict[str, list[str]]
    sent: list[str]

    def everything(self) -> str:
        return "\n".join([self.text, self.html, *(o for opts in self.options.values() for o in opts), *self.sent])


def look(page: Any, server: Server, path: str, *, menus: bool = True) -> Seen:
    """Open ``/dash<path>``, wait for every callback, open every menu; what the page showed and was sent."""
    responses: list[Any] = []

    def keep(response: Any) -> None:
        if any(part in response.url for part in _DASH_DATA):
            responses.append(response)

    page.on("response", keep)
    try:
        page.goto(f"{server.url}/dash{path}")
        settle(page)
        options = menu_options(page) if menus else {}
        settle(page)
        sent = [r.text() for r in responses]
    finally:
        page.remove_listener("response", keep)
    return Seen(path, page.locator("body").inner_text(), page.content(), options, sent)


def _where(seen: Seen, word: str) -> str:
    """Where ``word`` shows on a page, for the failure message."""
    parts = {"text": seen.text, "html": seen.html, **{f"menu {k}": "\n".join(v) for k, v in seen.options.items()}}
    parts |= {f"response {i}": s for i, s in enumerate(seen.sent)}
    found = []
    for name, body in parts.items():
        for m in re.finditer(word, body, re.I):
            found.append(f"{name}: ...{body[max(0, m.start() - 80) : m.end() + 80]}...")
            break
    return "\n".join(found)


def test_every_page_shows_only_the_callers_project(browser: Any, two_projects: Projects) -> None:
    server = two_projects.server
    with keyed_page(browser, two_projects.read["alpha"]) as page:
        page.goto(f"{server.url}/dash/")
        settle(page)
        seen = [look(page, server, p) for p in nav_paths(page)]
        assert not page.watch.errors, "\n".join(page.watch.errors)

    for s in seen:
        leak = _where(s, "bravo")
        assert not leak, f"{s.path} shows project bravo's data:\n{leak}"
        # the filter menus list the store's values: alpha's (so they are read, and a leak would show)
        menus = {k: s.options[label] for k, label in FILTER_DIMENSIONS if label in s.options and k in ALPHA_VALUES}
        assert menus or "tc-filter-bar" not in s.html, f"{s.path}: no filter menu read: {s.options}"
        for key, listed in menus.items():
            assert ALPHA_VALUES[key] in listed, f"{s.path}: the {key} menu lists {listed}"
    shown = "\n".join(s.text for s in seen)
    # where the pages show data, it is alpha's: its task kind, and its tasks by id (the Tasks page)
    assert "alpha_review" in shown, shown[:3000]
    assert any(f"alpha-task-{i}" in shown for i in range(TASKS["alpha"])), shown[:3000]


def test_the_sql_page_returns_the_callers_rows_only(browser: Any, two_projects: Projects) -> None:
    server = two_projects.server
    queries = {
        "SELECT task_id, kind, project FROM tasks ORDER BY task_id": [f"alpha-task-{i}" for i in range(TASKS["alpha"])],
        "SELECT DISTINCT model, engine_version, gpu_type, cluster_id FROM llm_calls": ["alpha-model", "alpha-1.0"],
        "SELECT 'tasks=' || count(*) AS n FROM tasks": [f"tasks={TASKS['alpha']}"],
        "SELECT 'calls=' || count(*) AS n FROM llm_calls": [f"calls={calls('alpha')}"],
        "SELECT DISTINCT service_name FROM spans": ["alpha-service"],
    }
    with keyed_page(browser, two_projects.read["alpha"]) as page:
        for sql, wanted in queries.items():
            s = look(page, server, "/sql?" + urlencode({"q": sql}), menus=False)
            body = s.text
            assert not re.search("bravo", s.everything(), re.I), f"{sql}: project bravo's rows:\n{_where(s, 'bravo')}"
            for w in wanted:
                assert re.search(rf"(?<![\w=-]){re.escape(w)}(?![\w.-])", body), f"{sql}: {w!r} not shown in\n{body}"
        assert not page.watch.errors, "\n".join(page.watch.errors)
