"""Overview: what the selection cost and what it bought, at a glance. Spend, completed tasks, cost per completed task
(with its interval), success rate, waste, cache hit rate and unpriced coverage, each with its trend per hour, day or
week; where the waste went; and what moved since the previous period.

Three callbacks, each over one question, so the browser asks them at once: ``cost`` (with ``bucket``: the headline
and its trends), ``cache`` (with ``bucket``: the hit rate and its trend) and ``changes`` (the current window against
the one before it; its table is drawn by ``dashboards._moved``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, dcc, html

from dashboards._charts import Fig, bucket_for, bucket_of, count, pct, usd
from dashboards._context import PageContext
from dashboards._moved import (
    change_count,
    change_money,
    change_points,
    change_ratio,
    changes_table,
    prefixed,
    seconds_text,
    unpriced_text,
    when_text,
)
from dashboards._ui import (
    RANGES,
    PageError,
    coverage_text,
    empty_state,
    filters_from_query,
    money,
    page,
    safe_callback,
    stat,
)
from taskcost.analytics import QUESTIONS, Filters, ReadStore, data_extent, format_usd

__all__ = ["bucket_for", "comparison_windows", "register", "trend_bucket"]

NAME = "overview"
log = logging.getLogger(__name__)

CARDS = ("cpct", "spend", "completed", "success", "waste", "cache", "attempts", "coverage")
"""The headline cards, in order: ``overview-<card>``."""
_COST_CARDS = tuple(c for c in CARDS if c != "cache")
_WASTE_PARTS = (
    ("failed_tasks", "failed tasks"),
    ("abandoned_tasks", "abandoned tasks"),
    ("failed_attempts", "failed attempts"),
    ("retried_attempts", "retried attempts"),
    ("cache_misses", "cache misses"),
)
"""How many changed values the 'what moved' table lists (the Cost and Canary pages have the rest)."""


# -- the time axis: which bucket, which windows --------------------------------------------------------------------
def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _span(store: ReadStore, filters: Filters, query: Mapping[str, Any], now: datetime) -> timedelta:
    """How long the selection is: the time range asked for, else from the first selected task to the last."""
    rng = RANGES.get(str(query.get("range") or "all"))
    if filters.since is not None:
        return (_utc(filters.until) if filters.until else now) - _utc(filters.since)
    if rng is not None:
        return rng
    extent = data_extent(store, filters)
    if extent.first_start is None or extent.last_start is None:
        return timedelta(0)
    return extent.last_start - extent.first_start


def trend_bucket(store: ReadStore, query: Mapping[str, Any], now: datetime) -> str:
    """The trends' bucket: the query's (the layout puts it there, once per render, so that the cards' callbacks do
    not each measure the data's span), else the one that suits the selection's length."""
    if query.get("bucket"):
        return bucket_of(query)
    return bucket_for(_span(store, filters_from_query(query, now=now), query, now))


BUCKET_LENGTH = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}


def comparison_windows(
    store: ReadStore, filters: Filters, now: datetime
) -> tuple[Filters, datetime, datetime, str] | None:
    """The current window as filters (``since`` and ``until`` set), the previous window (start, end) and how it was
    chosen. A time range: it against the one just before it, as long. All time: the last hour, day or week of the
    data (the trend's bucket) against the one before it; data shorter than two of them: its later half against its
    earlier half (by the tasks' starts). None when nothing is selected."""
    if filters.since is not None:
        until = _utc(filters.until) if filters.until else now
        since = _utc(filters.since)
        length = until - since
        return filters.narrowed(since=since, until=until), since - length, since, "the period before, as long"
    extent = data_extent(store, filters, calls=True)
    if extent.first_start is None or extent.last_start is None:
        return None
    first, last_task = _utc(extent.first_start), _utc(extent.last_start)
    end = max(last_task, _utc(extent.last_call_start or extent.last_start)) + timedelta(milliseconds=1)
    bucket = max(bucket_for(last_task - first), "hour", key=list(BUCKET_LENGTH).index)  # a minute is too short
    period = BUCKET_LENGTH[bucket]
    if last_task - first >= 2 * period:
        since = end - period
        return filters.narrowed(since=since, until=end), since - period, since, f"all time: the last {bucket} of data"
    mid = max(first + (last_task - first) / 2, first + timedelta(microseconds=1))
    how = "all time: the later half of the tasks, by start, against the earlier half"
    return filters.narrowed(since=mid, until=end), first, mid, how


# -- small pieces ------------------------------------------------------------------------------------------------
def _dec(v: Any) -> Decimal | None:
    return None if v is None else Decimal(str(v))


def _per_task(usd: Any, completed: Any, coverage: str) -> Any:
    """Cost per completed task beside its coverage; without a completed task there is none (not "unpriced")."""
    if not completed:
        return html.Span([html.Span("—", className="tc-money"), dmc.Text("no completed task", size="xs", c="dimmed")])
    return money(_dec(usd), coverage)


def _column(table: Mapping[str, Any], name: str) -> list[Any]:
    i = table["columns"].index(name)
    return [r[i] for r in table["rows"]]


def sparkline(x: Sequence[Any], y: Sequence[Any], labels: Sequence[str], *, id: str, color: str = "#228be6") -> Any:
    """A small trend line (no axes): ``y`` per bucket ``x``; ``labels`` are what the hover shows (exact money)."""
    points = [(a, float(b), c) for a, b, c in zip(x, y, labels, strict=True) if b is not None]
    fig = {
        "data": [
            {
                "type": "scatter",
                "x": [p[0] for p in points],
                "y": [p[1] for p in points],
                "customdata": [p[2] for p in points],
                "mode": "lines+markers",
                "line": {"width": 2, "color": color},
                "marker": {"size": 4, "color": color},
                "hovertemplate": "%{x}<br>%{customdata}<extra></extra>",
            }
        ],
        "layout": {
            "height": 48,
            "margin": {"l": 0, "r": 0, "t": 4, "b": 0},
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "showlegend": False,
            "plot_bgcolor": "rgba(0,0,0,0)",
            "paper_bgcolor": "rgba(0,0,0,0)",
        },
    }
    return dcc.Graph(
        figure=fig, config={"displayModeBar": False}, style={"height": "48px"}, id=id, className="tc-sparkline"
    )


def _trend(
    groups: Mapping[str, Any] | None, bucket: str, column: str, label: Any, *, id: str, color: str = "#228be6"
) -> Any:
    """The sparkline of one ``groups`` column per bucket; none while there is one bucket (the trend note says so)."""
    if not groups or len(groups["rows"]) < 2:
        return None
    x, y = _column(groups, "bucket"), _column(groups, column)
    return sparkline(x, y, ["—" if v is None else label(v) for v in y], id=id, color=color)


def _card(card: str, label: str, value: Any, sub: Any = None, trend: Any = None) -> Any:
    paper = stat(label, value, sub, id=f"overview-{card}-card")
    paper.style = {"height": "100%"}
    if trend is not None:
        paper.children = [*paper.children, trend]
    return paper


def _link(path: str, label: str, query: Mapping[str, Any]) -> Any:
    search = urlencode({k: v for k, v in query.items() if v not in (None, "")})
    return dmc.Anchor(label, href=dash.get_relative_path(path) + (f"?{search}" if search else ""), size="sm")


def _notes(notes: Sequence[str]) -> Any:
    return dmc.Stack([dmc.Text(n, size="xs", c="dimmed") for n in notes], gap=2, className="tc-notes")


def _task_cover(s: Mapping[str, Any], cover: str) -> str:
    """What a per-task figure is over: every completed task (``cover``, the calls' coverage), or the fully priced ones
    (a task with an unpriced call or tool call is left out, not counted as $0)."""
    left = int(s.get("unpriced_tasks") or 0)
    if not left:
        return cover
    return (
        f"over {count(s.get('priced_completed_tasks'))} of {count(s.get('completed'))} completed tasks: {left:,} "
        "finished tasks with an unpriced call or tool call left out, not $0"
    )


# -- the callbacks' bodies ---------------------------------------------------------------------------------------
def headline(store: ReadStore, query: Mapping[str, Any], now: datetime) -> tuple[Any, ...]:
    """(message, one card per ``_COST_CARDS``, the trends' note, waste): the ``cost`` question with its trend per
    bucket."""
    filters = filters_from_query(query, now=now)
    bucket = trend_bucket(store, query, now)
    q = QUESTIONS["cost"]
    ans = q.run(store, filters, q.options(bucket=bucket)).to_json()
    s = ans["summary"]
    if not s.get("tasks") and not s.get("in_progress_tasks"):
        return (empty_state(), *([None] * len(_COST_CARDS)), None, None)
    groups = ans["tables"].get("groups")
    cover = coverage_text(int(s.get("attempts") or 0), int(s.get("unpriced_calls") or 0))
    running = s.get("in_progress_tasks") or 0
    spend_sub = f"{s['tasks']:,} finished tasks" + (
        f"; {running:,} still running spent {format_usd(s.get('in_progress_spend_usd'))} so far" if running else ""
    )
    low, high = s.get("ci_low_usd"), s.get("ci_high_usd")
    level = f"{s.get('confidence', 0.95):.0%}"
    ci = f"{level} interval {format_usd(low)} – {format_usd(high)}" if low is not None else "no interval (few tasks)"
    apt = s.get("attempts_per_completed_task")
    cards = [
        _card(
            "cpct",
            "Cost per completed task",
            _per_task(s.get("cost_per_completed_task_usd"), s.get("completed"), _task_cover(s, cover)),
            f"{ci}; all spend / completed tasks",
            _trend(groups, bucket, "cost_per_completed_task_usd", usd, id="overview-cpct-trend"),
        ),
        _card(
            "spend",
            "Spend",
            money(_dec(s.get("spend_usd")), cover),
            spend_sub,
            _trend(groups, bucket, "spend_usd", usd, id="overview-spend-trend"),
        ),
        _card(
            "completed",
            "Completed tasks",
            html.Span(count(s.get("completed")), className="tc-figure"),
            f"of {s['tasks']:,} finished: {s.get('failed', 0):,} failed, {s.get('abandoned', 0):,} abandoned",
            _trend(groups, bucket, "completed", lambda v: f"{v} completed", id="overview-completed-trend"),
        ),
        _card(
            "success",
            "Success rate",
            html.Span(pct(s.get("success_rate")), className="tc-figure"),
            f"interval {pct(s.get('success_ci_low'))} – {pct(s.get('success_ci_high'))}; completed / finished",
            _trend(groups, bucket, "success_rate", pct, id="overview-success-trend", color="#40c057"),
        ),
        _card(
            "waste",
            "Waste",
            money(_dec(s.get("waste_usd")), cover),
            f"{pct(s.get('waste_share'))} of spend bought nothing",
            _trend(groups, bucket, "waste_usd", usd, id="overview-waste-trend", color="#fa5252"),
        ),
        _card(
            "attempts",
            "Attempts per completed task",
            html.Span("—" if apt is None else f"{float(apt):.2f}", className="tc-figure"),
            f"{count(s.get('attempts'))} call attempts, "
            f"{count(s.get('superseded_attempts'))} of them superseded by a retry",
            _trend(groups, bucket, "attempts_per_completed_task", lambda v: f"{v:.2f}", id="overview-attempts-trend"),
        ),
        _card(
            "coverage",
            "Priced",
            html.Span(pct(s.get("priced_share")), className="tc-figure"),
            f"{count(s.get('unpriced_calls'))} of {count(s.get('attempts'))} call attempts and "
            f"{count(s.get('unpriced_tool_calls'))} of {count(s.get('tool_calls'))} tool calls unpriced "
            "(left out of every $ figure, never counted as $0)",
            _trend(groups, bucket, "priced_share", pct, id="overview-coverage-trend", color="#868e96"),
        ),
    ]
    buckets = len(groups["rows"]) if groups else 0
    trend_note = dmc.Text(
        f"Trends: per {bucket} (UTC) of the tasks' start."
        if buckets > 1
        else f"No trends yet: the selection's tasks all started within one {bucket} (trends are per {bucket}).",
        size="xs",
        c="dimmed",
        id="overview-trend-note",
    )
    return (None, *cards, trend_note, dmc.Stack([_waste(ans, query), _notes(ans["notes"])], gap="xs"))


def _waste(ans: Mapping[str, Any], query: Mapping[str, Any]) -> Any:
    """Where the waste went: its disjoint parts in dollars, tool spend beside them."""
    table = ans["tables"]["waste"]
    rows = {r[0]: dict(zip(table["columns"], r, strict=True)) for r in table["rows"]}
    parts = [(label, rows[k]) for k, label in _WASTE_PARTS if k in rows]
    tool = rows.get("tool_spend")
    fig = Fig().add_bar(
        y=[label for label, _ in parts],
        x=[float(r["amount_usd"] or 0) for _, r in parts],
        customdata=[
            f"{format_usd(r['amount_usd'], none='unpriced')} ({pct(r['share_of_spend'])} of spend)" for _, r in parts
        ],
        text=[format_usd(r["amount_usd"], none="unpriced") for _, r in parts],
        textposition="auto",
        orientation="h",
        marker={"color": "#fa5252"},
        hovertemplate="%{y}: %{customdata}<extra></extra>",
    )
    fig.update_layout(
        height=190,
        margin={"l": 0, "r": 10, "t": 4, "b": 20},
        yaxis={"autorange": "reversed"},
        xaxis={"tickprefix": "$"},
        plot_bgcolor="rgba(0,0,0,0)",
        paper_bgcolor="rgba(0,0,0,0)",
    )
    unpriced = sum(int(r.get("unpriced_calls") or 0) for _, r in parts)
    beside = f"Tool spend beside it (not waste): {format_usd(tool['amount_usd'], none='unpriced')}." if tool else ""
    return dmc.Paper(
        [
            dmc.Group(
                [dmc.Text("Where the waste went", fw=600), _link("/cost", "waste in detail on the Cost page", query)],
                justify="space-between",
            ),
            dcc.Graph(figure=fig.to_dict(190), config={"displayModeBar": False}, id="overview-waste-chart"),
            dmc.Text(
                f"{beside} {unpriced:,} unpriced attempts are left out of these dollars.".strip(), size="xs", c="dimmed"
            ),
        ],
        withBorder=True,
        p="md",
        radius="md",
        id="overview-waste",
    )


def cache_card(store: ReadStore, query: Mapping[str, Any], now: datetime) -> Any:
    """The cache card: hit rate of input tokens, what the cache saved, its trend. What misses cost needs a second pass
    over the calls: the Cache page measures it (linked), the overview does not wait for it."""
    filters = filters_from_query(query, now=now)
    bucket = trend_bucket(store, query, now)
    q = QUESTIONS["cache"]
    ans = q.run(store, filters, q.options(bucket=bucket, misses=False)).to_json()
    s = ans["summary"]
    if not s.get("calls"):
        return None
    over = ans["tables"].get("over_time")
    if over and len(over["rows"]) > 1:
        y = _column(over, "hit_rate")
        trend = sparkline(_column(over, "bucket"), y, [pct(v) for v in y], id="overview-cache-trend", color="#7950f2")
    else:
        trend = None
    unpriced = s.get("unpriced_calls") or 0
    cover = (
        f"{unpriced:,} of {s['calls']:,} calls have no per-token price (self-hosted or unpriced): tokens only"
        if unpriced
        else f"all {s['calls']:,} calls priced"
    )
    sub = html.Span(
        [
            f"of {s.get('input_tokens', 0):,} input tokens. Saved ",
            money(_dec(s.get("saved_usd"))),
            f" ({cover}). ",
            _link("/cache", "What misses cost: the Cache page", query),
        ]
    )
    return _card("cache", "Cache hit rate", html.Span(pct(s.get("hit_rate")), className="tc-figure"), sub, trend)


def moved(store: ReadStore, query: Mapping[str, Any], now: datetime) -> Any:
    """What moved: the current window against the previous one (the ``changes`` question)."""
    filters = filters_from_query(query, now=now)
    windows = comparison_windows(store, filters, now)
    if windows is None:
        return None
    current, base_since, base_until, how = windows
    q = QUESTIONS["changes"]
    ans = q.run(store, current, q.options(baseline_since=base_since, baseline_until=base_until)).to_json()
    s = ans["summary"]
    b, c = prefixed(s, "baseline_"), prefixed(s, "current_")

    def rate(f: Mapping[str, Any]) -> float | None:
        return f["completed_tasks"] / f["finished_tasks"] if f["finished_tasks"] else None

    rows = [
        (
            "Cost per completed task",
            _per_task(b["cost_per_completed_task_usd"], b["completed_tasks"], unpriced_text(b)),
            _per_task(c["cost_per_completed_task_usd"], c["completed_tasks"], unpriced_text(c)),
            change_money(b["cost_per_completed_task_usd"], c["cost_per_completed_task_usd"]),
        ),
        ("Completed tasks", count(b["completed_tasks"]), count(c["completed_tasks"]),
         change_count(b, c, "completed_tasks")),
        ("Success rate", pct(rate(b)), pct(rate(c)), change_points(rate(b), rate(c))),
        ("Call attempts", count(b["calls"]), count(c["calls"]), change_count(b, c, "calls")),
        ("p95 latency", seconds_text(b["p95_s"]), seconds_text(c["p95_s"]), change_ratio(b["p95_s"], c["p95_s"])),
        ("Unpriced attempts", count(b["unpriced_calls"]), count(c["unpriced_calls"]),
         change_count(b, c, "unpriced_calls")),
    ]  # fmt: skip
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in ("", "previous", "current", "change")]))
    body = dmc.TableTbody(
        [dmc.TableTr([dmc.TableTd(v) for v in r], id=f"overview-moved-row-{i}") for i, r in enumerate(rows)]
    )
    current_text = f"{when_text(s['current_since'])} – {when_text(s['current_until'])}"
    when = f"{current_text} against {when_text(s['baseline_since'])} – {when_text(s['baseline_until'])} ({how})"
    changes = ans["tables"]["changes"]
    top = s.get("top_change")
    return dmc.Paper(
        [
            dmc.Group(
                [
                    dmc.Text("What moved since the previous period", fw=600),
                    _link("/canary", "compare on the Canary page", query),
                ],
                justify="space-between",
            ),
            dmc.Text(when, size="xs", c="dimmed", id="overview-moved-windows"),
            dmc.Table([head, body], withTableBorder=True, fz="sm", id="overview-moved-table"),
            dmc.Text(
                f"Biggest infra change: {top}"
                if top
                else "No fingerprint value (engine, GPU, model, ...) changed share.",
                size="sm",
                id="overview-top-change",
            ),
            changes_table(changes),
            _notes(ans["notes"]),
        ],
        withBorder=True,
        p="md",
        radius="md",
        id="overview-moved",
    )


# -- the page ----------------------------------------------------------------------------------------------------
def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        cards = [html.Div(id=f"overview-{c}") for c in CARDS]
        # the trends' bucket is measured once here, not by each card's callback; a bad value in the address is
        # left to the callbacks, which say so
        with contextlib.suppress(PageError):
            query = {**query, "bucket": trend_bucket(ctx.store, query, datetime.now(UTC))}
        return page(
            NAME,
            "Overview",
            query,
            ctx.store,
            html.Div(id="overview-message"),
            dmc.SimpleGrid(cards, cols={"base": 1, "sm": 2, "lg": 4}, spacing="md", id="overview-headline"),
            html.Div(id="overview-trends"),
            dmc.SimpleGrid(
                [html.Div(id="overview-waste-box"), html.Div(id="overview-moved-box")],
                cols={"base": 1, "lg": 2},
                spacing="md",
            ),
        )

    dash.register_page(NAME, path="/", name="Overview", layout=layout)

    @app.callback(
        [Output("overview-message", "children")]
        + [Output(f"overview-{c}", "children") for c in _COST_CARDS]
        + [Output("overview-trends", "children"), Output("overview-waste-box", "children")],
        Input(f"{NAME}-query", "data"),
    )
    @safe_callback(len(_COST_CARDS) + 3)
    def refresh(query: dict[str, str] | None) -> Any:
        return headline(ctx.store, query or {}, datetime.now(UTC))

    @app.callback(Output("overview-cache", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh_cache(query: dict[str, str] | None) -> Any:
        return cache_card(ctx.store, query or {}, datetime.now(UTC))

    @app.callback(Output("overview-moved-box", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh_moved(query: dict[str, str] | None) -> Any:
        return moved(ctx.store, query or {}, datetime.now(UTC))
