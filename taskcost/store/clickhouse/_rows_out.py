"""A ClickHouse answer read as the DuckDB store gives its rows: ``query``'s rows through ``fetchmany`` (what
``fetch_bounded`` reads), DuckDB's type names, naive UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

__all__ = ["Rows", "duck_type", "naive"]


_DUCK_NAMES = {
    pa.string(): "VARCHAR",
    pa.large_string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.int16(): "SMALLINT",
    pa.int8(): "TINYINT",
    pa.uint64(): "UBIGINT",
    pa.uint32(): "UINTEGER",
    pa.uint16(): "USMALLINT",
    pa.uint8(): "UTINYINT",
    pa.float64(): "DOUBLE",
    pa.float32(): "FLOAT",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us"): "TIMESTAMP",
    pa.date32(): "DATE",
}


def duck_type(t: pa.DataType) -> str:
    """The DuckDB name of an Arrow type (``QueryResult.types`` as the DuckDB store gives it)."""
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_list(t):
        return f"{duck_type(t.value_type)}[]"
    return _DUCK_NAMES.get(t, str(t).upper())


class Rows:
    """An Arrow table's rows through ``fetchmany`` (what ``fetch_bounded`` reads)."""

    def __init__(self, tbl: pa.Table) -> None:
        self._batches = iter(tbl.to_batches(max_chunksize=256))
        self._pending: list[tuple[Any, ...]] = []

    def fetchmany(self, n: int) -> list[tuple[Any, ...]]:
        while len(self._pending) < n:
            batch = next(self._batches, None)
            if batch is None:
                break
            cols = [c.to_pylist() for c in batch.columns]
            self._pending.extend(zip(*cols, strict=True))
        out, self._pending = self._pending[:n], self._pending[n:]
        return out


def naive(v: Any) -> Any:
    return v.astimezone(UTC).replace(tzinfo=None) if isinstance(v, datetime) and v.tzinfo else v
