"""Cost: what a completed task costs (with its interval and coverage), what of it was waste (by kind, by any
dimension, over time), and per token vs per completed task (the ranking flip).

Two callbacks over ``taskcost.analytics`` and the page's query: ``cost`` grouped by the URL's ``by`` (headline, waste,
groups) and per ``bucket`` (over time), two answers (each an aggregate in SQL: no task is read one by one for them);
``per-token`` by the URL's ``rank_by``.
Everything else here is presentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, dcc, html

from dashboards._charts import (
    BUCKET_MS,
    BUCKETS,
    Fig,
    bucket_of,
    choices,
    graph,
    label_of,
    notes_list,
    num,
    page_bucket,
    pct,
    pretty,
    rows_of,
    section,
    time_axis,
    usd,
)
from dashboards._context import PageContext
from dashboards._per_token_charts import per_token_view
from dashboards._ui import (
    PageError,
    answer_table,
    coverage_text,
    empty_state,
    filters_from_query,
    money,
    page,
    safe_callback,
    stat,
    url_id,
)
from taskcost.analytics import (
    DIMENSIONS,
    QUESTIONS,
    CostOptions,
    UsageError,
    check_dimension,
)

__all__ = ["register"]

NAME = "cost"
DEFAULT_BY = "model"
RANK_BY = ("model", "provider", "engine")
TOP_GROUPS = 20  # bars per chart; the table below lists every group

WASTE_KINDS: tuple[tuple[str, str, str], ...] = (
    ("failed_tasks", "failed tasks", "#e03131"),
    ("abandoned_tasks", "abandoned tasks", "#f76707"),
    ("failed_attempts", "failed attempts", "#c2255c"),
    ("retried_attempts", "retried attempts", "#7048e8"),
    ("cache_misses", "cache misses", "#1c7ed6"),
)
TOOL_COLOR = "#adb5bd"
IDLE_COLOR = "#868e96"
GROUP_PARTS: tuple[tuple[str, str, str], ...] = (
    ("failed_tasks_usd", "failed + abandoned tasks", "#e03131"),
    ("superseded_attempts_usd", "failed + retried attempts", "#7048e8"),
    ("cache_miss_usd", "cache misses", "#1c7ed6"),
    ("tool_spend_usd", "tool spend (not waste)", TOOL_COLOR),
)
"""The waste parts the groups table carries (it merges failed with abandoned tasks, failed with retried attempts)."""


def _group_coverage(g: Mapping[str, Any]) -> str:
    tools = g.get("unpriced_tool_calls") or 0
    if not g["unpriced_calls"] and not tools:
        return "all call attempts and tool calls priced"
    return (
        f"{pct(g['priced_share'])} of call attempts and tool calls priced ({g['unpriced_calls']:,} attempts and "
        f"{tools:,} tool calls unpriced, not in the dollars; {g.get('unpriced_tasks') or 0:,} tasks with any left out "
        "of the cost per completed task)"
    )


def _per_task_coverage(s: Mapping[str, Any]) -> str:
    """Which completed tasks the cost per completed task is over: the fully priced ones (unpriced is never $0)."""
    left_out = int(s.get("unpriced_completed_tasks") or 0)
    if not left_out:
        return coverage_text(int(s["attempts"]), int(s["unpriced_calls"]))
    return (
        f"over the {int(s.get('priced_completed_tasks') or 0):,} of {int(s['completed']):,} completed tasks fully "
        f"priced ({left_out:,} with an unpriced call attempt or tool call left out, not counted as $0)"
    )


def _unpriced(g: Mapping[str, Any]) -> str:
    return "no completed task" if not g["completed"] else "unpriced (no fully priced completed task)"


# -- the headline ------------------------------------------------------------------------------------------------
def _headline(s: Mapping[str, Any]) -> Any:
    cover = coverage_text(int(s["attempts"]), int(s["unpriced_calls"]))
    if s.get("unpriced_tool_calls"):
        cover += f"; {coverage_text(int(s['tool_calls']), int(s['unpriced_tool_calls']), 'tool calls')}"
    if s.get("ci_low_usd") is not None:
        level = f"{s['confidence'] * 100:.0f}%"
        ci = f"{level} interval {usd(s['ci_low_usd'])} – {usd(s['ci_high_usd'])} ({s['ci_method']})"
    else:
        ci = "no interval (too few completed tasks)"
    waste_cover = cover
    if s.get("cache_miss_unpriced_tokens"):
        waste_cover += f"; {s['cache_miss_unpriced_tokens']:,} missed cache tokens unpriced"
    if s.get("waste_sampled"):
        waste_cover += f"; retries and misses measured on {s['waste_measured_tasks']:,} completed tasks, scaled"
    running = f"; {s['in_progress_tasks']:,} still running (left out)" if s.get("in_progress_tasks") else ""
    return dmc.SimpleGrid(
        [
            stat(
                "Cost per completed task",
                money(s.get("cost_per_completed_task_usd"), _per_task_coverage(s)),
                ci,
                id="cost-per-completed",
            ),
            stat("Spend", money(s.get("spend_usd"), cover), f"{s['tasks']:,} finished tasks", id="cost-spend"),
            stat(
                "Completed tasks",
                f"{s['completed']:,} of {s['tasks']:,}",
                f"success {pct(s.get('success_rate'))}; {s['failed']:,} failed, {s['abandoned']:,} abandoned{running}",
                id="cost-completed",
            ),
            stat(
                "Waste",
                money(s.get("waste_usd"), waste_cover),
                f"{pct(s.get('waste_share'))} of spend bought nothing",
                id="cost-waste-total",
            ),
            _idle_stat(s),
            stat(
                "Attempts per completed task",
                "—" if s.get("attempts_per_completed_task") is None else f"{s['attempts_per_completed_task']:.2f}",
                f"{s['superseded_attempts']:,} superseded attempts re-sent "
                f"{s['resent_uncached_tokens']:,} uncached tokens",
                id="cost-attempts",
            ),
        ],
        cols={"base": 1, "sm": 2, "lg": 6},
        spacing="sm",
    )


def _idle_stat(s: Mapping[str, Any]) -> Any:
    """The clusters' bills no call used: its own figure, in no task's spend (unknown, never $0, without the bills)."""
    if "gpu_idle_usd" in s and s["gpu_idle_usd"] is None:
        return stat("Idle GPU", "unknown", "this store gives no cluster bills (not $0)", id="cost-gpu-idle")
    bill = s.get("gpu_bill_usd")
    sub = "no cluster bill in range" if not s.get("gpu_windows") else f"of the {usd(bill)} GPU bill; in no task's spend"
    return stat("Idle GPU", money(s.get("gpu_idle_usd")), sub, id="cost-gpu-idle")


# -- waste -------------------------------------------------------------------------------------------------------
def _waste_kinds(waste: Mapping[str, Any]) -> Any:
    """Everything selected: one bar per waste kind, tool spend and idle GPU beside them (not waste)."""
    rows = {r["kind"]: r for r in rows_of(waste)}
    fig = Fig()
    beside = [("tool_spend", "tool spend (not waste)", TOOL_COLOR), ("gpu_idle", "idle GPU (not waste)", IDLE_COLOR)]
    kinds = [*WASTE_KINDS, *beside]
    for kind, label, color in kinds:
        r = rows.get(kind)
        if r is None or (kind == "gpu_idle" and r["amount_usd"] is None):  # unknown idle: no bar (never $0)
            continue
        fig.add_bar(
            y=[label],
            x=[num(r["amount_usd"])],
            orientation="h",
            name=label,
            marker={"color": color},
            text=[f"{usd(r['amount_usd'])} · {pct(r['share_of_spend'])}"],
            textposition="outside",
            cliponaxis=False,
            customdata=[[r["calls"] or 0, r["tokens"] or 0, r["unpriced_calls"] or 0, r["tasks"] or 0]],
            hovertemplate=(
                f"<b>{label}</b><br>%{{x:$.6f}}<br>tasks %{{customdata[3]:,}}, call attempts %{{customdata[0]:,}}"
                "<br>tokens %{customdata[1]:,}<br>unpriced attempts %{customdata[2]:,}<extra></extra>"
            ),
        )
    fig.update_layout(title="Waste of everything selected, by kind", showlegend=False, yaxis={"autorange": "reversed"})
    top = max([num(r["amount_usd"]) or 0.0 for r in rows.values()] + [1e-6])
    fig.update_xaxes(tickprefix="$", range=[0, top * 1.4])
    return graph(fig, "cost-waste-kinds", height=300)


def _group_height(n: int) -> int:
    return max(280, 90 + 30 * n)


def _waste_by_group(groups: list[dict[str, Any]], by: str) -> Any:
    """The waste parts of each group (the costliest ``TOP_GROUPS``, in the order of ``_cost_by_group``), stacked."""
    top = groups[:TOP_GROUPS]
    names = [label_of(g[by]) for g in top]
    fig = Fig()
    for col, label, color in GROUP_PARTS:
        fig.add_bar(
            y=names,
            x=[num(g[col]) for g in top],
            orientation="h",
            name=label,
            marker={"color": color},
            customdata=[[usd(g[col]), g["unpriced_calls"], pct(g["waste_share"])] for g in top],
            hovertemplate=(
                f"<b>%{{y}}</b><br>{label}: %{{customdata[0]}}<br>waste: %{{customdata[2]}} of spend"
                "<br>unpriced attempts %{customdata[1]:,}<extra></extra>"
            ),
        )
    more = f" (costliest {TOP_GROUPS} of {len(groups)})" if len(groups) > TOP_GROUPS else ""
    fig.update_layout(barmode="stack", title=f"Waste by {by}{more}", yaxis={"autorange": "reversed"})
    fig.update_xaxes(tickprefix="$")
    return graph(fig, "cost-waste-by-group", height=_group_height(len(top)))


def _cost_by_group(groups: list[dict[str, Any]], by: str, confidence: float) -> Any:
    """Cost per completed task of each group (the costliest ``TOP_GROUPS``), with its interval; a group without a
    completed task has no bar."""
    top = groups[:TOP_GROUPS]
    vals = [num(g["cost_per_completed_task_usd"]) for g in top]

    def arm(end: str, sign: int) -> list[float]:
        return [
            sign * ((num(g[end]) or 0.0) - v) if v is not None and g[end] is not None else 0.0
            for g, v in zip(top, vals, strict=True)
        ]

    fig = Fig().add_bar(
        y=[label_of(g[by]) for g in top],
        x=vals,
        orientation="h",
        marker={"color": "#228be6"},
        error_x={"type": "data", "array": arm("ci_high_usd", 1), "arrayminus": arm("ci_low_usd", -1)},
        customdata=[
            [
                g["completed"],
                g["tasks"],
                pct(g["success_rate"]),
                usd(g["ci_low_usd"]) if g["ci_low_usd"] is not None else "—",
                usd(g["ci_high_usd"]) if g["ci_high_usd"] is not None else "—",
                _group_coverage(g),
            ]
            for g in top
        ],
        hovertemplate=(
            "<b>%{y}</b><br>%{x:$.6f} per completed task"
            f"<br>{confidence * 100:.0f}% interval %{{customdata[3]}} – %{{customdata[4]}}"
            "<br>%{customdata[0]:,} of %{customdata[1]:,} tasks completed (%{customdata[2]})"
            "<br>%{customdata[5]}<extra></extra>"
        ),
    )
    fig.update_layout(title=f"Cost per completed task by {by}, with its interval", yaxis={"autorange": "reversed"})
    fig.update_xaxes(tickprefix="$")
    fig.update_yaxes(
        tickvals=[label_of(g[by]) for g in top],
        ticktext=[
            f"{label_of(g[by])} · {_unpriced(g) if v is None else usd(g['cost_per_completed_task_usd'])}"
            for g, v in zip(top, vals, strict=True)
        ],
    )
    return graph(fig, "cost-by-group", height=_group_height(len(top)))


def _arm(g: Mapping[str, Any], end: str) -> float:
    """How far an interval's end is from the figure (0 without an interval)."""
    v, e = num(g["cost_per_completed_task_usd"]), num(g[end])
    return 0.0 if v is None or e is None else e - v


def _ci_text(g: Mapping[str, Any]) -> str:
    if g["ci_low_usd"] is None:
        return "none"
    return f"{usd(g['ci_low_usd'])} – {usd(g['ci_high_usd'])}"


# -- over time ---------------------------------------------------------------------------------------------------
def _over_time(groups: list[dict[str, Any]], bucket: str, confidence: float) -> Any:
    # a group with no bucket (no task in it finished yet) is no point of a time series
    rows = sorted((g for g in groups if g["bucket"] is not None), key=lambda g: g["bucket"])
    x = [g["bucket"] for g in rows]
    cost = Fig()
    cost.add_scatter(
        x=x,
        y=[num(g["cost_per_completed_task_usd"]) for g in rows],
        mode="lines+markers",
        name="cost per completed task",
        line={"color": "#1c7ed6"},
        error_y={
            "type": "data",
            "array": [_arm(g, "ci_high_usd") for g in rows],
            "arrayminus": [-_arm(g, "ci_low_usd") for g in rows],
            "color": "rgba(28,126,214,0.5)",
        },
        customdata=[
            [g["completed"], g["tasks"], g["unpriced_calls"], usd(g["cost_per_completed_task_usd"]), _ci_text(g)]
            for g in rows
        ],
        hovertemplate=(
            "%{x}<br>%{customdata[3]} per completed task"
            f"<br>{confidence * 100:.0f}% interval %{{customdata[4]}}"
            "<br>%{customdata[0]:,} of %{customdata[1]:,} tasks completed"
            "<br>unpriced attempts %{customdata[2]:,}<extra></extra>"
        ),
    )
    cost.update_layout(title=f"Cost per completed task per {bucket}")
    cost.update_yaxes(tickprefix="$", rangemode="tozero")
    waste = Fig()
    for col, label, color in GROUP_PARTS:
        waste.add_bar(
            x=x,
            y=[num(g[col]) for g in rows],
            name=label,
            marker={"color": color},
            hovertemplate=f"%{{x}}<br>{label}: %{{y:$.6f}}<extra></extra>",
        )
    waste.update_layout(barmode="stack", title=f"Waste per {bucket}")
    waste.update_yaxes(tickprefix="$")
    waste.update_traces(width=0.8 * BUCKET_MS[bucket])
    for fig in (cost, waste):
        time_axis(fig, x, bucket)
    return dmc.SimpleGrid(
        [graph(cost, "cost-time-cost"), graph(waste, "cost-time-waste")], cols={"base": 1, "lg": 2}, spacing="sm"
    )


# -- per token vs per completed task -----------------------------------------------------------------------------


def _over_time_box(ans: Mapping[str, Any], bucket: str) -> Any:
    groups = rows_of(ans["tables"]["groups"])
    cut = [n for n in ans["notes"] if n.startswith(("showing", "no interval"))]
    return [_over_time(groups, bucket, float(ans["summary"]["confidence"])), notes_list(cut, "cost-time-notes")]


def _bucket_control(query: Mapping[str, str], default: str) -> Any:
    data, value = choices(BUCKETS, query.get("bucket") or None, default)
    return dmc.SegmentedControl(id=url_id("bucket"), data=data, value=value, size="xs")


def _by_control(query: Mapping[str, str]) -> Any:
    data, value = choices(DIMENSIONS, query.get("by") or None, DEFAULT_BY, lambda d: d.replace("_", " "))
    return dmc.Select(id=url_id("by"), data=data, value=value, allowDeselect=False, w=170, size="xs", label="group by")


def _rank_control(query: Mapping[str, str]) -> Any:
    data, value = choices(RANK_BY, query.get("rank_by") or None, RANK_BY[0])
    return dmc.SegmentedControl(id=url_id("rank_by"), data=data, value=value, size="xs")


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        by = query.get("by") or DEFAULT_BY
        bucket = page_bucket(ctx.store, query)  # its callbacks get it with the query (the URL keeps only a choice)
        return page(
            NAME,
            "Cost",
            {**query, "bucket": bucket},
            ctx.store,
            dcc.Loading(html.Div(id="cost-headline"), delay_show=300, type="dot"),
            section(
                "Per token vs per completed task",
                "A price list ranks models per token; you pay per finished task. A group cheap per token can be the "
                "dear one per completed task when it needs more retries or fails tasks whose spend you pay anyway.",
                html.Div(id="cost-pertoken"),
                extra=_rank_control(query),
            ),
            section(
                "What bought nothing",
                "Waste in parts that do not overlap: the whole spend of failed and abandoned tasks, attempts a retry "
                "superseded (failed, or succeeded and retried anyway), and prompt tokens that repeated the previous "
                "call's prefix without being read from the cache. Tool spend is shown beside it; it is not waste.",
                html.Div(id="cost-waste"),
            ),
            section(
                f"By {by.replace('_', ' ')}",
                "Each group's cost per completed task (failed and abandoned tasks' spend included) with its interval, "
                "and its waste. For a call dimension, a task whose calls disagree is its own group, 'mixed'.",
                html.Div(id="cost-groups"),
                extra=_by_control(query),
            ),
            section(
                "Over time",
                "Cost per completed task and waste per bucket of the tasks' start (UTC; weeks start on Monday).",
                html.Div(id="cost-time"),
                extra=_bucket_control(query, bucket),
            ),
        )

    dash.register_page(NAME, path="/cost", name="Cost", layout=layout)

    @app.callback(
        Output("cost-headline", "children"),
        Output("cost-waste", "children"),
        Output("cost-groups", "children"),
        Output("cost-time", "children"),
        Input(f"{NAME}-query", "data"),
    )
    @safe_callback(4)
    def refresh(query: dict[str, str] | None) -> Any:
        # by group and over time from one read of the tasks (each answer what `taskcost cost` gives with that option)
        query = query or {}
        filters = filters_from_query(query)
        by = query.get("by") or DEFAULT_BY
        wrong = []  # every bad value in the address, at once
        try:
            check_dimension(by)
        except UsageError as exc:
            wrong.append(str(exc))
        try:
            bucket = bucket_of(query)
        except PageError as exc:
            wrong.append(str(exc))
        if wrong:
            raise PageError("; ".join(wrong))
        q = QUESTIONS["cost"]
        by_group = q.run(ctx.store, filters, CostOptions.model_validate({"by": by}))
        by_time = q.run(ctx.store, filters, CostOptions.model_validate({"bucket": bucket}))
        ans = by_group.to_json()
        s = ans["summary"]
        if not s.get("tasks"):
            running = s.get("in_progress_tasks")
            return (
                empty_state(f"No finished tasks yet ({running:,} still running)" if running else "No tasks yet"),
                None,
                None,
                None,
            )
        groups = rows_of(ans["tables"]["groups"]) if "groups" in ans["tables"] else []
        waste = dmc.SimpleGrid(
            [
                _waste_kinds(ans["tables"]["waste"]),
                answer_table(pretty(ans["tables"]["waste"], ans["tables"]["waste"]["display"]), id="cost-waste-table"),
            ],
            cols={"base": 1, "lg": 2},
            spacing="sm",
        )
        table = pretty(ans["tables"]["groups"], ans["tables"]["groups"]["display"], first=by) if groups else None
        grouped = [
            dmc.SimpleGrid(
                [_cost_by_group(groups, by, float(s["confidence"])), _waste_by_group(groups, by)],
                cols={"base": 1, "lg": 2},
                spacing="sm",
            ),
            answer_table(table, id="cost-groups-table") if table else None,
            notes_list(ans["notes"], "cost-notes"),
        ]
        return _headline(s), waste, grouped, _over_time_box(by_time.to_json(), bucket)

    @app.callback(Output("cost-pertoken", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def per_token(query: dict[str, str] | None) -> Any:
        query = query or {}
        filters = filters_from_query(query)
        rank_by = query.get("rank_by") or RANK_BY[0]
        if rank_by not in RANK_BY:
            raise PageError(f"cannot rank by {rank_by!r}: one of {', '.join(RANK_BY)}")
        q = QUESTIONS["per-token"]
        ans = q.run(ctx.store, filters, q.options(by=rank_by)).to_json()
        if not ans["summary"].get("call_attempts") and not ans["summary"].get("finished_tasks"):
            return None
        return per_token_view(ans)
