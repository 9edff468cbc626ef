"""Small DuckDB helpers the store's modules share: a transaction as a ``with`` block, a count."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import duckdb

__all__ = ["count", "transaction"]


@contextlib.contextmanager
def transaction(cur: duckdb.DuckDBPyConnection, commit: bool = True) -> Iterator[None]:
    """Committed when the block ends (rolled back instead with ``commit=False``: a dry run); rolled back when
    it raises, and the block's error is the one raised (not a failed ROLLBACK's)."""
    cur.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            cur.execute("ROLLBACK")
        raise
    cur.execute("COMMIT" if commit else "ROLLBACK")


def count(cur: duckdb.DuckDBPyConnection, sql: str) -> int:
    """The first column of the first row of ``sql`` (a count, or an INSERT's row count)."""
    row = cur.execute(sql).fetchone()
    return int(row[0]) if row else 0
