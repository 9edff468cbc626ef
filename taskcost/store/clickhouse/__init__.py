"""The store on ClickHouse (a server through clickhouse-connect, or an in-process chDB): the same public views as
the DuckDB store, for many collectors writing to one database. See docs/scale.md."""

from __future__ import annotations

__all__: list[str] = []
