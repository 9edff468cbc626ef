"""Overview: tasks by outcome and the cost per completed task. (A first page; more follow.)"""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, Input, Output, dash_table, dcc, html

from taskcost.analytics import task_summary

__all__ = ["register"]


def _money(v: Any) -> str:
    return "unpriced" if v is None else f"${v:,.6f}"


def register(app: Dash, store: Any) -> None:
    def layout(**_query: str) -> html.Div:
        return html.Div(
            [
                html.H2("Tasks"),
                dcc.Interval(id="overview-tick", interval=10_000),
                html.Div(id="overview-headline"),
                dash_table.DataTable(id="overview-table"),
            ]
        )

    dash.register_page("overview", path="/", name="Overview", layout=layout)

    @app.callback(
        Output("overview-headline", "children"),
        Output("overview-table", "data"),
        Input("overview-tick", "n_intervals"),
    )
    def refresh(_n: int | None) -> tuple[str, list[dict[str, Any]]]:
        s = task_summary(store)
        headline = (
            f"{s.tasks} tasks, {s.completed} completed; "
            f"cost per completed task {_money(s.cost_per_completed_task_usd)}"
        )
        rows = [
            {"outcome": r.outcome, "tasks": r.tasks, "attempts": r.attempts, "cost": _money(r.cost_usd)}
            for r in s.by_outcome
        ]
        return headline, rows
