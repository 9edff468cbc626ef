"""The read-only HTTP query API and health endpoint."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from taskcost import __version__
from taskcost._internal.jsonable import json_value
from taskcost.collector._errors import ApiError
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


def api_router(store: Store, *, sql_timeout_s: float, sql_max_rows: int) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, Any]:
        """Liveness: the process answers and the store answers a trivial query."""
        try:
            store.query("SELECT 1", timeout_s=5)
        except (QueryError, StoreUnavailableError) as exc:
            raise ApiError(503, f"store not available: {exc}") from None
        return {"status": "ok", "version": __version__}

    @router.post("/api/sql", response_model=SqlResponse, tags=["query"])
    def run_sql(req: SqlRequest) -> SqlResponse:
        """Run one read-only SELECT against the views (`llm_calls`, `tool_calls`, `tasks`) and tables."""
        limit = min(req.max_rows or sql_max_rows, sql_max_rows)
        try:
            res = store.query(req.sql, req.params, max_rows=limit, timeout_s=sql_timeout_s)
        except QueryError as exc:
            raise ApiError(400, str(exc)) from None
        return SqlResponse(
            columns=res.columns,
            types=res.types,
            rows=[[json_value(v) for v in row] for row in res.rows],
            truncated=res.truncated,
            elapsed_s=res.elapsed_s,
        )

    return router
