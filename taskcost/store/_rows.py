"""Canonical records -> priced, column-wise Arrow tables, typed by the live table definitions."""

from __future__ import annotations

import dataclasses
import logging
import operator
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from taskcost._internal.compact_json import compact
from taskcost.normalize import LLMCallRecord, NormalizedBatch, ToolCallRecord
from taskcost.pricing import CallPrice, Pricer, TokenUsage, default_pricer, pricing_inputs

__all__ = [
    "DEFAULT_PROJECT",
    "PRICE_COLUMNS",
    "PreparedBatch",
    "arrow_schema",
    "prepare_batch",
    "price_row",
    "typed_tables",
    "usage_of",
]

log = logging.getLogger("taskcost.store")

DEFAULT_PROJECT = "default"

TABLES = (
    "spans",
    "llm_call_rows",
    "tool_call_rows",
    "task_rows",
    "engine_metric_rows",
    "engine_span_rows",
    "llm_call_engine_rows",
)

_SIMPLE = {
    "VARCHAR": pa.string(),
    "JSON": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "SMALLINT": pa.int16(),
    "TINYINT": pa.int8(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "VARCHAR[]": pa.list_(pa.string()),
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def _arrow_type(duck_type: str) -> pa.DataType:
    if duck_type in _SIMPLE:
        return _SIMPLE[duck_type]
    m = _DECIMAL.fullmatch(duck_type)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise TypeError(f"no Arrow type for DuckDB column type {duck_type}")


def arrow_schema(columns: Sequence[tuple[str, str]]) -> pa.Schema:
    return pa.schema([(name, _arrow_type(t)) for name, t in columns])


@dataclasses.dataclass(slots=True)
class PreparedBatch:
    """One request's rows, column-wise, ready for the single writer: Python lists per column (``columns``), or,
    from a decode worker process, Arrow tables already typed by the store's schemas (``tables``), with the Arrow IPC
    streams they were read from (``streams``: the intake spool writes those bytes as they are)."""

    columns: dict[str, dict[str, list[Any]]]
    span_count: int
    tables: dict[str, pa.Table] | None = None
    streams: dict[str, bytes] | None = None
    # engine metric samples (``engine_metric_rows``): not spans, but rows a batch carries all the same
    sample_count: int = 0

    @property
    def empty(self) -> bool:
        """No span and no sample: committing it only folds the roll-ups' delta in."""
        return not self.span_count and not self.sample_count


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("column", True))
    return names


def _columns(
    records: Sequence[Any], received_ns: int, project: str, extra: dict[str, list[Any]] | None = None
) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {"project": [project] * len(records)}
    if records:
        names = _field_names(type(records[0]))
        # one C-level attrgetter call per record, then a transpose: no Python loop per field and record
        for name, column in zip(names, zip(*map(operator.attrgetter(*names), records), strict=True), strict=True):
            cols[name] = list(column)
    if extra:
        cols.update(extra)
    cols["received_ns"] = [received_ns] * len(records)
    return cols


def usage_of(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read_tokens: int | None,
    cache_write_tokens: int | None,
    reasoning_tokens: int | None,
    status: str,
    cache_write_1h: int = 0,
) -> TokenUsage | None:
    """What a stored call's counts mean to the pricer (ingest and reprice read them the same way)."""
    no_counts = input_tokens is None and output_tokens is None and cache_read_tokens is None
    if no_counts and cache_write_tokens is None and status == "ok":
        return None  # a successful call that reports no usage at all cannot be priced
    cache_read = cache_read_tokens or 0
    cache_write = cache_write_tokens or 0
    return TokenUsage(
        input_tokens=input_tokens if input_tokens is not None else cache_read + cache_write,
        output_tokens=output_tokens or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning_tokens or 0,
        cache_write_1h_tokens=min(cache_write_1h, cache_write),
    )


def _usage(c: LLMCallRecord, cache_write_1h: int = 0) -> TokenUsage | None:
    return usage_of(
        c.input_tokens,
        c.output_tokens,
        c.cache_read_tokens,
        c.cache_write_tokens,
        c.reasoning_tokens,
        c.status,
        cache_write_1h,
    )


PRICE_COLUMNS = (
    "cost_usd",
    "input_cost_usd",
    "output_cost_usd",
    "fee_usd",
    "price_source",
    "priced_provider",
    "priced_model",
    "unpriced_reason",
    "price_book_version",
    "price_detail",
    "priced_at_ns",
)


_CALL_PRICE_FIELDS = tuple(f.name for f in dataclasses.fields(CallPrice))


def price_row(price: CallPrice, priced_at_ns: int | None) -> tuple[Any, ...]:
    """One call's price as the values of PRICE_COLUMNS (ingest and reprice store it the same way)."""
    return _fields_row(tuple(getattr(price, name) for name in _CALL_PRICE_FIELDS), priced_at_ns)


def _fields_row(fields: tuple[Any, ...], priced_at_ns: int | None) -> tuple[Any, ...]:
    """``price_row`` of a CallPrice given as its fields (``Pricer.price_fields``)."""
    cost, in_usd, out_usd, source, provider_id, model_id, reason, fee, book, detail = fields
    detail_json = None if detail is None else compact(detail)
    return (cost, in_usd, out_usd, fee, source, provider_id, model_id, reason, book, detail_json, priced_at_ns)


def _price_columns(calls: Sequence[LLMCallRecord], pricer: Pricer) -> dict[str, list[Any]]:
    if not calls:
        return {k: [] for k in PRICE_COLUMNS}
    price, attributes, rows = pricer.price_fields, pricer.attributes, []
    unpriced = CallPrice.unpriced
    for c in calls:
        carried = c.pricing_attributes  # read by the normaliser, span over resource
        try:
            # none carried: what pricing_inputs gives when every lookup is None
            context, cache_write_1h = ({}, 0) if not carried else pricing_inputs(attributes, carried.get)
            fields = price(
                c.provider,
                c.response_model or c.request_model,
                _usage(c, cache_write_1h),
                datetime.fromtimestamp(c.start_ns / 1e9, tz=UTC),
                c.deployment,
                context,
                c.cluster_id,
            )
        except Exception as exc:  # a value pricing cannot read costs this call its price, not the batch its rows
            log.warning("call %s/%s not priced: %r", c.trace_id, c.span_id, exc)
            rows.append(price_row(unpriced(f"pricing failed: {type(exc).__name__}"), None))
            continue
        # priced_at_ns stays NULL at ingest: the cost was computed when the row was received (received_ns)
        rows.append(_fields_row(fields, None))
    return {name: list(column) for name, column in zip(PRICE_COLUMNS, zip(*rows, strict=True), strict=True)}


def _tool_price_columns(tools: Sequence[ToolCallRecord], pricer: Pricer) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"cost_usd": [], "cost_source": []}
    for t in tools:
        try:
            at = datetime.fromtimestamp(t.start_ns / 1e9, tz=UTC)
            cost, source = pricer.price_tool(t.tool_name, at, t.cost_usd)
        except Exception as exc:  # as for calls: its cost unknown, the tool call kept
            log.warning("tool call %s/%s not priced: %r", t.trace_id, t.span_id, exc)
            cost, source = None, None
        out["cost_usd"].append(cost)
        out["cost_source"].append(source)
    return out


def prepare_batch(
    batch: NormalizedBatch, received_ns: int, project: str = DEFAULT_PROJECT, pricer: Pricer | None = None
) -> PreparedBatch:
    """Price the calls and lay every record out column-wise (cheap to append, one table per kind).

    ``pricer``: what to price with (default: the bundled prices, no book: ``taskcost.pricing.default_pricer``).
    """
    pricer = pricer or default_pricer()
    llm_prices = _price_columns(batch.llm_calls, pricer)
    tool_prices = _tool_price_columns(batch.tool_calls, pricer)
    return PreparedBatch(
        columns={
            "spans": _columns(batch.spans, received_ns, project),
            "llm_call_rows": _columns(batch.llm_calls, received_ns, project, llm_prices),
            "tool_call_rows": _columns(batch.tool_calls, received_ns, project, tool_prices),
            "task_rows": _columns(batch.tasks, received_ns, project),
            "engine_span_rows": _columns(batch.engine_spans, received_ns, project),
            "llm_call_engine_rows": _columns(batch.call_engines, received_ns, project),
        },
        span_count=len(batch.spans),
    )


# What Arrow raises for a value its type cannot hold (ArrowInvalid is a ValueError; ArrowTypeError a TypeError).
_UNTYPED = (pa.ArrowException, ValueError, TypeError, OverflowError)


def typed_tables(batch: PreparedBatch, schemas: Mapping[str, pa.Schema]) -> tuple[PreparedBatch, list[str]]:
    """``batch`` with its rows as Arrow tables typed by ``schemas`` (the store's), ready for the writer, and the
    reasons for any span left out.

    The normaliser bounds every value it reads to what its column holds (taskcost/normalize/_attrs.py), so no row
    should fail here; if one does, that costs its span, never the batch: every row of the span (in each table) is
    left out, the span is counted as rejected, and the rest is typed again."""
    columns = batch.columns
    bad: dict[tuple[str, str], str] = {}
    tables: dict[str, pa.Table] = {}
    for name, cols in columns.items():
        if not cols["received_ns"]:
            continue
        try:
            tables[name] = pa.Table.from_pydict(cols, schema=schemas[name])
        except _UNTYPED:
            rows = _untyped_rows(cols, schemas[name], name)
            if not rows:  # not a value of a row: the columns do not match the schema (a bug, not data)
                raise
            bad.update(rows)
    if bad:
        log.error("%d span(s) with a value the store cannot hold left out: %s", len(bad), list(bad.values())[:5])
        tables = {}
        for name, cols in columns.items():
            keep = [i for i, key in enumerate(zip(cols["trace_id"], cols["span_id"], strict=True)) if key not in bad]
            if keep:
                kept = {col: [values[i] for i in keep] for col, values in cols.items()}
                tables[name] = pa.Table.from_pydict(kept, schema=schemas[name])
    lost = (
        len(bad.keys() & set(zip(columns["spans"]["trace_id"], columns["spans"]["span_id"], strict=True))) if bad else 0
    )
    typed = PreparedBatch(columns={}, span_count=batch.span_count - lost, tables=tables)
    return typed, [f"span {k[1]} rejected: {why}" for k, why in bad.items()]


def _untyped_rows(cols: dict[str, list[Any]], schema: pa.Schema, table: str) -> dict[tuple[str, str], str]:
    """The (trace id, span id) of each row of ``cols`` whose values ``schema`` cannot type, with why (row by row:
    only when the whole table failed)."""
    out: dict[tuple[str, str], str] = {}
    for i in range(len(cols["received_ns"])):
        try:
            pa.Table.from_pydict({col: values[i : i + 1] for col, values in cols.items()}, schema=schema)
        except _UNTYPED as exc:
            out[(cols["trace_id"][i], cols["span_id"][i])] = f"a value of {table} the store cannot hold ({exc})"[:200]
    return out
