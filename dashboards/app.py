"""The Dash app factory. Pages are registered explicitly (the app ships inside an installed package)."""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, dcc, html

from dashboards.pages import overview

__all__ = ["create_dash_app"]


def create_dash_app(store: Any, **dash_kwargs: Any) -> Dash:
    """A Dash app over ``store`` (anything ``taskcost.analytics`` accepts)."""
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        title="taskcost",
        suppress_callback_exceptions=True,
        routes_pathname_prefix="/",
        **dash_kwargs,
    )
    overview.register(app, store)
    app.layout = html.Div(
        [
            html.H1("taskcost"),
            html.Nav([dcc.Link(p["name"], href=p["relative_path"]) for p in dash.page_registry.values()]),
            dash.page_container,
        ]
    )
    return app
