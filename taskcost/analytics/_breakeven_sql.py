"""Rent vs API's SQL: the hourly traffic per model (the models past max_groups ranked, then folded and priced in the
store) and the self-hosted calls' busy time in their busiest hours, which measures throughput (``_breakeven`` runs
them)."""

from __future__ import annotations

from taskcost.analytics._filters import Filters, Sql, hours_scope
from taskcost.analytics._groups import OTHER, Top, top_values
from taskcost.analytics._rates import UNITS, rates_cte
from taskcost.store import ReadStore

__all__ = ["_BUSY", "_DETAIL", "_GPU_TYPES_SHOWN", "_NO_RATE", "_RATE", "_top_models", "_traffic_sql", "_unfolded_sql"]


_DEPLOYMENT = "CASE WHEN deployment = 'self_hosted' THEN 'self_hosted' ELSE 'api' END"
_TRAFFIC = f"""
traffic AS (
    SELECT provider, model, {_DEPLOYMENT} AS deployment, hour,
           sum(attempts)::BIGINT AS calls,
           coalesce(sum(attempts) FILTER (WHERE priced), 0)::BIGINT AS priced_calls,
           sum(cost_usd) AS cost_usd,
           coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens,
           coalesce(sum(cache_read_tokens), 0)::BIGINT AS cache_read_tokens,
           coalesce(sum(cache_write_tokens), 0)::BIGINT AS cache_write_tokens,
           coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens
    FROM scoped_hours
    GROUP BY 1, 2, 3, 4
),
name_rates AS (
    SELECT model, count(*) AS providers, any_value(input) AS input, any_value(cache_read) AS cache_read,
           any_value(cache_write) AS cache_write, any_value(output) AS output
    FROM model_rates GROUP BY model
),
rated AS (
    SELECT t.*, {{folded}} AS folded,
           {{rates}}
    FROM traffic AS t
    LEFT JOIN (SELECT *, TRUE AS found FROM model_rates) AS r
        ON r.provider IS NOT DISTINCT FROM t.provider AND r.model IS NOT DISTINCT FROM t.model
    LEFT JOIN name_rates AS n ON n.model IS NOT DISTINCT FROM t.model
),
judged AS (
    SELECT *, {{priced}} AS model_priced
    FROM rated
    WINDOW m AS (PARTITION BY provider, model, deployment)
)
SELECT CASE WHEN folded THEN NULL ELSE provider END AS provider, CASE WHEN folded THEN ? ELSE model END AS model,
       deployment, hour, CASE WHEN folded THEN model_priced END AS tail_priced,
       sum(calls)::BIGINT AS calls, sum(priced_calls)::BIGINT AS priced_calls, sum(cost_usd) AS cost_usd,
       sum(input_tokens)::BIGINT AS input_tokens, sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
       sum(cache_write_tokens)::BIGINT AS cache_write_tokens, sum(output_tokens)::BIGINT AS output_tokens,
       sum(CASE WHEN folded AND model_priced THEN {{charge}} END) AS tail_api_usd
FROM judged
GROUP BY 1, 2, 3, 4, 5
"""
"""The hourly traffic per model, the models past max_groups folded into one row per deployment, ``other``, priced in
the store: each at its own model's rates (``rates_cte``: the project's latest stored rates; a self-hosted model at the
same model name's API rates when one provider has them; a cache unit without a rate at the input rate), the rates a
kept model gets from the same source, without the bundled price list (a lookup per model, in Python). A model some of
whose tokens no rate prices is left out whole (``tail_priced`` false), as a kept one is."""
_TOKENS = {
    "input": "(input_tokens - cache_read_tokens - cache_write_tokens)",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
    "output": "output_tokens",
}


_UNFOLDED = """,
models AS (SELECT count(*) AS n FROM (SELECT DISTINCT provider, model, deployment FROM traffic) AS d)
SELECT provider, model, deployment, hour, CAST(NULL AS BOOLEAN) AS tail_priced, calls, priced_calls, cost_usd,
       input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, CAST(NULL AS DECIMAL(38, 12)) AS tail_api_usd
FROM traffic
WHERE (SELECT n FROM models) <= ?
"""
"""The hourly traffic, nothing folded, when the models number at most max_groups + 1 (else no row: rank, then fold)."""


def _unfolded_sql(filters: Filters, limit: int) -> Sql:
    """The hourly traffic per model, unfolded, or no row when the models are more than ``limit`` + 1."""
    traffic = _TRAFFIC[: _TRAFFIC.index("),\nname_rates")] + ")"
    return Sql("WITH ") + hours_scope(filters) + Sql(",") + Sql(traffic + _UNFOLDED, [limit + 1])


def _traffic_sql(filters: Filters, top: Top) -> Sql:
    """The hourly traffic (``_TRAFFIC``), folded by ``top`` (the models, ranked in ``_top_models``)."""

    def rate(unit: str) -> str:
        own = f"CASE WHEN r.found THEN r.{unit} WHEN t.deployment = 'self_hosted' AND n.providers = 1 THEN n.{unit} END"
        return own

    effective = {u: rate(u) for u in ("input", "output")}
    effective |= {u: f"coalesce({rate(u)}, {rate('input')})" for u in ("cache_read", "cache_write")}
    rates = ", ".join(f"{expr} AS r_{u}" for u, expr in effective.items())
    priced = " AND ".join(f"(sum({_TOKENS[u]}) OVER m = 0 OR r_{u} IS NOT NULL)" for u in UNITS)
    charge = " + ".join(f"{_TOKENS[u]} * coalesce(r_{u}, 0)" for u in UNITS)
    folded = top.is_other(_model_key("t."))
    head, tail = _TRAFFIC.split("{folded}")
    rates_filters = Filters.model_validate({"project": filters.project, "until": filters.until})
    sql = Sql("WITH ") + hours_scope(filters) + Sql(",\n") + rates_cte(rates_filters) + Sql(",\n")
    sql += Sql(head) + folded
    return sql + Sql(tail.format(rates=rates, priced=priced, charge=charge), [OTHER])


def _model_key(alias: str) -> str:
    """A (provider, model, deployment) as one value, to rank and fold."""
    return f"coalesce({alias}provider, '') || chr(31) || coalesce({alias}model, '') || chr(31) || {alias}deployment"


def _top_models(store: ReadStore, filters: Filters, limit: int) -> Top:
    """The (provider, model, deployment) that keep a row each: the most spend first (then the most tokens)."""
    ctes = (
        Sql("WITH ")
        + hours_scope(filters)
        + Sql(
            f",\nhours AS (SELECT provider, model, {_DEPLOYMENT} AS deployment, cost_usd, "
            "coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens FROM scoped_hours)\n"
        )
    )
    return top_values(
        store, filters, ctes, "hours AS c", _model_key("c."), "sum(c.cost_usd) AS spend, sum(c.tokens) AS n",
        "spend DESC NULLS LAST, n DESC", limit,
    )  # fmt: skip


_BUSY = """,
busiest AS (
    SELECT date_trunc('hour', start_time) AS hour FROM scoped_calls GROUP BY 1
    ORDER BY sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) DESC, 1 DESC LIMIT {hours}
),
o AS (
    SELECT coalesce(cluster_id, '') AS unit, start_time, end_time, duration_s, gpu_count, gpu_type,
           coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens,
           {rate} AS rate,
           max(end_time) OVER (PARTITION BY coalesce(cluster_id, '') ORDER BY start_time
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
    FROM scoped_calls
    WHERE end_time > start_time AND date_trunc('hour', start_time) IN (SELECT hour FROM busiest)
),
units AS (
    SELECT unit, count(*) AS calls, sum(tokens)::BIGINT AS tokens,
           -- the union of the intervals: each call adds the part of it that runs past every call started before it
           sum(CASE WHEN before_end IS NULL OR end_time > before_end
                    THEN date_diff('microsecond', CASE WHEN before_end > start_time THEN before_end ELSE start_time END,
                                   end_time)
                    ELSE 0 END)::BIGINT AS busy_us,
           sum(duration_s) AS call_s, max(gpu_count) AS gpus, min(gpu_count) AS min_gpus,
           arg_max(rate, start_time) FILTER (WHERE rate IS NOT NULL) AS rate
    FROM o GROUP BY unit
),
types AS (SELECT DISTINCT gpu_type FROM o WHERE gpu_type IS NOT NULL AND gpu_type <> '')
SELECT count(*) AS units, coalesce(sum(calls), 0)::BIGINT AS calls, coalesce(sum(tokens), 0)::BIGINT AS tokens,
       coalesce(sum(busy_us), 0)::BIGINT AS busy_us, coalesce(sum(call_s), 0) AS call_s,
       -- GPU-seconds busy: each cluster's busy time by its GPUs (unknown: --gpus-per-replica, else 1)
       sum(CAST(busy_us AS DOUBLE) / 1e6 * coalesce(gpus, {gpus})) AS gpu_s, min(min_gpus) AS min_gpus,
       max(gpus) AS max_gpus, (SELECT list(gpu_type ORDER BY gpu_type)[1:{types}] FROM types) AS gpu_types,
       (SELECT count(*) FROM types) AS n_gpu_types,
       -- the $/GPU-hour the clusters were billed at, weighted by each one's busy GPU-seconds (the throughput's weights)
       sum(CAST(busy_us AS DECIMAL(38, 0)) * coalesce(gpus, {gpus}) * rate)
           / nullif(sum(CASE WHEN rate IS NOT NULL THEN CAST(busy_us AS DECIMAL(38, 0)) * coalesce(gpus, {gpus}) END),
                    0) AS billed_rate,
       count(rate) AS rated_units, count(DISTINCT rate) AS distinct_rates{detail}
FROM units
"""
"""The self-hosted calls' throughput in their busiest hours, per cluster (a cluster is busy while one of its calls is
in flight) and then added up in the store: one row, whatever the number of clusters."""
_GPU_TYPES_SHOWN = 10
_RATE = (
    "CASE WHEN cost_usd IS NOT NULL "
    "THEN TRY_CAST(json_extract_string(price_detail, '$.usd_per_gpu_hour') AS DECIMAL(18, 9)) END"
)
"""A billed self-hosted call's $/GPU-hour (its price detail: the clusters file's rate), read only when the GPU's price
is not given (the detail is a text column)."""
_NO_RATE = "CAST(NULL AS DECIMAL(18, 9))"
_DETAIL = """,
       (SELECT arg_max(price_detail, start_time) FILTER (WHERE cost_usd IS NOT NULL) FROM scoped_calls) AS detail"""
