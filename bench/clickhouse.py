"""The analytics on the ClickHouse store (chDB, in this process) beside the DuckDB store, on the same history.

The history is the query bench's (``bench.query.load_history``, self-hosted share on), loaded into a DuckDB file as
the DuckDB rows do; its row tables are then copied into chDB's row tables as they are (Arrow, in chunks: a bulk
load behind the writers, as ``load_history`` is behind the DuckDB writer). Each question is asked through the
library door (``question.run(store, ...)``) of both stores in the same run: one warm-up, then the median of
``repeats``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.analytics import PARAMS, _median
from bench.query import load_history

__all__ = ["copy_rows", "failures", "run_clickhouse_analytics"]

QUERY_MEMORY_BYTES = 8 << 30
"""What a query may use here (``sql_memory_limit``): 8 GiB, of this machine's 24, so that what is measured is the
engine's time (a server's default, about 1.1 GiB, refuses the larger questions at 10M calls: said in the failures)."""

failures: dict[tuple[str, int, str], str] = {}
"""The last run's questions that failed, by (question, size, store): why (NaN in its timings)."""

_ROW_TABLES = {"llm_call_rows": "llm_call_rows", "tool_call_rows": "tool_call_rows", "task_rows": "task_rows"}
_EVERYTHING = {"spans": "span_rows"}  # (DuckDB table -> ClickHouse table) the raw spans too, for a served copy


def copy_rows(duck: Any, ch: Any, chunk: int = 500_000, everything: bool = False) -> int:
    """The DuckDB store's row tables into the ClickHouse store's (the columns a batch carries); rows copied.
    ``everything``: the raw spans and the clusters' allocated windows too (a whole store, to serve)."""
    copied = 0
    tables = {name: (name, table) for name, table in _ROW_TABLES.items()}
    if everything:
        tables |= {name: (name, table) for name, table in _EVERYTHING.items()}
    for batch_name, (source, table) in tables.items():
        schema: pa.Schema = ch.arrow_schemas[batch_name]
        cols = ", ".join(f'"{n}"' for n in schema.names)
        reader = duck._con.sql(f"SELECT {cols} FROM {source}").to_arrow_reader(chunk)
        for rb in reader:
            part = pa.Table.from_batches([rb]).cast(schema)
            ch._client.insert_arrow(table, part)
            copied += part.num_rows
    if everything:
        windows = duck._con.sql("SELECT * FROM cluster_cost_rows").to_arrow_table()
        if windows.num_rows:
            ch._client.insert_arrow("cluster_cost_rows", windows)
            copied += windows.num_rows
    return copied


def run_clickhouse_analytics(
    sizes: tuple[int, ...] = (1_000_000, 10_000_000), repeats: int = 3
) -> dict[tuple[str, int, str], float]:
    """Median seconds per (question, size, store); and (``"load"``, size, "ClickHouse") the copy's seconds."""
    from taskcost.analytics import QUESTIONS, Filters
    from taskcost.store import DuckDBStore, QueryError
    from taskcost.store.clickhouse._store import ClickHouseStore

    out: dict[tuple[str, int, str], float] = {}
    failures.clear()
    fields = set(Filters.model_fields)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            db = Path(tmp) / f"c{size}.duckdb"
            with DuckDBStore.open(db) as duck:
                load_history(duck, size, self_hosted=True)
                dsn = f"chdb://{Path(tmp) / f'ch{size}'}"
                with ClickHouseStore.open(dsn, query_memory_bytes=QUERY_MEMORY_BYTES) as ch:
                    t = time.perf_counter()
                    rows = copy_rows(duck, ch)
                    out[("load", size, "ClickHouse")] = time.perf_counter() - t
                    print(f"  copied {rows:,} rows into chDB in {out[('load', size, 'ClickHouse')]:.1f} s", flush=True)
                    for name, params in PARAMS.items():
                        q = QUESTIONS[name]
                        filters = Filters.model_validate({k: v for k, v in params.items() if k in fields})
                        options = q.options.model_validate({k: v for k, v in params.items() if k not in fields})
                        for label, store in (("DuckDB", duck), ("ClickHouse", ch)):
                            try:
                                out[(name, size, label)] = _median(
                                    lambda q=q, s=store, f=filters, o=options: q.run(s, f, o), repeats
                                )
                            except QueryError as exc:  # a question the store cannot answer at this size: said so
                                out[(name, size, label)] = float("nan")
                                failures[(name, size, label)] = str(exc).split(". (")[0][:160]
                        print(
                            f"  {name} at {size:,}: DuckDB {out[(name, size, 'DuckDB')]:.3f} s, "
                            f"ClickHouse {out[(name, size, 'ClickHouse')]:.3f} s",
                            flush=True,
                        )
            db.unlink(missing_ok=True)
    return out
