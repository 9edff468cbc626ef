"""The operator's reads: ad hoc SQL over the public views (the dashboards' SQL console), the views' columns, and
the stored spans' ingest activity and price sources (the Data health page). Everything goes through
``store.query``: the same sandbox, limits and project isolation as ``/api/sql``."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from taskcost._internal.jsonable import json_value
from taskcost.analytics._question import UsageError
from taskcost.store import VIEWS, QueryError, ReadStore

__all__ = [
    "RELATIONS",
    "IngestActivity",
    "PriceSourceUse",
    "Relation",
    "SqlAnswer",
    "ingest_activity",
    "price_sources",
    "run_sql",
    "sql_schema",
]

RELATIONS: tuple[str, ...] = (*VIEWS, "spans")
"""What user SQL may read (docs/schema.md): the views and the raw ``spans``."""

_NS = 1_000_000_000


@dataclass(frozen=True)
class Relation:
    """A relation user SQL may read, and its columns as ``(name, type)`` (DuckDB's type names)."""

    name: str
    columns: list[tuple[str, str]]


def sql_schema(store: ReadStore) -> list[Relation]:
    """The columns of every relation user SQL may read, as the store answers them (one empty SELECT each)."""
    out = []
    for name in RELATIONS:
        res = store.query(f"SELECT * FROM {name} LIMIT 0", max_rows=1)
        out.append(Relation(name, list(zip(res.columns, res.types, strict=True))))
    return out


@dataclass(frozen=True)
class SqlAnswer:
    """One query's answer with JSON-safe values (money and other decimals as text, times as ISO text)."""

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]
    truncated: bool
    truncated_by: str | None  # "rows" or "bytes": which limit cut the answer
    elapsed_s: float

    def csv(self) -> str:
        """The answer as CSV (a header row; NULL as an empty field), as ``taskcost sql --format csv`` writes it."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        w.writerows(["" if v is None else v for v in row] for row in self.rows)
        return buf.getvalue()

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "types": self.types,
            "rows": self.rows,
            "truncated": self.truncated,
            "truncated_by": self.truncated_by,
            "elapsed_s": self.elapsed_s,
        }


def run_sql(store: ReadStore, sql: str, *, max_rows: int = 1000, max_bytes: int | None = None) -> SqlAnswer:
    """Run one read-only SELECT (the store's sandbox); at most ``max_rows`` rows and about ``max_bytes`` bytes.
    A refused or failed query raises ``UsageError`` with the store's message."""
    if not sql.strip():
        raise UsageError("no query: write one SELECT statement")
    try:
        res = store.query(sql, [], max_rows=max_rows, max_bytes=max_bytes)
    except QueryError as exc:
        raise UsageError(str(exc)) from None
    return SqlAnswer(
        columns=list(res.columns),
        types=list(res.types),
        rows=[[json_value(v) for v in row] for row in res.rows],
        truncated=res.truncated,
        truncated_by=res.meta.get("truncated_by") or ("rows" if res.truncated else None),
        elapsed_s=res.elapsed_s,
    )


@dataclass(frozen=True)
class IngestActivity:
    """How spans arrive, from the stored spans' receive times (``spans.received_ns``).

    ``buckets``: spans received per ``bucket_s`` over the ``window_s`` ending at ``window_end`` (zeros included;
    ``window_end`` is now, or the last receive time when no span arrived in the window ending now). ``lag_*``:
    receive time minus end time over that window (how late spans reach the server)."""

    spans: int
    first_received: datetime | None
    last_received: datetime | None
    now: datetime
    recent_s: int
    recent_spans: int
    window_s: int
    bucket_s: int
    window_end: datetime
    buckets: list[tuple[datetime, int]]
    lag_p50_s: float | None
    lag_p95_s: float | None

    @property
    def rate_per_s(self) -> float:
        """Spans received per second over the last ``recent_s`` seconds."""
        return self.recent_spans / self.recent_s

    @property
    def window_is_now(self) -> bool:
        return self.window_end == self.now


def _at(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / _NS, UTC)


def ingest_activity(
    store: ReadStore, *, now: datetime | None = None, window_s: int = 3600, bucket_s: int = 60, recent_s: int = 300
) -> IngestActivity:
    """Stored spans and how fast they arrived: per ``bucket_s`` over the last ``window_s`` (or, when nothing arrived
    then, the ``window_s`` before the last span), and the rate over the last ``recent_s``."""
    now = now or datetime.now(UTC)
    now_ns = int(now.timestamp() * _NS)
    head = store.query(
        "SELECT count(*) AS spans, min(received_ns) AS first_ns, max(received_ns) AS last_ns,"
        " count(*) FILTER (WHERE received_ns >= ? AND received_ns < ?) AS recent FROM spans",
        [now_ns - recent_s * _NS, now_ns],
    ).dicts()[0]
    last_ns = head["last_ns"]
    bucket_ns = bucket_s * _NS
    if last_ns is None or last_ns >= now_ns - window_s * _NS:
        end_ns, window_end = now_ns, now
    else:  # nothing arrived in the window ending now: the window before the last span instead
        end_ns = (last_ns // bucket_ns + 1) * bucket_ns
        window_end = datetime.fromtimestamp(end_ns / _NS, UTC)
    last_bucket = (end_ns - 1) // bucket_ns
    first_bucket = last_bucket - max(1, window_s // bucket_s) + 1
    start_ns = first_bucket * bucket_ns
    counts: dict[int, int] = {}
    lag50 = lag95 = None
    if last_ns is not None:
        rows = store.query(
            "SELECT received_ns // ? AS b, count(*) AS n,"
            " quantile_cont(received_ns - end_ns, 0.5) AS lag50, quantile_cont(received_ns - end_ns, 0.95) AS lag95"
            " FROM spans WHERE received_ns >= ? AND received_ns < ? GROUP BY GROUPING SETS ((b), ())",
            [bucket_ns, start_ns, end_ns],
            max_rows=window_s // bucket_s + 10,
        ).dicts()
        for r in rows:
            if r["b"] is None:  # the grand total's row: the lag over the whole window
                lag50 = None if r["lag50"] is None else float(r["lag50"]) / _NS
                lag95 = None if r["lag95"] is None else float(r["lag95"]) / _NS
            else:
                counts[int(r["b"])] = int(r["n"])
    buckets = [
        (datetime.fromtimestamp(b * bucket_s, UTC), counts.get(b, 0)) for b in range(first_bucket, last_bucket + 1)
    ]
    return IngestActivity(
        spans=int(head["spans"]),
        first_received=_at(head["first_ns"]),
        last_received=_at(last_ns),
        now=now,
        recent_s=recent_s,
        recent_spans=int(head["recent"]),
        window_s=window_s,
        bucket_s=bucket_s,
        window_end=window_end,
        buckets=buckets,
        lag_p50_s=lag50,
        lag_p95_s=lag95,
    )


@dataclass(frozen=True)
class PriceSourceUse:
    """Which prices the stored LLM calls were priced with (``price_source`` NULL: unpriced)."""

    price_source: str | None
    price_book_version: str | None
    calls: int
    last_priced: datetime | None


def price_sources(store: ReadStore, *, max_rows: int = 100) -> list[PriceSourceUse]:
    """The price data (and price book) versions in the stored LLM calls, most calls first."""
    rows = store.query(
        "SELECT price_source, price_book_version, count(*) AS calls, max(priced_at) AS last_priced FROM llm_calls"
        " GROUP BY ALL ORDER BY calls DESC, price_source NULLS LAST, price_book_version NULLS FIRST",
        [],
        max_rows=max_rows,
    ).dicts()
    return [PriceSourceUse(r["price_source"], r["price_book_version"], int(r["calls"]), r["last_priced"]) for r in rows]
