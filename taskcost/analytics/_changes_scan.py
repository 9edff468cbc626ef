"""What changed, the scan: each fingerprint field's values by window (calls, first and last seen), the values past
max_groups folded into ``other``, from the calls grouped by window and combination of fingerprint values (``_changes``
compares and ranks what it returns)."""

from __future__ import annotations

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._changes_rank import FIELDS
from taskcost.analytics._filters import Filters, Sql
from taskcost.analytics._groups import OTHER, Top
from taskcost.store import ReadStore

__all__ = ["_join", "_scan"]


def _join(parts: list[Sql], sep: str = ", ") -> Sql:
    out = Sql("")
    for i, p in enumerate(parts):
        out += Sql(sep) + p if i else p
    return out


_COMBOS_READ = 5_000
"""Combinations of fingerprint values read into Python at most: fewer (the common case, a few hundred) are turned
into each field's values here, as they are; more, or a field with more than max_groups + 1 values, and the store
ranks and folds them (two more passes)."""


def _per_field(combos: pl.DataFrame) -> pl.DataFrame:
    """The combinations' calls, first and last seen summed to each field's values: (w, field, value, ...)."""
    return pl.concat(
        combos.group_by("w", f)
        .agg(pl.col("calls", "ok_calls").sum(), pl.col("first_seen").min(), pl.col("last_seen").max())
        .select(
            "w",
            pl.lit(f).alias("field"),
            pl.col(f).cast(pl.String).alias("value"),
            "calls",
            "ok_calls",
            "first_seen",
            "last_seen",
        )  # fmt: skip
        for f in FIELDS
    )


def _scan(
    store: ReadStore, filters: Filters, cte: Sql, limit: int
) -> tuple[pl.DataFrame, dict[str, dict[str, int]], dict[str, Top]]:
    """Each field's values by window (calls, first and last seen), folded: per field, the ``limit`` values with the
    most calls (both windows) keep a row, the others are one row, ``other`` (``_groups``). One pass over the calls
    grouped by window and combination of fingerprint values (one hash of 12 keys costs less than 12 hashes of one,
    and spills when it must), at most ``_COMBOS_READ`` of them read. When there were more, or a field has more than
    ``limit`` + 1 values, the rank and the fold happen in the store: the combinations turned into each field's values
    (DuckDB ``UNPIVOT``; ClickHouse ``arrayJoin``) and ranked (at most 12 x (limit + 1) rows back), then a pass that
    groups the calls by their folded values (at most 2 x 12 x (limit + 1) rows back). Returns the fingerprint as
    (w, field, value, calls, first_seen, last_seen, field_order), per window {calls, ok_calls}, and per field the
    values kept (``Top``)."""
    cols = ", ".join(FIELDS)
    casts = ", ".join(f"CAST({f} AS VARCHAR) AS {f}" for f in FIELDS)
    measures = (
        "count(*) AS calls, count(*) FILTER (WHERE status = 'ok') AS ok_calls, min(start_time) AS first_seen, "
        "max(start_time) AS last_seen"
    )
    # no filter on the window's label (``_label``): the scope's range alone lets the store skip the rest of the table
    combos = cte + Sql(f"SELECT w, {cols}, {measures} FROM win GROUP BY w, {cols} LIMIT ?", [_COMBOS_READ + 1])
    read = frame(store, combos, filters)
    long = _per_field(read.filter(pl.col("w") != "between")) if read.height <= _COMBOS_READ else None
    tops = {}
    if long is not None:
        counts = long.group_by("field").agg(pl.col("value").n_unique(), pl.col("value").unique().alias("values"))
        tops = {f: Top(tuple(v), int(n), limit) for f, n, v in counts.select("field", "value", "values").iter_rows()}
    if long is None or any(t.groups > limit + 1 for t in tops.values()):
        per = (
            f"SELECT field, value, sum(calls) AS total FROM (SELECT calls, {casts} FROM ("
            f"SELECT {cols}, count(*) AS calls FROM win GROUP BY {cols}"
            f")) UNPIVOT INCLUDE NULLS (value FOR field IN ({cols})) GROUP BY field, value"
        )
        rank = cte + Sql(
            f"""SELECT field, value, n, r FROM (
    SELECT field, value, count(*) OVER (PARTITION BY field) AS n,
        row_number() OVER (PARTITION BY field ORDER BY value IS NOT DISTINCT FROM ?, total DESC, value NULLS LAST) AS r
    FROM ({per}) AS per
) AS ranked WHERE r <= ? ORDER BY field, r""",
            [OTHER, limit + 1],
        )
        tops = {}
        for (f,), part in frame(store, rank, filters).partition_by("field", as_dict=True, maintain_order=True).items():
            n, values = int(part["n"][0]), part["value"].to_list()
            tops[str(f)] = Top(tuple(values if n <= limit + 1 else values[:limit]), n, limit)
        folded = _join([(tops[f].expr(f) if f in tops else Sql(f)) + Sql(f" AS {f}") for f in FIELDS])
        keys = ", ".join(str(i) for i in range(2, len(FIELDS) + 2))
        sql = cte + Sql(", combos AS (SELECT w, ") + folded
        sql += Sql(
            f""", {measures} FROM win GROUP BY w, {keys})
SELECT w, field, value, sum(calls) AS calls, sum(ok_calls) AS ok_calls, min(first_seen) AS first_seen,
    max(last_seen) AS last_seen
FROM (SELECT w, {casts}, calls, ok_calls, first_seen, last_seen FROM combos)
    UNPIVOT INCLUDE NULLS (value FOR field IN ({cols}))
GROUP BY 1, 2, 3"""
        )
        long = frame(store, sql, filters).filter(pl.col("w") != "between")
    order = {f: i for i, f in enumerate(FIELDS)}
    long = long.with_columns(
        pl.col("w").cast(pl.String),
        pl.col("calls", "ok_calls").cast(pl.Int64),
        pl.col("first_seen", "last_seen").cast(pl.Datetime("us")),
        pl.col("field").replace_strict(order, return_dtype=pl.Int64).alias("field_order"),
    )
    totals = long.filter(pl.col("field_order") == 0).group_by("w").agg(pl.col("calls", "ok_calls").sum())
    windows = {r["w"]: r for r in totals.iter_rows(named=True)}
    return long.select("w", "field", "value", "calls", "first_seen", "last_seen", "field_order"), windows, tops
