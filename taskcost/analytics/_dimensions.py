"""The values each dimension takes in the store (what a filter can pick): the dashboards' filter menus and the
CLI's hints read them from here."""

from __future__ import annotations

from collections.abc import Sequence

from taskcost.analytics._answer import frame
from taskcost.analytics._filters import CALL_DIMENSIONS, DIMENSIONS, MIXED, TASK_DIMENSIONS, Filters, Sql, task_scope
from taskcost.store import ReadStore

__all__ = ["dimension_values"]


def dimension_values(
    store: ReadStore, dimensions: Sequence[str] = DIMENSIONS, filters: Filters | None = None, *, limit: int = 200
) -> dict[str, list[str]]:
    """Dimension -> its distinct values among the tasks ``filters`` select (all tasks when None), most frequent
    first, at most ``limit`` each; ``mixed`` (a task whose calls disagree) is left out. One query over ``tasks``,
    which carries every dimension as a column."""
    filters = filters or Filters.model_validate({})
    unknown = [d for d in dimensions if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"unknown dimensions {unknown}: known are {', '.join(DIMENSIONS)}")
    if not dimensions:
        return {}
    columns = {**TASK_DIMENSIONS, **CALL_DIMENSIONS}
    arms = [
        f"SELECT '{d}' AS dimension, CAST({columns[d]} AS VARCHAR) AS value, count(*) AS n FROM scoped_tasks"
        f" WHERE {columns[d]} IS NOT NULL AND CAST({columns[d]} AS VARCHAR) <> '{MIXED}' GROUP BY 1, 2"
        for d in dimensions
    ]
    sql = (
        Sql("WITH ")
        + task_scope(filters)
        + Sql(
            " SELECT dimension, value FROM (SELECT dimension, value, n,"
            " row_number() OVER (PARTITION BY dimension ORDER BY n DESC, value) AS r FROM ("
            + " UNION ALL ".join(arms)
            + ") AS counted) AS ranked WHERE r <= ? ORDER BY dimension, n DESC, value",
            [limit],
        )
    )
    out: dict[str, list[str]] = {d: [] for d in dimensions}
    for d, v in frame(store, sql, filters).iter_rows():
        out[d].append(v)
    return out
