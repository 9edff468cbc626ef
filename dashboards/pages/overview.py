"""Overview: spend, completed tasks, cost per completed task, success rate. (Shell; the full page follows.)"""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, Input, Output, html

from dashboards._ui import empty_state, filters_from_query, page, safe_callback, stat
from dashboards.app import PageContext
from taskcost.analytics import QUESTIONS, format_usd

__all__ = ["register"]

NAME = "overview"


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return page(NAME, "Overview", query, ctx.store, html.Div(id="overview-body"))

    dash.register_page(NAME, path="/", name="Overview", layout=layout)

    @app.callback(Output("overview-body", "children"), Input(f"{NAME}-query", "data"))
    @safe_callback()
    def refresh(query: dict[str, str] | None) -> Any:
        filters = filters_from_query(query)
        q = QUESTIONS["cost"]
        ans = q.run(ctx.store, filters, q.options()).to_json()
        s = ans["summary"]
        if not s.get("tasks"):
            return empty_state()
        return html.Div(
            [
                stat("Cost per completed task", format_usd(s.get("cost_per_completed_task_usd"), none="unpriced")),
                stat("Completed tasks", str(s.get("completed_tasks"))),
            ],
            id="overview-headline",
        )
