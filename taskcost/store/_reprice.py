"""``taskcost reprice``: price stored calls again, and allocate self-hosted clusters' bills to their calls.

It runs on its own cursor, beside the single writer (DuckDB's MVCC lets the writer keep committing new spans
meanwhile). Calls are priced by the same ``Pricer.price`` as at ingest, from the same stored inputs, so a
re-priced history is what ingest would have stored under the new prices. The calls stored when it begins are
read page by page, in (start, row id) order: the page cut points come from one sorted read of those keys alone
(DuckDB's sort spills beyond its memory limit), and each page joins only the spans of its own start times, so
memory holds a page whatever the history (a temporary table of every call's inputs joined to every span was the
earlier design: out of memory at 300k calls under 128MB). Rows are updated only where something changed.

Each page is its own transaction, with what it changes in its tasks' costs: ``tasks`` equals the sum of its
calls at every commit, but a reader during a re-price sees the calls it has reached at their new prices and the
others at their old ones. An interrupted re-price leaves the pages it committed; running it again finishes the
job (it changes only what differs). One transaction for the whole history was the earlier design: DuckDB holds
an update's new values in memory until a checkpoint, about 30 MB per 100k calls changed, so re-pricing 1M calls
ran out of memory under a 256MB limit (a 512MB one would have at about 1.5M). Paged, with a checkpoint every
``_CHECKPOINT_PAGES`` pages, the process stayed at about 270 MB RSS through 1M calls under 128MB (ad hoc runs,
not committed). A dry run writes nothing.

Race with ingest (server mode): the server swaps its pricer before re-pricing; a batch priced with the old
pricer but committed after the re-price began (appended after the last row id it saw) is caught by a second,
short pass over the rows appended since that were received before it began.

The server allocates the clusters' windows by itself as they end (taskcost/collector/_allocation.py): ``allocate``
is the self-hosted pass of ``reprice`` alone, over a range of windows, in one transaction; ``_allocation_due`` says
which windows are due (after the last one stored per cluster, and those of calls that came after their window was
allocated).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from taskcost._internal.lazy import LazyModule
from taskcost.pricing import (
    CallPrice,
    ClusterWindowCost,
    ModelChange,
    Pricer,
    RepriceReport,
    SelfHostedCall,
    WindowAllocation,
    allocate_self_hosted,
    allocation_range,
    pricing_inputs,
)
from taskcost.store import _hours, _rollup
from taskcost.store._rows import PRICE_COLUMNS, price_row, usage_of
from taskcost.store._sql import count, transaction

__all__ = ["WINDOW_COLUMNS", "Progress", "allocate", "cluster_costs", "reprice", "window_rows"]

Progress = Callable[[str, int, int], None]  # (phase, done, total)

_pc = LazyModule("pyarrow.compute")  # its import takes ~50 ms: only re-pricing needs it
_MONEY = pa.decimal128(38, 12)
# a changed call: its key, what the task roll-up needs (task, counted = not a duplicate, the old cost), its start
# (where the hourly roll-up's adjustment finds it), new prices
_NEW_SCHEMA = pa.schema(
    [("project", pa.string()), ("trace_id", pa.string()), ("span_id", pa.string())]
    + [("task_id", pa.string()), ("counted", pa.bool_()), ("old_cost_usd", pa.decimal128(38, 12))]
    + [("start_ns", pa.int64())]
    + [
        (c, _MONEY if c.endswith("_usd") else (pa.int64() if c == "priced_at_ns" else pa.string()))
        for c in PRICE_COLUMNS
    ]
)
_SET = ", ".join(f"{c} = n.{c}" for c in PRICE_COLUMNS)
_OLD = ", ".join(f"c.{c} AS old_{c}" for c in PRICE_COLUMNS if c != "priced_at_ns")
_MAX_WINDOWS_SHOWN = 24
_CHECKPOINT_PAGES = 10  # try a CHECKPOINT after this many committed pages: it writes out the updates held in memory


def _range(col: str, since_ns: int | None, until_ns: int | None) -> tuple[str, list[Any]]:
    parts, params = [], []
    if since_ns is not None:
        parts.append(f"{col} >= ?")
        params.append(since_ns)
    if until_ns is not None:
        parts.append(f"{col} < ?")
        params.append(until_ns)
    return (" AND ".join(parts) or "true"), params


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).replace(microsecond=(ns % 1_000_000_000) // 1000)


def _iso(ns: int) -> str:
    return _at(ns).isoformat().replace("+00:00", "Z")


def _same(old: Sequence[Any], new: Sequence[Any]) -> bool:
    """Old stored price columns vs new ones (priced_at_ns excluded; details compared as JSON values)."""
    for name, a, b in zip(PRICE_COLUMNS, old, new, strict=False):
        if name == "price_detail":
            if (json.loads(a) if a else None) != (json.loads(b) if b else None):
                return False
        elif a != b:
            return False
    return True


def _apply(cur: duckdb.DuckDBPyConnection, rows: list[tuple[Any, ...]]) -> None:
    """Write new price columns for (project, trace_id, span_id, task_id, counted, old_cost_usd, start_ns,
    *PRICE_COLUMNS) rows, and what that changes in the tasks' costs and the hourly call roll-up (same transaction: the
    roll-ups stay exact)."""
    if not rows:
        return
    table = pa.Table.from_pylist([dict(zip(_NEW_SCHEMA.names, r, strict=True)) for r in rows], schema=_NEW_SCHEMA)
    cur.register("_taskcost_repriced", table)
    try:
        cur.execute(
            f"UPDATE llm_call_rows AS c SET {_SET} FROM _taskcost_repriced AS n "
            "WHERE c.project = n.project AND c.trace_id = n.trace_id AND c.span_id = n.span_id"
        )
        _rollup.adjust_tasks(cur, "_taskcost_repriced", "llm")
        # the changed rows as stored now, for the hourly roll-up: read within their starts (zone maps skip the rest;
        # UPDATE ... RETURNING would do, but DuckDB then rewrites the rows, and their row ids, which pages go by)
        starts = table.column("start_ns")
        cur.execute(
            "CREATE OR REPLACE TEMP TABLE _taskcost_changed AS SELECT c.* FROM llm_call_rows AS c "
            "SEMI JOIN _taskcost_repriced AS n ON c.project = n.project AND c.trace_id = n.trace_id "
            "AND c.span_id = n.span_id AND c.start_ns = n.start_ns "
            "WHERE c.start_ns BETWEEN ? AND ?",
            [_pc.min(starts).as_py(), _pc.max(starts).as_py()],
        )
        _hours.adjust_hours(cur, "_taskcost_changed", "_taskcost_repriced")
        cur.execute("DROP TABLE _taskcost_changed")
    finally:  # (after a failed statement the transaction is aborted: keep its error, not the unregister's)
        with contextlib.suppress(duckdb.Error):
            cur.unregister("_taskcost_repriced")


_API_CALLS = "c.deployment IS DISTINCT FROM 'self_hosted'"


_Key = tuple[int, int]  # (start_ns, rowid): the order pages follow, unique per call


def _page_bounds(cur: duckdb.DuckDBPyConnection, where: str, params: list[Any], page: int) -> tuple[int, list[_Key]]:
    """How many API calls match, and the keys that split them into pages of ``page`` calls (the last one past the
    end): the matches' keys, sorted by DuckDB (which spills to disk beyond its memory limit) and read in batches."""
    bounds: list[_Key] = []
    total, last = 0, (0, 0)
    with contextlib.closing(cur.cursor()) as keys:  # its own connection: the reader streams while it is open
        reader = keys.sql(
            f"SELECT c.start_ns, c.rowid FROM llm_call_rows c WHERE {_API_CALLS} AND {where} ORDER BY 1, 2",
            params=params,
        ).to_arrow_reader(65_536)
        for batch in reader:
            starts, rowids = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            bounds += [(starts[i], rowids[i]) for i in range((-total) % page, len(starts), page)]
            total += len(starts)
            if starts:
                last = (starts[-1], rowids[-1])
    return total, ([*bounds, (last[0], last[1] + 1)] if total else [])


_IN_PAGE = "c.start_ns BETWEEN ? AND ? AND (c.start_ns > ? OR c.rowid >= ?) AND (c.start_ns < ? OR c.rowid < ?)"


def _page_rows(
    cur: duckdb.DuckDBPyConnection, pricer: Pricer, where: str, params: list[Any], lo: _Key, hi: _Key
) -> list[tuple[Any, ...]]:
    """The API calls from key ``lo`` up to (not with) ``hi`` that match ``where``, with what pricing them needs: the
    stored usage, the old prices and the pricing attributes of their spans (read from the spans of the same start
    times only, so that a page joins a page)."""
    names = [name for name, _ in pricer.attributes]
    lookups = ", ".join(
        "coalesce(json_extract_string(s.attributes, ?), json_extract_string(s.resource_attributes, ?))" for _ in names
    )
    paths: list[Any] = []
    for name in names:
        path = '$."' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        paths += [path, path]
    return cur.execute(
        "SELECT 0 AS rn, c.project, c.trace_id, c.span_id, c.start_ns, c.provider, "
        "coalesce(c.response_model, c.request_model) AS model, c.input_tokens, c.output_tokens, "
        "c.cache_read_tokens, c.cache_write_tokens, c.reasoning_tokens, c.status, c.deployment, c.cluster_id, "
        f"{_OLD}, [{lookups}]::VARCHAR[] AS attrs, c.task_id, NOT c.duplicate AS counted "
        "FROM llm_call_rows c LEFT JOIN spans s "
        "ON s.project = c.project AND s.trace_id = c.trace_id AND s.span_id = c.span_id "
        "AND s.start_ns = c.start_ns AND s.start_ns BETWEEN ? AND ? "
        f"WHERE {_API_CALLS} AND {_IN_PAGE} AND {where} "
        "ORDER BY c.start_ns, c.rowid",
        [*paths, lo[0], hi[0], lo[0], hi[0], lo[0], lo[1], hi[0], hi[1], *params],
    ).fetchall()


def _price_page(
    pricer: Pricer, rows: list[tuple[Any, ...]], now_ns: int, report: RepriceReport
) -> list[tuple[Any, ...]]:
    changed = []
    n_old = len(PRICE_COLUMNS) - 1
    by_model = {(m.provider, m.model): m for m in report.by_model}
    for r in rows:
        (_, project, trace_id, span_id, start_ns, provider, model, i, o, cr, cw, rs, status, dep, cluster) = r[:15]
        old = r[15 : 15 + n_old]
        attrs, task_id, counted = r[15 + n_old] or [], r[16 + n_old], r[17 + n_old]
        values = dict(zip((name for name, _ in pricer.attributes), attrs, strict=False))
        context, cw1h = pricing_inputs(pricer.attributes, values.get)
        price: CallPrice = pricer.price(
            provider,
            model,
            usage_of(i, o, cr, cw, rs, status, cw1h),
            _at(start_ns),
            deployment=dep,
            context=context,
            cluster_id=cluster,
        )
        new = price_row(price, now_ns)
        report.calls += 1
        if old[0] is not None:
            report.before_usd += old[0]
        if price.cost_usd is not None:
            report.after_usd += price.cost_usd
        else:
            report.unpriced_after += 1
        if _same(old, new):
            continue
        report.updated += 1
        changed.append((project, trace_id, span_id, task_id, counted, old[0], start_ns, *new))
        if old[0] == price.cost_usd:
            continue  # same cost, new provenance (e.g. another book version)
        report.changed += 1
        report.newly_priced += old[0] is None and price.cost_usd is not None
        report.newly_unpriced += old[0] is not None and price.cost_usd is None
        m = by_model.setdefault((provider, model), ModelChange(provider, model))
        m.calls += 1
        m.before_usd += old[0] or Decimal(0)
        m.after_usd += price.cost_usd or Decimal(0)
    report.by_model = sorted(by_model.values(), key=lambda m: -abs(m.after_usd - m.before_usd))
    return changed


def _api_pass(
    cur: duckdb.DuckDBPyConnection,
    pricer: Pricer,
    report: RepriceReport,
    where: str,
    params: list[Any],
    now_ns: int,
    page: int,
    progress: Progress | None,
    write: bool,
) -> None:
    """The calls priced by token (not self-hosted) that ``where`` selects, page by page in start order: a page is
    read, priced and (``write``) applied in its own transaction; memory holds one page whatever the history."""
    total, bounds = _page_bounds(cur, where, params, page)
    done = pages = 0
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        rows = _page_rows(cur, pricer, where, params, lo, hi)
        changed = _price_page(pricer, rows, now_ns, report)
        if write:
            with transaction(cur):
                _apply(cur, changed)
            pages += 1
            if pages % _CHECKPOINT_PAGES == 0:
                # (DuckDB checkpoints beside an open write transaction, the writer's; should it refuse, the
                # writer's automatic checkpoints still come)
                with contextlib.suppress(duckdb.Error):
                    cur.execute("CHECKPOINT")
        done += len(rows)
        if progress is not None:
            progress("calls", min(done, total), total)


def _tool_pass(
    cur: duckdb.DuckDBPyConnection, pricer: Pricer, report: RepriceReport, where: str, params: list[Any]
) -> None:
    """Tool calls whose cost did not come from their own span: the book's tool prices, again."""
    rows = cur.execute(
        "SELECT project, trace_id, span_id, tool_name, start_ns, cost_usd, cost_source, task_id FROM tool_call_rows "
        "WHERE cost_source IS DISTINCT FROM 'span' AND NOT (cost_source IS NULL AND cost_usd IS NOT NULL) "
        f"AND {where}",
        params,
    ).fetchall()
    changed = []
    for project, trace_id, span_id, tool_name, start_ns, cost, source, task_id in rows:
        new_cost, new_source = pricer.price_tool(tool_name, _at(start_ns), None)
        report.tool_calls += 1
        report.tool_before_usd += cost or Decimal(0)
        report.tool_after_usd += new_cost or Decimal(0)
        if (new_cost, new_source) != (cost, source):
            changed.append(
                {
                    "project": project,
                    "trace_id": trace_id,
                    "span_id": span_id,
                    "c": new_cost,
                    "s": new_source,
                    "task_id": task_id,
                    "old_cost_usd": cost,
                }
            )
    report.tools_changed = len(changed)
    if changed:
        schema = pa.schema(
            [
                ("project", pa.string()),
                ("trace_id", pa.string()),
                ("span_id", pa.string()),
                ("c", _MONEY),
                ("s", pa.string()),
                ("task_id", pa.string()),
                ("old_cost_usd", _MONEY),
            ]
        )
        cur.register("_taskcost_tools", pa.Table.from_pylist(changed, schema=schema))
        try:
            cur.execute(
                "UPDATE tool_call_rows AS t SET cost_usd = n.c, cost_source = n.s FROM _taskcost_tools AS n "
                "WHERE t.project = n.project AND t.trace_id = n.trace_id AND t.span_id = n.span_id"
            )
            _rollup.adjust_tasks(
                cur,
                "(SELECT project, task_id, true AS counted, old_cost_usd, c AS cost_usd FROM _taskcost_tools)",
                "tool",
            )
        finally:  # (after a failed statement the transaction is aborted: keep its error)
            with contextlib.suppress(duckdb.Error):
                cur.unregister("_taskcost_tools")


def _self_hosted_rows(cur: duckdb.DuckDBPyConnection, lo: int | None, hi: int | None) -> list[tuple[Any, ...]]:
    old = ", ".join(c for c in PRICE_COLUMNS if c != "priced_at_ns")
    where, params = [], []
    if lo is not None:
        where.append("end_ns >= ?")
        params.append(lo)
    if hi is not None:
        where.append("start_ns < ?")
        params.append(hi)
    return cur.execute(
        f"SELECT project, trace_id, span_id, start_ns, end_ns, cluster_id, task_id, NOT duplicate, {old} "
        "FROM llm_call_rows "
        f"WHERE deployment = 'self_hosted' AND {' AND '.join(where) or 'true'} ORDER BY start_ns",
        params,
    ).fetchall()


def _cluster_pass(
    cur: duckdb.DuckDBPyConnection,
    pricer: Pricer,
    report: RepriceReport,
    since_ns: int | None,
    until_ns: int | None,
    now_ns: int,
    closed_ns: int | None = None,
) -> None:
    """Allocate the clusters' bills (``pricing.allocate_self_hosted``) over the whole windows that cover the range,
    and store the windows and the self-hosted calls' new prices. Windows that end after ``now_ns`` (or after
    ``closed_ns``, when earlier) are not allocated."""
    w = pricer.window_s * 1_000_000_000
    lo, hi, closed = allocation_range(pricer.window_s, since_ns, until_ns, now_ns)
    if closed_ns is not None:
        closed = min(closed, closed_ns - closed_ns % w)
    rows = _self_hosted_rows(cur, lo, hi)
    for _ in range(16):  # widen to whole windows until no call crosses the edge (calls are rarely long)
        if not rows:
            break
        new_lo = None if lo is None else min(lo, min(r[3] for r in rows))
        new_hi = None if hi is None else max(hi, max(r[4] + 1 for r in rows))
        new_lo = None if new_lo is None else new_lo - new_lo % w
        new_hi = None if new_hi is None else -(-new_hi // w) * w
        if (lo, hi) == (new_lo, new_hi):
            break
        lo, hi = new_lo, new_hi
        rows = _self_hosted_rows(cur, lo, hi)
    # a second report of a stored response (``duplicate``) is counted nowhere: it takes no share of a bill, else part
    # of the attributed dollars would sit on a call no view shows
    rows = [r for r in rows if r[7]]
    report.self_hosted_calls = len(rows)
    calls = [SelfHostedCall((r[0], r[1], r[2]), r[5], r[3], r[4]) for r in rows]
    allocated = allocate_self_hosted(pricer, calls, lo, hi, closed)
    # the windows in range are recomputed from scratch (none, when no clusters file is configured any more)
    cur.execute(
        "DELETE FROM cluster_cost_rows WHERE window_start_ns >= ? AND window_start_ns < ?",
        [lo if lo is not None else 0, min(hi, closed) if hi is not None else closed],
    )
    if pricer.clusters is not None:
        _store_windows(cur, allocated.windows, pricer.clusters.label, now_ns)
    for alloc in allocated.windows:
        report.windows += 1
        report.bill_usd += alloc.bill_usd
        report.attributed_usd += alloc.attributed_usd
        report.idle_usd += alloc.idle_usd
    changed = []
    for r in rows:
        key, task_id, counted, old = (r[0], r[1], r[2]), r[6], r[7], r[8:]
        new = price_row(allocated.prices[key], now_ns)
        if not _same(old, new):
            changed.append((*key, task_id, counted, old[0], r[3], *new))
    report.self_hosted_changed = len(changed)
    _apply(cur, changed)


WINDOW_COLUMNS = (
    "cluster_id", "window_start_ns", "window_end_ns", "gpu_type", "gpu_count", "usd_per_gpu_hour", "rate_source",
    "bill_usd", "attributed_usd", "idle_usd", "busy_s", "calls", "clusters_version", "computed_at_ns",
)  # fmt: skip
"""``cluster_cost_rows``' columns, in order (both stores)."""


def window_rows(allocations: list[WindowAllocation], label: str, now_ns: int) -> list[list[Any]]:
    """The allocated windows as ``cluster_cost_rows`` rows (WINDOW_COLUMNS)."""
    return [
        [
            a.cluster.id,
            a.start_ns,
            a.end_ns,
            a.cluster.gpu_type,
            a.cluster.gpu_count,
            a.cluster.rate,
            a.cluster.rate_source,
            a.bill_usd,
            a.attributed_usd,
            a.idle_usd,
            a.busy_ns / 1e9,
            len(a.shares),
            label,
            now_ns,
        ]
        for a in allocations
    ]


def _store_windows(
    cur: duckdb.DuckDBPyConnection, allocations: list[WindowAllocation], label: str, now_ns: int
) -> None:
    if allocations:
        marks = ", ".join("?" for _ in WINDOW_COLUMNS)
        cur.executemany(f"INSERT INTO cluster_cost_rows VALUES ({marks})", window_rows(allocations, label, now_ns))


def _catch_up(
    cur: duckdb.DuckDBPyConnection,
    pricer: Pricer,
    report: RepriceReport,
    where: str,
    params: list[Any],
    started_ns: int,
    now_ns: int,
    page: int,
) -> None:
    """Calls received before the re-price began but committed after it did (appended after the last row it saw,
    ``where`` says so): price them too. They may have been priced with the old prices on their way in."""
    extra = RepriceReport()
    late_where = f"{where} AND c.received_ns < ?"
    _api_pass(cur, pricer, extra, late_where, [*params, started_ns], now_ns, page, None, write=True)
    report.caught_up = extra.updated


def reprice(
    con: duckdb.DuckDBPyConnection,
    pricer: Pricer,
    *,
    since_ns: int | None = None,
    until_ns: int | None = None,
    now_ns: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    page: int = 5000,
) -> RepriceReport:
    """Price the calls that started in [since, until) again with ``pricer`` (all history by default), and
    allocate the clusters' bills over the whole windows that have ended. Returns what changed."""
    started = time.perf_counter()
    started_ns = time.time_ns()
    now_ns = now_ns if now_ns is not None else started_ns
    report = RepriceReport(
        since_ns=since_ns,
        until_ns=until_ns,
        dry_run=dry_run,
        prices=pricer.data.label,
        book=pricer.book_version,
        clusters=None if pricer.clusters is None else pricer.clusters.label,
    )
    where, params = _range("c.start_ns", since_ns, until_ns)
    with contextlib.closing(con.cursor()) as cur:
        # the calls stored when it begins (row ids only grow: rows are appended, never deleted); the ones appended
        # later came in priced with the new prices, but for those received before it began: the catch-up
        seen = count(cur, "SELECT coalesce(max(rowid), -1) FROM llm_call_rows")
        _api_pass(
            cur, pricer, report, f"{where} AND c.rowid <= ?", [*params, seen], now_ns, page, progress, not dry_run
        )
        if progress is not None:
            progress("clusters", 0, 1)
        with transaction(cur, commit=not dry_run):  # a dry run rolls its tool and cluster passes back
            _tool_pass(cur, pricer, report, where.replace("c.start_ns", "start_ns"), params)
            _cluster_pass(cur, pricer, report, since_ns, until_ns, now_ns)
        if progress is not None:
            progress("clusters", 1, 1)
        if not dry_run:
            _catch_up(cur, pricer, report, f"{where} AND c.rowid > ?", [*params, seen], started_ns, now_ns, page)
    report.seconds = time.perf_counter() - started
    return report


def cluster_costs(
    con: duckdb.DuckDBPyConnection,
    since_ns: int | None = None,
    until_ns: int | None = None,
    cluster_id: str | None = None,
) -> list[ClusterWindowCost]:
    """The allocated windows (by the last ``reprice`` or the server's allocation), oldest first."""
    where, params = _range("window_start_ns", since_ns, until_ns)
    if cluster_id is not None:
        where += " AND cluster_id = ?"
        params.append(cluster_id)
    with contextlib.closing(con.cursor()) as cur:
        rows = cur.execute(
            "SELECT cluster_id, window_start_ns, window_end_ns, gpu_type, gpu_count, usd_per_gpu_hour, rate_source, "
            "bill_usd, attributed_usd, idle_usd, busy_s, calls, clusters_version FROM cluster_cost_rows "
            f"WHERE {where} ORDER BY window_start_ns, cluster_id",
            params,
        ).fetchall()
    return [ClusterWindowCost(*r) for r in rows]


def allocate(
    con: duckdb.DuckDBPyConnection,
    pricer: Pricer,
    *,
    since_ns: int | None,
    until_ns: int | None,
    now_ns: int | None = None,
    closed_ns: int | None = None,
) -> RepriceReport:
    """The self-hosted part of ``reprice`` alone, in one transaction: allocate the clusters' bills over the whole
    windows that cover [since, until) and have ended by ``closed_ns`` (default: ``now_ns``), store the windows and
    price their calls (the server's own allocation, window by window). Allocating a window again recomputes it
    from scratch: the same calls cost the same."""
    started = time.perf_counter()
    now_ns = now_ns if now_ns is not None else time.time_ns()
    report = RepriceReport(
        since_ns=since_ns,
        until_ns=until_ns,
        prices=pricer.data.label,
        book=pricer.book_version,
        clusters=None if pricer.clusters is None else pricer.clusters.label,
    )
    with contextlib.closing(con.cursor()) as cur, transaction(cur):
        _cluster_pass(cur, pricer, report, since_ns, until_ns, now_ns, closed_ns)
    report.seconds = time.perf_counter() - started
    return report
