"""The ``engines`` question's reads: plain SQL over ``llm_calls`` (joined with ``engine_calls``), ``tasks`` and
``engine_metrics``, each a few rows per deployment configuration (one row per sampled call for the quantiles).

A configuration is one combination of ``CONFIG`` values; in SQL it is one key ``k``, the 64-bit hash of the values
(NULL and '' apart; the sums group by the values too, so two configurations sharing a key are an error). A call
without topology tags (no engine row: a 429 the engine never saw) can be folded into the one tagged configuration of
its cluster with the same call tags (``canonical``): the sample is keyed by that folded key ``kk``.

Dialect notes for another store: ``hash(start_time)`` samples (ClickHouse: ``sipHash64``), ``date_diff`` and the
running ``max(end_time) OVER (...)`` measure busy time as ``breakeven`` does, ``lag`` takes counter differences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._cost_priced import fully_priced
from taskcost.analytics._filters import Filters, Sql, call_scope, hours_scope, task_scope, utc
from taskcost.store import ReadStore

__all__ = [
    "CALL_CONFIG",
    "CONFIG",
    "ENGINE_CONFIG",
    "METRICS",
    "SAMPLE",
    "TASK_KEY",
    "configs_and_sample",
    "default_model",
    "metrics",
    "sample",
    "task_figures",
]

CALL_CONFIG = (
    "model", "provider", "engine", "engine_version", "quantization", "gpu_type", "gpu_count", "cluster_id",
    "deployment",
)  # fmt: skip
"""A configuration's columns that ``llm_calls`` holds (``engine`` and ``cluster_id``: else the engine span's)."""
ENGINE_CONFIG = (
    "tp_size", "pp_size", "dp_size", "pd_disaggregated", "prefill_gpu_type", "decode_gpu_type", "spec_method",
    "spec_draft_model",
)  # fmt: skip
"""A configuration's topology and decoding columns, from ``engine_calls``."""
CONFIG = (*CALL_CONFIG, *ENGINE_CONFIG)

SAMPLE = 10_000
"""Each configuration's quantiles and intervals come from at most about this many of its calls: all of them below, a
deterministic sample above (``hash(start_time) % 10^6`` under the configuration's fraction, as the canary's)."""
_SCALE = 1_000_000

_OK = "coalesce(status, 'ok') <> 'error' AND output_tokens > 0"
# output tokens per second of decode: the engine's decode time where it reported one, else the client's time after
# the first token (latency - TTFT); NULL for a failed call, one without output, or one with neither time
_ENGINE_DECODE = f"{_OK} AND decode_s > 0"
_CLIENT_DECODE = f"{_OK} AND coalesce(decode_s, 0) <= 0 AND ttft_s IS NOT NULL AND latency_s > ttft_s"
_DECODE_TPS = (
    f"CASE WHEN {_ENGINE_DECODE} THEN output_tokens / decode_s "
    f"WHEN {_CLIENT_DECODE} THEN output_tokens / (latency_s - ttft_s) END"
)
_DECODE_SRC = f"CASE WHEN {_ENGINE_DECODE} THEN 'engine' WHEN {_CLIENT_DECODE} THEN 'client' END"


def _key(columns: Sequence[str]) -> str:
    """A configuration's key: the 64-bit hash of its columns (NULL and '' differ), checked for collisions where the
    configurations are read (``configs_and_sample``). Building a text of the columns instead cost more than the rest
    of the sums (1.8 s of operator time at 2.5M calls)."""
    return f"hash({', '.join(columns)})"


def _in(column: str, values: Sequence[Any]) -> Sql:
    return Sql(f"{column} IN ({', '.join('?' for _ in values)})", list(values))


def _calls_ctes(filters: Filters, models: Sequence[str]) -> Sql:
    """``WITH scoped_calls, kc``: the selected call attempts of ``models`` (every filter but ``model``), each with its
    configuration's columns, figures and key ``k`` (the key in the same subquery as the join: a store that keeps a
    CTE read several times computes both once)."""
    call_cols = ", ".join(
        f"coalesce(c.{c}, e.{c}) AS {c}" if c in ("engine", "cluster_id") else f"c.{c}" for c in CALL_CONFIG
    )
    engine_cols = ", ".join(f"e.{c}" for c in ENGINE_CONFIG)
    # the engine rows of the models' calls only (a call's engine row has its model): the view's join with every call
    # was a quarter of the read's operator time at 10M calls (1.3 of 5.2 s in DuckDB's profile)
    body = (
        Sql(
            f"SELECT {call_cols}, {engine_cols}, c.project, c.task_id, c.trace_id, c.span_id, c.start_time, "
            "c.end_time, c.status, c.cost_usd, c.input_tokens, c.output_tokens, c.cache_read_tokens, "
            "c.duration_s AS latency_s, c.ttft_s, e.engine_source, e.queue_s, e.prefill_s, e.decode_s, "
            "e.engine_cached_tokens, e.spec_draft_tokens, e.spec_accepted_tokens "
            "FROM scoped_calls AS c LEFT JOIN (SELECT * FROM engine_calls WHERE "
        )
        + _in("model", models)
        + Sql(") AS e ON e.project = c.project AND e.trace_id = c.trace_id AND e.span_id = c.span_id WHERE ")
        + _in("c.model", models)
    )
    return (
        Sql("WITH ")
        + call_scope(filters.narrowed(model=None))
        + Sql(f",\nkc AS (SELECT *, {_key(CONFIG)} AS k FROM (")
        + body
        + Sql(") AS j)\n")
    )


_CONFIGS = f""",
agg AS (SELECT k AS ak, count(*) AS n FROM kc GROUP BY k),
-- busy: the union of the calls' intervals, each call adding its part past every call started before it (as
-- ``breakeven`` measures it); the running max over the three columns it needs alone, by a number per key (partitioned
-- by the 64-bit key itself, the running max took 3.5 s of operator time at 2.5M calls, by the number 0.5 s)
ids AS (SELECT ak AS ik, row_number() OVER (ORDER BY ak) AS bk FROM agg),
o AS (
    SELECT ids.bk, start_time, end_time,
        max(end_time) OVER (PARTITION BY ids.bk ORDER BY start_time, end_time
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
    FROM kc JOIN ids ON ids.ik = kc.k
),
busy AS (
    SELECT bk, CAST(sum(CASE WHEN end_time > start_time AND (before_end IS NULL OR end_time > before_end)
                             THEN date_diff('microsecond',
                                            CASE WHEN before_end > start_time THEN before_end ELSE start_time END,
                                            end_time)
                             ELSE 0 END) AS BIGINT) AS busy_us
    FROM o GROUP BY bk
),
sums AS (
SELECT k, {", ".join(CONFIG)},
    count(*) AS calls,
    sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS errors,
    count(cost_usd) AS priced_calls,
    sum(cost_usd) AS spend_usd,
    sum(CASE WHEN cost_usd IS NOT NULL THEN coalesce(input_tokens, 0) + coalesce(output_tokens, 0) ELSE 0 END)
        AS priced_tokens,
    sum(coalesce(input_tokens, 0)) AS input_tokens,
    sum(coalesce(cache_read_tokens, 0)) AS cache_read_tokens,
    sum(coalesce(output_tokens, 0)) AS output_tokens,
    sum(CASE WHEN engine_cached_tokens IS NOT NULL THEN coalesce(input_tokens, 0) ELSE 0 END) AS engine_input_tokens,
    sum(coalesce(engine_cached_tokens, 0)) AS engine_cached_tokens,
    sum(CASE WHEN spec_draft_tokens > 0 THEN spec_draft_tokens ELSE 0 END) AS spec_draft_tokens,
    sum(CASE WHEN spec_draft_tokens > 0 THEN coalesce(spec_accepted_tokens, 0) ELSE 0 END) AS spec_accepted_tokens,
    sum(CASE WHEN engine_source IS NOT NULL THEN 1 ELSE 0 END) AS engine_rows,
    sum(CASE WHEN {_ENGINE_DECODE} THEN 1 ELSE 0 END) AS engine_decode_calls,
    sum(CASE WHEN {_CLIENT_DECODE} THEN 1 ELSE 0 END) AS client_decode_calls,
    sum(CASE WHEN coalesce(status, 'ok') <> 'error' THEN 1 ELSE 0 END) AS ok_calls
FROM kc GROUP BY k, {", ".join(CONFIG)}
)
SELECT 'config' AS part, sums.*, busy.busy_us"""


_SUMS = (
    "calls", "errors", "priced_calls", "spend_usd", "priced_tokens", "input_tokens", "cache_read_tokens",
    "output_tokens", "engine_input_tokens", "engine_cached_tokens", "spec_draft_tokens", "spec_accepted_tokens",
    "engine_rows", "engine_decode_calls", "client_decode_calls", "ok_calls", "busy_us",
)  # fmt: skip
"""The columns of ``_CONFIGS`` after the configuration's own, in its order."""
_SAMPLED = (
    ("start_time", "start_time"), ("trace_id", "trace_id"), ("span_id", "span_id"),
    ("CASE WHEN status = 'error' THEN 1 ELSE 0 END", "error"), (_DECODE_TPS, "decode_tps"),
    (_DECODE_SRC, "decode_src"), ("ttft_s", "ttft_s"), ("coalesce(input_tokens, 0)", "input_tokens"),
    ("coalesce(cache_read_tokens, 0)", "cache_read_tokens"), ("engine_cached_tokens", "engine_cached_tokens"),
    ("queue_s", "queue_s"), ("prefill_s", "prefill_s"), ("decode_s", "decode_s"),
    ("spec_draft_tokens", "spec_draft_tokens"), ("spec_accepted_tokens", "spec_accepted_tokens"),
)  # fmt: skip
"""A sampled call's columns: (expression over ``kc``, name)."""
_H = f"CAST(hash(start_time) % {_SCALE} AS BIGINT)"


def configs_and_sample(store: ReadStore, filters: Filters, models: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One read of the selected calls of ``models`` joined with ``engine_calls`` (the store reads the join once: a
    second read, for the sample alone, cost as much again), giving both

    - one row per configuration key ``k``: its columns, exact sums (counts, tokens, spend) and busy microseconds;
    - the calls a sample may take (``sample``), with ``h`` = ``hash(start_time) % 10^6``: all of a key with at most
      ``SAMPLE`` calls, else those with ``h`` under ``10^6 * SAMPLE / calls + 1`` of their key: a superset of every
      configuration's sample after the fold (a folded configuration has at least the calls of each of its keys)."""
    ctes = _calls_ctes(filters, models)
    sums = _CONFIGS + ", NULL AS h, " + ", ".join(f"NULL AS s_{n}" for _, n in _SAMPLED)
    sums += "\nFROM sums JOIN ids ON ids.ik = sums.k JOIN busy ON busy.bk = ids.bk"
    calls = (
        f"\nUNION ALL\nSELECT 'call' AS part, k, {', '.join(f'NULL AS {c}' for c in (*CONFIG, *_SUMS))}, {_H} AS h, "
        + ", ".join(f"{x} AS s_{n}" for x, n in _SAMPLED)
        + f"\nFROM kc JOIN agg ON agg.ak = kc.k WHERE agg.n <= ? OR {_H} < ? / agg.n + 1"
    )
    sql = Sql(ctes.text.rstrip("\n"), ctes.params) + Sql(sums) + Sql(calls, [SAMPLE, _SCALE * SAMPLE])
    both = frame(store, sql, filters, max_rows=20_000_000)
    configs = both.filter(pl.col("part") == "config").select("k", *CONFIG, *_SUMS)
    if configs["k"].n_unique() < configs.height:  # two configurations with one 64-bit key: never silently merged
        raise RuntimeError("two deployment configurations share one hash key: the engines question cannot tell them")
    picked = both.filter(pl.col("part") == "call").select("k", "h", *(pl.col(f"s_{n}").alias(n) for _, n in _SAMPLED))
    return configs, picked


def sample(calls: pl.DataFrame, canonical: Mapping[str, str], counts: Mapping[str, int]) -> pl.DataFrame:
    """About ``SAMPLE`` calls of each configuration (all of a smaller one) from ``configs_and_sample``'s calls, in one
    order whatever the store's: ``kk`` (the key after the fold of ``canonical``), the call's decode speed and its
    source, TTFT, input size, engine times, token counts for the rates. A configuration of ``n > SAMPLE`` calls takes
    those with ``h < ceil(10^6 * SAMPLE / n)``: a deterministic sample, the same whichever keys were folded into it."""
    kk = pl.col("k").replace(dict(canonical)) if canonical else pl.col("k")
    out = calls.with_columns(kk.alias("kk"))
    limits = {k: math.ceil(_SCALE * SAMPLE / n) for k, n in counts.items() if n > SAMPLE}
    if limits:
        limit = pl.col("kk").replace_strict(limits, default=_SCALE, return_dtype=pl.Int64)
        out = out.filter(pl.col("h") < limit)
    return out.drop("k", "h").sort("kk", "start_time", "trace_id", "span_id", nulls_last=True)


TASK_KEY = ("model", "provider", "engine", "engine_version", "quantization", "gpu_type", "cluster_id", "deployment")
"""The configuration columns a task holds (``tasks``: the value its calls share, ``mixed`` when they disagree)."""

_TASKS = f"""SELECT {", ".join(TASK_KEY)}, kind,
    sum(CASE WHEN outcome IS NOT NULL THEN 1 ELSE 0 END) AS finished_tasks,
    sum(CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END) AS completed_tasks,
    sum(CASE WHEN outcome = 'completed' AND {fully_priced()} THEN 1 ELSE 0 END) AS priced_completed_tasks,
    sum(CASE WHEN outcome IS NOT NULL AND NOT {fully_priced()} THEN 1 ELSE 0 END) AS unpriced_tasks,
    sum(CASE WHEN outcome IS NOT NULL AND {fully_priced()} THEN 1 ELSE 0 END) AS priced_finished_tasks,
    sum(CASE WHEN outcome IS NOT NULL AND {fully_priced()} THEN cost_usd END) AS task_spend_usd
FROM scoped_tasks WHERE """


def task_figures(store: ReadStore, filters: Filters, models: Sequence[str]) -> pl.DataFrame:
    """Per combination of the task columns (``TASK_KEY``) and task kind, of the tasks run on ``models`` alone:
    finished, completed and fully priced tasks, and the fully priced finished tasks' spend (LLM and tools)."""
    sql = Sql("WITH ") + task_scope(filters.narrowed(model=None)) + Sql("\n" + _TASKS) + _in("model", models)
    return frame(store, sql + Sql(f" GROUP BY {', '.join(TASK_KEY)}, kind"), filters)


def default_model(store: ReadStore, filters: Filters) -> str | None:
    """The self-hosted model with the most call attempts in the selection (None: no self-hosted call)."""
    sql = (
        Sql("WITH ")
        + hours_scope(filters.narrowed(model=None))
        + Sql(
            "\nSELECT model, sum(attempts) AS n FROM scoped_hours "
            "WHERE deployment = 'self_hosted' AND model IS NOT NULL GROUP BY model ORDER BY n DESC, model LIMIT 1"
        )
    )
    df = frame(store, sql, filters)
    return None if df.is_empty() else str(df["model"][0])


METRICS = (
    "prefix_cache_hits", "prefix_cache_queries", "cached_prompt_tokens", "prompt_tokens", "cache_hit_rate",
    "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens", "spec_accept_rate", "spec_accept_length",
    "requests_waiting", "kv_cache_usage", "preemptions",
)  # fmt: skip
"""The engine metrics the question reads (docs/schema.md, ``engine_metrics``)."""

_METRICS = """,
m AS (
    SELECT cluster_id, model, metric, kind, value,
           lag(value) OVER (PARTITION BY cluster_id, engine, model, metric, labels ORDER BY ts_ns) AS prev
    FROM series
)
SELECT cluster_id, model, metric,
       -- a counter's increase between samples; a value below the one before is a restart: it counts from 0
       sum(CASE WHEN kind = 'counter' AND prev IS NOT NULL
                THEN CASE WHEN value >= prev THEN value - prev ELSE value END END) AS delta,
       avg(CASE WHEN kind = 'gauge' THEN value END) AS mean,
       count(*) AS samples
FROM m GROUP BY cluster_id, model, metric"""


def _ns(at: datetime) -> int:
    aware = utc(at)
    return (int(aware.timestamp()) * 1_000_000 + aware.microsecond) * 1000


def metrics(store: ReadStore, filters: Filters, clusters: Sequence[str]) -> pl.DataFrame:
    """Per cluster, model (the engine's own name for it; NULL when it says none) and metric of ``METRICS``, over the
    samples in [since, until) of those clusters' engines: a counter's increase (restarts counted from 0), a gauge's
    mean. The per-position acceptance counts are left out (the total is the series without a ``position`` label)."""
    if not clusters:
        return pl.DataFrame(schema={"cluster_id": pl.String, "model": pl.String, "metric": pl.String,
                                    "delta": pl.Float64, "mean": pl.Float64, "samples": pl.Int64})  # fmt: skip
    conds = (
        _in("cluster_id", clusters)
        + Sql(" AND ")
        + _in("metric", METRICS)
        + Sql(" AND json_extract_string(labels, '$.position') IS NULL")
    )
    if filters.since is not None:
        conds += Sql(" AND ts_ns >= ?", [_ns(filters.since)])
    if filters.until is not None:
        conds += Sql(" AND ts_ns < ?", [_ns(filters.until)])
    if filters.project is not None:
        conds += Sql(" AND project = ?", [filters.project])
    sql = Sql("WITH series AS (SELECT cluster_id, engine, model, metric, labels, kind, ts_ns, value ")
    sql += Sql("FROM engine_metrics WHERE ") + conds + Sql(")") + Sql(_METRICS)
    return frame(store, sql, filters)
