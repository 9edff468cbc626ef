"""Canonical records -> priced, column-wise Arrow tables, typed by the live table definitions."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from taskcost.normalize import LLMCallRecord, NormalizedBatch
from taskcost.pricing import TokenUsage, price_call

__all__ = ["DEFAULT_PROJECT", "PreparedBatch", "arrow_schema", "prepare_batch"]

DEFAULT_PROJECT = "default"

TABLES = ("spans", "llm_call_rows", "tool_call_rows", "task_rows")

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
    """One request's rows, column-wise, ready for the single writer."""

    columns: dict[str, dict[str, list[Any]]]
    span_count: int


def _columns(
    records: Sequence[Any], received_ns: int, project: str, extra: dict[str, list[Any]] | None = None
) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {"project": [project] * len(records)}
    if records:
        for f in dataclasses.fields(records[0]):
            cols[f.name] = [getattr(r, f.name) for r in records]
    if extra:
        cols.update(extra)
    cols["received_ns"] = [received_ns] * len(records)
    return cols


def _usage(c: LLMCallRecord) -> TokenUsage | None:
    counts = (c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_write_tokens)
    if all(v is None for v in counts) and c.status == "ok":
        return None  # a successful call that reports no usage at all cannot be priced
    cache_read = c.cache_read_tokens or 0
    cache_write = c.cache_write_tokens or 0
    return TokenUsage(
        input_tokens=c.input_tokens if c.input_tokens is not None else cache_read + cache_write,
        output_tokens=c.output_tokens or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=c.reasoning_tokens or 0,
    )


def _price_columns(calls: Sequence[LLMCallRecord]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {
        k: []
        for k in (
            "cost_usd",
            "input_cost_usd",
            "output_cost_usd",
            "price_source",
            "priced_provider",
            "priced_model",
            "unpriced_reason",
        )
    }
    for c in calls:
        at = datetime.fromtimestamp(c.start_ns / 1e9, tz=UTC)
        p = price_call(c.provider, c.response_model or c.request_model, _usage(c), at, deployment=c.deployment)
        out["cost_usd"].append(p.cost_usd)
        out["input_cost_usd"].append(p.input_cost_usd)
        out["output_cost_usd"].append(p.output_cost_usd)
        out["price_source"].append(p.source)
        out["priced_provider"].append(p.provider_id)
        out["priced_model"].append(p.model_id)
        out["unpriced_reason"].append(p.unpriced_reason)
    return out


def prepare_batch(batch: NormalizedBatch, received_ns: int, project: str = DEFAULT_PROJECT) -> PreparedBatch:
    """Price the calls and lay every record out column-wise (cheap to append, one table per kind)."""
    return PreparedBatch(
        columns={
            "spans": _columns(batch.spans, received_ns, project),
            "llm_call_rows": _columns(batch.llm_calls, received_ns, project, _price_columns(batch.llm_calls)),
            "tool_call_rows": _columns(batch.tool_calls, received_ns, project),
            "task_rows": _columns(batch.tasks, received_ns, project),
        },
        span_count=len(batch.spans),
    )
