"""A PreparedBatch into the ClickHouse tables: exact with many writers, with no state kept between batches.

Per batch:

1. Its rows as Arrow tables typed by the batch schemas (the DuckDB store's; ClickHouse reads Arrow's string, int,
   decimal128, bool and list<string> into the columns' String, Int, Decimal(38, 12), Bool and Array(String); a NULL
   list is stored as [] because an Array cannot be Nullable).
2. Which of its spans are stored already: one indexed look-up per project of the (trace_id, span_id) of its traces
   (the tables' key starts with (project, trace_id)). The spans found count as ``deduplicated``, the others as new;
   within the batch a span repeated counts once. As in the DuckDB writer, when some spans are re-sent, only the
   rows of the new spans (each once) are inserted.
3. The inserts, one per table, the raw spans last: a span in ``span_rows`` means every row of it was inserted before,
   so a writer that failed half way is completed by the client's retry (the rows inserted twice are collapsed by
   the tables' ReplacingMergeTree and by the views).

A writer racing another with the same spans may count them as new too (both look up before either inserts): the
counts of the two are then too high, never the views, which read each span once (``_schema``).

Each insert carries ``insert_deduplication_token``: the SHA-256 of the rows it inserts (sorted, in Arrow IPC), so a
block inserted again unchanged (a retry after a lost answer, or two writers inserting the very same re-sent rows) is
dropped by the engine. ClickHouse and chDB honour the token on a non-replicated MergeTree only when the table has
``non_replicated_deduplication_window`` > 0 (checked on chDB 26.9: three inserts of a block with one token store it
once; without the table setting, three times); the row tables set it to 10,000 blocks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from taskcost.store._rows import PreparedBatch
from taskcost.store.clickhouse._schema import BATCH_TABLES, TABLE_OF

__all__ = ["Written", "batch_tables", "write_batch"]

Key = tuple[str, str, str]
SAMPLES = "engine_metric_rows"  # a batch's engine metric samples: not keyed by span


class Written:
    """What one batch did: spans newly stored and spans already stored (re-sent, or repeated in the batch)."""

    __slots__ = ("deduplicated", "spans")

    def __init__(self, spans: int, deduplicated: int) -> None:
        self.spans = spans
        self.deduplicated = deduplicated


def batch_tables(batch: PreparedBatch, schemas: Mapping[str, pa.Schema]) -> dict[str, pa.Table]:
    """A batch's non-empty tables as Arrow, by batch table name (built from ``columns`` with ``schemas`` unless a
    decode worker built them already)."""
    out: dict[str, pa.Table] = {}
    for name in BATCH_TABLES:
        if batch.tables is not None:
            tbl = batch.tables.get(name)
        elif batch.columns.get(name, {}).get("received_ns"):
            tbl = pa.Table.from_pydict(batch.columns[name], schema=schemas[name])
        else:
            tbl = None
        if tbl is not None and tbl.num_rows:
            out[name] = tbl
    return out


def _keys(tbl: pa.Table) -> list[Key]:
    cols = [tbl.column(c).to_pylist() for c in ("project", "trace_id", "span_id")]
    return list(zip(*cols, strict=True))


def stored_keys(client: Any, keys: list[Key]) -> set[Key]:
    """Which of ``keys`` are in ``span_rows`` already (one look-up per project, by its traces)."""
    traces: dict[str, set[str]] = {}
    for project, trace, _ in keys:
        traces.setdefault(project, set()).add(trace)
    wanted = set(keys)
    found: set[Key] = set()
    for project, ids in traces.items():
        rows = client.query(
            "SELECT DISTINCT trace_id, span_id FROM span_rows "
            "WHERE project = {p:String} AND trace_id IN {t:Array(String)}",
            parameters={"p": project, "t": sorted(ids)},
        ).result_rows
        found.update(k for t, s in rows if (k := (project, t, s)) in wanted)
    return found


def _only(tbl: pa.Table, new: set[Key]) -> pa.Table:
    """The rows of ``tbl`` whose span is in ``new``, the first of each span."""
    seen: set[Key] = set()
    keep = []
    for i, k in enumerate(_keys(tbl)):
        if k in new and k not in seen:
            seen.add(k)
            keep.append(i)
    return tbl.take(pa.array(keep, pa.int64())) if len(keep) < tbl.num_rows else tbl


def dedup_token(table: str, tbl: pa.Table) -> str:
    """The insert's deduplication token: its table and the SHA-256 of its rows (sorted by span key, as Arrow IPC)."""
    ordered = tbl.sort_by([("project", "ascending"), ("trace_id", "ascending"), ("span_id", "ascending")])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, ordered.schema) as w:
        w.write_table(ordered)
    return f"taskcost-{table}-{hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()}"


def _insert_samples(client: Any, tbl: pa.Table) -> None:
    """Engine metric samples, every one as sent (a re-sent one is left out by the ``engine_metrics`` view; a block
    inserted again unchanged, by the engine's deduplication token)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, tbl.schema) as w:
        w.write_table(tbl)
    token = f"taskcost-{SAMPLES}-{hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()}"
    client.insert_arrow(TABLE_OF[SAMPLES], tbl, settings={"insert_deduplication_token": token})


def write_batch(client: Any, tables: dict[str, pa.Table]) -> Written:
    """Insert a batch's tables (``batch_tables``); returns what it did."""
    if SAMPLES in tables:
        tables = dict(tables)
        _insert_samples(client, tables.pop(SAMPLES))
    spans = tables.get("spans")
    if spans is None:  # rows without their spans are not stored (the DuckDB writer's rule: a commit of no span)
        return Written(0, 0)
    keys = _keys(spans)
    distinct = set(keys)
    new = distinct - stored_keys(client, list(distinct))
    if not new:
        return Written(0, len(keys))
    if len(new) < len(keys):  # some re-sent or repeated: only the new spans' rows, each once
        tables = {name: sub for name, tbl in tables.items() if (sub := _only(tbl, new)).num_rows}
    for name in sorted(tables, key=lambda n: n == "spans"):  # the raw spans last
        tbl = tables[name]
        client.insert_arrow(TABLE_OF[name], tbl, settings={"insert_deduplication_token": dedup_token(name, tbl)})
    return Written(len(new), len(keys) - len(new))
