"""The composition root: the collector's app with the dashboards mounted beside it, behind the same read keys.

The one place that knows every room (architecture.md): the collector does not know the dashboards, the
dashboards do not know the store or the collector; ``taskcost serve`` builds the server here."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from fastapi import FastAPI
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from taskcost._analytics_api import analytics_router
from taskcost.collector import (
    CALLER_PROJECT,
    DASHBOARD_CHALLENGE,
    ApiError,
    AuthPolicy,
    QueryGate,
    authenticate,
    error_body,
    intake_from_settings,
)
from taskcost.collector import create_app as create_collector_app
from taskcost.settings import Settings
from taskcost.store import QueryResult, Store

__all__ = ["create_app"]


# The dashboards' request bodies, at most (read after the key was checked): a callback carries the SQL page's answer
# back to draw its chart (up to 8 MiB of values, dashboards/pages/sql.py)
_DASHBOARD_MAX_BODY_BYTES = 32 * 1024 * 1024


class _ReadKeyGate:
    """ASGI wrapper for the dashboards: a read key is required once auth is on, and the caller's project travels
    to the Dash callbacks in the ASGI scope (``CALLER_PROJECT``), where no client can put anything."""

    def __init__(self, app: Any, auth: AuthPolicy, admin_token: str | None) -> None:
        self.app = app
        self.auth = auth
        self.admin_token = admin_token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            caller = authenticate(self.auth, headers, "read", self.admin_token)
        except ApiError as exc:
            challenge = dict(exc.headers or {})
            if exc.status == 401:
                challenge["WWW-Authenticate"] = DASHBOARD_CHALLENGE
            message = exc.message + (
                " (in a browser: any user name, the read key as the password)" if exc.status == 401 else ""
            )
            await JSONResponse(error_body(exc.status, message), exc.status, headers=challenge)(scope, receive, send)
            return
        await self.app({**scope, CALLER_PROJECT: caller.project}, receive, send)


class _BuiltOnFirstUse:
    """An ASGI app made by ``build`` when the first request reaches it (on a worker thread: building is blocking
    work), then kept. The dashboards are mounted this way: building them imports Dash and its components and lays
    out every page (0.6-0.8 s of CPU and about 35 MB, docs/configuration.md), which a server nobody opens the
    dashboards of never spends. A build that fails fails that request (500) and is tried again by the next."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self.app: Any = None

    def built(self) -> Any:
        with self._lock:
            if self.app is None:
                self.app = self._build()
            return self.app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.app if self.app is not None else await run_in_threadpool(self.built)
        await app(scope, receive, send)


class _GatedReads:
    """The store as the dashboards read it: through the SQL gate that /api/sql uses too, in the caller's project's
    share of it (``project``: the one the dashboards read, the server's check of the caller's key put it there)."""

    def __init__(self, store: Store, gate: QueryGate) -> None:
        self._store = store
        self._gate = gate

    def query(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> QueryResult:
        return self._gate.run(kwargs.get("project"), self._store.query, sql, params, **kwargs)

    def arrow(self, sql: str, params: list[Any] | None = None, **kwargs: Any) -> pa.Table:
        return self._gate.run(kwargs.get("project"), self._store.arrow, sql, params, **kwargs)

    def cluster_costs(self, **options: Any) -> Any:
        return self._store.cluster_costs(**options)


def _server_figures(app: FastAPI, settings: Settings, store: Store) -> Callable[[], dict[str, Any]]:
    """The server's own figures for the dashboards' Data health page: its counters (what /metrics exposes: the
    whole server's, every project, since it started), its write queue and spool, and the prices it prices with
    (what /api/pricing/status says). Counts and versions only: no stored row, so nothing of another project."""
    metrics = app.state.metrics
    pricing = app.state.intake.pricing
    started_at = datetime.now(UTC)
    # where the spool setting keeps it: <db>.spool/ (the ClickHouse store says where its own is)
    spool = getattr(store, "spool_directory", None) or settings.db.with_name(settings.db.name + ".spool")

    def by_label(counter: Any) -> dict[str, int]:
        return {
            ",".join(s.labels.values()) or "": int(s.value)
            for m in counter.collect()
            for s in m.samples
            if s.name.endswith("_total")
        }

    def total(counter: Any) -> int:
        return sum(by_label(counter).values())

    def spool_files() -> tuple[int, int]:
        size = aside = 0
        for path in spool.glob("*") if spool.is_dir() else ():
            try:
                if path.suffix == ".spool":
                    size += path.stat().st_size
                elif path.suffix == ".rejected":
                    aside += 1
            except OSError:  # committed and deleted meanwhile
                continue
        return size, aside

    def figures() -> dict[str, Any]:
        spool_bytes, set_aside = spool_files()
        p = pricing.current()
        return {
            "scope": "server",
            "started_at": started_at,
            "cluster_allocation": app.state.cluster_allocation.status(),
            "spans": {
                "received": total(metrics.received),
                "accepted": total(metrics.accepted),
                "deduplicated": total(metrics.deduplicated),
                "rejected": total(metrics.rejected),
                "rejected_by_reason": by_label(metrics.rejected),
                "dropped": total(metrics.dropped),
                "attribute_values_ignored": total(metrics.ignored_values),
            },
            "requests": {
                "refused_by_reason": by_label(metrics.refused),
                "throttled_by_reason": by_label(metrics.throttled),
                "invalid_by_status": by_label(metrics.bad_requests),
                "sql_refused": total(metrics.sql_refused),
            },
            "writer": {
                "alive": store.writer_alive,
                "queued_spans": store.queued_spans,
                "queue_limit_spans": store.queue_limit,
                "failed_batches": getattr(store, "failed_batches", None),
            },
            "spool": {
                "enabled": settings.spool,
                "backlog_spans": store.queued_spans if settings.spool else 0,
                "bytes": spool_bytes,
                "set_aside_records": set_aside,
            },
            "prices": {
                "data": p.data.label,
                "origin": p.data.origin,
                "providers": p.data.providers,
                "models": p.data.models,
                "book": p.book_version,
                "clusters": None if p.clusters is None else p.clusters.label,
                "error": pricing.error,
            },
        }

    return figures


def create_app(
    settings: Settings,
    store: Store,
    *,
    dashboards: bool = True,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    admin_token: str | None = None,
) -> FastAPI:
    """The whole service around an open store: the collector's app (``taskcost.collector.create_app``: intake, the
    query API, operations) and, with ``dashboards``, the Dash app at ``/dash/``. Nothing is opened or started
    here; the caller owns the store."""
    # the prices are built here, once, from the settings, and shared by intake, the pricing endpoints and (through
    # app.state.intake) the gRPC receiver
    intake = intake_from_settings(settings)
    app = create_collector_app(
        settings,
        store,
        lifespan=lifespan,
        admin_token=admin_token,
        intake=intake,
        body_limits={"/dash/": _DASHBOARD_MAX_BODY_BYTES},
    )
    auth = app.state.auth
    app.include_router(analytics_router(store, app.state.sql_gate, admin_token or settings.admin_token, auth))
    if dashboards:
        gated, health = _GatedReads(store, app.state.sql_gate), _server_figures(app, settings, store)

        def build() -> Any:
            from a2wsgi import WSGIMiddleware

            from dashboards import create_dash_app

            dash_app = create_dash_app(
                gated, caller_scope_key=CALLER_PROJECT, health=health, requests_pathname_prefix="/dash/"
            )
            return WSGIMiddleware(dash_app.server)

        dash = _BuiltOnFirstUse(build)
        app.add_api_route("/dash", lambda: RedirectResponse("/dash/"), include_in_schema=False)
        app.mount("/dash", _ReadKeyGate(dash, auth, admin_token or settings.admin_token))  # type: ignore[arg-type]
        app.state.dashboards = dash  # (``dash.built()`` builds them now)
    return app
