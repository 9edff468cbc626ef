"""The store on ClickHouse (a server through clickhouse-connect, or an in-process chDB): the same public views as
the DuckDB store, for many collectors writing to one database. See docs/scale.md."""

from __future__ import annotations

from taskcost.store.clickhouse._spool_writer import clickhouse_spool_dir
from taskcost.store.clickhouse._store import ClickHouseStore

__all__ = ["ClickHouseStore", "clickhouse_spool_dir"]
