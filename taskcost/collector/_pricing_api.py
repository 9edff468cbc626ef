"""Pricing on a running server: which prices it uses, re-pricing, and the clusters' allocated windows.

The router shares the app's one ``PricingSource`` with intake (OTLP/HTTP and OTLP/gRPC price with it), so a
re-price reloads exactly the prices new spans are priced with, and file changes (``taskcost prices update``, book
edits) are picked up by both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from taskcost.collector._auth import AuthPolicy, authenticate, check_admin
from taskcost.collector._errors import ApiError
from taskcost.pricing import PricingSource, epoch_ns
from taskcost.store import Store, StoreUnavailableError

__all__ = ["pricing_router"]


class RepriceRequest(BaseModel):
    since: datetime | None = Field(None, description="Calls that started at or after this (UTC).")
    until: datetime | None = Field(None, description="Calls that started before this (UTC).")
    dry_run: bool = Field(False, description="Compute and report, change nothing.")


def _ns(at: datetime | None) -> int | None:
    return None if at is None else epoch_ns(at)


def pricing_router(
    source: PricingSource,
    store: Store,
    admin_token: str | None,
    auth: AuthPolicy,
    allocation: Callable[[], dict[str, Any]] | None = None,
) -> APIRouter:
    """``allocation``: the state of the server's allocation of the clusters' windows (in the status). ``auth``:
    whether a key is required (a body is read after the key was checked: ``BodyGate``)."""
    router = APIRouter()

    @router.get("/api/pricing/status", tags=["pricing"])
    def status(request: Request) -> dict[str, Any]:
        """The price data, price book and clusters file this server prices with, its cluster window and pricing
        attributes (and a reload error, if any), and how its allocation of the clusters' windows stands."""
        authenticate(auth, request, "read", admin_token)
        p = source.current()
        return {
            "prices": p.data.label,
            "prices_origin": p.data.origin,
            "providers": p.data.providers,
            "models": p.data.models,
            "book": p.book_version,
            "clusters": None if p.clusters is None else p.clusters.label,
            "cluster_window_s": p.window_s,
            "pricing_attributes": dict(p.attributes),
            "error": source.error,
            "cluster_allocation": None if allocation is None else allocation(),
        }

    @router.post("/api/admin/reprice", tags=["admin"])
    def reprice(body: RepriceRequest, request: Request) -> dict[str, Any]:
        """Reload the price files, then price stored calls again (page by page). Needs the admin token."""
        check_admin(request, admin_token)
        try:
            pricer = source.reload()
        except ValueError as exc:
            raise ApiError(400, f"the prices do not load, nothing was re-priced: {exc}") from None
        try:
            report = store.reprice(
                pricer, since_ns=_ns(body.since), until_ns=_ns(body.until), now_ns=time.time_ns(), dry_run=body.dry_run
            )
        except StoreUnavailableError as exc:
            raise ApiError(503, str(exc)) from None
        out: dict[str, Any] = report.to_json()
        return out

    @router.get("/api/admin/clusters", tags=["admin"])
    def clusters(
        request: Request, since: datetime | None = None, until: datetime | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """The self-hosted clusters' windows as last allocated: bill, attributed and idle cost. Admin token."""
        check_admin(request, admin_token)
        return [w.to_json() for w in store.cluster_costs(since_ns=_ns(since), until_ns=_ns(until), cluster_id=cluster)]

    return router
