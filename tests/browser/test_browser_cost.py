"""The Cost page in a real browser: its figures are the analytics library's (asked over the same server's
``GET /api/analytics/<question>``) for the filters, grouping, bucket and ranking in the URL."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.browser.conftest import choose, control, number, open_page, settle, shot
from tests.conftest import Server

NONE_LABEL = "(no value)"


def api(server: Server, question: str, **params: str) -> dict[str, Any]:
    r = httpx.get(f"{server.url}/api/analytics/{question}", params=params, timeout=60)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def rows(answer: dict[str, Any], table: str) -> list[dict[str, Any]]:
    t = answer["tables"][table]
    return [dict(zip(t["columns"], r, strict=True)) for r in t["rows"]]


def figure(page: Any, graph_id: str) -> list[dict[str, Any]]:
    """The traces a Plotly graph drew (x, y, name)."""
    traces: list[dict[str, Any]] = page.evaluate(
        """id => Array.from(document.getElementById(id).querySelector('.js-plotly-plot').data,
               t => ({x: Array.from(t.x || []), y: Array.from(t.y || []), name: t.name || null}))""",
        graph_id,
    )
    return traces


def table_column(page: Any, table_id: str, col: int = 0) -> list[str]:
    cells = page.locator(f"#{table_id} tbody tr td:nth-child({col + 1})")
    return [c.strip() for c in cells.all_inner_texts()]


def headline(page: Any, stat_id: str) -> float:
    return number(page.locator(f"#{stat_id}").inner_text())


def in_url(page: Any, fragment: str, timeout_s: float = 30.0) -> None:
    """Wait until the address holds ``fragment`` (a busy browser may send the URL writer's request after
    ``settle`` saw the page quiet), then until the page rendered from it."""
    deadline = time.monotonic() + timeout_s
    while fragment not in page.url:
        assert time.monotonic() < deadline, f"{fragment!r} never reached the address: {page.url}"
        page.wait_for_timeout(100)
    settle(page)


def pick(page: Any, key: str, value: str) -> None:
    """Click ``value`` in the URL-kept segmented control ``key`` and wait for the page to render again."""
    control(page, key).get_by_text(value, exact=True).click()
    in_url(page, f"{key}={value}")


def select(page: Any, key: str, value: str) -> None:
    """Pick ``value`` in the URL-kept select ``key`` and wait for the page to render again."""
    choose(page, key, value)
    in_url(page, urlencode({key: value}))


def check_cost_figures(page: Any, server: Server, by: str, **filters: str) -> None:
    """The headline, the waste chart and the groups the page shows are the library's for these filters."""
    want = api(server, "cost", by=by, **filters)
    s = want["summary"]
    assert headline(page, "cost-per-completed") == pytest.approx(float(s["cost_per_completed_task_usd"]))
    assert headline(page, "cost-spend") == pytest.approx(float(s["spend_usd"]), abs=1e-6)
    assert headline(page, "cost-waste-total") == pytest.approx(float(s["waste_usd"]), abs=1e-6)
    assert headline(page, "cost-completed") == s["completed"]
    drawn = {t["name"]: t["x"][0] for t in figure(page, "cost-waste-kinds")}
    beside = {"tool_spend": "tool spend (not waste)", "gpu_idle": "idle GPU (not waste)"}
    for w in rows(want, "waste"):
        if w["kind"] != "total_waste" and w["amount_usd"] is not None:
            label = beside.get(w["kind"], w["kind"].replace("_", " "))
            assert drawn[label] == pytest.approx(float(w["amount_usd"])), label
    groups = [NONE_LABEL if g[by] is None else g[by] for g in rows(want, "groups")]
    assert table_column(page, "cost-groups-table") == groups


def test_cost_page_shows_the_librarys_figures(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cost")
    check_cost_figures(page, demo_server, "model")
    # per token vs per task: both rankings, and the flip, as the library ranks them
    want = api(demo_server, "per-token")
    ranked = [r for r in rows(want, "ranking") if r["per_token_rank"] is not None]
    assert ranked, "the demo's data ranks its models"
    slope = {t["name"].rsplit(" (", 1)[0]: t["y"] for t in figure(page, "cost-slope")}
    assert slope == {r["model"]: [r["per_token_rank"], r["per_task_rank"]] for r in ranked}
    bars = figure(page, "cost-per-task")[0]
    assert bars["y"] == [r["model"] for r in ranked]
    assert bars["x"] == pytest.approx([float(r["per_completed_task_usd"]) for r in ranked])
    assert table_column(page, "cost-ranking-table", 3) == [
        "—" if r["rank_change"] is None else str(r["rank_change"]) for r in rows(want, "ranking")
    ]
    flips = want["summary"]["flips"]
    if flips:
        assert page.locator("#cost-flips li").count() == len(flips)
    # over time: a demo run is minutes long, so the page picks minutes; each one's cost per completed task is the
    # library's
    assert control(page, "bucket").locator("input:checked").get_attribute("value") == "minute"
    per_minute = rows(api(demo_server, "cost", bucket="minute"), "groups")  # one or a few: the run is short
    line = next(t for t in figure(page, "cost-time-cost") if t["name"] == "cost per completed task")
    assert line["y"] == pytest.approx([float(r["cost_per_completed_task_usd"]) for r in per_minute])
    assert "unranked because" in page.locator("#cost-ranking-table thead").inner_text()  # why a row is not ranked
    shot(page, "cost")  # every table fits its card


def test_a_filter_changes_the_figures_to_the_librarys(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cost")
    before = page.locator("#cost-per-completed").inner_text()
    ranked = [r for r in rows(api(demo_server, "per-token"), "ranking") if r["per_token_rank"] is not None]
    model = max(ranked, key=lambda r: r["completed_tasks"])["model"]
    select(page, "model", model)
    assert f"model={model}" in page.url
    assert page.locator("#cost-per-completed").inner_text() != before
    check_cost_figures(page, demo_server, "model", model=model)
    # the per-token ranking is the filtered one too: one model left
    assert table_column(page, "cost-ranking-table") == [
        r["model"] for r in rows(api(demo_server, "per-token", model=model), "ranking")
    ]
    # another filter on top narrows it further, to what the library gives for both
    combined = {"model": model, "engine_version": "0.7.0"}
    select(page, "engine_version", "0.7.0")
    assert "engine_version=0.7.0" in page.url
    if api(demo_server, "cost", **combined)["summary"]["tasks"]:
        check_cost_figures(page, demo_server, "model", **combined)
    else:  # an API model on a self-hosted engine version: nothing, said so
        assert page.locator(".tc-empty").count() == 1
        assert page.locator("#cost-per-completed").count() == 0


def test_an_engine_version_filter(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cost")
    before = page.locator("#cost-per-completed").inner_text()
    select(page, "engine_version", "0.7.0")
    assert page.locator("#cost-per-completed").inner_text() != before
    check_cost_figures(page, demo_server, "model", engine_version="0.7.0")
    open_page(page, demo_server, "/cost?engine_version=0.6.0")
    check_cost_figures(page, demo_server, "model", engine_version="0.6.0")


def test_by_bucket_and_rank_by_are_kept_in_the_url(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cost")
    select(page, "by", "kind")
    assert "by=kind" in page.url
    check_cost_figures(page, demo_server, "kind")
    kinds = [g["kind"] for g in rows(api(demo_server, "cost", by="kind"), "groups")]
    assert figure(page, "cost-by-group")[0]["y"] == [NONE_LABEL if k is None else k for k in kinds]

    pick(page, "bucket", "hour")
    assert "bucket=hour" in page.url
    per_hour = rows(api(demo_server, "cost", bucket="hour"), "groups")
    line = next(t for t in figure(page, "cost-time-cost") if t["name"] == "cost per completed task")
    assert line["y"] == pytest.approx([float(r["cost_per_completed_task_usd"]) for r in per_hour])

    pick(page, "rank_by", "provider")
    assert "rank_by=provider" in page.url
    want = rows(api(demo_server, "per-token", by="provider"), "ranking")
    assert table_column(page, "cost-ranking-table") == [
        NONE_LABEL if r["provider"] is None else r["provider"] for r in want
    ]

    page.reload()
    settle(page)
    assert table_column(page, "cost-groups-table") == [NONE_LABEL if k is None else k for k in kinds]
    assert "provider" in page.locator("#cost-ranking-table thead").inner_text()


def test_a_bad_value_in_the_address_is_a_message(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/cost?by=colour&bucket=fortnight")
    assert page.locator(".tc-error").count() >= 1
    said = page.locator("#cost-headline").inner_text()
    assert "colour" in said and "fortnight" in said  # both bad values, at once


def test_the_cost_page_on_an_empty_store(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/cost")
    assert page.locator(".tc-empty").count() == 1
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.locator(".tc-error").count() == 0
    shot(page, "cost-empty")
