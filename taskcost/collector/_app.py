"""The app factory: one process serves OTLP intake, the query API and the dashboards."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from taskcost import __version__
from taskcost.collector._api import api_router
from taskcost.collector._auth import CALLER_PROJECT, authenticate
from taskcost.collector._decoders import DecodePool
from taskcost.collector._errors import ApiError, error_body, install_error_handlers
from taskcost.collector._gate import QueryGate
from taskcost.collector._ingest import rules_from_settings
from taskcost.collector._metrics import Metrics
from taskcost.collector._otlp import otlp_router
from taskcost.collector._pricing_api import pricing_router
from taskcost.settings import Settings
from taskcost.store import Store

__all__ = ["create_app"]


class _ReadKeyGate:
    """ASGI wrapper for the dashboards: a read key is required once auth is on, and the caller's project travels
    to the Dash callbacks in the ASGI scope (``CALLER_PROJECT``), where no client can put anything."""

    def __init__(self, app: Any, store: Store, admin_token: str | None) -> None:
        self.app = app
        self.store = store
        self.admin_token = admin_token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            caller = authenticate(self.store, headers, "read", self.admin_token)
        except ApiError as exc:
            await JSONResponse(error_body(exc.status, exc.message), exc.status, headers=exc.headers)(
                scope, receive, send
            )
            return
        await self.app({**scope, CALLER_PROJECT: caller.project}, receive, send)


class _GatedReads:
    """The store as the dashboards use it: reads share the SQL gate with /api/sql."""

    def __init__(self, store: Store, gate: QueryGate) -> None:
        self._store = store
        self._gate = gate

    def query(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> Any:
        return self._gate.run(self._store.query, sql, params, **kwargs)


def create_app(
    settings: Settings,
    store: Store,
    *,
    dashboards: bool = True,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    admin_token: str | None = None,
) -> FastAPI:
    """Build the service around an open store. Nothing is opened or started here; the caller owns
    the store (and closes it when the server stops, e.g. from ``lifespan``). ``admin_token``
    (else ``settings.admin_token``) enables key management over HTTP. With ``settings.decode_workers`` > 0,
    ``app.state.decoders`` is the decode pool: start it with ``.start()`` and stop it with ``.close()`` (it starts
    by itself on the first request otherwise)."""
    app = FastAPI(
        lifespan=lifespan,
        title="taskcost",
        version=__version__,
        description="Task-cost accounting for LLM agents: OTLP/HTTP intake and a read-only SQL API.",
        docs_url=None,  # served below, behind the same keys as the rest
        redoc_url=None,
        openapi_url=None,
    )
    install_error_handlers(app)
    admin_token = admin_token or settings.admin_token
    gate = QueryGate(settings.sql_max_concurrent, settings.sql_max_queued)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        authenticate(store, request, "any", admin_token)
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        authenticate(store, request, "any", admin_token)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="taskcost API")

    metrics = Metrics(store)
    if hasattr(store, "on_commit"):
        store.on_commit = metrics.on_commit
    schemas = getattr(store, "arrow_schemas", None)
    decoders = (
        DecodePool(settings, schemas, settings.decode_workers)  # started by the caller, or on the first request
        if settings.decode_workers and schemas is not None and not getattr(store, "read_only", False)
        else None
    )
    app.include_router(
        otlp_router(
            store,
            max_body_bytes=settings.max_body_bytes,
            max_inflight=settings.max_inflight_requests,
            backpressure_wait_s=settings.backpressure_wait_s,
            rules=rules_from_settings(settings),
            metrics=metrics,
            decoders=decoders,
        )
    )
    app.include_router(
        api_router(
            store,
            sql_timeout_s=settings.sql_timeout_s,
            sql_max_rows=settings.sql_max_rows,
            sql_max_bytes=settings.sql_max_result_bytes,
            gate=gate,
            metrics=metrics,
            admin_token=admin_token,
        )
    )
    app.include_router(pricing_router(settings, store, admin_token))
    app.state.settings = settings
    app.state.store = store
    app.state.metrics = metrics
    app.state.decoders = decoders
    app.state.sql_gate = gate
    if dashboards:
        from a2wsgi import WSGIMiddleware

        from dashboards import create_dash_app

        dash_app = create_dash_app(
            _GatedReads(store, gate), caller_scope_key=CALLER_PROJECT, requests_pathname_prefix="/dash/"
        )
        app.add_api_route("/dash", lambda: RedirectResponse("/dash/"), include_in_schema=False)
        app.mount("/dash", _ReadKeyGate(WSGIMiddleware(dash_app.server), store, admin_token))  # type: ignore[arg-type]
        app.state.dash_app = dash_app
    return app
