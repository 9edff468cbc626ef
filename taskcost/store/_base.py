"""The storage interface every backend implements (DuckDB today; a distributed one later)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from taskcost.store._keys import ApiKey
from taskcost.store._rows import PreparedBatch

__all__ = [
    "CommitInfo",
    "QueryError",
    "QueryResult",
    "Store",
    "StoreBusyError",
    "StoreLockedError",
    "StoreUnavailableError",
]


class StoreUnavailableError(RuntimeError):
    """The store cannot be opened or used."""


class StoreLockedError(StoreUnavailableError):
    """Another process owns the database file."""


class StoreBusyError(StoreUnavailableError):
    """The write queue is full; try again shortly (back-pressure)."""


@dataclass(frozen=True)
class CommitInfo:
    """What one commit of the single writer did."""

    spans: int  # newly stored
    deduplicated: int  # already stored before (a re-sent batch), skipped
    seconds: float


class QueryError(ValueError):
    """A user query was refused or failed; the message says why."""


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    elapsed_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


class Store(Protocol):
    """What the collector, analytics and CLI may ask of storage."""

    def submit(self, batch: PreparedBatch, wait_s: float = ...) -> Future[CommitInfo]: ...

    def query(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = ...,
        timeout_s: float = ...,
        project: str | None = ...,
        max_bytes: int | None = ...,
    ) -> QueryResult: ...

    def close(self) -> None: ...

    # operations and access control
    @property
    def queued_spans(self) -> int: ...

    @property
    def queue_limit(self) -> int: ...

    @property
    def writer_alive(self) -> bool: ...

    @property
    def engine_settings(self) -> dict[str, str]: ...

    @property
    def auth_enabled(self) -> bool: ...

    def verify_key(self, secret: str) -> ApiKey | None: ...

    def create_key(self, project: str, kind: str) -> tuple[ApiKey, str]: ...

    def revoke_key(self, key_id: str) -> bool: ...

    def list_keys(self) -> list[ApiKey]: ...
