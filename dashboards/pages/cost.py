"""Cost. (Placeholder: the page is being built.)"""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, html

from dashboards._ui import page
from dashboards.app import PageContext

__all__ = ["register"]

NAME = "cost"


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return page(NAME, "Cost", query, ctx.store, html.Div(id=f"{NAME}-body"))

    dash.register_page(NAME, path="/cost", name="Cost", layout=layout)
