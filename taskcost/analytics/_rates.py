"""Per-token rates by model, as the stored costs used them: what cache savings and misses are priced at.

A call's ``price_detail`` lists the rate of each unit it used (``lines``: ``unit``, ``usd_per_mtok``). The rate of a
unit for a model is taken from the latest priced call of that model that used the unit (an aggregate over narrow
columns of the selected calls, then the price detail of those few calls, parsed here): the model's current rate,
which is each call's own rate unless the price changed inside the window. Self-hosted calls (priced per GPU-hour)
have no per-token rates.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._filters import Filters, Sql, call_scope, utc_text
from taskcost.store import ReadStore

if TYPE_CHECKING:
    from taskcost.pricing import TokenUsage

__all__ = ["UNITS", "ModelRates", "completed_rates", "listed_rates", "model_rates", "rates_cte", "rates_frame"]

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


def model_rates(
    store: ReadStore, filters: Filters, models: Collection[str | None] | None = None
) -> dict[tuple[str | None, str | None], ModelRates]:
    """(provider, model) -> its per-token rates, over the calls ``filters`` select (token-priced calls only); only of
    the model names ``models`` when given (a question that prices a few models of many: ``rates_cte`` prices the
    rest in SQL).

    Two reads, so that no large text column is scanned: the latest start time per model and unit (narrow columns),
    then the price detail of only the calls at those times (the time range lets the store skip the rest)."""
    latest = ", ".join(f"max(start_time) FILTER (WHERE {col} > 0) AS {unit}" for unit, col in _COLUMNS.items())
    sql = Sql("WITH ") + call_scope(filters)
    sql += Sql(f"\nSELECT provider, model, {latest}\nFROM scoped_calls\nWHERE input_cost_usd IS NOT NULL")
    if models is not None:
        names = [m for m in models if m is not None]
        some = [f"model IN ({', '.join('?' for _ in names)})"] if names else []
        some += ["model IS NULL"] if None in models else []
        sql += Sql(f" AND ({' OR '.join(some) or 'FALSE'})", names)
    sql += Sql("\nGROUP BY provider, model")
    times = frame(store, sql, filters)
    wanted = {
        (row["provider"], row["model"], unit): row[unit]
        for row in times.iter_rows(named=True)
        for unit in UNITS
        if row[unit] is not None
    }
    details: dict[tuple[str | None, str | None, str], Any] = {}
    if wanted:
        stamps = [utc_text(t) for t in sorted(set(wanted.values()))]
        scoped = filters.narrowed(since=None, until=None)
        find = Sql("WITH ") + call_scope(scoped)
        find += Sql(
            "\nSELECT provider, model, start_time, price_detail FROM scoped_calls "
            "WHERE input_cost_usd IS NOT NULL AND start_time >= CAST(? AS TIMESTAMP) "
            "AND start_time <= CAST(? AS TIMESTAMP) AND start_time IN ("
            + ", ".join("CAST(? AS TIMESTAMP)" for _ in stamps)
            + ")",
            [stamps[0], stamps[-1], *stamps],
        )
        for row in frame(store, find, filters).iter_rows(named=True):
            for unit in UNITS:
                key = (row["provider"], row["model"], unit)
                at = wanted.get(key)
                if at is not None and at == row["start_time"] and _unit_rate(row["price_detail"], unit) is not None:
                    details[key] = row["price_detail"]
    out = {}
    for provider, model in {(p, m) for p, m, _ in wanted} | {
        (r["provider"], r["model"]) for r in times.iter_rows(named=True)
    }:
        rates = {unit: _unit_rate(details.get((provider, model, unit)), unit) for unit in UNITS}
        out[(provider, model)] = ModelRates(provider, model, **rates)
    return out


def _unit_rate_sql(detail: str, unit: str) -> str:
    """SQL for ``_unit_rate``: the rate of ``unit`` in a price detail's ``lines``, USD per token (DECIMAL(38, 18): the
    detail's USD per million tokens, exact to 12 places, times 1e-6); NULL when the detail has none."""
    line = (
        f"list_filter(CAST(json_extract({detail}, '$.lines') AS JSON[]), lambda x: json_extract_string(x, '$.unit') = "
        f"'{unit}' AND json_extract_string(x, '$.usd_per_mtok') IS NOT NULL)[1]"
    )
    return (
        f"TRY_CAST(json_extract_string({line}, '$.usd_per_mtok') AS DECIMAL(38, 12)) * CAST(0.000001 AS DECIMAL(7, 6))"
    )


def rates_cte(filters: Filters) -> Sql:
    """``model_rates`` for SQL: CTEs (no ``WITH``) ending in ``model_rates`` (provider, model, input, cache_read,
    cache_write, output: USD per token, DECIMAL(38, 18), NULL when unknown), one row per model priced per token among
    the calls ``filters`` select, with the rates ``model_rates`` returns (the unit's rate in the price detail of the
    model's latest priced call that used it; on a tie in time, the highest). For a question that prices tokens of
    many models in the store: the rates never leave it, so the work does not grow with the models in Python."""
    latest = ", ".join(f"max(start_time) FILTER (WHERE {col} > 0) AS t_{unit}" for unit, col in _COLUMNS.items())
    rates = ", ".join(
        f"max({_unit_rate_sql('c.price_detail', unit)}) FILTER (WHERE c.start_time = r.t_{unit}) AS {unit}"
        for unit in UNITS
    )
    times = ", ".join(f"r.t_{unit}" for unit in UNITS)
    return call_scope(filters, "rate_calls") + Sql(
        f""",
rate_times AS (
    SELECT provider, model, {latest} FROM rate_calls WHERE input_cost_usd IS NOT NULL GROUP BY provider, model
),
model_rates AS (
    SELECT r.provider, r.model, {rates}
    FROM rate_times AS r JOIN rate_calls AS c ON c.provider IS NOT DISTINCT FROM r.provider
        AND c.model IS NOT DISTINCT FROM r.model AND c.input_cost_usd IS NOT NULL AND c.start_time IN ({times})
    GROUP BY r.provider, r.model
)"""
    )


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


_LISTED_TOKENS = 1000  # a small prompt: long-context tiers (above 200k tokens, say) do not apply


def listed_rates(provider: str | None, model: str | None, at: datetime) -> ModelRates | None:
    """A model's per-token list rates from the bundled price data (genai-prices) at ``at``, for a model no stored call
    shows a rate of: each unit priced on a small prompt. None when the price data does not know the model."""
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    n = _LISTED_TOKENS

    from taskcost.pricing import TokenUsage, price_call  # the price data loads on first use

    def per_token(usage: TokenUsage) -> Decimal | None:
        cost = price_call(provider, model, usage, at).cost_usd
        return None if cost is None else cost / n

    full = per_token(TokenUsage(input_tokens=n))
    if full is None:
        return None
    read = per_token(TokenUsage(input_tokens=n, cache_read_tokens=n))
    write = per_token(TokenUsage(input_tokens=n, cache_write_tokens=n))
    return ModelRates(provider, model, full, read, write, per_token(TokenUsage(output_tokens=n)))


def completed_rates(rates: ModelRates | None, listed: ModelRates | None) -> tuple[ModelRates | None, bool]:
    """The stored rates with any missing unit from the list rates; a cache unit neither knows is priced at the input
    rate (what an API without that cache price charges). True when that fallback was used."""
    base = listed if rates is None else rates
    if base is None:
        return None, False
    fill = {u: getattr(base, u) if getattr(base, u) is not None else getattr(listed, u, None) for u in UNITS}
    guessed = base.input is not None and any(fill[u] is None for u in ("cache_read", "cache_write"))
    if guessed:
        fill |= {u: fill[u] if fill[u] is not None else base.input for u in ("cache_read", "cache_write")}
    return ModelRates(base.provider, base.model, **fill), guessed
