"""The read-only HTTP query API, operations endpoints and key management."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from taskcost import __version__
from taskcost._internal.jsonable import json_value
from taskcost.collector._auth import AuthPolicy, authenticate, check_admin
from taskcost.collector._errors import ApiError
from taskcost.collector._gate import QueryGate, QueryGateFull
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
    truncated_by: Literal["rows", "bytes"] | None = Field(
        None, description="Which limit cut the result: sql_max_rows (or max_rows), or sql_max_result_bytes."
    )
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


def _sql_body(res: Any) -> bytes:
    """The answer's JSON, encoded once, directly (orjson refuses values nested deeper than it can encode)."""
    try:
        return orjson.dumps(
            {
                "columns": res.columns,
                "types": res.types,
                "rows": [[json_value(v) for v in row] for row in res.rows],
                "truncated": res.truncated,
                "truncated_by": res.meta.get("truncated_by"),
                "elapsed_s": res.elapsed_s,
            }
        )
    except (orjson.JSONEncodeError, RecursionError) as exc:
        raise ApiError(400, f"the result cannot be sent as JSON: {exc}") from None


def api_router(
    store: Store,
    *,
    sql_timeout_s: float,
    sql_max_rows: int,
    sql_max_bytes: int,
    gate: QueryGate,
    metrics: Metrics,
    admin_token: str | None,
    auth: AuthPolicy,
    allocation: Callable[[], dict[str, Any]] | None = None,
) -> APIRouter:
    """``allocation``: the state of the server's allocation of the clusters' windows, shown by /readyz. ``auth``:
    whether a key is required (the bodies of these routes are read after the key was checked: ``BodyGate``)."""
    router = APIRouter()
    health = ThreadPoolExecutor(max_workers=1, thread_name_prefix="taskcost-health")  # never shared with user SQL
    gate.on_refused = metrics.sql_refused.inc

    @router.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, Any]:
        """Liveness: the process answers and the store answers a trivial query (on a thread of its own, not
        behind user SQL)."""
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.run_in_executor(health, lambda: store.query("SELECT 1", timeout_s=5)), 5)
        except (QueryError, StoreUnavailableError) as exc:
            raise ApiError(503, f"store not available: {exc}") from None
        except TimeoutError:
            raise ApiError(503, "store not available: a trivial query took more than 5 s") from None
        return {"status": "ok", "version": __version__}

    @router.get("/readyz", tags=["operations"])
    async def readyz() -> dict[str, Any]:
        """Readiness: the writer runs and its queue has room. Also says how the server's allocation of the
        self-hosted clusters' windows stands (`cluster_allocation`: the last window allocated, the next one due, its
        last error); that never makes the server unready. On ClickHouse, `clickhouse_access` says whether a project's
        SQL runs as the reader user under row policies, or why not."""
        if not store.writer_alive:
            raise ApiError(503, "the store's writer is not running")
        queued = store.queued_spans
        if queued >= store.queue_limit:
            raise ApiError(503, f"write queue full ({queued} spans waiting)", headers={"Retry-After": "1"})
        ready: dict[str, Any] = {"status": "ready", "queued_spans": queued}
        if allocation is not None:
            ready["cluster_allocation"] = allocation()
        if (access := getattr(store, "access", None)) is not None:  # ClickHouse: reader and row policies, or why not
            ready["clickhouse_access"] = access.summary
        return ready

    @router.get("/metrics", tags=["operations"], response_class=Response)
    async def prometheus_metrics(request: Request) -> Response:
        """Prometheus exposition: received, accepted, rejected, deduplicated, refused, queue, write latency. The
        figures are the whole server's (every project): once keys exist, a read key or the admin token."""
        authenticate(auth, request, "read", admin_token)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @router.post(
        "/api/sql",
        response_model=SqlResponse,
        tags=["query"],
        responses={
            400: {"description": "The query was refused (the message says what) or failed."},
            429: {"description": "Every query slot and queue place is taken; retry after Retry-After seconds."},
        },
    )
    async def run_sql(req: SqlRequest, request: Request) -> Response:
        """Run one read-only SELECT over the views (`llm_calls`, `tool_calls`, `tasks`) and `spans`. A read key
        sees its own project's rows only. The answer holds at most `sql_max_rows` rows and about
        `sql_max_result_bytes` bytes (`truncated_by` says which limit cut it); the query runs at most
        `sql_timeout_s` seconds."""
        caller = authenticate(auth, request, "read", admin_token)
        limit = min(req.max_rows or sql_max_rows, sql_max_rows)
        try:
            res = await gate.run_async(
                caller.project,  # a project's fair share of the query slots; the admin's and no-auth are one more
                store.query,
                req.sql,
                req.params,
                max_rows=limit,
                timeout_s=sql_timeout_s,
                project=caller.project,
                max_bytes=sql_max_bytes,
            )
        except QueryGateFull as exc:
            raise ApiError(429, str(exc), headers={"Retry-After": "1"}) from None
        except QueryError as exc:
            raise ApiError(400, str(exc)) from None
        return Response(_sql_body(res), media_type="application/json")

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
