"""The dashboards are mounted in the same process and their callbacks answer from analytics: the Overview's headline,
the Tasks list and a task's drill-down, the DEMO DATA badge, asked the way the browser asks them (the browser tests
in tests/browser/ drive the real pages)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dashboards.pages.overview import CARDS
from taskcost.app import create_app
from taskcost.normalize import normalize_request
from taskcost.settings import Settings
from taskcost.store import DuckDBStore, prepare_batch
from tests.builders.analytics import Fleet
from tests.otlp_samples import sample_request

# one completed task (task-1, code_review): 2 gpt-4o attempts ($0.0026 + $0.00475) and a $0.005 tool call
TASK_COST = "$0.012350"


@pytest.fixture
def dash_client(settings: Settings, store: DuckDBStore) -> Iterator[TestClient]:
    store.write(prepare_batch(normalize_request(sample_request()), time.time_ns()))
    with TestClient(create_app(settings, store)) as c:
        yield c


def _update(client: TestClient, outputs: list[tuple[str, str]], inputs: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """One callback, as the browser asks it: its outputs and its inputs' values; the response's outputs by id."""
    ids = [{"id": i, "property": p} for i, p in outputs]
    multi = len(outputs) > 1
    payload = {
        "output": "...".join(f"{i}.{p}" for i, p in outputs).join(("..", "..")) if multi else ".".join(outputs[0]),
        "outputs": ids if multi else ids[0],
        "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs],
        "changedPropIds": [f"{i}.{p}" for i, p, _ in inputs],
    }
    r = client.post("/dash/_dash-update-component", json=payload)
    assert r.status_code in (200, 204), r.text
    return r.json()["response"] if r.status_code == 200 else {}


def _text(component: Any) -> str:
    """The text a component tree shows (its children's strings, depth first)."""
    if component is None:
        return ""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list):
        return " ".join(_text(c) for c in component)
    props = component.get("props", {}) if isinstance(component, dict) else {}
    return _text(props.get("children"))


def test_dash_is_served_under_its_prefix(dash_client: TestClient) -> None:
    r = dash_client.get("/dash/")
    assert r.status_code == 200
    assert '"requests_pathname_prefix":"\\u002fdash\\u002f"' in r.text  # Dash escapes the slashes
    layout = dash_client.get("/dash/_dash-layout")
    assert layout.status_code == 200 and '"Overview"' in layout.text


def test_the_dashboards_are_built_by_the_first_request_that_reaches_them(dash_client: TestClient) -> None:
    """Not at start: a server whose dashboards nobody opens never builds them. The first request to reach them (here a
    callback, before any page) builds them once, and answers."""
    dashboards = dash_client.app.state.dashboards  # type: ignore[attr-defined]
    assert dash_client.get("/healthz").status_code == 200
    assert dashboards.app is None
    badge = _update(dash_client, [("tc-demo-badge", "children")], [("_pages_location", "pathname", "/dash/")])
    built = dashboards.app
    assert built is not None and badge == {"tc-demo-badge": {"children": None}}  # real data: no DEMO badge
    assert dash_client.get("/dash/").status_code == 200 and dashboards.app is built


def test_a_build_that_fails_fails_its_request_and_the_next_one_tries_again() -> None:
    from taskcost.app import _BuiltOnFirstUse

    calls: list[int] = []

    async def hello(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"built"})

    def build() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first build fails")
        return hello

    from starlette.applications import Starlette

    outer = Starlette()
    outer.mount("/x", _BuiltOnFirstUse(build))  # type: ignore[arg-type]
    with TestClient(outer, raise_server_exceptions=False) as c:
        assert c.get("/x/").status_code == 500
        assert c.get("/x/").text == "built"
        assert c.get("/x/").text == "built"
    assert len(calls) == 2


COST_CARDS = [c for c in CARDS if c != "cache"]
HEADLINE = [
    ("overview-message", "children"),
    *[(f"overview-{c}", "children") for c in COST_CARDS],
    ("overview-trends", "children"),
    ("overview-waste-box", "children"),
]
"""The Overview's first callback: a message (empty state, error), the cards the ``cost`` question fills, a note on
the trends, the waste."""


def test_overview_headline_reports_the_task(dash_client: TestClient) -> None:
    out = _update(dash_client, HEADLINE, [("overview-query", "data", {})])
    assert out["overview-message"]["children"] is None  # no empty state, no error
    text = {c: _text(out[f"overview-{c}"]["children"]) for c in COST_CARDS}
    assert TASK_COST in text["cpct"] and "all 2 call attempts priced" in text["cpct"]
    assert TASK_COST in text["spend"]
    assert text["completed"].startswith("Completed tasks 1 of 1 finished")
    assert "100.0%" in text["success"] and "100.0%" in text["coverage"]
    # the failed attempt ($0.0026) bought nothing
    assert "$0.002600" in text["waste"]
    assert _text(out["overview-trends"]["children"]).startswith("No trends yet")  # one task: one hour


@pytest.fixture
def fleet_client(settings: Settings, store: DuckDBStore) -> Iterator[TestClient]:
    """Tasks in three hours (minute 0, 70, 130 after T0): cheap-1 calls of 1,000, 2,000 and 4,000 input tokens
    ($0.0012, $0.0022, $0.0042 with 100 output tokens each); the second hour also has a failed task ($0.0012)."""
    f = Fleet()
    for i, (minute, tokens) in enumerate(((0, 1000), (70, 2000), (130, 4000))):
        f.task(f"t{i}", minute=minute).call("cheap-1", input_tokens=tokens, output_tokens=100)
    f.task("x", minute=75, outcome="failed").call("cheap-1", output_tokens=100)
    f.write(store)
    with TestClient(create_app(settings, store)) as c:
        yield c


def test_overview_trends_are_the_cost_questions_buckets(fleet_client: TestClient) -> None:
    out = _update(fleet_client, HEADLINE, [("overview-query", "data", {})])

    def trend(card: str) -> list[Any]:
        graph = next(c for c in out[f"overview-{card}"]["children"]["props"]["children"] if isinstance(c, dict) and
                     c.get("props", {}).get("id") == f"overview-{card}-trend")  # fmt: skip
        [line] = graph["props"]["figure"]["data"]
        return list(line["y"])

    # per hour: cost per completed task $0.0012; ($0.0022 + $0.0012) / 1; $0.0042
    assert trend("cpct") == pytest.approx([0.0012, 0.0034, 0.0042])
    assert trend("spend") == pytest.approx([0.0012, 0.0034, 0.0042])
    assert trend("success") == pytest.approx([1.0, 0.5, 1.0])
    assert trend("completed") == [1, 1, 1]
    assert _text(out["overview-trends"]["children"]) == "Trends: per hour (UTC) of the tasks' start."


def test_overview_on_a_filter_that_selects_nothing_shows_the_empty_state(dash_client: TestClient) -> None:
    out = _update(dash_client, HEADLINE, [("overview-query", "data", {"kind": "nothing-like-it"})])
    assert "tc-empty" in json.dumps(out["overview-message"])
    assert all(out[f"overview-{c}"]["children"] is None for c in COST_CARDS)


def test_overview_bad_filter_is_a_message_not_a_traceback(dash_client: TestClient) -> None:
    out = _update(dash_client, [("overview-cache", "children")], [("overview-query", "data", {"since": "not a date"})])
    assert "tc-error" in json.dumps(out) and "bad filter" in json.dumps(out)


@pytest.mark.parametrize(
    "query, message",
    [
        ({"since": "0001-01-01T00:00:00+01:00"}, "since 0001-01-01T00:00:00+01:00 is out of range"),
        ({"until": "9999-12-31T23:30:00"}, "until 9999-12-31T23:30:00 is out of range"),
        ({"since": "2026-11-02T10:00:00", "until": "2026-11-02T09:00:00"}, "must be before until"),
    ],
)
def test_a_time_out_of_range_or_reversed_in_the_address_is_a_message(
    dash_client: TestClient, query: dict[str, str], message: str
) -> None:
    out = _update(dash_client, HEADLINE, [("overview-query", "data", query)])
    text = json.dumps(out["overview-message"])
    assert "tc-error" in text and message in text, text
    if "out of range" in message:
        assert "1678-01-01" in text and "2262-01-01" in text
    cost = [("cost-headline", "children"), ("cost-waste", "children"), ("cost-groups", "children"),
            ("cost-time", "children")]  # fmt: skip
    out = _update(dash_client, cost, [("cost-query", "data", query)])
    assert "tc-error" in json.dumps(out["cost-headline"]) and message in json.dumps(out["cost-headline"])


def test_tasks_list_and_drilldown(dash_client: TestClient) -> None:
    out = _update(dash_client, [("tasks-body", "children")], [("tasks-query", "data", {"sort": "-cost"})])
    text = _text(out["tasks-body"]["children"])
    assert "1 tasks match" in text and "task-1" in text and TASK_COST in text
    out = _update(dash_client, [("tasks-detail", "children")], [("tasks-query", "data", {"task": "task-1"})])
    tree = json.dumps(out["tasks-detail"])
    assert tree.count('"tc-call-row"') == 2  # the failed attempt and its retry
    assert "tasks-timeline" in tree and TASK_COST in tree
    out = _update(dash_client, [("tasks-detail", "children")], [("tasks-query", "data", {"task": "nope"})])
    assert "no task 'nope'" in json.dumps(out)


def test_the_demo_badge_is_off_for_real_data(dash_client: TestClient) -> None:
    out = _update(dash_client, [("tc-demo-badge", "children")], [("_pages_location", "pathname", "/dash/")])
    assert out["tc-demo-badge"]["children"] is None


def test_trends_bucket_by_the_selections_length() -> None:
    """A demo run (minutes of data) gets per-minute trends; longer selections hours, days, weeks; a time range
    picks the bucket that suits it."""
    from datetime import timedelta

    from dashboards._charts import bucket_of
    from dashboards.pages.overview import bucket_for

    assert [bucket_for(timedelta(minutes=m)) for m in (0, 5, 120)] == ["minute"] * 3
    assert [bucket_for(timedelta(hours=h)) for h in (3, 72)] == ["hour"] * 2
    assert (bucket_for(timedelta(days=4)), bucket_for(timedelta(days=121))) == ("day", "week")
    assert [bucket_of({"range": r}) for r in ("15m", "1h", "24h", "7d")] == ["minute", "minute", "hour", "day"]
    assert bucket_of({"range": "7d", "bucket": "minute"}) == "minute"  # the URL's bucket wins


def test_a_bucket_without_a_figure_and_a_value_not_set_are_shown_as_such() -> None:
    # while traffic flows, a bucket may have no completed task yet (no attempts per completed task) and a changed
    # field may be unset on some calls: the pages broke ("unsupported format string passed to NoneType") or said None
    from dashboards._moved import changes_table
    from dashboards.pages.overview import _trend

    groups = {
        "columns": ["bucket", "attempts_per_completed_task"],
        "rows": [["2026-12-05T10:00", 1.5], ["2026-12-05T11:00", None]],
    }
    line = _trend(groups, "hour", "attempts_per_completed_task", lambda v: f"{v:.2f}", id="t")
    assert line.figure["data"][0]["customdata"] == ["1.50"]  # the bucket with no figure is no point (was a TypeError)
    cols = ["field", "value", "status", "share_baseline", "share_current", "cost_change", "p95_change"]
    table = changes_table({"columns": cols, "rows": [["engine_version", None, "new", 0.0, 0.2, None, None]]})
    assert "(not set)" in json.dumps(table.to_plotly_json(), default=str, ensure_ascii=False)


def test_a_share_too_small_to_round_to_one_percent_is_not_shown_as_none() -> None:
    from dashboards._moved import share_text

    assert [share_text(v) for v in (None, 0, 0.0011, 0.004, 0.006, 0.5, 0.996, 1)] == [
        "—", "0%", "<1%", "<1%", "1%", "50%", ">99%", "100%",
    ]  # fmt: skip


def test_the_overview_says_what_its_per_task_figure_and_its_priced_share_cover(
    settings: Settings, store: DuckDBStore
) -> None:
    # one task with an unpriced tool call: the priced share counts it, and the cost per completed task leaves the
    # task out (the cards said "all call attempts priced" and "0 of 2 call attempts unpriced" beside 66.7%)
    f = Fleet()
    f.task("t0", minute=0).call("cheap-1").tool(None)
    f.task("t1", minute=1).call("cheap-1")
    f.write(store)
    with TestClient(create_app(settings, store)) as c:
        out = _update(c, HEADLINE, [("overview-query", "data", {})])
    cpct, priced = _text(out["overview-cpct"]["children"]), _text(out["overview-coverage"]["children"])
    assert "over 1 of 2 completed tasks: 1 finished tasks with an unpriced call or tool call left out" in cpct
    assert "66.7%" in priced and "0 of 2 call attempts and 1 of 1 tool calls unpriced" in priced
