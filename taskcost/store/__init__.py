"""Storage. The only package that talks to DuckDB; everything else uses the ``Store`` interface."""

from taskcost.store._base import QueryError, QueryResult, Store, StoreLockedError, StoreUnavailableError
from taskcost.store._duckdb import DuckDBStore
from taskcost.store._migrations import MIGRATIONS
from taskcost.store._rows import PreparedBatch, prepare_batch

VIEWS = ("llm_calls", "tool_calls", "tasks")
"""The SQL contract users query (docs/schema.md documents every one)."""

__all__ = [
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
