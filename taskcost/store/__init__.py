"""Storage. The only package that talks to DuckDB; everything else uses the ``Store`` interface."""

from taskcost.store._base import (
    CommitInfo,
    QueryError,
    QueryResult,
    Store,
    StoreBusyError,
    StoreLockedError,
    StoreUnavailableError,
)
from taskcost.store._duckdb import DuckDBStore
from taskcost.store._keys import KEY_KINDS, ApiKey
from taskcost.store._migrations import MIGRATIONS
from taskcost.store._rows import DEFAULT_PROJECT, PreparedBatch, prepare_batch
from taskcost.store._sandbox import PUBLIC_RELATIONS

VIEWS = ("llm_calls", "tool_calls", "tasks")
"""The SQL contract users query (docs/schema.md documents every one)."""

__all__ = [
    "DEFAULT_PROJECT",
    "KEY_KINDS",
    "PUBLIC_RELATIONS",
    "ApiKey",
    "CommitInfo",
    "StoreBusyError",
    "MIGRATIONS",
    "VIEWS",
    "DuckDBStore",
    "PreparedBatch",
    "QueryError",
    "QueryResult",
    "Store",
    "StoreLockedError",
    "StoreUnavailableError",
    "prepare_batch",
]
