"""The Overview page in a real browser: its figures are the analytics library's (asked over the server's own HTTP API
with the same filters), a filter moves them to the library's figures for that filter, "what moved" is the ``changes``
question's comparison, and demo data is marked in the header."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx
import pytest

from taskcost.analytics import format_usd
from tests.browser.conftest import choose, open_page, settle, shot
from tests.conftest import Server


def _ask(server: Server, question: str, **params: str) -> dict[str, Any]:
    r = httpx.get(f"{server.url}/api/analytics/{question}", params=params, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _sql(server: Server, sql: str) -> list[list[Any]]:
    r = httpx.post(f"{server.url}/api/sql", json={"sql": sql}, timeout=60)
    assert r.status_code == 200, r.text
    rows: list[list[Any]] = r.json()["rows"]
    return rows


def _usd(v: Any) -> str:
    return format_usd(None if v is None else Decimal(str(v)), none="unpriced")


def _pct(v: float) -> str:
    return f"{v * 100:.1f}%"


def _headline(page: Any) -> dict[str, str]:
    """The cards' big figures as shown."""

    def text(sel: str) -> str:
        return str(page.locator(sel).first.inner_text()).strip()

    return {
        "cpct": text("#overview-cpct-card .tc-money"),
        "spend": text("#overview-spend-card .tc-money"),
        "completed": text("#overview-completed-card .tc-figure"),
        "success": text("#overview-success-card .tc-figure"),
        "waste": text("#overview-waste-card .tc-money"),
        "priced": text("#overview-coverage-card .tc-figure"),
        "cache": text("#overview-cache-card .tc-figure"),
    }


def _expected(server: Server, **filters: str) -> dict[str, str]:
    """What the library answers for ``filters``: the same figures, formatted as the page formats them."""
    s = _ask(server, "cost", **filters)["summary"]
    c = _ask(server, "cache", **filters)["summary"]
    return {
        "cpct": _usd(s["cost_per_completed_task_usd"]),
        "spend": _usd(s["spend_usd"]),
        "completed": f"{s['completed']:,}",
        "success": _pct(s["success_rate"]),
        "waste": _usd(s["waste_usd"]),
        "priced": _pct(s["priced_share"]),
        "cache": _pct(c["hit_rate"]),
    }


def test_the_headline_is_the_librarys_answer_and_demo_data_is_marked(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/")
    shown = _headline(page)
    assert shown == _expected(demo_server)
    [[tasks, completed]] = _sql(
        demo_server, "SELECT count(*), count(*) FILTER (WHERE outcome = 'completed') FROM tasks"
    )
    assert shown["completed"] == f"{completed:,}" and completed > 0
    assert f"of {tasks:,} finished" in page.locator("#overview-completed-card").inner_text()
    # every money figure says its coverage beside it
    for card in ("cpct", "spend", "waste"):
        assert page.locator(f"#overview-{card}-card .tc-coverage").inner_text().strip()
    assert page.locator("#tc-demo-badge").inner_text().strip() == "DEMO DATA"
    waste = page.locator("#overview-waste-chart")
    assert waste.locator(".bars .point").count() == 5  # the five disjoint parts of waste
    shot(page, "overview", readme=True)


def test_a_filter_moves_the_headline_to_the_librarys_figures_for_it(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/")
    before = _headline(page)
    kind = choose(page, "kind", "report")
    assert "kind=report" in page.url
    after = _headline(page)
    assert after == _expected(demo_server, kind=kind)
    assert after["cpct"] != before["cpct"] and after["completed"] != before["completed"]
    page.reload()
    settle(page)
    assert _headline(page) == after


@pytest.mark.parametrize("key", ["model", "engine", "engine_version", "gpu_type", "cluster"])
def test_each_filter_moves_the_headline_to_the_librarys_figures(page: Any, demo_server: Server, key: str) -> None:
    """Every menu of the filter bar: its first value narrows the cards to what the library answers for it."""
    open_page(page, demo_server, "/")
    before = _headline(page)
    value = choose(page, key)
    assert urlencode({key: value}) in page.url
    after = _headline(page)
    assert after == _expected(demo_server, **{key: value})
    assert after != before  # the demo's values each cover part of its traffic


def test_what_moved_is_the_changes_questions_comparison(page: Any, demo_server: Server) -> None:
    [[first, last]] = _sql(demo_server, "SELECT min(start_time), max(start_time) FROM tasks")
    [[last_call]] = _sql(demo_server, "SELECT max(start_time) FROM llm_calls")
    t0, t1 = datetime.fromisoformat(first), datetime.fromisoformat(last)
    since = (t0 + (t1 - t0) / 2).replace(microsecond=0)
    until = datetime.fromisoformat(last_call).replace(microsecond=0) + timedelta(seconds=1)
    window = {"since": since.isoformat(), "until": until.isoformat()}
    open_page(page, demo_server, f"/?since={window['since']}&until={window['until']}")
    assert {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()} == window  # kept in the address
    s = _ask(demo_server, "changes", **window)["summary"]
    assert s["mode"] == "comparison"
    rows = page.locator("#overview-moved-table tbody tr")
    cost = rows.nth(0).locator("td")
    for i, w in ((1, "baseline"), (2, "current")):
        want = _usd(s[f"{w}_cost_per_completed_task_usd"]) if s[f"{w}_completed_tasks"] else "—"
        assert cost.nth(i).locator(".tc-money").inner_text() == want
    done = rows.nth(1).locator("td")
    assert [done.nth(1).inner_text(), done.nth(2).inner_text()] == [
        f"{s['baseline_completed_tasks']:,}",
        f"{s['current_completed_tasks']:,}",
    ]
    calls = rows.nth(3).locator("td")
    assert [calls.nth(1).inner_text(), calls.nth(2).inner_text()] == [
        f"{s['baseline_calls']:,}",
        f"{s['current_calls']:,}",
    ]
    windows = page.locator("#overview-moved-windows").inner_text()
    assert windows.startswith(f"{since:%Y-%m-%d %H:%M:%S} – {until:%Y-%m-%d %H:%M:%S} against")
    if s["top_change"]:
        assert s["top_change"] in page.locator("#overview-top-change").inner_text()
    # the headline is the current window's alone: the cost question over it
    assert _headline(page)["completed"] == f"{_ask(demo_server, 'cost', **window)['summary']['completed']:,}"
    # a filter picked on top keeps the window in the address (and the figures follow both)
    kind = choose(page, "kind", "report")
    assert {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()} == {**window, "kind": kind}
    assert _headline(page) == _expected(demo_server, **window, kind=kind)


def test_an_empty_store_shows_how_to_get_data_and_no_demo_badge(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/")
    assert page.locator(".tc-empty").count() == 1
    assert page.locator("#overview-cpct-card").count() == 0
    assert page.locator("#overview-moved").count() == 0
    assert page.locator("#tc-demo-badge").inner_text().strip() == ""
    assert page.locator(".tc-error").count() == 0
