"""Per-token rates by model, as the stored costs used them: what cache savings and misses are priced at.

A call's ``price_detail`` lists the rate of each unit it used (``lines``: ``unit``, ``usd_per_mtok``). The rate of a
unit for a model is taken from the latest priced call of that model that used the unit (one aggregate pass over the
selected calls, then a few JSON documents parsed here): the model's current rate, which is each call's own rate
unless the price changed inside the window. Self-hosted calls (priced per GPU-hour) have no per-token rates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import polars as pl

from taskcost.analytics._answer import frame
from taskcost.analytics._filters import Filters, Sql, call_scope
from taskcost.store import ReadStore

__all__ = ["UNITS", "ModelRates", "model_rates", "rates_frame"]

UNITS = ("input", "cache_read", "cache_write", "output")
_M = Decimal(1_000_000)


@dataclass(frozen=True)
class ModelRates:
    """USD per token of each unit (None: no priced call of the model used it in the selection)."""

    provider: str | None
    model: str | None
    input: Decimal | None
    cache_read: Decimal | None
    cache_write: Decimal | None
    output: Decimal | None

    @property
    def cache_discount(self) -> Decimal | None:
        """What one input token costs more than one read from the cache (input rate - cache-read rate)."""
        if self.input is None or self.cache_read is None:
            return None
        return self.input - self.cache_read


def _unit_rate(detail: Any, unit: str) -> Decimal | None:
    if detail is None:
        return None
    try:
        doc = json.loads(detail) if isinstance(detail, str) else detail
        for line in doc.get("lines", []):
            if line.get("unit") == unit and line.get("usd_per_mtok") is not None:
                return Decimal(str(line["usd_per_mtok"])) / _M
    except (ValueError, TypeError, AttributeError, InvalidOperation):
        return None
    return None


_COLUMNS = {
    "input": "uncached_input_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
    "output": "output_tokens",
}


def model_rates(store: ReadStore, filters: Filters) -> dict[tuple[str | None, str | None], ModelRates]:
    """(provider, model) -> its per-token rates, over the calls ``filters`` select (token-priced calls only)."""
    latest = ",\n".join(
        f"arg_max(price_detail, start_time) FILTER (WHERE {col} > 0) AS {unit}" for unit, col in _COLUMNS.items()
    )
    sql = Sql("WITH ") + call_scope(filters)
    sql += Sql(
        f"\nSELECT provider, model, {latest}\nFROM scoped_calls\n"
        "WHERE input_cost_usd IS NOT NULL\nGROUP BY provider, model"
    )
    out = {}
    for row in frame(store, sql, filters).iter_rows(named=True):
        rates = {unit: _unit_rate(row[unit], unit) for unit in UNITS}
        out[(row["provider"], row["model"])] = ModelRates(row["provider"], row["model"], **rates)
    return out


def rates_frame(rates: dict[tuple[str | None, str | None], ModelRates]) -> pl.DataFrame:
    """The rates as a frame (USD per million tokens, Decimal), to join on provider and model."""
    schema: dict[str, Any] = {
        "provider": pl.String,
        "model": pl.String,
        **{f"{u}_usd_per_mtok": pl.Decimal(38, 12) for u in UNITS},
    }
    rows = [
        {
            "provider": r.provider,
            "model": r.model,
            **{f"{u}_usd_per_mtok": None if (v := getattr(r, u)) is None else v * _M for u in UNITS},
        }
        for r in rates.values()
    ]
    return pl.DataFrame(rows, schema=schema)
