"""Cache. (Placeholder: the page is being built.)"""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, html

from dashboards._ui import page
from dashboards.app import PageContext

__all__ = ["register"]

NAME = "cache"


def register(app: Dash, ctx: PageContext) -> None:
    def layout(**query: str) -> Any:
        return page(NAME, "Cache", query, ctx.store, html.Div(id=f"{NAME}-body"))

    dash.register_page(NAME, path="/cache", name="Cache", layout=layout)
