"""The Dash app factory. Pages are registered explicitly (the app ships inside an installed package), one file per
page under ``pages/``, each a ``register(app, ctx)`` whose layout is rendered from the URL query."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

import dash
import dash_mantine_components as dmc
import flask
from dash import ALL, Dash, Input, Output, State, html

from dashboards._badge import register_badge
from dashboards._context import PageContext
from dashboards._ui import URL_TYPE
from dashboards.pages import PAGES
from taskcost.analytics import ReadStore

__all__ = ["create_dash_app"]

_PAGES_LOCATION = "_pages_location"
"""The page router's own ``dcc.Location`` (``refresh="callback-nav"``): a new search on it renders the page again."""


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

    def caller_project(self) -> str | None:
        """The project this request reads (None: every project); a question over data that is not per project (the
        clusters' bills) narrows itself to it."""
        return self._project()

    def cluster_costs(self, **options: Any) -> Any:
        self._project()  # only for a request that passed the key check
        return self._store.cluster_costs(**options)  # type: ignore[attr-defined]


def create_dash_app(
    store: ReadStore,
    *,
    caller_scope_key: str | None = None,
    health: Callable[[], dict[str, Any]] | None = None,
    **dash_kwargs: Any,
) -> Dash:
    """A Dash app over ``store`` (anything ``taskcost.analytics`` accepts). With ``caller_scope_key``, every query
    is limited to the project the server put under that key of the request's ASGI scope. ``health``: the server's
    own figures for the Data health page."""
    if caller_scope_key is not None:
        store = _ProjectScoped(store, caller_scope_key)
    ctx = PageContext(store, health)
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        title="taskcost",
        suppress_callback_exceptions=True,
        routes_pathname_prefix="/",
        **dash_kwargs,
    )
    pages = list(PAGES)
    for module in pages:
        module.register(app, ctx)
    register_badge(app, store)
    entries = [dash.page_registry[m.NAME] for m in pages]  # the navigation keeps the pages' own order
    nav = [
        dmc.NavLink(label=p["name"], href=p["relative_path"], id=f"nav-{p['module']}", active="exact") for p in entries
    ]
    app.layout = dmc.MantineProvider(
        dmc.AppShell(
            [
                dmc.AppShellHeader(
                    dmc.Group(
                        [
                            dmc.Title("taskcost", order=3),
                            dmc.Text("cost per completed task", c="dimmed", size="sm"),
                            html.Div(id="tc-demo-badge"),
                        ],
                        h="100%",
                        px="md",
                    )
                ),
                dmc.AppShellNavbar(nav, p="xs"),
                dmc.AppShellMain(dash.page_container),
            ],
            header={"height": 52},
            navbar={"width": 170, "breakpoint": "sm"},
            padding="md",
        )
    )

    @app.callback(
        Output(_PAGES_LOCATION, "search"),
        Input({"type": URL_TYPE, "key": ALL}, "value"),
        State({"type": URL_TYPE, "key": ALL}, "id"),
        State(_PAGES_LOCATION, "search"),
        prevent_initial_call=True,
    )
    def _write_url(values: list[Any], ids: list[dict[str, str]], search: str | None) -> Any:
        """Every URL-kept control's value into the query string (empty ones left out), keeping the address's other
        keys (``since``, a task's id...) except the absolute times when the time range changed; the router renders
        the page again from it."""
        if len(dash.ctx.triggered) != 1:  # the page was rendered (all its controls appeared): nothing was changed
            return dash.no_update
        held = {i["key"] for i in ids}
        if dash.ctx.triggered_id == {"type": URL_TYPE, "key": "range"}:
            held |= {"since", "until"}
        pairs = [(k, v) for k, v in parse_qsl((search or "").lstrip("?")) if k not in held]
        pairs += [(i["key"], _text(v)) for i, v in zip(ids, values, strict=True) if v not in (None, "", [], False)]
        if any(k == "range" and v == "all" for k, v in pairs):
            pairs = [(k, v) for k, v in pairs if k != "range"]
        new = "?" + urlencode(pairs) if pairs else ""
        return dash.no_update if new == (search or "") else new

    return app


def _text(value: Any) -> str:
    if value is True:
        return "1"
    return str(value)
