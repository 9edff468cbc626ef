"""Cache economics: how much of the input the prompt cache served, what that saved, what it missed, whether it buys
latency, and which task kinds break their prompt prefix (from the SDK's fingerprint).

Definitions (docs/analytics.md, "Cache economics"):

- hit rate = sum(cache_read_tokens) / sum(input_tokens) (input is stored inclusive of cache reads and writes);
- saved = sum(cache_read_tokens) x (input rate - cache-read rate);
- missed = for each call that is not the first of its (provider, model) in its task, the input tokens that repeated
  the previous call's prompt prefix but were not read from the cache, priced like a saving. The repeated prefix is
  ``round(stable_prefix_chars x input_tokens / prompt_chars)`` when the SDK's fingerprint measured it, else
  ``min(previous input, this input)``; minus ``cache_read_tokens``, floored at 0. A call with a stable prefix is a
  repeat by the fingerprint itself (the SDK only measures one against a previous call), so the window that finds the
  previous call runs over the other calls only: with the SDK everywhere it is nearly free.

Tokens are summed per (provider, model) in SQL and priced here, exactly (polars Decimal), at each model's rates from
``_rates``. Self-hosted calls (priced per GPU-hour) and models with no known cache-read rate keep their tokens and get
no dollars, and every money figure says how many calls it could not price.

Hit rate and savings are plain sums over every selected call (exact at any size). Misses, the prefix report and the
TTFT bands need each call with its task (a join) and, without a fingerprint, its previous call (a window): above
``SAMPLE_CALLS`` selected calls they are measured on the calls of a sample of tasks (a hash of the task id, so a task
is whole) and scaled up; ``exact`` measures every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import Field

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._cache_tables import (
    HIT_RATE_BANDS,
    INPUT_SIZE_BANDS,
    hit_rate_expr,
    money_sum,
    prefix_tables,
    ttft_tables,
)
from taskcost.analytics._facts import Bucket, check_bucket, check_dimension
from taskcost.analytics._filters import (
    CALL_DIMENSIONS,
    DIMENSIONS,
    TASK_DIMENSIONS,
    Filters,
    Sql,
    call_scope,
    hours_scope,
)
from taskcost.analytics._question import Options, Question
from taskcost.analytics._rates import ModelRates, model_rates
from taskcost.store import ReadStore

__all__ = [
    "HASH_BUCKETS",
    "HIT_RATE_BANDS",
    "INPUT_SIZE_BANDS",
    "QUESTION",
    "SAMPLE_CALLS",
    "CacheAnswer",
    "CacheOptions",
    "cache_economics",
]

SAMPLE_CALLS = 50_000
"""Above this many selected calls, misses, the prefix report and the TTFT percentiles are measured on the calls of a
sample of tasks of about this many calls (unless ``exact``): the answer stays well under a second at 10M calls, and
under 0.2 s from the CLI at 1M (measured at 1M in one process: 0.11 s with 50,000, 0.14 s with 100,000)."""
HASH_BUCKETS = 1_000_000
"""A task is in the sample when ``hash(project, task_id) % HASH_BUCKETS`` is below the threshold."""

_M = Decimal(1_000_000)


class CacheOptions(Options):
    by: str | None = Field(None, description=f"Group by this dimension ({', '.join(DIMENSIONS)}); none: one row.")
    bucket: Bucket | None = Field(
        None, description="Also a time series with one row per minute, hour, day or week (of each call's start)."
    )
    exact: bool = Field(
        False,
        description=f"Measure misses, the prefix report and TTFT percentiles on every call, not on a sample of tasks "
        f"above {SAMPLE_CALLS:,} calls (slower on large selections).",
    )
    misses: bool = Field(
        True,
        description="Measure misses, TTFT by hit rate and the prefix report (a second pass over the calls); false: "
        "hit rates and savings only, with the missed figures left empty (null), not zero.",
    )


@dataclass(frozen=True)
class CacheAnswer(Answer):
    """Hit rate, savings and misses overall (the headline), per group, over time and per model; TTFT by hit-rate
    band; the prefix-stability report."""

    question = "cache"
    by: str | None
    bucket: str | None
    totals: dict[str, Any]
    groups: pl.DataFrame
    over_time: pl.DataFrame
    by_model: pl.DataFrame
    ttft_by_hit_rate: pl.DataFrame
    ttft_by_input_size: pl.DataFrame
    prefix_stability: pl.DataFrame
    prefix_breakers: pl.DataFrame

    def summary(self) -> dict[str, Any]:
        return dict(self.totals)

    def tables(self) -> list[Table]:
        by = f" by {self.by}" if self.by else ""
        key = (self.by,) if self.by else ()
        totals = ("calls", "input_tokens", "cache_read_tokens", "hit_rate", "saved_usd", "missed_tokens", "missed_usd")
        out = [
            Table("groups", f"Cache hit rate, saved and missed{by}", self.groups, (*key, *totals, "unpriced_calls")),
            Table(
                "by_model",
                "By model, at its rates (USD per million tokens)",
                self.by_model,
                ("provider", "model", "self_hosted", "input_usd_per_mtok", "cache_read_usd_per_mtok", *totals),
            ),
        ]
        if self.bucket is not None:
            out.append(Table("over_time", f"Per {self.bucket}{by}", self.over_time, ("bucket", *key, *totals)))
        out += [
            Table("ttft_by_hit_rate", "Time to first token by the call's hit rate", self.ttft_by_hit_rate),
            Table(
                "ttft_by_input_size",
                "Time to first token by input size and hit rate (like against like)",
                self.ttft_by_input_size,
            ),
            Table(
                "prefix_stability",
                "Prompt-prefix stability by task kind (SDK fingerprint)",
                self.prefix_stability,
                _STABILITY_SHOWN,
            ),
            Table(
                "prefix_breakers",
                "Where prefixes break, by tokens after the break",
                self.prefix_breakers,
                (
                    "kind",
                    "break_kind",
                    "break_block",
                    "breaks",
                    "share_of_breaks",
                    "after_break_tokens",
                    "after_break_usd",
                    "missed_usd",
                ),
            ),  # fmt: skip
        ]
        return [t for t in out if t.frame.width]  # misses=false: the tables it did not measure are left out


_STABILITY_SHOWN = (
    "kind", "fingerprinted_calls", "compared_calls", "breaks", "break_rate", "top_break_kind", "top_break_block",
    "mean_stable_share", "after_break_tokens", "after_break_usd", "missed_tokens", "missed_usd", "unpriced_calls",
)  # fmt: skip
"""The prefix report's columns a terminal and the Cache page show (``top_break_calls`` is in CSV and JSON)."""


# -- SQL ---------------------------------------------------------------------------------------------------------

# a call's own hit-rate band (0..4) and input-size band (0..4), as integers: no float on a band's edge; none without
# input tokens (no hit rate)
_BANDS = """CASE WHEN coalesce(c.input_tokens, 0) <= 0 THEN NULL
            WHEN coalesce(c.cache_read_tokens, 0) = 0 THEN 0
            WHEN c.cache_read_tokens * 4 <= c.input_tokens THEN 1
            WHEN c.cache_read_tokens * 2 <= c.input_tokens THEN 2
            WHEN c.cache_read_tokens * 4 <= c.input_tokens * 3 THEN 3
            ELSE 4 END AS hit_band,
        CASE WHEN coalesce(c.input_tokens, 0) <= 0 THEN NULL
            WHEN c.input_tokens < 1024 THEN 0 WHEN c.input_tokens < 4096 THEN 1 WHEN c.input_tokens < 16384 THEN 2
            WHEN c.input_tokens < 65536 THEN 3 ELSE 4 END AS size_band"""
_ROW = """call_grp, bucket, provider, model, self_hosted, input_tokens, cache_read_tokens, has_fingerprint,
        prompt_chars, stable_prefix_chars, prefix_break_block, prefix_break_kind, ttft_s, hit_band, size_band"""

# Every selected call's tokens, exact, at the grain of the groups, the time series and the models: from the calls
# added up per hour (``hours_scope``: the hourly roll-up; per minute, the calls themselves).
_TOTALS = """
SELECT {grp} AS grp, {bucket} AS bucket, c.provider, c.model,
    coalesce(c.deployment = 'self_hosted', FALSE) AS self_hosted,
    CAST(sum(c.attempts) AS BIGINT) AS calls,
    CAST(sum(c.input_tokens) AS BIGINT) AS input_tokens,
    CAST(sum(c.cache_read_tokens) AS BIGINT) AS cache_read_tokens
FROM scoped_hours AS c
GROUP BY grp, bucket, c.provider, c.model, self_hosted
"""

# Each (sampled) call's repeated prefix: measured by the fingerprint, or (no fingerprint) estimated from the previous
# call of its (provider, model) in the task (by start time; on a tie the smaller prompt first), which only the calls
# without a fingerprint need a window for. The sampled calls are read once (the columns every call needs: a column
# read for all calls costs at 10M, e.g. span_id a fifth of the query) and kept (a few hundred thousand rows at most);
# their rows meet their task once (its kind, and a task dimension's value). One aggregate at the finest grain every
# table needs (rolled up from it in polars), and the TTFT percentiles per hit-rate band, and per band and input size
# (DuckDB ``quantile_cont(x, [..])``; ClickHouse ``quantilesExactInclusive``).
_PER_CALL = f"""
sampled AS (
    SELECT c.project, c.task_id, c.start_time, {{call_grp}} AS call_grp, {{bucket}} AS bucket,
        c.provider, c.model, coalesce(c.deployment = 'self_hosted', FALSE) AS self_hosted,
        coalesce(c.input_tokens, 0) AS input_tokens, coalesce(c.cache_read_tokens, 0) AS cache_read_tokens,
        c.prompt_chars IS NOT NULL AS has_fingerprint, c.prompt_chars, c.stable_prefix_chars,
        c.prefix_break_block, c.prefix_break_kind, c.ttft_s, {_BANDS}
    FROM scoped_calls AS c
    WHERE {{sample}}
),
measured AS (
    SELECT project, task_id, {_ROW}, 'fingerprint' AS estimate,
        CASE WHEN prompt_chars > 0 THEN CAST(round(CAST(stable_prefix_chars AS DOUBLE) * input_tokens / prompt_chars)
            AS BIGINT) ELSE 0 END AS repeated_tokens
    FROM sampled WHERE stable_prefix_chars IS NOT NULL
),
estimated AS (
    SELECT project, task_id, {_ROW}, CASE WHEN previous_input IS NOT NULL THEN 'size' END AS estimate,
        CASE WHEN previous_input IS NOT NULL THEN least(previous_input, input_tokens) END AS repeated_tokens
    FROM (
        SELECT *, lag(input_tokens) OVER (
            PARTITION BY project, task_id, provider, model ORDER BY start_time, input_tokens) AS previous_input
        FROM sampled WHERE stable_prefix_chars IS NULL
    ) AS w
),
calls AS (
    SELECT c.*, {{grp}} AS grp, t.kind AS task_kind
    FROM (SELECT * FROM measured UNION ALL SELECT * FROM estimated) AS c
    LEFT JOIN tasks AS t ON t.project = c.project AND t.task_id = c.task_id AND {{task_sample}}
)
SELECT CASE WHEN GROUPING(hit_band) = 1 THEN 'calls' WHEN GROUPING(size_band) = 1 THEN 'hit' ELSE 'size' END AS part,
    grp, bucket, task_kind, has_fingerprint, prefix_break_kind, prefix_break_block, provider, model, self_hosted,
    hit_band, size_band,
    CAST(count(*) AS BIGINT) AS calls,
    CAST(count(ttft_s) AS BIGINT) AS ttft_calls,
    CAST(sum(input_tokens) AS BIGINT) AS input_tokens,
    CAST(sum(cache_read_tokens) AS BIGINT) AS cache_read_tokens,
    CAST(sum(CASE WHEN repeated_tokens > cache_read_tokens THEN repeated_tokens - cache_read_tokens ELSE 0 END)
        AS BIGINT) AS missed_tokens,
    CAST(sum(CASE WHEN estimate = 'fingerprint' THEN 1 ELSE 0 END) AS BIGINT) AS fingerprint_calls,
    CAST(sum(CASE WHEN estimate = 'size' THEN 1 ELSE 0 END) AS BIGINT) AS size_estimate_calls,
    CAST(sum(CASE WHEN stable_prefix_chars IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS compared_calls,
    CAST(sum(CASE WHEN prefix_break_block IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS breaks,
    sum(CASE WHEN estimate = 'fingerprint' AND prompt_chars > 0
        THEN least(CAST(stable_prefix_chars AS DOUBLE) / prompt_chars, 1.0) END) AS stable_share_sum,
    CAST(sum(CASE WHEN estimate = 'fingerprint' AND prompt_chars > 0 THEN 1 ELSE 0 END) AS BIGINT) AS share_calls,
    CAST(sum(CASE WHEN estimate = 'fingerprint' AND prefix_break_block IS NOT NULL
        THEN greatest(input_tokens - repeated_tokens, 0) ELSE 0 END) AS BIGINT) AS after_break_tokens,
    quantile_cont(ttft_s, [0.5, 0.95]) AS ttft_quantiles
FROM calls
GROUP BY GROUPING SETS (
    (grp, bucket, task_kind, has_fingerprint, prefix_break_kind, prefix_break_block, provider, model, self_hosted),
    (hit_band),
    (hit_band, size_band)
)
"""


def _group_column(by: str | None) -> str:
    """The SQL for a call's value of ``by``: a call dimension is the call's own (``c``), a task dimension its task's
    (``t``)."""
    if by is None:
        return "CAST(NULL AS VARCHAR)"
    if by in CALL_DIMENSIONS:
        return f"c.{CALL_DIMENSIONS[by]}"
    if by == "project":
        return "c.project"
    return f"t.{TASK_DIMENSIONS[by]}"


def _bucket_column(bucket: str | None) -> str:
    return "CAST(NULL AS TIMESTAMP)" if bucket is None else f"date_trunc('{bucket}', c.start_time)"


def _sample(threshold: int | None, alias: str = "c") -> str:
    """The SQL condition that keeps the sampled tasks' calls (DuckDB ``hash``; ClickHouse would say ``cityHash64``);
    a threshold of 0 keeps none (the answer's shape, no scan)."""
    if threshold == 0:
        return "FALSE"
    return "TRUE" if threshold is None else f"hash({alias}.project, {alias}.task_id) % {HASH_BUCKETS} < {threshold}"


def _task_valued(by: str | None) -> bool:
    """Whether ``by`` is a value of the call's task (read from ``tasks``), not of the call itself."""
    return by in TASK_DIMENSIONS and by != "project"


def _totals_sql(filters: Filters, by: str | None, bucket: str | None) -> Sql:
    # no join with the tasks: a task's value is grouped on in the per-call query (at 10M calls, the join is a second)
    grp = "CAST(NULL AS VARCHAR)" if _task_valued(by) else _group_column(by)
    at = "CAST(NULL AS TIMESTAMP)" if bucket is None else f"date_trunc('{bucket}', c.hour)"
    scope = hours_scope(filters, grain="minute") if bucket == "minute" else hours_scope(filters)
    return Sql("WITH ") + scope + Sql(_TOTALS.format(grp=grp, bucket=at))


def _per_call_sql(filters: Filters, by: str | None, bucket: str | None, threshold: int | None) -> Sql:
    # a call's own value travels with it; a task's is read with its kind, after the join
    task_value = _task_valued(by)
    call_grp = "CAST(NULL AS VARCHAR)" if task_value else _group_column(by)
    grp = _group_column(by) if task_value else "c.call_grp"
    body = _PER_CALL.format(
        grp=grp,
        call_grp=call_grp,
        bucket=_bucket_column(bucket),
        sample=_sample(threshold),
        task_sample=_sample(threshold, "t"),
    )
    return Sql("WITH ") + call_scope(filters) + Sql(",\n" + body)


def _threshold(calls: int, exact: bool) -> int | None:
    """The hash threshold that samples about ``SAMPLE_CALLS`` calls' tasks, or None: measure every call."""
    if exact or calls <= SAMPLE_CALLS:
        return None
    return max(1, math.ceil(HASH_BUCKETS * SAMPLE_CALLS / calls))


# -- pricing -----------------------------------------------------------------------------------------------------


def _rates_frame(rates: dict[tuple[str | None, str | None], ModelRates]) -> pl.DataFrame:
    """(provider, model) -> USD per token of input and cache read, and the discount a read gets (None: unknown)."""
    rows = [
        {"provider": r.provider, "model": r.model, "input": r.input, "cache_read": r.cache_read} for r in rates.values()
    ]
    schema: dict[str, Any] = {
        "provider": pl.String,
        "model": pl.String,
        "input": pl.Decimal(38, 18),
        "cache_read": pl.Decimal(38, 18),
    }
    return pl.DataFrame(rows, schema=schema).with_columns(discount=pl.col("input") - pl.col("cache_read"))


def _priced(df: pl.DataFrame, rates: pl.DataFrame, money: dict[str, str]) -> pl.DataFrame:
    """Rows keyed by (..., provider, model, self_hosted) with token columns priced (``money``: money column -> its
    tokens) at the cache discount, which is null for a self-hosted call (no per-token price) and for a model without
    both rates; ``unpriced_calls`` and ``unpriced_<tokens>`` count what could not be priced. No tokens cost exactly $0
    at any rate: a row without cache reads or misses (an attempt that got no response) has nothing unpriced."""
    out = df.join(rates, on=["provider", "model"], how="left", nulls_equal=True)
    out = out.with_columns(discount=pl.when(pl.col("self_hosted")).then(None).otherwise(pl.col("discount")))
    extra = []
    for m, tokens in money.items():
        usd = pl.col(tokens).cast(pl.Decimal(38, 0)) * pl.col("discount")
        extra.append(pl.when(pl.col(tokens) == 0).then(usd.fill_null(0)).otherwise(usd).alias(m))
    priced = pl.col("discount").is_not_null() | (pl.sum_horizontal([pl.col(t) for t in money.values()]) == 0)
    extra.append(pl.when(priced).then(0).otherwise(pl.col("calls")).alias("unpriced_calls"))
    extra += [
        pl.when(pl.col("discount").is_not_null()).then(0).otherwise(pl.col(tokens)).alias(f"unpriced_{tokens}")
        for tokens in ("cache_read_tokens", "missed_tokens")
        if tokens in money.values()
    ]
    return out.with_columns(extra)


def _scaled(df: pl.DataFrame, scale: float) -> pl.DataFrame:
    """A sample's counts and tokens scaled up to the whole selection (whole numbers; unchanged at scale 1)."""
    if scale == 1:
        return df
    counts = [c for c, t in df.schema.items() if t == pl.Int64]
    floats = [c for c, t in df.schema.items() if t == pl.Float64]
    return df.with_columns(
        *[(pl.col(c) * scale).round(0).cast(pl.Int64) for c in counts], *[pl.col(c) * scale for c in floats]
    )


_COUNTS = [
    "calls", "input_tokens", "cache_read_tokens", "missed_tokens", "fingerprint_calls", "size_estimate_calls",
    "unpriced_calls", "unpriced_cache_read_tokens", "unpriced_missed_tokens",
]  # fmt: skip
_FIGURES = [
    "calls", "input_tokens", "cache_read_tokens", "hit_rate", "saved_usd", "missed_tokens", "missed_usd",
    "fingerprint_calls", "size_estimate_calls", "unpriced_calls", "unpriced_cache_read_tokens",
    "unpriced_missed_tokens",
]  # fmt: skip


def _rollup(priced: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Priced rows summed to ``keys``: the columns of ``groups``, ``over_time`` and ``by_model``."""
    aggs = [pl.col(c).sum().cast(pl.Int64) for c in _COUNTS] + [money_sum("saved_usd"), money_sum("missed_usd")]
    out = priced.group_by(keys, maintain_order=True).agg(aggs) if keys else priced.select(aggs)
    out = out.with_columns(hit_rate_expr()).select(*keys, *_FIGURES)
    return out.sort(keys, nulls_last=True) if keys else out


# -- the question ------------------------------------------------------------------------------------------------


def _notes(
    by_model: pl.DataFrame, rates: dict[tuple[str | None, str | None], ModelRates], misses: bool = True
) -> list[str]:
    notes = []
    hosted = by_model.filter(pl.col("self_hosted"))
    missed = f" and {int(hosted['missed_tokens'].sum()):,} missed" if misses else ""
    if hosted.height and (calls := int(hosted["calls"].sum())):
        notes.append(
            f"{calls:,} self-hosted call(s) are priced per GPU-hour, not per token: their "
            f"{int(hosted['cache_read_tokens'].sum()):,} cache-read{missed} tokens are counted without dollars."
        )
    for row in by_model.filter(~pl.col("self_hosted") & (pl.col("unpriced_calls") > 0)).iter_rows(named=True):
        known = rates.get((row["provider"], row["model"]))
        why = (
            "no priced call of it in the window"
            if known is None or known.input is None
            else "no priced call of it read from the cache in the window, so its cache-read rate is unknown"
        )
        missed = f" and {row['missed_tokens']:,} missed" if misses else ""
        notes.append(
            f"{row['provider']}/{row['model']}: {why}; its {row['cache_read_tokens']:,} cache-read{missed} tokens "
            f"({row['calls']:,} calls) are unpriced."
        )
    return notes


def _usd(value: Decimal | None) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}" if abs(value) >= Decimal("0.01") else f"${value:.6f}"


def _headline(total: dict[str, Any], misses: bool = True) -> str:
    """E.g. ``hit rate 23.5% of 37,500 input tokens; saved $0.02, missed $0.03 (2 of 14 calls unpriced)``; without
    ``misses`` (not measured), no missed figure."""
    if not total["input_tokens"]:
        return "no input tokens in the selection"
    missed = f", missed {_usd(total['missed_usd'])}" if misses else ""
    text = (
        f"hit rate {total['hit_rate']:.1%} of {total['input_tokens']:,} input tokens; "
        f"saved {_usd(total['saved_usd'])}{missed}"
    )
    if total["unpriced_calls"]:
        text += f" ({total['unpriced_calls']:,} of {total['calls']:,} calls unpriced: tokens only)"
    return text


_CELL = ["grp", "bucket", "provider", "model", "self_hosted"]


def _by_model(priced: pl.DataFrame, rates: pl.DataFrame) -> pl.DataFrame:
    """One row per (provider, model, self_hosted), with the rates it was priced at (USD per million tokens)."""
    out = _rollup(priced, ["provider", "model", "self_hosted"])
    rate_cols = rates.select(
        "provider",
        "model",
        (pl.col("input") * _M).cast(pl.Decimal(38, 12)).alias("input_usd_per_mtok"),
        (pl.col("cache_read") * _M).cast(pl.Decimal(38, 12)).alias("cache_read_usd_per_mtok"),
    )
    out = out.join(rate_cols, on=["provider", "model"], how="left", nulls_equal=True).with_columns(
        pl.when(pl.col("self_hosted")).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("input_usd_per_mtok", "cache_read_usd_per_mtok")
    )
    first = ["provider", "model", "self_hosted", "input_usd_per_mtok", "cache_read_usd_per_mtok"]
    return out.select(*first, *[c for c in out.columns if c not in first])


def cache_economics(store: ReadStore, filters: Filters, options: CacheOptions) -> CacheAnswer:
    """Cache hit rate, dollars saved and missed (overall, per ``options.by``, per ``options.bucket``, per model), TTFT
    by hit-rate band, and the prefix-stability report, over the calls ``filters`` select."""
    by, bucket = options.by, options.bucket
    check_dimension(by)
    check_bucket(store, filters, bucket)
    # a model's rates do not depend on which of its calls are looked at: learn them from the project's calls in the
    # window (a narrow filter, e.g. one task kind that never hit the cache, would otherwise lose the cache-read rate
    # its misses are priced at)
    window = Filters.model_validate({"project": filters.project, "since": filters.since, "until": filters.until})
    rates_by_model = model_rates(store, window)
    rates = _rates_frame(rates_by_model)

    totals_frame = frame(store, _totals_sql(filters, by, bucket), filters)
    calls = int(totals_frame["calls"].sum())
    threshold = _threshold(calls, options.exact) if options.misses else 0
    answer = frame(store, _per_call_sql(filters, by, bucket, threshold), filters)
    per_call = answer.filter(pl.col("part") == "calls").drop("hit_band", "size_band", "ttft_quantiles")
    measured = int(per_call["calls"].sum())
    scale = calls / measured if threshold and measured else 1.0
    per_call = _scaled(per_call.drop("part", "ttft_calls"), scale)
    bands = _scaled(answer.filter(pl.col("part") != "calls"), scale)

    # exact tokens per cell, with the (scaled) misses of the same cell; a task's value (kind, ...) is known to the
    # per-call query only: its groups are its cells (exact unless sampled)
    money = {"saved_usd": "cache_read_tokens", "missed_usd": "missed_tokens"}
    measures = ["missed_tokens", "fingerprint_calls", "size_estimate_calls"]
    task_cells = per_call.group_by(_CELL).agg(pl.col("calls", "input_tokens", "cache_read_tokens", *measures).sum())
    keys = _CELL[1:] if _task_valued(by) else _CELL
    misses = task_cells.group_by(keys).agg(pl.col(*measures).sum())
    cells = totals_frame.join(misses, on=keys, how="left", nulls_equal=True).with_columns(
        pl.col(*measures).fill_null(0)
    )
    priced = _priced(cells, rates, money)
    grouped = _priced(task_cells, rates, money) if _task_valued(by) else priced
    group_keys = ["grp"] if by is not None else []
    rename = {"grp": by} if by is not None else {}
    groups = _rollup(grouped, group_keys).rename(rename)
    over_time = _rollup(grouped, ["bucket", *group_keys]).rename(rename) if bucket is not None else pl.DataFrame()
    by_model = _by_model(priced, rates)

    prefix = _priced(per_call, rates, {"missed_usd": "missed_tokens", "after_break_usd": "after_break_tokens"})
    prefix_stability, prefix_breakers = prefix_tables(prefix)
    ttft_by_hit_rate, ttft_by_input_size = ttft_tables(bands)

    total = _rollup(priced, []).row(0, named=True)
    compared = int(prefix_stability["compared_calls"].sum())
    breaks = int(prefix_stability["breaks"].sum())
    totals: dict[str, Any] = {
        "headline": _headline(total),
        **{k: total[k] for k in ("calls", "input_tokens", "cache_read_tokens", "hit_rate", "saved_usd")},
        **{k: total[k] for k in ("missed_tokens", "missed_usd", "fingerprint_calls", "size_estimate_calls")},
        **{k: total[k] for k in ("unpriced_calls", "unpriced_cache_read_tokens", "unpriced_missed_tokens")},
        "prefix_compared_calls": compared,
        "prefix_breaks": breaks,
        "prefix_break_rate": breaks / compared if compared else None,
        "measured_calls": measured,
    }
    notes = _notes(by_model, rates_by_model, options.misses)
    if not options.misses:
        return _without_misses(filters, by, bucket, totals, groups, over_time, by_model, notes)
    notes.append(
        f"missed tokens: {totals['fingerprint_calls']:,} repeat call(s) measured by the SDK's prompt fingerprint, "
        f"{totals['size_estimate_calls']:,} estimated as min(previous input, this input) (no fingerprint)."
    )
    if calls and not prefix_stability.height:
        notes.append("no selected call carries the SDK's prompt fingerprint: there is no prefix-stability report.")
    if threshold:
        grouped_note = f" (and the groups by {by}: a task's value is read with it)" if _task_valued(by) else ""
        notes.append(
            f"misses, the prefix report and TTFT figures{grouped_note} were measured on the calls of a sample of "
            f"tasks ({measured:,} of {calls:,} calls, tasks chosen by a hash of their id) and scaled by {scale:.2f}; "
            "the other hit rates, savings and call counts are exact (exact=true measures every call)."
        )
    return CacheAnswer(
        filters,
        by,
        bucket,
        totals,
        groups,
        over_time,
        by_model,
        ttft_by_hit_rate,
        ttft_by_input_size,
        prefix_stability,
        prefix_breakers,
        notes=notes,
    )


_UNMEASURED = ["missed_tokens", "missed_usd", "fingerprint_calls", "size_estimate_calls", "unpriced_missed_tokens"]


def _without_misses(
    filters: Filters,
    by: str | None,
    bucket: str | None,
    totals: dict[str, Any],
    groups: pl.DataFrame,
    over_time: pl.DataFrame,
    by_model: pl.DataFrame,
    notes: list[str],
) -> CacheAnswer:
    """The answer of ``misses=false``: what was not measured is null (unknown), never zero."""

    def unknown(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(pl.lit(None, dtype=df.schema[c]).alias(c) for c in _UNMEASURED if c in df.columns)

    totals = {**totals, **dict.fromkeys([*_UNMEASURED, "prefix_compared_calls", "prefix_breaks"]), "measured_calls": 0}
    totals["prefix_break_rate"] = None
    totals["headline"] = _headline(totals, misses=False)
    notes.append("misses, TTFT by hit rate and the prefix report were not measured (misses=false).")
    empty = pl.DataFrame()
    return CacheAnswer(
        filters,
        by,
        bucket,
        totals,
        unknown(groups),
        unknown(over_time),
        unknown(by_model),
        empty,
        empty,
        empty,
        empty,
        notes=notes,
    )


def _run(store: ReadStore, filters: Filters, options: CacheOptions) -> Answer:
    return cache_economics(store, filters, options)


QUESTION = Question(
    name="cache",
    help="cache economics: hit rate, dollars saved and missed, prefix stability",
    run=_run,
    options=CacheOptions,
)
