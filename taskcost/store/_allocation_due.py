"""What the server's own allocation of the clusters' GPU-hours has to do next: read from the stored windows and calls
(no pricing; ``_reprice.allocate`` does the work)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import duckdb

from taskcost.store._base import AllocationDue

if TYPE_CHECKING:
    from taskcost.pricing import Pricer

__all__ = ["allocation_due", "cluster_ids", "due"]


def allocation_due(
    con: duckdb.DuckDBPyConnection, pricer: Pricer, *, closed_ns: int, received_since_ns: int | None
) -> AllocationDue:
    """What the server's allocation has to do before ``closed_ns`` (rounded down to a window's start): from the first
    window of each configured cluster after its last stored one (``cluster_cost_rows``; from its first period when
    none is stored), and from the first window of the self-hosted calls of a configured cluster that arrived since
    ``received_since_ns``, ended before ``closed_ns`` and are still unpriced (spans that came after their window was
    allocated). Reads the stored windows and calls only (no pricing)."""
    w = pricer.window_s * 1_000_000_000
    closed = closed_ns - closed_ns % w
    with contextlib.closing(con.cursor()) as cur:
        stored = {
            str(cid): (int(end), int(at))
            for cid, end, at in cur.execute(
                "SELECT cluster_id, max(window_end_ns), max(computed_at_ns) FROM cluster_cost_rows GROUP BY 1"
            ).fetchall()
        }
        ids = cluster_ids(pricer)
        late = None
        if ids and received_since_ns is not None:
            marks = ", ".join("?" for _ in ids)
            late = _first_or_none(
                cur,
                "SELECT min(start_ns) FROM llm_call_rows WHERE deployment = 'self_hosted' AND cost_usd IS NULL "
                f"AND received_ns >= ? AND end_ns <= ? AND cluster_id IN ({marks})",
                [received_since_ns, closed, *ids],
            )
    return due(pricer, stored, closed, late)


def cluster_ids(pricer: Pricer) -> list[str]:
    """The configured clusters' ids, sorted (none without a clusters file)."""
    return [] if pricer.clusters is None else sorted({c.id for c in pricer.clusters.clusters})


def due(pricer: Pricer, stored: dict[str, tuple[int, int]], closed: int, late: int | None) -> AllocationDue:
    """What is due, from the stored windows (cluster id -> (last window's end, last computed at)), the end of the
    last ended window ``closed`` and the first late call's start (None: none): both stores' rule."""
    w = pricer.window_s * 1_000_000_000
    clusters = pricer.clusters
    ids = cluster_ids(pricer)
    starts: list[int] = []
    for cid in ids:
        after = stored[cid][0] if cid in stored else None
        for period in clusters.periods(cid) if clusters is not None else []:
            if after is not None and period.end_ns is not None and period.end_ns <= after:
                continue  # this period's windows are all stored
            start = period.start_ns if after is None else max(after, period.start_ns)
            if start < closed:
                starts.append(start)
            break  # the first period with windows still to allocate
    if late is not None:
        starts.append(late)
    ends = [end for cid, (end, _) in stored.items() if cid in ids]
    since = min(starts) if starts else None
    return AllocationDue(
        since_ns=None if since is None else since - since % w,
        closed_ns=closed,
        allocated_through_ns=max(ends) if ends else None,
        last_allocated_at_ns=max((at for _, at in stored.values()), default=None),
        late_calls_from_ns=late,
    )


def _first_or_none(cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> int | None:
    row = cur.execute(sql, params).fetchone()
    return None if row is None or row[0] is None else int(row[0])
