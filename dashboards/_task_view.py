"""A task's drill-down for the Tasks page: the timeline of its call attempts and tool calls, tokens, cache and cost
per call, how any call's cost was computed, its infra fingerprint; and the links and formatting the task list shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import dash
import dash_mantine_components as dmc
import plotly.graph_objects as go
from dash import dcc

from dashboards._charts import count, usd
from dashboards._ui import error_box, money
from taskcost.analytics import QUESTIONS, Filters, TaskDetail, explain_call, format_usd, task_detail

__all__ = [
    "call_table",
    "count",
    "dec",
    "drilldown",
    "duration",
    "explanation",
    "fingerprint",
    "href",
    "list_query",
    "model_cell",
    "outcome_badge",
    "task_head",
    "timeline",
    "token_chart",
    "tool_table",
    "unpriced_note",
    "usd",
    "when",
]

_OUTCOME_COLORS = {"completed": "green", "failed": "red", "abandoned": "orange"}


# -- links ---------------------------------------------------------------------------------------------------------
def href(query: Mapping[str, Any], **changes: str | None) -> str:
    """This page's address with ``query`` changed (a None value removes the key)."""
    merged = {k: v for k, v in {**query, **changes}.items() if v not in (None, "")}
    search = urlencode(merged)
    return dash.get_relative_path("/tasks") + (f"?{search}" if search else "")


def list_query(query: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in query.items() if k not in ("task", "call")}


# -- formatting ----------------------------------------------------------------------------------------------------
def duration(seconds: Any) -> str:
    if seconds is None:
        return "—"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} m {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} m"


def when(at: Any) -> str:
    if at is None:
        return "—"
    if isinstance(at, datetime):
        return at.strftime("%Y-%m-%d %H:%M:%S")
    return str(at).replace("T", " ")[:19]


def outcome_badge(outcome: str | None) -> Any:
    label = outcome or "running"
    return dmc.Badge(label, color=_OUTCOME_COLORS.get(label, "gray"), variant="light", className="tc-outcome")


def unpriced_note(n: Any, attempts: Any = None) -> str | None:
    """A task's coverage beside its cost: only said when some attempt is unpriced (or there is no call at all)."""
    if n:
        return f"{int(n):,} unpriced attempt{'s' if int(n) != 1 else ''} not in it"
    if attempts == 0:
        return "no LLM call"
    return None


def dec(v: Any) -> Decimal | None:
    return None if v is None else Decimal(str(v))


def model_cell(row: Mapping[str, Any]) -> Any:
    engine = " ".join(str(x) for x in (row.get("engine"), row.get("engine_version")) if x)
    model = row.get("model") or "—"
    if not engine:
        return model  # text, not a component: the tasks page shows a list of these (pages/tasks.py SHOWN)
    gpu = f" · {row['gpu_type']}" if row.get("gpu_type") else ""
    return [model, dmc.Text(engine + gpu, size="xs", c="dimmed")]


# -- one task ------------------------------------------------------------------------------------------------------
def _rows(df: Any) -> list[dict[str, Any]]:
    return list(df.iter_rows(named=True))


def _ms(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() * 1000


def timeline(d: TaskDetail) -> Any:
    """A Gantt chart: the task, each logical call (its attempts side by side, failed ones red) and each tool call."""
    calls, tools, task = _rows(d.calls), _rows(d.tools), d.task
    order: list[str] = []
    labels: dict[str, str] = {}
    for c in calls:
        if c["call_id"] not in labels:
            labels[c["call_id"]] = f"call {len(labels) + 1} · {c['model'] or '?'}"
            order.append(labels[c["call_id"]])
    tool_labels = [f"tool {i + 1} · {t['tool_name'] or '?'}" for i, t in enumerate(tools)]
    task_label = "task"
    categories = [task_label, *order, *tool_labels]
    traces = []
    if task.get("start_time") is not None and task.get("end_time") is not None:
        traces.append(
            _bars(
                "task",
                "#adb5bd",
                [task_label],
                [task["start_time"]],
                [_ms(task["start_time"], task["end_time"])],
                [f"{task['task_id']}: {duration(task['duration_s'])}, {usd(task['cost_usd'])}"],
                [""],
            )
        )
    for status, color, name in (("ok", "#228be6", "LLM call attempt"), ("error", "#fa5252", "failed attempt")):
        picked = [c for c in calls if (c["status"] == "error") == (status == "error")]
        if picked:
            traces.append(
                _bars(
                    name,
                    color,
                    [labels[c["call_id"]] for c in picked],
                    [c["start_time"] for c in picked],
                    [max(_ms(c["start_time"], c["end_time"]), 1.0) for c in picked],
                    [_call_hover(c) for c in picked],
                    [f"#{c['attempt']}" for c in picked],
                )
            )
    if tools:
        traces.append(
            _bars(
                "tool call",
                "#40c057",
                tool_labels,
                [t["start_time"] for t in tools],
                [max(_ms(t["start_time"], t["end_time"]), 1.0) for t in tools],
                [
                    f"{t['tool_name']}: {duration(t['duration_s'])}, {t['status']}, "
                    f"{format_usd(t['cost_usd'], none='no cost')}"
                    for t in tools
                ],
                [""] * len(tools),
            )
        )
    fig = go.Figure(traces)
    fig.update_layout(
        barmode="overlay",
        height=min(90 + 26 * len(categories), 900),
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        xaxis={"type": "date", "title": None},
        yaxis={"categoryorder": "array", "categoryarray": categories, "autorange": "reversed"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return dcc.Graph(figure=fig, config={"displaylogo": False}, id="tasks-timeline")


def _bars(
    name: str,
    color: str,
    y: Sequence[str],
    base: Sequence[datetime],
    ms: Sequence[float],
    hover: Sequence[str],
    text: Sequence[str],
) -> Any:
    return go.Bar(
        name=name,
        orientation="h",
        y=list(y),
        base=[b.isoformat() for b in base],
        x=list(ms),
        customdata=list(hover),
        text=list(text),
        textposition="inside",
        marker={"color": color},
        hovertemplate="%{customdata}<extra></extra>",
    )


def _call_hover(c: Mapping[str, Any]) -> str:
    cost = format_usd(c["cost_usd"], none=f"unpriced ({c.get('unpriced_reason') or 'no price'})")
    return (
        f"attempt {c['attempt']} · {c['status']}{' ' + c['error_type'] if c.get('error_type') else ''} · "
        f"{c['provider']} {c['model']} · {duration(c['duration_s'])}<br>"
        f"input {count(c['input_tokens'])} (cache read {count(c['cache_read_tokens'])}), "
        f"output {count(c['output_tokens'])}"
        f" · {cost}"
    )


def token_chart(d: TaskDetail) -> Any:
    """Tokens per call attempt (uncached input, cache read, cache write, output), its cost on the right axis."""
    calls = _rows(d.calls)
    x = [f"{i + 1}·#{c['attempt']}" for i, c in enumerate(calls)]

    def col(name: str) -> list[int]:
        return [int(c[name] or 0) for c in calls]

    read, write = col("cache_read_tokens"), col("cache_write_tokens")
    uncached = [max(int(c["input_tokens"] or 0) - r - w, 0) for c, r, w in zip(calls, read, write, strict=True)]
    parts = (
        ("uncached input", uncached, "#74c0fc"),
        ("cache read", read, "#7950f2"),
        ("cache write", write, "#e599f7"),
        ("output", col("output_tokens"), "#ffa94d"),
    )
    traces: list[Any] = [
        go.Bar(name=name, x=x, y=y, marker={"color": color}, hovertemplate=f"{name}: %{{y:,}}<extra></extra>")
        for name, y, color in parts
    ]
    traces.append(
        go.Scatter(
            name="cost (right axis)",
            x=x,
            y=[None if c["cost_usd"] is None else float(c["cost_usd"]) for c in calls],
            customdata=[format_usd(c["cost_usd"], none="unpriced") for c in calls],
            mode="markers",
            marker={"size": 10, "color": "#212529", "symbol": "diamond"},
            yaxis="y2",
            hovertemplate="cost %{customdata}<extra></extra>",
        )
    )
    fig = go.Figure(traces)
    fig.update_layout(
        barmode="stack",
        height=280,
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        xaxis={"title": "call · attempt (in start order)", "type": "category"},
        yaxis={"title": "tokens"},
        yaxis2={"title": "USD", "overlaying": "y", "side": "right", "tickformat": "$,.6~f", "rangemode": "tozero"},
        legend={"orientation": "h", "y": 1.12},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return dcc.Graph(figure=fig, config={"displaylogo": False}, id="tasks-tokens")


def call_table(d: TaskDetail, query: Mapping[str, Any]) -> Any:
    """One row per call attempt: tokens, cache, cost (or why it has none), and a link that explains the cost."""
    start = d.task.get("start_time")
    rows = []
    for i, c in enumerate(_rows(d.calls)):
        at = f"+{(c['start_time'] - start).total_seconds():.2f} s" if start is not None else when(c["start_time"])
        explain = dmc.Anchor("explain", href=href(query, call=c["span_id"]), className="tc-explain-link")
        reason = None if c["cost_usd"] is not None else (c.get("unpriced_reason") or "unpriced")
        rows.append(
            dmc.TableTr(
                [
                    dmc.TableTd(f"{i + 1}"),
                    dmc.TableTd(f"#{c['attempt']}"),
                    dmc.TableTd(at),
                    dmc.TableTd(duration(c["duration_s"])),
                    dmc.TableTd(dmc.Text(c["status"], size="sm", **({"c": "red"} if c["status"] == "error" else {}))),
                    dmc.TableTd(f"{c['provider'] or '—'} / {c['model'] or '—'}"),
                    dmc.TableTd(count(c["input_tokens"])),
                    dmc.TableTd(count(c["cache_read_tokens"])),
                    dmc.TableTd(count(c["output_tokens"])),
                    dmc.TableTd(money(dec(c["cost_usd"]), reason)),
                    dmc.TableTd(explain),
                ],
                className="tc-call-row",
                id=f"tasks-call-{c['span_id']}",
                **({"bg": "var(--mantine-color-yellow-light)"} if c["span_id"] == query.get("call") else {}),
            )
        )
    head = dmc.TableThead(
        dmc.TableTr(
            [
                dmc.TableTh(h)
                for h in (
                    "#",
                    "attempt",
                    "start",
                    "duration",
                    "status",
                    "provider / model",
                    "input",
                    "cache read",
                    "output",
                    "cost",
                    "",
                )  # fmt: skip
            ]
        )
    )
    return dmc.Stack(
        [
            dmc.Text("Call attempts", fw=600),
            dmc.TableScrollContainer(
                dmc.Table([head, dmc.TableTbody(rows)], striped=True, withTableBorder=True, fz="sm", id="tasks-calls"),
                minWidth=900,
            ),
        ],
        gap=4,
    )


def tool_table(d: TaskDetail) -> Any:
    tools = _rows(d.tools)
    if not tools:
        return None
    start = d.task.get("start_time")
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in ("tool", "start", "duration", "status", "cost")]))
    body = dmc.TableTbody(
        [
            dmc.TableTr(
                [
                    dmc.TableTd(t["tool_name"] or "—"),
                    dmc.TableTd(
                        f"+{(t['start_time'] - start).total_seconds():.2f} s" if start else when(t["start_time"])
                    ),
                    dmc.TableTd(duration(t["duration_s"])),
                    dmc.TableTd(t["status"] or "—"),
                    dmc.TableTd(money(dec(t["cost_usd"]), None if t["cost_usd"] is not None else "no cost known")),
                ]
            )
            for t in tools
        ]
    )
    return dmc.Stack(
        [
            dmc.Text("Tool calls", fw=600),
            dmc.Table([head, body], striped=True, withTableBorder=True, fz="sm", id="tasks-tools"),
        ],
        gap=4,
    )


def _figure(label: str, value: Any, id: str | None = None) -> Any:
    props = {"id": id} if id else {}
    return dmc.Stack([dmc.Text(label, size="xs", c="dimmed"), dmc.Text(value, size="sm", fw=600, **props)], gap=0)


def task_head(d: TaskDetail) -> Any:
    t = d.task
    cover = (
        unpriced_note(t.get("unpriced_calls"), t.get("attempts")) or f"all {count(t.get('attempts'))} attempts priced"
    )
    infra = " · ".join(
        str(v)
        for v in (
            " ".join(str(x) for x in (t.get("engine"), t.get("engine_version")) if x),
            t.get("quantization"),
            t.get("gpu_type"),
            t.get("deployment"),
        )
        if v
    )
    return dmc.Paper(
        [
            dmc.Group(
                [
                    dmc.Title(t["task_id"], order=3, id="tasks-detail-id"),
                    outcome_badge(t.get("outcome")),
                    dmc.Badge(t.get("kind") or "no kind", variant="outline"),
                    *([dmc.Badge("golden", color="yellow", variant="light")] if t.get("golden") else []),
                ],
                gap="sm",
            ),
            dmc.SimpleGrid(
                [
                    _figure("cost", money(dec(t.get("cost_usd")), cover), id="tasks-detail-cost"),
                    _figure(
                        "LLM / tools",
                        f"{format_usd(t.get('llm_cost_usd'), none='unpriced')} / "
                        f"{format_usd(t.get('tool_cost_usd'), none='—')}",
                    ),
                    _figure(
                        "calls / attempts / failed",
                        f"{count(t.get('llm_calls'))} / {count(t.get('attempts'))} / {count(t.get('failed_attempts'))}",
                        id="tasks-detail-attempts",
                    ),  # fmt: skip
                    _figure("tool calls", count(t.get("tool_calls")), id="tasks-detail-tools"),
                    _figure("started (UTC)", when(t.get("start_time"))),
                    _figure("duration", duration(t.get("duration_s"))),
                    _figure(
                        "tokens: input (cache read) / output",
                        f"{count(t.get('input_tokens'))} ({count(t.get('cache_read_tokens'))}) / "
                        f"{count(t.get('output_tokens'))}",
                    ),
                    _figure("provider / model", f"{t.get('provider') or '—'} / {t.get('model') or '—'}"),
                ],
                cols={"base": 2, "md": 4},
                spacing="sm",
            ),
            dmc.Text(
                f"project {t['project']} · agent {t.get('agent_name') or '—'} {t.get('agent_version') or ''}"
                + (f" · runs on {infra}" if infra else ""),
                size="xs",
                c="dimmed",
            ),
        ],
        withBorder=True,
        p="md",
        radius="md",
    )


def explanation(store: Any, d: TaskDetail, span_id: str) -> Any:
    """How call ``span_id`` of this task was priced (``explain_call``: what ``taskcost explain-cost`` prints)."""
    trace = next((c["trace_id"] for c in _rows(d.calls) if c["span_id"] == span_id), None)
    trace = trace or next((t["trace_id"] for t in _rows(d.tools) if t["span_id"] == span_id), None)
    if trace is None:
        return error_box(f"call {span_id!r} is not one of this task's calls")
    lines = explain_call(store, span_id, trace)
    return dmc.Paper(
        [
            dmc.Text(f"How call {span_id} was priced (taskcost explain-cost {span_id})", fw=600),
            dmc.Code("\n".join(lines), block=True, id="tasks-explain", style={"whiteSpace": "pre-wrap"}),
        ],
        withBorder=True,
        p="md",
        radius="md",
    )


def drilldown(store: Any, query: Mapping[str, Any]) -> Any:
    task = str(query["task"])
    d = task_detail(store, task, project=query.get("project") or None)
    if d is None:
        where = f" in project {query['project']!r}" if query.get("project") else ""
        return error_box(f"no task {task!r}{where}: it may not have arrived yet, or the address is wrong")
    call = query.get("call")
    parts: list[Any] = [task_head(d)]
    if d.calls.height or d.tools.height:
        parts += [dmc.Text("Timeline", fw=600), timeline(d)]
    if d.calls.height:
        parts.append(dmc.Text("Tokens, cache and cost per call attempt", fw=600))
        if any(d.calls[c].fill_null(0).sum() for c in ("input_tokens", "output_tokens")):
            parts.append(token_chart(d))
        else:
            parts.append(dmc.Text("No call attempt reported token usage.", size="sm", c="dimmed"))
        parts.append(call_table(d, query))
    else:
        parts.append(dmc.Text("This task has no LLM call attempts.", size="sm", c="dimmed"))
    if call:
        parts.append(explanation(store, d, str(call)))
    parts.append(tool_table(d))
    parts += [dmc.Text(n, size="xs", c="dimmed") for n in d.notes()]
    return dmc.Stack([p for p in parts if p is not None], gap="sm")


def fingerprint(store: Any, query: Mapping[str, Any]) -> Any:
    """The task's infra fingerprint: each field's values by share of its calls (the ``changes`` question)."""
    filters = Filters.model_validate({"project": query.get("project") or None})
    q = QUESTIONS["changes"]
    ans = q.run(store, filters, q.options(task=str(query["task"]))).to_json()
    table = ans["tables"]["fingerprint"]
    s = ans["summary"]
    if not s.get("calls"):
        return None
    cols = table["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in table["rows"]]
    head = dmc.TableThead(dmc.TableTr([dmc.TableTh(h) for h in ("field", "value", "calls", "share of calls")]))
    body = dmc.TableTbody(
        [
            dmc.TableTr(
                [
                    dmc.TableTd(r["field"]),
                    dmc.TableTd("—" if r["value"] is None else str(r["value"])),
                    dmc.TableTd(count(r["calls"])),
                    dmc.TableTd(f"{float(r['share']) * 100:.0f}%"),
                ]
            )
            for r in rows
        ]
    )
    p95 = s.get("p95_s")
    return dmc.Paper(
        [
            dmc.Text("Infra fingerprint", fw=600),
            dmc.Text(
                "Which engine, GPU, container image, cluster, model and price data this task's calls ran on "
                f"({s['calls']} call attempts; p95 latency {'—' if p95 is None else f'{p95:.2f} s'}).",
                size="xs",
                c="dimmed",
            ),
            dmc.Table([head, body], striped=True, withTableBorder=True, fz="sm", id="tasks-fingerprint-table"),
            *[dmc.Text(n, size="xs", c="dimmed") for n in ans["notes"]],
        ],
        withBorder=True,
        p="md",
        radius="md",
    )
