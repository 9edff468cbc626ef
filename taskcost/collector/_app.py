"""The app factory: one process serves OTLP intake, the query API and the dashboards."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from taskcost import __version__
from taskcost.collector._api import api_router
from taskcost.collector._errors import install_error_handlers
from taskcost.collector._otlp import otlp_router
from taskcost.settings import Settings
from taskcost.store import Store

__all__ = ["create_app"]


def create_app(
    settings: Settings,
    store: Store,
    *,
    dashboards: bool = True,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> FastAPI:
    """Build the service around an open store. Nothing is opened or started here; the caller owns
    the store (and closes it when the server stops, e.g. from ``lifespan``)."""
    app = FastAPI(
        lifespan=lifespan,
        title="taskcost",
        version=__version__,
        description="Task-cost accounting for LLM agents: OTLP/HTTP intake and a read-only SQL API.",
    )
    install_error_handlers(app)
    app.include_router(otlp_router(store, settings.max_body_bytes))
    app.include_router(api_router(store, sql_timeout_s=settings.sql_timeout_s, sql_max_rows=settings.sql_max_rows))
    app.state.settings = settings
    app.state.store = store
    if dashboards:
        from a2wsgi import WSGIMiddleware

        from dashboards import create_dash_app

        dash_app = create_dash_app(store, requests_pathname_prefix="/dash/")
        app.add_api_route("/dash", lambda: RedirectResponse("/dash/"), include_in_schema=False)
        app.mount("/dash", WSGIMiddleware(dash_app.server))  # type: ignore[arg-type]
        app.state.dash_app = dash_app
    return app
