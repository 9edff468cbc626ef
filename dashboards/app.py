"""The Dash app factory. Pages are registered explicitly (the app ships inside an installed package)."""

from __future__ import annotations

from typing import Any

import dash
import flask
from dash import Dash, dcc, html

from dashboards.pages import overview
from taskcost.analytics import ReadStore

__all__ = ["create_dash_app"]


class _ProjectScoped:
    """The store as seen by one dashboard request: limited to the project the server vouched for after checking
    the caller's read key, which it put in the ASGI scope under ``scope_key`` (None: every project, auth is off).
    A request that did not come through that check reads nothing."""

    def __init__(self, store: ReadStore, scope_key: str) -> None:
        self._store = store
        self._scope_key = scope_key

    def _project(self) -> str | None:
        scope = flask.request.environ.get("asgi.scope") if flask.has_request_context() else None
        if not isinstance(scope, dict) or self._scope_key not in scope:
            raise PermissionError("this request did not pass the server's key check")
        project: str | None = scope[self._scope_key]
        return project

    def query(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> Any:
        return self._store.query(sql, params, **{**kwargs, "project": self._project()})

    def arrow(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> Any:
        return self._store.arrow(sql, params, **{**kwargs, "project": self._project()})


def create_dash_app(store: ReadStore, *, caller_scope_key: str | None = None, **dash_kwargs: Any) -> Dash:
    """A Dash app over ``store`` (anything ``taskcost.analytics`` accepts). With ``caller_scope_key``, every query
    is limited to the project the server put under that key of the request's ASGI scope."""
    if caller_scope_key is not None:
        store = _ProjectScoped(store, caller_scope_key)
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
