"""The SQL page in a real browser: a query typed and run shows what /api/sql answers, lands in the URL, downloads as
the same CSV, charts; a write or a syntax error shows the store's message; an empty store says so."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from tests.browser.conftest import open_page, settle, shot
from tests.conftest import Server

TASKS_BY_KIND = "SELECT kind, count(*) AS n FROM tasks GROUP BY kind ORDER BY kind"


def api_sql(server: Server, sql: str) -> httpx.Response:
    return httpx.post(f"{server.url}/api/sql", json={"sql": sql}, timeout=30)


def table_rows(page: Any) -> list[list[str]]:
    rows: list[list[str]] = page.evaluate(
        """() => [...document.querySelectorAll('#sql-table tbody tr')]
                 .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))"""
    )
    return rows


def table_columns(page: Any) -> list[str]:
    # each header shows the column's name, and its type under it
    return [th.inner_text().split("\n")[0].strip() for th in page.locator("#sql-table thead th").all()]


def as_shown(v: Any) -> str:
    return "NULL" if v is None else str(v)


def run(page: Any, sql: str, *, keys: bool = False) -> None:
    page.locator("#sql-editor").fill(sql)
    if keys:
        page.locator("#sql-editor").press("Control+Enter")
    else:
        page.locator("#sql-run").click()
    settle(page)


def _drawn(page: Any, kind: str) -> dict[str, Any]:
    """The quick chart's first trace once plotly.js has drawn one of ``kind``: it draws after Dash's answer (and loads
    its bundle on first use), so a settled page may not show it yet on a busy machine. Times out otherwise."""
    page.wait_for_function(
        """kind => {
            const plot = document.querySelector('#sql-graph .js-plotly-plot');
            return !!(plot && plot.data && plot.data.length && plot.data[0].type === kind);
        }""",
        arg=kind,
        timeout=30_000,
    )
    trace: dict[str, Any] = page.evaluate("() => document.querySelector('#sql-graph .js-plotly-plot').data[0]")
    return trace


def test_a_query_run_shows_what_the_api_answers_and_lands_in_the_url(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/sql")
    run(page, TASKS_BY_KIND)
    api = api_sql(demo_server, TASKS_BY_KIND).json()
    assert api["rows"], "the demo has tasks"
    assert table_columns(page) == api["columns"] == ["kind", "n"]
    assert table_rows(page) == [[as_shown(v) for v in r] for r in api["rows"]]
    assert page.locator("#sql-row-count").inner_text().startswith(f"{len(api['rows'])} rows in ")
    assert "q=SELECT+kind" in page.url

    # the quick chart: a bar per kind, its heights the counts
    fig = _drawn(page, "bar")
    assert fig["x"] == [r[0] for r in api["rows"]] and fig["y"] == [r[1] for r in api["rows"]]
    shot(page, "sql", wide_tables=True)
    page.locator("#sql-chart-kind").get_by_text("line").click()
    settle(page)
    fig = _drawn(page, "scatter")
    assert fig["y"] == [r[1] for r in api["rows"]]

    # the URL alone brings it back (a shared link)
    page.goto(page.url)
    settle(page)
    assert page.locator("#sql-editor").input_value() == TASKS_BY_KIND
    assert table_rows(page) == [[as_shown(v) for v in r] for r in api["rows"]]


def test_ctrl_enter_runs_the_query_and_running_it_again_reads_again(page: Any, demo_server: Server) -> None:
    sql = "SELECT outcome, count(*) AS tasks, sum(cost_usd) AS cost_usd FROM tasks GROUP BY outcome ORDER BY outcome"
    open_page(page, demo_server, "/sql")
    run(page, sql, keys=True)
    api = api_sql(demo_server, sql).json()
    assert table_rows(page) == [[as_shown(v) for v in r] for r in api["rows"]]  # money as exact decimal text
    assert "\n" not in page.locator("#sql-editor").input_value()  # Ctrl+Enter ran it, it typed no new line
    page.locator("#sql-run").click()  # the same query again: it runs again (the URL does not change)
    settle(page)
    assert table_rows(page) == [[as_shown(v) for v in r] for r in api["rows"]]


def test_the_csv_download_holds_the_whole_answer(page: Any, demo_server: Server, tmp_path: Path) -> None:
    sql = "SELECT task_id, kind, outcome, cost_usd, llm_calls FROM tasks ORDER BY task_id"
    open_page(page, demo_server, f"/sql?q={quote(sql)}")
    api = api_sql(demo_server, sql).json()
    assert len(table_rows(page)) == len(api["rows"]) > 0
    with page.expect_download() as info:
        page.locator("#sql-csv").click()
    download = info.value
    assert download.suggested_filename == "taskcost-query.csv"
    path = tmp_path / "answer.csv"
    download.save_as(path)
    with path.open(newline="") as fh:
        got = list(csv.reader(fh))
    assert got[0] == api["columns"]
    assert got[1:] == [["" if v is None else str(v) for v in r] for r in api["rows"]]
    settle(page)


def test_a_long_answer_says_it_was_cut(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, f"/sql?q={quote('SELECT range AS i, range * 2 AS twice FROM range(5000)')}")
    rows = table_rows(page)
    assert rows[0] == ["0", "0"] and rows[-1] == ["999", "1998"] and len(rows) == 1000
    assert page.locator("#sql-row-count").inner_text().startswith("first 1,000 rows: the answer has more")


def test_a_refused_query_shows_the_stores_message(page: Any, demo_server: Server) -> None:
    before = api_sql(demo_server, "SELECT count(*) FROM tasks").json()["rows"]
    open_page(page, demo_server, "/sql")
    for sql in ("DELETE FROM tasks", "SELEC kind FROM tasks", "SELECT * FROM api_keys"):  # a write, a typo, internal
        refused = api_sql(demo_server, sql)
        assert refused.status_code == 400
        run(page, sql)
        assert refused.json()["message"] in page.locator("#sql-error").inner_text(), sql
        assert page.locator("#sql-table").count() == 0
        if sql.startswith("DELETE"):
            shot(page, "sql-refused", wide_tables=True)
    assert api_sql(demo_server, "SELECT count(*) FROM tasks").json()["rows"] == before


def test_the_schema_lists_every_column_the_views_have(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/sql")
    for view in ("llm_calls", "tool_calls", "tasks", "spans"):
        columns = api_sql(demo_server, f"SELECT * FROM {view} LIMIT 0").json()["columns"]
        items = page.locator("#sql-schema-list .mantine-Accordion-item")
        item = items.filter(has=page.get_by_text(view, exact=True)).first  # (not engine_spans for spans)
        assert str(len(columns)) in item.locator(".mantine-Badge-root").inner_text()
        item.locator(".mantine-Accordion-control").click()
        page.wait_for_timeout(300)
        shown = [c.inner_text() for c in item.locator("code").all()]
        assert shown == columns


def test_on_an_empty_store_the_console_says_so_and_still_answers(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/sql")
    assert "No spans stored yet" in page.locator(".tc-empty").inner_text()
    run(page, "SELECT count(*) AS n FROM spans")
    assert table_rows(page) == [["0"]]
