"""Rent vs API: the window the traffic is measured over, and what the hours at its ends count for when observed in
part (a 6-minute window is not an hour of traffic)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._filters import Filters, Sql, call_scope, naive_utc
from taskcost.store import ReadStore

__all__ = ["LOW_WINDOW_H", "MIN_EDGE_S", "edge_notes", "edge_scales", "window"]

LOW_WINDOW_H = 24 * 7
"""A window shorter than a week misses the weekly cycle (a note says so), and its ends are measured to the second."""
MIN_EDGE_S = 300
"""An hour at either end of a short window observed for less counts as observed this long (a burst of seconds says
little of an hour's rate): its traffic is scaled by at most 3600 / 300 = 12."""


def window(filters: Filters, hours: pl.Series) -> tuple[datetime, int]:
    """The window's first hour and its length in hours: the filters' since / until when given (idle hours at either
    end count), else the first and last hour with traffic."""

    first, last = hours.min(), hours.max()
    assert isinstance(first, datetime) and isinstance(last, datetime)
    lo = naive_utc(filters.since) if filters.since is not None else first
    hi = naive_utc(filters.until) if filters.until is not None else last + timedelta(hours=1)
    lo = lo.replace(minute=0, second=0, microsecond=0)
    n = int(-(-(hi - lo) // timedelta(hours=1)))
    return lo, n


def edge_scales(store: ReadStore, filters: Filters, start: datetime, hours: int) -> tuple[Decimal, Decimal]:
    """What the first and the last hour of the window count for, against the part of them observed: 3600 s / the
    seconds observed (1 for a whole hour; at most 12: a part under ``MIN_EDGE_S`` counts as that long, since a burst
    of seconds says little of an hour's rate). The window begins at ``since`` (else the first call's start) and ends at
    ``until`` (else the last call's end); a one-hour window's two scales are the same. Measured for windows shorter
    than a week (the calls' first start and last end: one read); longer ones take whole hours (an edge is then under
    1% of the window)."""
    one = Decimal(1)
    if hours >= LOW_WINDOW_H:
        return one, one
    lo = naive_utc(filters.since) if filters.since is not None else None
    hi = naive_utc(filters.until) if filters.until is not None else None
    if lo is None or hi is None:
        edges = (
            Sql("WITH ")
            + call_scope(filters)
            + Sql(" SELECT min(start_time) AS lo, max(end_time) AS hi FROM scoped_calls")
        )
        row = frame(store, edges, filters).row(0, named=True)
        lo = lo if lo is not None else row["lo"]
        hi = hi if hi is not None else row["hi"]
    end = start + timedelta(hours=hours)
    lo = max(lo or start, start)
    hi = min(hi or end, end)

    def scale(a: datetime, b: datetime) -> Decimal:
        # a burst of seconds is not an hour's rate: the part seen counts for at least MIN_EDGE_S (at most x 12)
        seen = max(Decimal((b - a) // timedelta(microseconds=1)) / Decimal(1_000_000), Decimal(MIN_EDGE_S))
        return min((Decimal(3600) / seen).quantize(Decimal("1e-9")), Decimal(3600) / Decimal(MIN_EDGE_S))

    if hours == 1:
        both = scale(lo, hi)
        return both, both
    return scale(lo, start + timedelta(hours=1)), scale(end - timedelta(hours=1), hi)


def edge_notes(hours: int, first: Decimal, last: Decimal) -> list[str]:
    """What the notes say of the ends' scales (none when both are whole hours)."""
    ends = [("only hour", first)] if hours == 1 else [("first hour", first), ("last hour", last)]
    out = []
    for what, k in ends:
        if k == 1:
            continue
        seen = "under 5 min" if k * MIN_EDGE_S >= 3600 else f"{float(3600 / k) / 60:.0f} min"
        out.append(
            f"the {what} of the window was observed for {seen}: its traffic counts at that rate, x {float(k):.3g} "
            f"(a part under {MIN_EDGE_S // 60} min counts as {MIN_EDGE_S // 60})"
        )
    return out
