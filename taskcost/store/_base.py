"""The storage interface every backend implements (DuckDB today; a distributed one later)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from taskcost.pricing import ClusterWindowCost, Pricer, RepriceReport
    from taskcost.store._keys import ApiKey
    from taskcost.store._rows import PreparedBatch

__all__ = [
    "AllocationDue",
    "CommitInfo",
    "QueryError",
    "QueryResult",
    "ReadStore",
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


@dataclass(frozen=True)
class AllocationDue:
    """What the server's allocation of the clusters' windows has to do (``Store.cluster_allocation_due``)."""

    since_ns: int | None  # the start of the first window to allocate (None: nothing is due)
    closed_ns: int  # the end of the last window that may be allocated
    allocated_through_ns: int | None  # the end of the last window stored, of a configured cluster
    last_allocated_at_ns: int | None  # when a window was last stored (by the server or a re-price)
    late_calls_from_ns: int | None  # the start of the first call that came after its window was allocated


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


class ReadStore(Protocol):
    """What readers need: analytics, the dashboards and the query API ask the store this and nothing else."""

    def query(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = ...,
        timeout_s: float = ...,
        project: str | None = ...,
        max_bytes: int | None = ...,
    ) -> QueryResult:
        """One read-only SELECT over the public views (the sandbox), within ``timeout_s``; at most ``max_rows`` rows
        and about ``max_bytes`` bytes; ``project``: that project's rows only. Raises QueryError."""
        ...

    def arrow(
        self,
        sql: str,
        params: list[Any] | None = None,
        *,
        max_rows: int = ...,
        timeout_s: float = ...,
        project: str | None = ...,
    ) -> pa.Table:
        """The same sandboxed SELECT as ``query``, answered as one Arrow table (typed columns: DECIMAL money stays
        decimal128). For analytics, which aggregate in SQL and read the few rows back whole: more than ``max_rows``
        rows is a QueryError, never a silently shorter answer."""
        ...


class Store(ReadStore, Protocol):
    """The whole contract of a storage backend: what the serving process, the collector, the CLI and the tests
    use. Every implementation passes tests/test_store_contract.py."""

    # -- intake ---------------------------------------------------------------------------------------------
    @property
    def read_only(self) -> bool: ...

    @property
    def arrow_schemas(self) -> dict[str, pa.Schema]:
        """The Arrow schema of each table a PreparedBatch fills (decode workers lay rows out to it)."""
        ...

    @property
    def on_commit(self) -> Callable[[CommitInfo], None] | None: ...

    @on_commit.setter
    def on_commit(self, fn: Callable[[CommitInfo], None] | None) -> None: ...

    def submit(self, batch: PreparedBatch, wait_s: float = ...) -> Future[CommitInfo]:
        """Queue a batch for the writer; the future resolves once it is durable. Full queue: StoreBusyError."""
        ...

    def write(self, batch: PreparedBatch, timeout: float | None = ...) -> CommitInfo: ...

    def fold_rollups(self, timeout: float | None = ...) -> None: ...

    # -- operations -----------------------------------------------------------------------------------------
    @property
    def queued_spans(self) -> int: ...

    @property
    def queue_limit(self) -> int: ...

    @property
    def writer_alive(self) -> bool: ...

    @property
    def committed_spans(self) -> int: ...

    @property
    def deduplicated_spans(self) -> int: ...

    @property
    def engine_settings(self) -> dict[str, str]: ...

    def close(self) -> None: ...

    def admin_query(self, sql: str, params: list[Any] | None = None) -> QueryResult:
        """Any SQL over every table, unsandboxed: for this process's own use (maintenance, tests), never user input."""
        ...

    # -- access control -------------------------------------------------------------------------------------
    @property
    def keys_ever_created(self) -> bool:
        """Whether a key was ever created in this store, revoked ones included (once true, never false again)."""
        ...

    @property
    def has_active_keys(self) -> bool: ...

    def verify_key(self, secret: str) -> ApiKey | None: ...

    def create_key(self, project: str, kind: str) -> tuple[ApiKey, str]: ...

    def revoke_key(self, key_id: str) -> bool: ...

    def list_keys(self) -> list[ApiKey]: ...

    # -- pricing --------------------------------------------------------------------------------------------
    def reprice(self, pricer: Pricer, **options: Any) -> RepriceReport:
        """Price stored calls again (and allocate clusters' bills); one at a time (StoreUnavailableError)."""
        ...

    def allocate_clusters(
        self,
        pricer: Pricer,
        *,
        since_ns: int | None,
        until_ns: int | None,
        now_ns: int | None = ...,
        closed_ns: int | None = ...,
    ) -> RepriceReport:
        """Allocate the clusters' ended windows in a range (the self-hosted part of ``reprice``), one transaction;
        refused (StoreUnavailableError) while a re-price runs."""
        ...

    def cluster_allocation_due(
        self, pricer: Pricer, *, closed_ns: int, received_since_ns: int | None
    ) -> AllocationDue: ...

    def cluster_costs(self, **options: Any) -> list[ClusterWindowCost]: ...
