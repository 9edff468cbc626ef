"""The collector's app factory: OTLP intake, the query API, operations and pricing endpoints."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from taskcost import __version__
from taskcost.collector._allocation import ClusterAllocator
from taskcost.collector._api import api_router
from taskcost.collector._auth import AuthPolicy, authenticate
from taskcost.collector._body import BodyGate
from taskcost.collector._decoders import DecodePool
from taskcost.collector._engine_scrape import EngineIntake, EngineScraper
from taskcost.collector._errors import install_error_handlers
from taskcost.collector._gate import QueryGate
from taskcost.collector._ingest import Intake, intake_from_settings
from taskcost.collector._metrics import Metrics
from taskcost.collector._otlp import otlp_router
from taskcost.collector._pricing_api import pricing_router
from taskcost.pricing import PricingSource
from taskcost.settings import Settings
from taskcost.store import Store

__all__ = ["create_app"]


def create_app(
    settings: Settings,
    store: Store,
    *,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    admin_token: str | None = None,
    intake: Intake | None = None,
    body_limits: Mapping[str, int] | None = None,
) -> FastAPI:
    """The collector's app: OTLP/HTTP intake, the query API, operations and pricing endpoints, around an open store
    (the dashboards are mounted by the composition root, taskcost/app.py). Nothing is opened or started here; the
    caller owns the store (and closes it when the server stops, e.g. from ``lifespan``). ``intake``: the normaliser's
    rules and the pricing source, built once by the caller and shared with the gRPC receiver (None: from
    ``settings``); ``app.state.intake`` holds it. ``admin_token``
    (else ``settings.admin_token``) enables key management over HTTP. With ``settings.decode_workers`` > 0,
    ``app.state.decoders`` is the decode pool: start it with ``.start()`` (it starts by itself on the first request
    otherwise); the end of the app's lifespan stops its workers, after the caller's ``lifespan`` (the next request
    starts them again; ``.close()`` stops them for good, and is what an app used without its lifespan needs).
    ``app.state.cluster_allocation`` allocates the self-hosted clusters' windows once they have ended
    (``allocate_clusters``): it starts with the app's lifespan and stops before the caller's ``lifespan`` ends
    (which may close the store); its ``status()`` is in /readyz.
    ``app.state.engine_scraper`` scrapes the ``engine_scrape`` targets (a thread, from the app's start to its stop,
    when there are any). ``app.state.auth`` says whether a key is required (the ``auth`` setting and the store's
    keys: ``AuthPolicy``). A request body is read only after the caller's key was checked, and only up to
    ``api_max_body_bytes`` (``BodyGate``; ``body_limits``: other limits by path prefix; OTLP intake has
    ``max_body_bytes``)."""
    admin_token = admin_token or settings.admin_token
    intake = intake_from_settings(settings) if intake is None else intake
    # the pricing endpoints re-price with what intake prices with: one source
    pricing = intake.pricing or PricingSource(settings.pricing_config())
    intake = dataclasses.replace(intake, pricing=pricing)
    allocation = ClusterAllocator(
        store,
        pricing,
        enabled=settings.allocate_clusters and not store.read_only,
        delay_s=settings.cluster_allocation_delay_s,
    )

    @contextlib.asynccontextmanager
    async def allocating(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if decoders is not None:  # last: the caller's lifespan may stop receivers that still decode with it
                stack.callback(decoders.stop)
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            allocation.start()
            stack.callback(allocation.stop)  # first: the caller's lifespan may close the store
            scraper.start()
            stack.callback(scraper.stop)
            yield

    app = FastAPI(
        lifespan=allocating,
        title="taskcost",
        version=__version__,
        description="Task-cost accounting for LLM agents: OTLP/HTTP intake and a read-only SQL API.",
        docs_url=None,  # served below, behind the same keys as the rest
        redoc_url=None,
        openapi_url=None,
    )
    install_error_handlers(app)
    auth = AuthPolicy.from_settings(settings, store)
    app.add_middleware(
        BodyGate,
        auth=auth,
        admin_token=admin_token,
        limit=settings.api_max_body_bytes,
        limits={"/v1/": None, **(body_limits or {})},  # OTLP: key, then max_body_bytes, in the route
    )
    gate = QueryGate(settings.sql_max_concurrent, settings.sql_max_queued)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        authenticate(auth, request, "any", admin_token)
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        authenticate(auth, request, "any", admin_token)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="taskcost API")

    metrics = Metrics(store)
    store.on_commit = metrics.on_commit
    engines = EngineIntake.of(metrics, settings)  # one series cap for HTTP, gRPC and the scraper
    # the engine_scrape targets, scraped from the app's start to its stop (none: no thread)
    scraper = EngineScraper(store, [] if store.read_only else settings.engine_scrape, engines)
    decoders = (
        DecodePool(settings, store.arrow_schemas, settings.decode_workers)  # started by the caller or on first use
        if settings.decode_workers and not store.read_only
        else None
    )
    app.include_router(
        otlp_router(
            store,
            auth=auth,
            max_body_bytes=settings.max_body_bytes,
            max_inflight=settings.max_inflight_requests,
            backpressure_wait_s=settings.backpressure_wait_s,
            intake=intake,
            metrics=metrics,
            decoders=decoders,
            engines=engines,
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
            auth=auth,
            allocation=allocation.status,
        )
    )
    app.include_router(pricing_router(pricing, store, admin_token, auth, allocation=allocation.status))
    app.state.settings = settings
    app.state.store = store
    app.state.auth = auth
    app.state.metrics = metrics
    app.state.decoders = decoders
    app.state.sql_gate = gate
    app.state.intake = intake
    app.state.cluster_allocation = allocation
    app.state.engine_scraper = scraper
    return app
