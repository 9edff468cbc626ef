"""The ``engines`` question's reads: plain SQL over ``engine_config_hours`` and ``engine_config_busy`` (whole hours),
``llm_calls`` joined with ``engine_call_figures`` (the hours at either end, and the sampled calls), ``tasks`` and
``engine_metrics``, each a few rows per deployment configuration (one row per sampled call for the quantiles).

A configuration is one combination of ``CONFIG`` values; in SQL it is one key ``k``, the 64-bit hash of the values
(NULL and '' apart; the sums group by the values too, so two configurations sharing a key are an error). A call
without topology tags (no engine row: a 429 the engine never saw) can be folded into the one tagged configuration of
its cluster with the same call tags (``canonical``): the sample is keyed by that folded key ``kk``.

Dialect notes for another store: ``hash(epoch_us(start_time))`` samples (ClickHouse: ``sipHash64`` of
``toUnixTimestamp64Micro``), a running ``max(hi) OVER (...)`` measures busy time as ``breakeven`` does, ``lag`` takes
counter differences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._cost_priced import fully_priced
from taskcost.analytics._filters import (
    CALL_DIMENSIONS,
    Filters,
    Sql,
    by_task,
    call_scope,
    hours_scope,
    task_scope,
    utc,
    whole_hours,
)
from taskcost.store import CLIENT_DECODE_CALL, ENGINE_DECODE_CALL, ENGINE_HOUR_MEASURES, ReadStore
from taskcost.store import ENGINE_CONFIG as ENGINE_CONFIG_COLUMNS

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

CONFIG: tuple[str, ...] = ENGINE_CONFIG_COLUMNS
"""A configuration's columns (``engine_config_hours``): the call's, then its topology and decoding tags."""
CALL_CONFIG = CONFIG[:9]
"""A configuration's columns that ``llm_calls`` holds (``engine`` and ``cluster_id``: else the engine span's)."""
ENGINE_CONFIG = CONFIG[9:]
"""A configuration's topology and decoding columns, from ``engine_calls``."""
_RAW = tuple({"engine": "call_engine", "cluster_id": "call_cluster_id"}.get(c, c) for c in CALL_CONFIG)
"""``CALL_CONFIG`` as a call holds it (its own engine and cluster), in ``engine_config_hours``' names."""
_MEASURES = tuple(n for n, _ in ENGINE_HOUR_MEASURES)

SAMPLE = 10_000
"""Each configuration's quantiles and intervals come from at most about this many of its calls: all of them below, a
deterministic sample above (``h``, the hash of the call's start in microseconds % 10^6, under the configuration's
fraction, as the canary's)."""
_SCALE = 1_000_000

_ENGINE_DECODE, _CLIENT_DECODE = ENGINE_DECODE_CALL, CLIENT_DECODE_CALL
# output tokens per second of decode: the engine's decode time where it reported one, else the client's time after
# the first token (latency - TTFT); NULL for a failed call, one without output, or one with neither time
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


def _kc(scope: Sql, models: Sequence[str], pre: tuple[Sql, int] | None = None) -> Sql:
    """``WITH scoped_calls, kc``: the call attempts of ``scope`` (a ``call_scope``) of ``models``, each with its
    configuration's columns, engine figures (``engine_call_figures``) and key ``k``. ``pre``: a condition on the calls
    (``c``), and the limit of ``h`` no call under it exceeds (the figures are read of those calls alone)."""
    call_cols = ", ".join(
        f"coalesce(c.{c}, e.span_{c}) AS {c}" if c in ("engine", "cluster_id") else f"c.{c}" for c in CALL_CONFIG
    )
    engine_cols = ", ".join(f"e.{c}" for c in ENGINE_CONFIG)
    where = _in("c.model", models)
    figures = Sql("engine_call_figures")
    if pre is not None:
        where += Sql(" AND ") + pre[0]
        figures = Sql(f"(SELECT * FROM engine_call_figures WHERE {_H.format(t='start_ns // 1000')} < ?)", [pre[1]])
    body = (
        Sql(
            f"SELECT {call_cols}, {engine_cols}, c.engine AS call_engine, c.cluster_id AS call_cluster_id, "
            "c.project, c.trace_id, c.span_id, c.start_time, c.end_time, c.status, c.cost_usd, c.input_tokens, "
            "c.output_tokens, c.cache_read_tokens, c.duration_s AS latency_s, c.ttft_s, e.engine_source, e.queue_s, "
            "e.prefill_s, e.decode_s, e.engine_cached_tokens, e.spec_draft_tokens, e.spec_accepted_tokens "
            "FROM scoped_calls AS c LEFT JOIN "
        )
        + figures
        + Sql(" AS e ON e.project = c.project AND e.trace_id = c.trace_id AND e.span_id = c.span_id WHERE ")
        + where
    )
    return Sql("WITH ") + scope + Sql(f",\nkc AS (SELECT *, {_key(CONFIG)} AS k FROM (") + body + Sql(") AS j)")


_BUSY = """,
-- busy: the union of the parts' intervals (a call's, or a kept part of an hour's: engine_config_busy), each adding
-- what it reaches past every part started before it (as ``breakeven`` measures it); the running max over the three
-- columns it needs alone, by a number per key (partitioned by the 64-bit key itself, the running max took 3.5 s of
-- operator time at 2.5M calls, by the number 0.5 s)
ids AS (SELECT k AS ik, row_number() OVER (ORDER BY k) AS bk FROM sums),
o AS (
    SELECT ids.bk, lo, hi,
        max(hi) OVER (PARTITION BY ids.bk ORDER BY lo, hi ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM (SELECT {key} AS k, lo, hi FROM parts) AS p JOIN ids ON ids.ik = p.k
),
busy AS (
    SELECT bk, CAST(sum(CASE WHEN before IS NULL OR hi > before
                             THEN hi - CASE WHEN before > lo THEN before ELSE lo END ELSE 0 END) AS BIGINT) AS busy_us
    FROM o GROUP BY bk
)
SELECT 'config' AS part, sums.*, coalesce(busy.busy_us, 0) AS busy_us, NULL AS rk
FROM sums JOIN ids ON ids.ik = sums.k LEFT JOIN busy ON busy.bk = ids.bk
UNION ALL
SELECT DISTINCT 'pair' AS part, {key} AS k, {nulls}, {raw_key} AS rk FROM u"""

_SUMS = (*_MEASURES, "busy_us")
"""The columns of a configuration's row after its own."""
_SAMPLED = (
    ("start_time", "start_time"), ("trace_id", "trace_id"), ("span_id", "span_id"),
    ("CASE WHEN status = 'error' THEN 1 ELSE 0 END", "error"), (_DECODE_TPS, "decode_tps"),
    (_DECODE_SRC, "decode_src"), ("ttft_s", "ttft_s"), ("coalesce(input_tokens, 0)", "input_tokens"),
    ("coalesce(cache_read_tokens, 0)", "cache_read_tokens"), ("engine_cached_tokens", "engine_cached_tokens"),
    ("queue_s", "queue_s"), ("prefill_s", "prefill_s"), ("decode_s", "decode_s"),
    ("spec_draft_tokens", "spec_draft_tokens"), ("spec_accepted_tokens", "spec_accepted_tokens"),
)  # fmt: skip
"""A sampled call's columns: (expression over ``kc``, name)."""
_H = "CAST(hash({t}) % " + str(_SCALE) + " AS BIGINT)"
"""A call's sample number ``h`` (``t``: its start's SQL, in microseconds since 1970: a 64-bit integer in both stores,
``llm_calls``' ``epoch_us(start_time)``, ``engine_call_figures``' ``start_ns // 1000``; hashing one cost less than
hashing the span id's text)."""


def _configs(store: ReadStore, filters: Filters, models: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per configuration key ``k`` of ``models`` in the selection: its columns, exact sums (counts, tokens,
    spend) and busy microseconds; and the pairs (``k``, ``rk``: the hash of the configuration's columns as its calls
    hold them, ``_RAW``) that occur.

    The whole hours are read from ``engine_config_hours`` (and, without a project or an engine or cluster filter,
    ``engine_config_busy``: every project's calls of a configuration make its busy time), the partial hours at either
    end call by call; a selection by task, or one without a whole hour, is read call by call."""
    narrowed = filters.narrowed(model=None)
    hours = None if by_task(filters) else whole_hours(filters)
    dims = filters.call_values()
    kept_busy = hours is not None and filters.project is None and not {"engine", "cluster"} & dims.keys()
    # the calls read one by one: the edges alone where the roll-ups answer the rest, else every one selected
    edges = Sql("FALSE") if hours is None else hours.in_edges("c.start_time")
    scope = call_scope(narrowed, within=edges if kept_busy else None)
    sql = _kc(scope, models)
    conds = _in("model", models)
    own = dict(zip(CALL_CONFIG, _RAW, strict=True))
    for d, v in dims.items():
        if d != "model":
            conds += Sql(f" AND {own[CALL_DIMENSIONS[d]]} = ?", [v])
    if filters.project is not None:
        conds += Sql(" AND project = ?", [filters.project])
    columns = ", ".join((*CONFIG, "call_engine", "call_cluster_id"))
    measures = ", ".join(e + " AS " + n for n, e in ENGINE_HOUR_MEASURES)
    per_call = Sql(f"SELECT {columns}, {measures} FROM kc")
    if hours is not None:
        kept = Sql(f"SELECT {columns}, {', '.join(_MEASURES)} FROM engine_config_hours WHERE ") + conds
        kept += Sql(" AND ") + hours.hours("hour")
        per_call = (
            kept
            + Sql(" UNION ALL ")
            + per_call
            + (Sql(" WHERE ") + hours.in_edges("start_time") if not kept_busy else Sql(""))
        )
    sums = ", ".join(f"sum({n}) AS {n}" if n == "spend_usd" else f"CAST(sum({n}) AS BIGINT) AS {n}" for n in _MEASURES)
    sql += Sql(",\nu AS (") + per_call + Sql(f"),\nsums AS (SELECT {_key(CONFIG)} AS k, {', '.join(CONFIG)}, {sums} ")
    sql += Sql(f"FROM u GROUP BY {', '.join(CONFIG)}),\nparts AS (")
    if kept_busy:
        assert hours is not None
        busy_conds = _in("model", models) + Sql("".join(f" AND {CALL_DIMENSIONS[d]} = ?" for d in dims if d != "model"),
                                                 [v for d, v in dims.items() if d != "model"])  # fmt: skip
        sql += Sql(f"SELECT {', '.join(CONFIG)}, lo_us AS lo, hi_us AS hi FROM engine_config_busy WHERE ") + busy_conds
        sql += Sql(" AND ") + hours.hours("hour") + Sql(" UNION ALL ")
    sql += Sql(f"SELECT {', '.join(CONFIG)}, epoch_us(start_time) AS lo, epoch_us(end_time) AS hi FROM kc ")
    sql += Sql("WHERE end_time > start_time)")
    raw_key = _key(_RAW)
    nulls = ", ".join(f"NULL AS {c}" for c in (*CONFIG, *_SUMS))
    sql += Sql(_BUSY.format(key=_key(CONFIG), nulls=nulls, raw_key=raw_key))
    both = frame(store, sql, filters)
    configs = both.filter(pl.col("part") == "config").select("k", *CONFIG, *_SUMS)
    if configs["k"].n_unique() < configs.height:  # two configurations with one 64-bit key: never silently merged
        raise RuntimeError("two deployment configurations share one hash key: the engines question cannot tell them")
    return configs, both.filter(pl.col("part") == "pair").select("k", "rk")


def _limit(n: int) -> int:
    """The ``h`` under which a configuration of ``n`` calls keeps a call in its sample (``sample``), or above."""
    return _SCALE if n <= SAMPLE else _SCALE * SAMPLE // n + 2


def configs_and_sample(store: ReadStore, filters: Filters, models: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two reads: ``_configs`` (a row per configuration, exact sums and busy time), then the calls a sample may take
    (``sample``), with ``h`` (``_H``): those under a limit no smaller than their configuration's
    (``10^6 * SAMPLE / calls``; all of a configuration of at most ``SAMPLE`` calls), found by the calls' own columns
    (``rk``) before any join: a superset of every configuration's sample after the fold (a folded configuration has
    at least the calls of each of its keys)."""
    configs, pairs = _configs(store, filters, models)
    empty = pl.DataFrame(schema={"k": pl.UInt64, "h": pl.Int64, **{n: pl.Null for _, n in _SAMPLED}})
    if configs.is_empty():
        return configs, empty
    limits = {int(k): _limit(int(n)) for k, n in zip(configs["k"], configs["calls"], strict=True)}
    by_raw: dict[int, int] = {}
    for k, rk in pairs.iter_rows():
        by_raw[int(rk)] = max(by_raw.get(int(rk), 0), limits[int(k)])
    cases = Sql(" ".join("WHEN ? THEN ?" for _ in by_raw), [x for item in by_raw.items() for x in item])
    raw = _key(tuple(f"c.{c}" for c in CALL_CONFIG))  # (the call's own engine and cluster: ``_RAW``)
    most = max(by_raw.values())
    h = _H.format(t="epoch_us(c.start_time)")
    # (the configuration's limit looked up only for the calls under the largest: a CASE evaluates a branch for the
    # rows that reach it, where a store may order the two parts of an AND either way)
    pre = Sql(f"CASE WHEN {h} < ? THEN {h} < CASE {raw} ", [most]) + cases + Sql(" ELSE 0 END ELSE false END")
    sql = _kc(call_scope(filters.narrowed(model=None)), models, (pre, most))
    h = _H.format(t="epoch_us(start_time)")
    sql += Sql(f"\nSELECT k, {h} AS h, " + ", ".join(f"{x} AS s_{n}" for x, n in _SAMPLED) + " FROM kc")
    picked = frame(store, sql, filters, max_rows=20_000_000)
    return configs, picked.select("k", "h", *(pl.col(f"s_{n}").alias(n) for _, n in _SAMPLED))


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
