"""Storage. The only package that talks to DuckDB; everything else uses the ``Store`` interface.

Everything but the interface (``_base``) and the keys is imported on first use: ``DuckDBStore`` and
``PUBLIC_RELATIONS`` load DuckDB, the row layout (``prepare_batch``) loads pyarrow and the prices. A decode worker
does not load DuckDB; a command that only reads through a server loads none of them."""

from typing import TYPE_CHECKING, Any

from taskcost.store._base import (
    AllocationDue,
    CommitInfo,
    QueryError,
    QueryResult,
    ReadStore,
    Store,
    StoreBusyError,
    StoreLockedError,
    StoreUnavailableError,
)
from taskcost.store._engine_columns import CLIENT_DECODE as CLIENT_DECODE_CALL
from taskcost.store._engine_columns import CONFIG as ENGINE_CONFIG
from taskcost.store._engine_columns import ENGINE_DECODE as ENGINE_DECODE_CALL
from taskcost.store._engine_columns import HOUR_MEASURES as ENGINE_HOUR_MEASURES
from taskcost.store._keys import KEY_KINDS, ApiKey

if TYPE_CHECKING:
    from taskcost.store._duckdb import DuckDBStore
    from taskcost.store._migrations import MIGRATIONS
    from taskcost.store._rows import DEFAULT_PROJECT, PreparedBatch, prepare_batch, typed_tables
    from taskcost.store._sandbox import PUBLIC_RELATIONS
    from taskcost.store._spool import ipc_stream

VIEWS = (
    "llm_calls", "tool_calls", "tasks", "llm_call_hours", "engine_spans", "engine_calls", "engine_call_figures",
    "engine_config_hours", "engine_config_busy",
)  # fmt: skip
"""The SQL contract users query (docs/schema.md documents every one)."""

__all__ = [
    "DEFAULT_PROJECT",
    "CLIENT_DECODE_CALL",
    "ENGINE_CONFIG",
    "ENGINE_DECODE_CALL",
    "ENGINE_HOUR_MEASURES",
    "AllocationDue",
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


_WHERE = {
    "DuckDBStore": "_duckdb",
    "PUBLIC_RELATIONS": "_sandbox",
    "ipc_stream": "_spool",
    "MIGRATIONS": "_migrations",
    "DEFAULT_PROJECT": "_rows",
    "PreparedBatch": "_rows",
    "prepare_batch": "_rows",
    "typed_tables": "_rows",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
