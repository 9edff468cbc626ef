"""What every question returns, and how its SQL is read: DuckDB -> Arrow -> polars, no row-by-row Python.

An answer is a typed dataclass holding polars DataFrames (money columns stay ``Decimal``: DuckDB's DECIMAL(38,12)
arrives as Arrow decimal128 and polars keeps it exact). Every answer turns into one JSON shape, which the HTTP API
returns, the CLI prints (as tables, CSV or JSON) and the dashboards read::

    {"question": "cost", "filters": {...}, "summary": {...}, "tables": {"<name>": {"title": ..., "columns": [...],
     "rows": [[...], ...]}}, "notes": ["..."]}

Money in that JSON is a decimal string (never a float); a column or summary key ending in ``_usd`` is money.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from taskcost._internal.jsonable import json_value
from taskcost._internal.lazy import pl
from taskcost.analytics._filters import Filters, Sql
from taskcost.store import ReadStore

__all__ = ["ANALYTICS_TIMEOUT_S", "Answer", "Table", "frame", "frame_json"]

ANALYTICS_TIMEOUT_S = 60.0
"""Each query of a question stops after this (a question reads aggregates: this is a guard, not a budget)."""


def frame(store: ReadStore, sql: Sql, filters: Filters, *, max_rows: int = 1_000_000) -> pl.DataFrame:
    """``sql`` run in the store's sandbox, limited to ``filters.project`` (a read key's project is set there by the
    API), as a polars DataFrame."""
    table = store.arrow(sql.text, sql.params, max_rows=max_rows, timeout_s=ANALYTICS_TIMEOUT_S, project=filters.project)
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    return df


def frame_json(df: pl.DataFrame) -> dict[str, Any]:
    """``{"columns": [...], "rows": [[...], ...]}`` with JSON-safe values (Decimal as a string)."""
    return {"columns": df.columns, "rows": [[json_value(v) for v in row] for row in df.iter_rows()]}


@dataclass(frozen=True)
class Table:
    """A named frame of an answer, with the title the CLI and the dashboards show."""

    name: str
    title: str
    frame: pl.DataFrame
    display: tuple[str, ...] = ()  # the columns a terminal shows (all when empty); CSV and JSON carry every column


@dataclass(frozen=True)
class Answer:
    """Base of every question's result. Subclasses hold typed fields (figures and polars frames) and implement
    ``summary`` (the headline figures, JSON-safe) and ``tables``; ``notes`` are sentences a reader must see
    (coverage, which estimate was used, why there is no answer)."""

    question: ClassVar[str] = ""
    terminal_keys: ClassVar[tuple[str, ...]] = ()  # summary keys a terminal shows, in order (all when empty)
    filters: Filters
    notes: list[str] = field(default_factory=list, kw_only=True)

    def summary(self) -> dict[str, Any]:
        return {}

    def tables(self) -> list[Table]:
        return []

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "filters": self.filters.model_dump(mode="json", exclude_defaults=True),
            "summary": json_value(self.summary()),
            "tables": {
                t.name: {"title": t.title, **frame_json(t.frame), **({"display": list(t.display)} if t.display else {})}
                for t in self.tables()
            },
            "notes": list(self.notes),
            **({"terminal_keys": list(self.terminal_keys)} if self.terminal_keys else {}),
        }
