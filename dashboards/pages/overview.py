"""Overview: tasks by outcome and the cost per completed task. (A first page; more follow.)"""

from __future__ import annotations

import dash
from dash import Dash, Input, Output, dcc, html

from taskcost.analytics import ReadStore, format_usd, task_summary

__all__ = ["register"]


def register(app: Dash, store: ReadStore) -> None:
    def layout(**_query: str) -> html.Div:
        return html.Div(
            [
                html.H2("Tasks"),
                dcc.Interval(id="overview-tick", interval=10_000),
                html.Div(id="overview-headline"),
                html.Table(id="overview-table"),
            ]
        )

    dash.register_page("overview", path="/", name="Overview", layout=layout)

    @app.callback(
        Output("overview-headline", "children"),
        Output("overview-table", "children"),
        Input("overview-tick", "n_intervals"),
    )
    def refresh(_n: int | None) -> tuple[str, list[html.Tr]]:
        s = task_summary(store)
        per = format_usd(s.cost_per_completed_task_usd, none="unpriced")
        headline = f"{s.tasks} tasks, {s.completed} completed; cost per completed task {per}"
        head = html.Tr([html.Th(h) for h in ("outcome", "tasks", "attempts", "cost")])
        rows = [
            html.Tr(
                [
                    html.Td(r.outcome),
                    html.Td(r.tasks),
                    html.Td(r.attempts),
                    html.Td(format_usd(r.cost_usd, none="unpriced")),
                ]
            )
            for r in s.by_outcome
        ]
        return headline, [head, *rows]
