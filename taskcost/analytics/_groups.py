"""The bound on an answer's groups: the ``max_groups`` values of a dimension with the most spend keep a row each, and
the rest are folded into one row, ``other``, whose figures are computed over all of their rows exactly as any
group's. The rank and the fold happen in SQL (``top_values``, then ``Top.expr`` in the question's own query), so a
question reads at most ``max_groups`` + 1 groups whatever the number of distinct values a tenant sent (a task kind per
task, a model name per call), and no per-group work (an interval, a rate) runs for the long tail.

When the values number at most ``max_groups`` + 1 nothing is folded: the fold would stand for one group. That is the
common case, and a question first asks its own queries unfolded, each read at most a few rows past what a complete
answer of ``max_groups`` + 1 values can hold (``capped``): when every one came back whole and its values fit
(``unranked``), the answer is those rows, with no ranking query; otherwise the values are ranked and the queries asked
again, folded. A value
literally named ``other`` is ranked last, so when a fold happens it is counted in the ``other`` row (never two rows
with one name).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from taskcost.analytics._answer import frame
from taskcost.analytics._filters import Filters, Sql
from taskcost.store import ReadStore

__all__ = [
    "MAX_GROUPS",
    "MAX_GROUPS_LIMIT",
    "OTHER",
    "Top",
    "capped",
    "fold_note",
    "max_groups_option",
    "top_values",
    "unranked",
]

OTHER = "other"
"""The value of the row that holds every group past ``max_groups``."""
MAX_GROUPS = 30
"""Groups shown by default (the rest in ``other``): a table a terminal and a dashboard page can show whole."""
MAX_GROUPS_LIMIT = 1000
"""The most groups a question may be asked for: an answer stays a few hundred kilobytes and a second of work."""


def max_groups_option() -> Any:
    """The ``max_groups`` option of a grouped question (CLI ``--max-groups``, HTTP ``?max_groups=``)."""
    return Field(
        MAX_GROUPS,
        ge=1,
        le=MAX_GROUPS_LIMIT,
        description=f"Show at most this many groups (the most spend first); the rest are added up in one row, "
        f"'{OTHER}' (at most {MAX_GROUPS_LIMIT:,}).",
    )


@dataclass(frozen=True)
class Top:
    """The values that keep their own row (``kept``, in rank order) among ``groups`` ranked values; ``keep``: values
    never ranked nor folded (``mixed``), and ``keep_null``: the empty value likewise."""

    kept: tuple[Any, ...]
    groups: int
    limit: int
    keep: tuple[str, ...] = ()
    keep_null: bool = False

    @property
    def folded(self) -> int:
        """How many values the ``other`` row holds (0: none; nothing is folded then)."""
        return self.groups - len(self.kept) if self.groups > self.limit + 1 else 0

    def _named(self) -> list[Any]:
        return [v for v in (*self.kept, *self.keep) if v is not None]

    def _null_kept(self) -> bool:
        return self.keep_null or None in self.kept

    def expr(self, column: str) -> Sql:
        """SQL for the value of ``column`` after the fold: itself when kept, else ``other`` (``column`` when nothing is
        folded)."""
        if not self.folded:
            return Sql(column)
        named = self._named()
        out = Sql(f"CASE WHEN {column} IS NULL THEN ") + (Sql("NULL") if self._null_kept() else Sql("?", [OTHER]))
        if named:
            out += Sql(f" WHEN {column} IN ({', '.join('?' for _ in named)}) THEN {column}", named)
        return out + Sql(" ELSE ? END", [OTHER])

    def is_other(self, column: str) -> Sql:
        """SQL that is true exactly for the rows folded into ``other`` (never NULL)."""
        if not self.folded:
            return Sql("FALSE")
        named = self._named()
        out = Sql(f"CASE WHEN {column} IS NULL THEN {'FALSE' if self._null_kept() else 'TRUE'}")
        if named:
            out += Sql(f" WHEN {column} IN ({', '.join('?' for _ in named)}) THEN FALSE", named)
        return out + Sql(" ELSE TRUE END")


def capped(sql: Sql, rows: int) -> Sql:
    """``sql`` (a whole query, ``WITH`` included) read at most ``rows`` + 1 rows: more than ``rows`` back means the
    answer was cut (rank, then ask again folded)."""
    return Sql("SELECT * FROM (") + sql + Sql(") AS capped LIMIT ?", [rows + 1])


def unranked(values: Iterable[Any], limit: int, *, keep: Sequence[str] = (), keep_null: bool = False) -> Top | None:
    """The ``Top`` of a dimension whose values (all of them, as a complete unfolded answer holds them) need no fold:
    at most ``limit`` + 1 besides ``keep`` (and the empty value with ``keep_null``); None when they need one."""
    ranked = {v for v in values if (v is not None or not keep_null) and v not in keep}
    if len(ranked) > limit + 1:
        return None
    return Top(tuple(ranked), len(ranked), limit, tuple(keep), keep_null)


def top_values(
    store: ReadStore,
    filters: Filters,
    ctes: Sql,
    source: str,
    key: str,
    measures: str,
    order: str,
    limit: int,
    *,
    keep: Sequence[str] = (),
    keep_null: bool = False,
) -> Top:
    """The values of ``key`` (an expression over ``source``, a relation of ``ctes``: ``WITH ...`` or empty) ranked by
    ``order`` (over ``measures``, aggregates named in it, e.g. ``sum(cost_usd) AS spend`` / ``spend DESC NULLS
    LAST``), then by value: one query that returns at most ``limit`` + 1 rows and the number of values. ``keep`` and
    (``keep_null``) the empty value are left out of the ranking: they keep their own row."""
    where = ["k IS NOT NULL"] if keep_null else []
    params: list[Any] = []
    if keep:
        where.append(f"(k IS NULL OR k NOT IN ({', '.join('?' for _ in keep)}))")
        params += list(keep)
    sql = ctes + Sql(
        f"SELECT k, count(*) OVER () AS groups FROM (SELECT {key} AS k, {measures} FROM {source} GROUP BY 1) AS s"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY (k IS NOT DISTINCT FROM ?), {order}, k NULLS LAST LIMIT ?",
        [*params, OTHER, limit + 1],
    )
    ranked = frame(store, sql, filters)
    groups = int(ranked["groups"][0]) if ranked.height else 0
    values = ranked["k"].to_list()
    kept = tuple(values if groups <= limit + 1 else values[:limit])
    return Top(kept, groups, limit, tuple(keep), keep_null)


def fold_note(top: Top | None, what: str, option: str) -> list[str]:
    """The note of a fold (none without one): how many values the ``other`` row holds and how to see them."""
    if top is None or not top.folded:
        return []
    return [
        f"{top.folded:,} of {top.groups:,} {what} (those with the least spend) are added up in one row, '{OTHER}', "
        f"whose figures cover all of them (a value named '{OTHER}' is counted in it); to see one of them, filter on "
        f"it ({option} VALUE), or raise max_groups (now {top.limit:,}, at most {MAX_GROUPS_LIMIT:,})"
    ]
