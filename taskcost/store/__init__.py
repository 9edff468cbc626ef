"""Storage. The only package that talks to DuckDB; everything else uses the ``Store`` interface.

``DuckDBStore`` and ``PUBLIC_RELATIONS`` load DuckDB: they are imported on first use, so that a process that only
lays rows out (a decode worker: ``prepare_batch``) does not load it."""

from typing import TYPE_CHECKING, Any

from taskcost.store._base import (
    CommitInfo,
    QueryError,
    QueryResult,
    ReadStore,
    Store,
    StoreBusyError,
    StoreLockedError,
    StoreUnavailableError,
)
from taskcost.store._keys import KEY_KINDS, ApiKey
from taskcost.store._migrations import MIGRATIONS
from taskcost.store._rows import DEFAULT_PROJECT, PreparedBatch, prepare_batch, typed_tables

if TYPE_CHECKING:
    from taskcost.store._duckdb import DuckDBStore
    from taskcost.store._sandbox import PUBLIC_RELATIONS
    from taskcost.store._spool import ipc_stream

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
    "ReadStore",
    "Store",
    "StoreLockedError",
    "StoreUnavailableError",
    "ipc_stream",
    "prepare_batch",
    "typed_tables",
]


_WHERE = {"DuckDBStore": "_duckdb", "PUBLIC_RELATIONS": "_sandbox", "ipc_stream": "_spool"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
