"""The Tasks page in a real browser: the list counts, sorts, searches and filters as the store does (checked with SQL
over the same database through the server's /api/sql), and a task's drill-down shows its call attempts and tool calls,
their timeline, and how a call's cost was computed."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

from dashboards.pages.tasks import SHOWN  # the list's page size
from taskcost.analytics import format_usd
from tests.browser.conftest import choose, control, number, open_page, settle, shot
from tests.conftest import Server

SEARCHED = ("task_id", "kind", "outcome", "model", "engine")


def _sql(server: Server, sql: str, params: list[Any] | None = None) -> list[list[Any]]:
    r = httpx.post(f"{server.url}/api/sql", json={"sql": sql, "params": params or []}, timeout=60)
    assert r.status_code == 200, r.text
    rows: list[list[Any]] = r.json()["rows"]
    return rows


def _one(server: Server, sql: str, params: list[Any] | None = None) -> Any:
    [[value]] = _sql(server, sql, params)
    return value


def _query(page: Any) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def _shown(page: Any) -> list[str]:
    return [t.strip() for t in page.locator(".tc-task-link").all_inner_texts()]


def _says_count(page: Any, total: int) -> None:
    """The list says how many tasks match: all of them when they fit on the page, else that more do."""
    text = page.locator("#tasks-count").inner_text()
    if total > SHOWN:
        assert text.startswith(f"More than {SHOWN} tasks match") and f"the first {SHOWN}" in text
    else:
        assert number(text) == total
    assert page.locator(".tc-task-row").count() == min(total, SHOWN)


def _matching(search: str) -> str:
    return "(" + " OR ".join(f"strpos(lower(coalesce({c}, '')), '{search}') > 0" for c in SEARCHED) + ")"


def test_the_list_counts_and_sorts_as_the_store_does(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/tasks?sort=-cost")
    _says_count(page, _one(demo_server, "SELECT count(*) FROM tasks"))
    by_cost = [r[0] for r in _sql(demo_server, "SELECT task_id FROM tasks ORDER BY cost_usd DESC NULLS LAST, task_id")]
    assert _shown(page) == by_cost[:SHOWN]
    top = _one(demo_server, "SELECT cost_usd FROM tasks ORDER BY cost_usd DESC NULLS LAST LIMIT 1")
    first = page.locator(".tc-task-row").first
    assert first.locator(".tc-money").inner_text() == format_usd(Decimal(str(top)))
    shot(page, "tasks")
    # a column header sorts by it on the server (and says so in the URL)
    page.locator("#tasks-sort-duration").click()
    settle(page)
    assert _query(page)["sort"] == "-duration"
    by_duration = [
        r[0] for r in _sql(demo_server, "SELECT task_id FROM tasks ORDER BY duration_s DESC NULLS LAST, task_id")
    ]
    assert _shown(page) == by_duration[:SHOWN]
    page.locator("#tasks-sort-duration").click()  # again: the other way
    settle(page)
    assert _query(page)["sort"] == "duration"
    shortest = _one(demo_server, "SELECT task_id FROM tasks ORDER BY duration_s ASC NULLS LAST, task_id LIMIT 1")
    assert _shown(page)[0] == shortest


def test_a_filter_and_a_search_narrow_the_list_as_sql_does(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/tasks")
    kind = choose(page, "kind", "report")
    reports = _sql(demo_server, "SELECT task_id FROM tasks WHERE kind = ? ORDER BY start_time DESC, task_id", [kind])
    assert reports
    _says_count(page, len(reports))
    assert _shown(page) == [r[0] for r in reports][:SHOWN]
    # the rarest outcome among them (the demo fails a few), searched in upper case
    outcome = _one(
        demo_server,
        "SELECT outcome FROM tasks WHERE kind = ? AND outcome IS NOT NULL GROUP BY 1 ORDER BY count(*), 1 LIMIT 1",
        [kind],
    )
    control(page, "q").fill(outcome.upper())
    control(page, "q").press("Enter")
    settle(page)
    assert _query(page) == {"kind": kind, "q": outcome.upper(), "sort": "-start"}
    found = _sql(demo_server, f"SELECT task_id FROM tasks WHERE kind = ? AND {_matching(outcome)}", [kind])
    assert 0 < len(found) <= SHOWN
    _says_count(page, len(found))
    assert sorted(_shown(page)) == sorted(r[0] for r in found)
    page.reload()
    settle(page)
    assert sorted(_shown(page)) == sorted(r[0] for r in found)


def test_the_drilldown_shows_every_call_and_explains_a_cost(page: Any, demo_server: Server) -> None:
    # a completed task with retries and the most call attempts and tool calls: its timeline has the most to show
    task, attempts, tools, cost = _sql(
        demo_server,
        "SELECT task_id, attempts, tool_calls, cost_usd FROM tasks "
        "ORDER BY retries > 0 AND outcome = 'completed' DESC, attempts + tool_calls DESC, task_id LIMIT 1",
    )[0]
    open_page(page, demo_server, f"/tasks?q={task}&sort=-cost")  # found by its id
    page.locator(".tc-task-link", has_text=task).click()
    settle(page)
    assert _query(page) == {"q": task, "sort": "-cost", "task": task}
    assert page.locator("#tasks-detail-id").inner_text() == task
    calls = _one(demo_server, "SELECT count(*) FROM llm_calls WHERE task_id = ?", [task])
    assert calls == attempts > 1
    assert page.locator(".tc-call-row").count() == calls
    assert page.locator("#tasks-tools tbody tr").count() == tools
    assert page.locator("#tasks-detail-cost .tc-money").inner_text() == format_usd(Decimal(str(cost)))
    # the timeline: one bar for the task, one per call attempt, one per tool call
    assert page.locator("#tasks-timeline .bars .point").count() == 1 + calls + tools
    # the fingerprint: the task's calls by model (the changes question's task mode)
    models = _sql(demo_server, "SELECT model, count(*) FROM llm_calls WHERE task_id = ? GROUP BY 1", [task])
    fingerprint = page.locator("#tasks-fingerprint-table tbody tr", has_text="model")
    assert sorted(r.locator("td").nth(1).inner_text() for r in fingerprint.all()) == sorted(m for m, _ in models)
    # explain the second attempt's cost: the library's explanation of that span, with the stored cost
    span, span_cost = _sql(
        demo_server,
        "SELECT span_id, cost_usd FROM llm_calls WHERE task_id = ? ORDER BY start_time, span_id LIMIT 1 OFFSET 1",
        [task],
    )[0]
    page.locator(".tc-explain-link").nth(1).click()
    settle(page)
    assert _query(page)["call"] == span
    text = page.locator("#tasks-explain").inner_text()
    assert text.startswith(f"call {span} ")
    if span_cost is None:
        assert "unpriced:" in text
    else:
        assert f"total (cost_usd) {format_usd(Decimal(str(span_cost)), places=12)}" in text
    shot(page, "task-drilldown")
    page.locator("#tasks-back").click()
    settle(page)
    assert _query(page) == {"q": task, "sort": "-cost"}
    assert _shown(page) == [task]


def test_an_unknown_task_says_so(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/tasks?task=no-such-task")
    assert "no task 'no-such-task'" in page.locator(".tc-error").inner_text()
    assert page.locator("#tc-demo-badge").inner_text().strip() == "DEMO DATA"  # marked on every page


def test_an_empty_store_shows_how_to_get_data(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/tasks")
    assert page.locator(".tc-empty").count() == 1
    assert page.locator(".tc-task-row").count() == 0
    open_page(page, empty_server, "/tasks?task=anything")
    assert page.locator(".tc-error").count() == 1
