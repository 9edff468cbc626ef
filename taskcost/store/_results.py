"""Reading a user query's result within a row and a byte budget.

Rows are fetched from DuckDB in small chunks and counted as they arrive, so a result is never held whole before
it is cut: at most one DuckDB vector (2,048 rows) beyond the budget is ever materialised by DuckDB, and at most
``_CHUNK`` rows of it as Python values.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["fetch_bounded", "value_bytes"]

_CHUNK = 256
_SCALAR = 8  # a number, boolean, date or time: about what its JSON takes


def value_bytes(value: Any) -> int:
    """About how many bytes ``value`` takes as JSON (strings by their length; containers summed; no recursion)."""
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if v is None:
            total += 4
        elif isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, bytes | bytearray | memoryview):
            total += (len(v) * 4) // 3 + 4  # base64
        elif isinstance(v, dict):
            total += 2 + 2 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            total += 2 + len(v)
            stack.extend(v)
        else:
            total += _SCALAR
    return total


def fetch_bounded(
    rel: Any, max_rows: int, max_bytes: int | None
) -> tuple[list[tuple[Any, ...]], Literal["rows", "bytes"] | None]:
    """Rows of a DuckDB result, at most ``max_rows`` and (when given) about ``max_bytes``; and which limit cut it,
    if one did. A first row larger than ``max_bytes`` alone is not returned."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    while len(rows) <= max_rows:
        chunk = rel.fetchmany(min(_CHUNK, max_rows + 1 - len(rows)))
        if not chunk:
            return rows, None
        for row in chunk:
            size += value_bytes(row)
            if max_bytes is not None and size > max_bytes:
                return rows, "bytes"
            rows.append(tuple(row))
    return rows[:max_rows], "rows"
