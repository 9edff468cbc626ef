"""Tasks: every selected task, searchable and sortable on the server (the search, the sort and the task opened are in
the URL), and one task's drill-down: the timeline of its call attempts and tool calls, tokens, cache and cost per
call, the infra fingerprint of its calls, and how any call's cost was computed.

``/tasks?kind=report&q=demo&sort=-cost`` lists; ``/tasks?...&task=<id>`` opens a task (the list's filters kept for the
way back); ``&call=<span id>`` explains that call's cost. Thin over ``taskcost.analytics``: ``task_list``,
``task_detail``, ``explain_call`` and the ``changes`` question's task mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Dash, Input, Output, html

from dashboards._context import PageContext
from dashboards._task_view import (
    count,
    dec,
    drilldown,
    duration,
    fingerprint,
    href,
    list_query,
    model_cell,
    outcome_badge,
    unpriced_note,
    when,
)
from dashboards._ui import empty_state, filters_from_query, money, page, safe_callback, url_id
from taskcost.analytics import (
    TaskList,
    task_list,
)

__all__ = ["SHOWN", "SORT_LABELS", "register"]

NAME = "tasks"
SHOWN = 50
"""The list shows this many tasks (a note says how many match): search, filter or sort to narrow. 50, not 100: the
browser's work to show the list grows faster than its rows (the demo's tasks on 2 cores, in a tab that had shown a
page: 100 rows took 3.9-4.9 s of CPU and 3.3-4.1 s to show, 50 rows 2.0-2.2 s and 1.4-1.6 s)."""

SORT_LABELS: dict[str, str] = {
    "-start": "newest first",
    "start": "oldest first",
    "-cost": "costliest first",
    "cost": "cheapest first",
    "-duration": "longest first",
    "-attempts": "most attempts first",
    "task": "task id",
}
"""The sort menu (any ``TASK_SORTS`` key, ``-`` for descending, is accepted in the URL)."""
_DEFAULT_SORT = "-start"
_DESCENDING_FIRST = {"start", "cost", "duration", "attempts"}


# -- the list ------------------------------------------------------------------------------------------------------
def _controls(query: Mapping[str, Any]) -> Any:
    sort = query.get("sort") or _DEFAULT_SORT
    options = [{"value": k, "label": v} for k, v in SORT_LABELS.items()]
    if sort not in SORT_LABELS:
        options.insert(0, {"value": sort, "label": sort})
    return dmc.Group(
        [
            dmc.TextInput(
                id=url_id("q"),
                label="Search",
                placeholder="task id, kind, outcome, model, engine (Enter)",
                value=query.get("q") or "",
                debounce=True,
                w=340,
            ),
            dmc.Select(id=url_id("sort"), label="Sort", data=options, value=sort, allowDeselect=False, w=190),
        ],
        align="flex-end",
        gap="sm",
    )


def _header(query: Mapping[str, Any], label: str, key: str | None) -> Any:
    """A column header; a sortable one is a link that sorts by it (again: the other way)."""
    if key is None:
        return dmc.TableTh(label)
    current = str(query.get("sort") or _DEFAULT_SORT)
    if current.removeprefix("-") == key:
        desc = not current.startswith("-")
        arrow = " ▼" if current.startswith("-") else " ▲"
    else:
        desc, arrow = key in _DESCENDING_FIRST, ""
    target = f"-{key}" if desc else key
    return dmc.TableTh(
        dmc.Anchor(label + arrow, href=href(query, sort=target), underline="never", id=f"tasks-sort-{key}")
    )


def task_table(found: TaskList, query: Mapping[str, Any]) -> Any:
    """The page of tasks as a table: each task id links to its drill-down."""
    if found.rows.height == 0:
        what = f" matching {found.search!r}" if found.search else ""
        return dmc.Alert(
            f"No task{what} among the selected tasks: clear the search or widen the filters.",
            title="No tasks",
            color="gray",
            className="tc-empty",
        )
    base = list_query(query)
    projects = found.rows["project"].n_unique() > 1 and not query.get("project")
    head = dmc.TableThead(
        dmc.TableTr(
            [
                _header(query, "Task", "task"),
                _header(query, "Kind", "kind"),
                _header(query, "Outcome", "outcome"),
                _header(query, "Attempts", "attempts"),
                _header(query, "Cost", "cost"),
                _header(query, "Started (UTC)", "start"),
                _header(query, "Duration", "duration"),
                _header(query, "Model / engine", None),
            ]
        )
    )
    # few components a row (money() and model_cell() give text or one component where they can): the browser's
    # work after every answer grows faster than their number (SHOWN says by how much)
    rows = []
    for r in found.rows.iter_rows(named=True):
        extra = {"project": r["project"]} if projects else {}
        link = dmc.Anchor(r["task_id"], href=href(base, task=r["task_id"], **extra), className="tc-task-link")
        attempts: list[Any] = [count(r["attempts"]) + (f" ({r['retries']} retried)" if r.get("retries") else "")]
        if r.get("tool_calls"):
            attempts.append(dmc.Text(f"+ {r['tool_calls']} tool calls", size="xs", c="dimmed"))
        rows.append(
            dmc.TableTr(
                [
                    dmc.TableTd(link),
                    dmc.TableTd(r["kind"] or "—"),
                    dmc.TableTd(outcome_badge(r["outcome"])),
                    dmc.TableTd(attempts),
                    dmc.TableTd(money(dec(r["cost_usd"]), unpriced_note(r["unpriced_calls"], r["attempts"]))),
                    dmc.TableTd(when(r["start_time"])),
                    dmc.TableTd(duration(r["duration_s"])),
                    dmc.TableTd(model_cell(r)),
                ],
                className="tc-task-row",
            )
        )
    body = dmc.TableTbody(rows)
    order = SORT_LABELS.get(found.sort, found.sort)
    what = f" {found.search!r}" if found.search else ""
    if found.more:
        said = f"More than {found.limit:,} tasks match{what}"
        shown = f"; the first {found.limit:,} ({order}) are shown: search or filter to narrow"
    else:
        said, shown = f"{found.rows.height:,} tasks match{what}", ""
    return dmc.Stack(
        [
            dmc.Text(said + shown + ".", size="sm", id="tasks-count"),
            dmc.TableScrollContainer(
                dmc.Table([head, body], striped=True, highlightOnHover=True, withTableBorder=True, fz="sm"),
                minWidth=900,
            ),
            dmc.Text(
                "Cost leaves out unpriced call attempts (never counted as $0): a task with any says how many under its "
                "cost. Running tasks have no outcome yet.",
                size="xs",
                c="dimmed",
            ),
        ],
        gap="xs",
        id="tasks-table",
    )


# -- the page ------------------------------------------------------------------------------------------------------
def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        if query.get("task"):
            back = dmc.Anchor("← all tasks", href=href(list_query(query)), id="tasks-back")
            return page(
                NAME,
                "Task",
                query,
                ctx.store,
                back,
                html.Div(id="tasks-detail"),
                html.Div(id="tasks-fingerprint"),
                html.Div(id="tasks-body"),
                filters=False,
            )
        return page(
            NAME,
            "Tasks",
            query,
            ctx.store,
            _controls(query),
            html.Div(id="tasks-body"),
            html.Div(id="tasks-detail"),
            html.Div(id="tasks-fingerprint"),
        )

    dash.register_page(NAME, path="/tasks", name="Tasks", layout=layout)

    @app.callback(Output("tasks-body", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh_list(query: dict[str, str] | None) -> Any:
        query = query or {}
        if query.get("task"):
            return None
        filters = filters_from_query(query)
        sort = query.get("sort") or _DEFAULT_SORT
        found = task_list(ctx.store, filters, search=query.get("q") or None, sort=sort, limit=SHOWN)
        if found.rows.height == 0 and not found.search:
            return empty_state("No tasks yet")
        return task_table(found, query)

    @app.callback(Output("tasks-detail", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh_detail(query: dict[str, str] | None) -> Any:
        query = query or {}
        return drilldown(ctx.store, query) if query.get("task") else None

    @app.callback(Output("tasks-fingerprint", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh_fingerprint(query: dict[str, str] | None) -> Any:
        query = query or {}
        return fingerprint(ctx.store, query) if query.get("task") else None
