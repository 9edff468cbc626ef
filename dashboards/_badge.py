"""The header's DEMO DATA badge, on every page while the store holds data ``taskcost demo`` made."""

from __future__ import annotations

import logging
from typing import Any

import dash_mantine_components as dmc
from dash import Dash, Input, Output

from taskcost.analytics import ReadStore, demo_marks

__all__ = ["register_badge"]

log = logging.getLogger(__name__)


def register_badge(app: Dash, store: ReadStore) -> None:
    """The header's badge (``#tc-demo-badge``): DEMO DATA, on every page, while the store holds data the demo made."""

    @app.callback(Output("tc-demo-badge", "children"), Input("_pages_location", "pathname"))
    def demo_badge(_path: str | None) -> Any:
        try:
            marks = demo_marks(store)
        except Exception:  # the badge must never break a page: the pages say what is wrong with the store
            log.exception("reading the demo marks")
            return None
        if not marks.any:
            return None
        # mixed with real data: say how much of it is the demo's ("236 OF 244 TASKS" read as a progress count)
        what = "" if marks.only else f" · {marks.demo_tasks:,} of the {marks.tasks:,} tasks are the demo's"
        return dmc.Tooltip(
            dmc.Badge(f"DEMO DATA{what}", color="orange", variant="filled", size="lg", id="tc-demo-badge-label"),
            label="Made by `taskcost demo` (service taskcost-demo): a simulated fleet, not real spend.",
            withArrow=True,
        )
