"""Re-pricing and the clusters' GPU-hour allocation on the ClickHouse store: versioned cost rows.

Nothing is updated in place. A re-priced call is inserted again, the whole row with its new price columns and a later
``priced_at_ns``: the same key (project, trace_id, span_id), the same ``received_ns`` (so the same ``_keep`` version),
so the table's merges keep the last inserted of equal versions, and every reader takes, among the copies of the one
report that counts, the one priced last (``llm_call_counted`` orders by ``priced_at_ns`` descending after the
first-report rule: migration 0004). ``tasks`` and ``llm_call_hours`` are computed from those rows on each read, so
they move with the calls at once, whichever collector inserted what. Tool calls are rows of a FINAL view: an equal
version's last insert wins there too. An allocated window is a ``cluster_cost_rows`` row versioned by
``computed_at_ns``; windows a new allocation no longer has are deleted (lightweight DELETE).

The calls are read in pages that partition the traces by hash (``sipHash64(project, trace_id) % pages``): the
first-report rule groups rows within a trace, so each page decides its own rows exactly, and memory holds a page.
They are priced by the same ``Pricer.price`` and ``allocate_self_hosted`` as the DuckDB store's ``_reprice`` (which
this module reuses for the comparison and the report), from the same stored inputs.

What a multi-writer database cannot promise: a collector still running the old prices may insert calls after the
re-price has read them (a spooled batch replayed late, a collector not yet restarted with the new prices). Run the
re-price again once every collector runs the new prices: it changes only what differs (``price_book_version`` shows
which calls were priced by which book).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from taskcost.pricing import RepriceReport, SelfHostedCall, allocate_self_hosted, allocation_range
from taskcost.store._allocation_due import cluster_ids, due
from taskcost.store._base import AllocationDue
from taskcost.store._reprice import WINDOW_COLUMNS, _price_page, _same, window_rows
from taskcost.store._rows import PRICE_COLUMNS, price_row
from taskcost.store.clickhouse._schema import COUNTED_ORDER, COUNTED_PER

if TYPE_CHECKING:
    from taskcost.pricing import Pricer

__all__ = ["allocate", "allocation_due", "reprice"]

Progress = Callable[[str, int, int], None]
_PAGE_CALLS = 50_000  # calls per page (about): the page count is the stored rows over this
_OLD = [c for c in PRICE_COLUMNS if c != "priced_at_ns"]


def _json_text(doc: str, name: str) -> str:
    """DuckDB's ``json_extract_string(doc, '$."name"')``: a string's value, any other value's JSON text, NULL for a
    JSON null or a missing key (the pricer's attribute lookups read stored attributes that way)."""
    k = "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return (
        f"multiIf(JSONType({doc}, {k}) = 'String', JSONExtractString({doc}, {k}), "
        f"JSONType({doc}, {k}) = 'Null', NULL, JSONExtractRaw({doc}, {k}))"
    )


def _range(since_ns: int | None, until_ns: int | None, col: str = "start_ns") -> str:
    parts = ["1"]
    if since_ns is not None:
        parts.append(f"{col} >= {int(since_ns)}")
    if until_ns is not None:
        parts.append(f"{col} < {int(until_ns)}")
    return " AND ".join(parts)


def _pages(client: Any) -> int:
    rows = int(client.query("SELECT count() FROM llm_call_rows").result_rows[0][0])
    return max(1, -(-rows // _PAGE_CALLS))


def _counted_page(client: Any, page: int, pages: int, where: str, attrs: list[str]) -> pa.Table:
    """The counted calls of one page of traces that ``where`` selects: every stored column, and ``_attrs`` (the
    pricer's attribute lookups, span over resource)."""
    in_page = f"sipHash64(project, trace_id) % {pages} = {page}"
    lookups = ", ".join(
        f"coalesce({_json_text('s.attributes', n)}, {_json_text('s.resource_attributes', n)})" for n in attrs
    )
    sql = (
        f"SELECT c.*, CAST([{lookups}] AS Array(Nullable(String))) AS _attrs FROM ("
        f"SELECT * FROM llm_call_rows WHERE {in_page} ORDER BY {COUNTED_ORDER} LIMIT 1 BY {COUNTED_PER}"
        ") AS c LEFT JOIN (SELECT project, trace_id, span_id, attributes, resource_attributes FROM span_rows FINAL "
        f"WHERE {in_page}) AS s ON s.project = c.project AND s.trace_id = c.trace_id AND s.span_id = c.span_id "
        f"WHERE {where} ORDER BY c.start_ns, c.project, c.trace_id, c.span_id"
    )
    return client.query_arrow(sql, settings={"join_use_nulls": 1})


def _price_rows(tbl: pa.Table) -> list[tuple[Any, ...]]:
    """A page as ``_reprice._price_page`` reads rows."""
    d = tbl.to_pydict()
    model = [r if r is not None else q for r, q in zip(d["response_model"], d["request_model"], strict=True)]
    cols = [
        [0] * tbl.num_rows,
        *(d[c] for c in ("project", "trace_id", "span_id", "start_ns", "provider")),
        model,
        *(d[c] for c in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")),
        *(d[c] for c in ("reasoning_tokens", "status", "deployment", "cluster_id")),
        *(d[c] for c in _OLD),
        d["_attrs"] if "_attrs" in d else [[]] * tbl.num_rows,
        d["task_id"],
        [True] * tbl.num_rows,
    ]
    return list(zip(*cols, strict=True))


def _reinsert(client: Any, schema: pa.Schema, tbl: pa.Table, new: dict[Hashable, tuple[Any, ...]]) -> int:
    """Insert again the rows of ``tbl`` whose key is in ``new``, with those price columns (a new version)."""
    if not new:
        return 0
    keys = list(zip(*(tbl.column(c).to_pylist() for c in ("project", "trace_id", "span_id")), strict=True))
    take = [i for i, k in enumerate(keys) if k in new]
    rows = tbl.take(pa.array(take, pa.int64())).select(schema.names).cast(schema)
    picked = [new[keys[i]] for i in take]
    for j, name in enumerate(PRICE_COLUMNS):
        col = pa.array([p[j] for p in picked], type=schema.field(name).type)
        rows = rows.set_column(rows.schema.get_field_index(name), name, col)
    client.insert_arrow("llm_call_rows", rows)
    return rows.num_rows


def _api_pass(
    client: Any,
    schema: pa.Schema,
    pricer: Pricer,
    report: RepriceReport,
    where: str,
    now_ns: int,
    write: bool,
    progress: Progress | None,
) -> None:
    attrs = [name for name, _ in pricer.attributes]
    pages = _pages(client)
    for page in range(pages):
        tbl = _counted_page(client, page, pages, f"c.deployment IS DISTINCT FROM 'self_hosted' AND {where}", attrs)
        changed = _price_page(pricer, _price_rows(tbl), now_ns, report)
        if write:
            _reinsert(client, schema, tbl, {(c[0], c[1], c[2]): c[7:] for c in changed})
        if progress is not None:
            progress("calls", page + 1, pages)


def _tool_pass(client: Any, pricer: Pricer, report: RepriceReport, where: str, write: bool) -> None:
    """Tool calls whose cost did not come from their own span: the book's tool prices, again (a new version)."""
    tbl = client.query_arrow(
        "SELECT * FROM tool_call_rows FINAL WHERE (cost_source IS NULL OR cost_source != 'span') "
        f"AND NOT (cost_source IS NULL AND cost_usd IS NOT NULL) AND {where}"
    )
    if not tbl.num_rows:
        return
    from taskcost.store._reprice import _at

    d = tbl.to_pydict()
    take, costs, sources = [], [], []
    for i, (name, start, cost, source) in enumerate(
        zip(d["tool_name"], d["start_ns"], d["cost_usd"], d["cost_source"], strict=True)
    ):
        new_cost, new_source = pricer.price_tool(name, _at(start), None)
        report.tool_calls += 1
        report.tool_before_usd += cost or 0
        report.tool_after_usd += new_cost or 0
        if (new_cost, new_source) != (cost, source):
            take.append(i)
            costs.append(new_cost)
            sources.append(new_source)
    report.tools_changed = len(take)
    if write and take:
        rows = tbl.take(pa.array(take, pa.int64()))
        rows = rows.set_column(
            rows.schema.get_field_index("cost_usd"), "cost_usd", pa.array(costs, rows.schema.field("cost_usd").type)
        )
        rows = rows.set_column(
            rows.schema.get_field_index("cost_source"), "cost_source", pa.array(sources, pa.string())
        )
        client.insert_arrow("tool_call_rows", rows)


def _self_hosted(client: Any, lo: int | None, hi: int | None) -> pa.Table:
    where = " AND ".join(
        ["c.deployment = 'self_hosted'"]
        + ([f"c.end_ns >= {int(lo)}"] if lo is not None else [])
        + ([f"c.start_ns < {int(hi)}"] if hi is not None else [])
    )
    pages = _pages(client)
    parts = [_counted_page(client, p, pages, where, []) for p in range(pages)]
    return pa.concat_tables(parts).sort_by("start_ns") if parts else pa.table({})


def _cluster_pass(
    client: Any,
    schema: pa.Schema,
    pricer: Pricer,
    report: RepriceReport,
    since_ns: int | None,
    until_ns: int | None,
    now_ns: int,
    closed_ns: int | None,
    write: bool,
) -> None:
    """The DuckDB store's ``_cluster_pass``, over the counted rows, written as new versions."""
    w = pricer.window_s * 1_000_000_000
    lo, hi, closed = allocation_range(pricer.window_s, since_ns, until_ns, now_ns)
    if closed_ns is not None:
        closed = min(closed, closed_ns - closed_ns % w)
    tbl = _self_hosted(client, lo, hi)
    for _ in range(16):  # widen to whole windows until no call crosses the edge
        if not tbl.num_rows:
            break
        starts, ends = tbl.column("start_ns").to_pylist(), tbl.column("end_ns").to_pylist()
        new_lo = None if lo is None else min(lo, min(starts))
        new_hi = None if hi is None else max(hi, max(e + 1 for e in ends))
        new_lo = None if new_lo is None else new_lo - new_lo % w
        new_hi = None if new_hi is None else -(-new_hi // w) * w
        if (lo, hi) == (new_lo, new_hi):
            break
        lo, hi = new_lo, new_hi
        tbl = _self_hosted(client, lo, hi)
    d = tbl.to_pydict() if tbl.num_rows else {}
    keys = list(zip(d.get("project", []), d.get("trace_id", []), d.get("span_id", []), strict=True))
    report.self_hosted_calls = len(keys)
    calls = [
        SelfHostedCall(k, c, s, e)
        for k, c, s, e in zip(keys, d.get("cluster_id", []), d.get("start_ns", []), d.get("end_ns", []), strict=True)
    ]
    allocated = allocate_self_hosted(pricer, calls, lo, hi, closed)
    for alloc in allocated.windows:
        report.windows += 1
        report.bill_usd += alloc.bill_usd
        report.attributed_usd += alloc.attributed_usd
        report.idle_usd += alloc.idle_usd
    new: dict[Hashable, tuple[Any, ...]] = {}
    for i, key in enumerate(keys):
        row = price_row(allocated.prices[key], now_ns)
        if not _same([d[c][i] for c in _OLD], row):
            new[key] = row
    report.self_hosted_changed = len(new)
    if not write:
        return
    upto = min(hi, closed) if hi is not None else closed
    kept = {(a.cluster.id, a.start_ns) for a in allocated.windows}
    stored = client.query(
        "SELECT cluster_id, window_start_ns FROM cluster_cost_rows FINAL WHERE "
        f"window_start_ns >= {int(lo or 0)} AND window_start_ns < {int(upto)}"
    ).result_rows
    gone = [(c, s) for c, s in stored if (c, s) not in kept]
    if gone:  # windows the clusters file no longer has
        pairs = ", ".join(f"({_quote(c)}, {int(s)})" for c, s in gone)
        client.command(f"DELETE FROM cluster_cost_rows WHERE (cluster_id, window_start_ns) IN ({pairs})")
    if allocated.windows and pricer.clusters is not None:
        rows = window_rows(allocated.windows, pricer.clusters.label, now_ns)
        client.insert("cluster_cost_rows", rows, column_names=list(WINDOW_COLUMNS))
    _reinsert(client, schema, tbl, new)


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _report(pricer: Pricer, since_ns: int | None, until_ns: int | None, dry_run: bool = False) -> RepriceReport:
    return RepriceReport(
        since_ns=since_ns,
        until_ns=until_ns,
        dry_run=dry_run,
        prices=pricer.data.label,
        book=pricer.book_version,
        clusters=None if pricer.clusters is None else pricer.clusters.label,
    )


def reprice(
    client: Any,
    schema: pa.Schema,
    pricer: Pricer,
    *,
    since_ns: int | None = None,
    until_ns: int | None = None,
    now_ns: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
    page: int | None = None,
) -> RepriceReport:
    """Price the calls that started in [since, until) again (all history by default) and allocate the clusters'
    bills over the whole windows that have ended; changed rows are inserted as new versions. ``page`` is accepted
    for the DuckDB store's signature (pages here are ``_PAGE_CALLS`` calls by trace hash)."""
    started = time.perf_counter()
    now_ns = now_ns if now_ns is not None else time.time_ns()
    report = _report(pricer, since_ns, until_ns, dry_run)
    where = _range(since_ns, until_ns, "c.start_ns")
    _api_pass(client, schema, pricer, report, where, now_ns, not dry_run, progress)
    if progress is not None:
        progress("clusters", 0, 1)
    _tool_pass(client, pricer, report, _range(since_ns, until_ns), not dry_run)
    _cluster_pass(client, schema, pricer, report, since_ns, until_ns, now_ns, None, not dry_run)
    if progress is not None:
        progress("clusters", 1, 1)
    report.seconds = time.perf_counter() - started
    return report


def allocate(
    client: Any,
    schema: pa.Schema,
    pricer: Pricer,
    *,
    since_ns: int | None,
    until_ns: int | None,
    now_ns: int | None = None,
    closed_ns: int | None = None,
) -> RepriceReport:
    """The self-hosted part of ``reprice`` alone (the server's own allocation, window by window)."""
    started = time.perf_counter()
    now_ns = now_ns if now_ns is not None else time.time_ns()
    report = _report(pricer, since_ns, until_ns)
    _cluster_pass(client, schema, pricer, report, since_ns, until_ns, now_ns, closed_ns, True)
    report.seconds = time.perf_counter() - started
    return report


def allocation_due(client: Any, pricer: Pricer, *, closed_ns: int, received_since_ns: int | None) -> AllocationDue:
    """The DuckDB store's rule (``_allocation_due.due``), read from the ClickHouse tables (the stored windows
    through FINAL, the late calls among the counted ones)."""
    closed = closed_ns - closed_ns % (pricer.window_s * 1_000_000_000)
    stored = {
        str(cid): (int(end), int(at))
        for cid, end, at in client.query(
            "SELECT cluster_id, max(window_end_ns), max(computed_at_ns) FROM cluster_cost_rows FINAL GROUP BY 1"
        ).result_rows
    }
    ids = cluster_ids(pricer)
    late = None
    if ids and received_since_ns is not None:
        row = client.query(
            "SELECT min(start_ns) FROM llm_call_counted WHERE deployment = 'self_hosted' AND cost_usd IS NULL "
            f"AND received_ns >= {int(received_since_ns)} AND end_ns <= {int(closed)} "
            f"AND cluster_id IN ({', '.join(_quote(i) for i in ids)})",
            settings={"aggregate_functions_null_for_empty": 1},
        ).result_rows
        late = None if not row or row[0][0] is None else int(row[0][0])
    return due(pricer, stored, closed, late)
