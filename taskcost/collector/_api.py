"""The read-only HTTP query API, operations endpoints and key management."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from taskcost import __version__
from taskcost._internal.jsonable import json_value
from taskcost.collector._auth import authenticate, check_admin
from taskcost.collector._errors import ApiError
from taskcost.collector._metrics import Metrics
from taskcost.store import QueryError, Store, StoreUnavailableError

__all__ = ["api_router"]


class SqlRequest(BaseModel):
    sql: str = Field(..., min_length=1, max_length=100_000, description="One read-only SELECT statement.")
    params: list[Any] = Field(default_factory=list, description="Values for `?` placeholders.")
    max_rows: int | None = Field(None, ge=1, description="At most this many rows (capped by the server).")


class SqlResponse(BaseModel):
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    truncated: bool
    elapsed_s: float


class KeyCreate(BaseModel):
    project: str = Field(..., min_length=1, max_length=64)
    kind: Literal["ingest", "read"]


class KeyOut(BaseModel):
    id: str
    project: str
    kind: str
    prefix: str
    created_at: str | None = None
    revoked_at: str | None = None
    secret: str | None = Field(None, description="Only in the answer that creates the key.")


def _key_out(key: Any, secret: str | None = None) -> KeyOut:
    return KeyOut(
        id=key.id,
        project=key.project,
        kind=key.kind,
        prefix=key.prefix,
        created_at=json_value(key.created_at),
        revoked_at=json_value(key.revoked_at),
        secret=secret,
    )


def api_router(
    store: Store,
    *,
    sql_timeout_s: float,
    sql_max_rows: int,
    metrics: Metrics,
    admin_token: str | None,
) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, Any]:
        """Liveness: the process answers and the store answers a trivial query."""
        try:
            store.query("SELECT 1", timeout_s=5)
        except (QueryError, StoreUnavailableError) as exc:
            raise ApiError(503, f"store not available: {exc}") from None
        return {"status": "ok", "version": __version__}

    @router.get("/readyz", tags=["operations"])
    def readyz() -> dict[str, Any]:
        """Readiness: the writer runs and its queue has room."""
        if not store.writer_alive:
            raise ApiError(503, "the store's writer is not running")
        queued = store.queued_spans
        if queued >= store.queue_limit:
            raise ApiError(503, f"write queue full ({queued} spans waiting)", headers={"Retry-After": "1"})
        return {"status": "ready", "queued_spans": queued}

    @router.get("/metrics", tags=["operations"], response_class=Response)
    def prometheus_metrics() -> Response:
        """Prometheus exposition: received, accepted, rejected, deduplicated, refused, queue, write latency."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @router.post("/api/sql", response_model=SqlResponse, tags=["query"])
    def run_sql(req: SqlRequest, request: Request) -> SqlResponse:
        """Run one read-only SELECT over the views (`llm_calls`, `tool_calls`, `tasks`) and `spans`."""
        caller = authenticate(store, request, "read", admin_token)
        limit = min(req.max_rows or sql_max_rows, sql_max_rows)
        try:
            res = store.query(req.sql, req.params, max_rows=limit, timeout_s=sql_timeout_s, project=caller.project)
        except QueryError as exc:
            raise ApiError(400, str(exc)) from None
        return SqlResponse(
            columns=res.columns,
            types=res.types,
            rows=[[json_value(v) for v in row] for row in res.rows],
            truncated=res.truncated,
            elapsed_s=res.elapsed_s,
        )

    @router.get("/api/admin/keys", response_model=list[KeyOut], tags=["admin"])
    def list_keys(request: Request) -> list[KeyOut]:
        """Every key (never its secret). Needs the admin token."""
        check_admin(request, admin_token)
        return [_key_out(k) for k in store.list_keys()]

    @router.post("/api/admin/keys", response_model=KeyOut, status_code=201, tags=["admin"])
    def create_key(body: KeyCreate, request: Request) -> KeyOut:
        """A new key; its secret is in this answer only. Needs the admin token."""
        check_admin(request, admin_token)
        try:
            key, secret = store.create_key(body.project, body.kind)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        return _key_out(key, secret)

    @router.delete("/api/admin/keys/{key_id}", response_model=KeyOut, tags=["admin"])
    def revoke_key(key_id: str, request: Request) -> KeyOut:
        """Revoke a key at once. Needs the admin token."""
        check_admin(request, admin_token)
        if not store.revoke_key(key_id):
            raise ApiError(404, f"no active key {key_id!r}")
        [key] = [k for k in store.list_keys() if k.id == key_id]
        return _key_out(key)

    return router
