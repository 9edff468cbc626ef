"""The Dash app factory. Pages are registered explicitly (the app ships inside an installed package)."""

from __future__ import annotations

from typing import Any

import dash
import flask
from dash import Dash, dcc, html

from dashboards.pages import overview

__all__ = ["create_dash_app"]


class _ProjectScoped:
    """The store as seen by one dashboard request: limited to the project the server vouched for
    in ``header`` (set by the server after checking the caller's read key; absent when auth is off)."""

    def __init__(self, store: Any, header: str) -> None:
        self._store = store
        self._header = header

    def query(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> Any:
        project = flask.request.headers.get(self._header) if flask.has_request_context() else None
        if project is not None:
            kwargs["project"] = project
        return self._store.query(sql, params, **kwargs)


def create_dash_app(store: Any, *, project_header: str | None = None, **dash_kwargs: Any) -> Dash:
    """A Dash app over ``store`` (anything ``taskcost.analytics`` accepts). With ``project_header``,
    every query is limited to the project named in that request header."""
    if project_header is not None:
        store = _ProjectScoped(store, project_header)
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
