"""Cache economics' SQL: the totals query and the per-call query (each call's repeated prefix, measured or estimated,
and one aggregate per table's grain), the sample of tasks they measure, and the values past max_groups ranked and
folded in SQL (the groups, the models, the task kinds, the prefix breaks); ``_cache`` prices and shapes what they
return."""

from __future__ import annotations

from dataclasses import dataclass

from taskcost._internal.lazy import pl
from taskcost.analytics._filters import (
    CALL_DIMENSIONS,
    TASK_DIMENSIONS,
    Filters,
    Sql,
    call_scope,
    hours_scope,
    task_scope,
)
from taskcost.analytics._groups import OTHER, Top, fold_note, top_values, unranked
from taskcost.analytics._rates import rates_cte
from taskcost.store import ReadStore

__all__ = [
    "HASH_BUCKETS",
    "_Folds",
    "_fits",
    "_folds",
    "_per_call_sql",
    "_task_valued",
    "_totals_sql",
    "_unfolded",
    "per_call_parts",
    "rates_later",
    "with_rates",
]

HASH_BUCKETS = 1_000_000
"""A task is in the sample when ``hash(project, task_id) % HASH_BUCKETS`` is below the threshold."""


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
_ROW = """call_grp, bucket, provider, model, self_hosted, input, cache_read, cache_write, input_tokens,
        cache_read_tokens, cache_write_tokens, has_fingerprint, prompt_chars, stable_prefix_chars, prefix_break_block,
        prefix_break_kind, ttft_s, hit_band, size_band"""
_RATE_COLUMNS = "r.input AS input, r.cache_read AS cache_read, r.cache_write AS cache_write"
"""A model's rates each row keeps (USD per token): input, cache read (what a read saves against input) and cache
write (what a write costs more than input: the premium a saving is net of)."""
_RATES_JOIN = (
    "LEFT JOIN model_rates AS r ON r.provider IS NOT DISTINCT FROM c.provider AND r.model IS NOT DISTINCT FROM c.model"
)

# Every selected call's tokens, exact, at the grain of the groups, the time series and the models (the values past
# max_groups folded), each model with its rates (USD per token, from ``rates_cte``: a folded model's tokens keep the
# rates of their own model, so the ``other`` row is priced exactly): from the calls added up per hour
# (``hours_scope``: the hourly roll-up; per minute, the calls themselves).
_TOTALS = f"""
    coalesce(c.deployment = 'self_hosted', FALSE) AS self_hosted, {_RATE_COLUMNS},
    CAST(sum(c.attempts) AS BIGINT) AS calls,
    CAST(sum(c.input_tokens) AS BIGINT) AS input_tokens,
    CAST(sum(c.cache_read_tokens) AS BIGINT) AS cache_read_tokens,
    CAST(sum(c.cache_write_tokens) AS BIGINT) AS cache_write_tokens
FROM scoped_hours AS c {_RATES_JOIN}
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
"""

# Each (sampled) call's repeated prefix: measured by the fingerprint, or (no fingerprint) estimated from the previous
# call of its (provider, model) in the task (by start time; on a tie the smaller prompt first), which only the calls
# without a fingerprint need a window for. The sampled calls are read once (the columns every call needs: a column
# read for all calls costs at 10M, e.g. span_id a fifth of the query) and kept (a few hundred thousand rows at most);
# their rows meet their task once (its kind, and a task dimension's value). Then one aggregate per table's grain, every
# value past max_groups folded (the group, the model, the task kind, the prefix break): the cells of the groups, time
# series and models; the prefix report by task kind; the breaks by kind, block kind and block; and the TTFT
# percentiles per hit-rate band, and per band and input size (DuckDB ``quantile_cont(x, [..])``; ClickHouse
# ``quantilesExactInclusive``). Rows keep their model's rates (``input``, ``cache_read``) so that they are priced here.
_SAMPLED = f"""
        c.provider, c.model, coalesce(c.deployment = 'self_hosted', FALSE) AS self_hosted,
        {_RATE_COLUMNS},
        coalesce(c.input_tokens, 0) AS input_tokens, coalesce(c.cache_read_tokens, 0) AS cache_read_tokens,
        coalesce(c.cache_write_tokens, 0) AS cache_write_tokens,
        c.prompt_chars IS NOT NULL AS has_fingerprint, c.prompt_chars, c.stable_prefix_chars,
        c.prefix_break_block, c.prefix_break_kind, c.ttft_s, {_BANDS}
    FROM scoped_calls AS c {_RATES_JOIN}
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
)"""
_MEASURES = """
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
    CAST(sum(cache_write_tokens) AS BIGINT) AS cache_write_tokens"""
_KEYS = """grp, bucket, task_kind, has_fingerprint, break_kind_f AS prefix_break_kind,
    break_block_f AS prefix_break_block, provider_f AS provider, model_f AS model, self_hosted, input, cache_read,
    cache_write"""
_PER_CALL_TABLES = f"""
SELECT CASE WHEN GROUPING(grp) = 0 THEN 'cells' WHEN GROUPING(break_kind_f) = 0 THEN 'breaks' ELSE 'kinds' END AS part,
    {_KEYS}, CAST(NULL AS INTEGER) AS hit_band, CAST(NULL AS INTEGER) AS size_band, {_MEASURES},
    CAST(NULL AS DOUBLE[]) AS ttft_quantiles
FROM calls
GROUP BY GROUPING SETS (
    (grp, bucket, provider_f, model_f, self_hosted, input, cache_read, cache_write),
    (task_kind, has_fingerprint, self_hosted, input, cache_read, cache_write),
    (task_kind, has_fingerprint, break_kind_f, break_block_f, self_hosted, input, cache_read, cache_write)
)
UNION ALL
SELECT CASE WHEN GROUPING(size_band) = 1 THEN 'hit' ELSE 'size' END AS part,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, hit_band, size_band, {_MEASURES},
    quantile_cont(ttft_s, [0.5, 0.95]) AS ttft_quantiles
FROM calls
GROUP BY GROUPING SETS ((hit_band), (hit_band, size_band))
UNION ALL
SELECT 'break_values' AS part, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    n, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, NULL
FROM break_values
"""
# Read unfolded (``_Folds.breaks`` false), the same tables come from one aggregate at the finest grain (every key of
# the three; its rows at most the sampled calls, in practice a few hundred), rolled up in polars (``per_call_parts``):
# two grouping sets fewer, a fifth of the query's time.
_PER_CALL_FINEST = f"""
SELECT CASE WHEN GROUPING(hit_band) = 1 THEN 'finest' WHEN GROUPING(size_band) = 1 THEN 'hit' ELSE 'size' END AS part,
    {_KEYS}, hit_band, size_band, {_MEASURES},
    CASE WHEN GROUPING(hit_band) = 0 THEN quantile_cont(ttft_s, [0.5, 0.95]) END AS ttft_quantiles
FROM calls
GROUP BY GROUPING SETS (
    (grp, bucket, provider_f, model_f, self_hosted, input, cache_read, cache_write, task_kind, has_fingerprint,
     break_kind_f, break_block_f),
    (hit_band),
    (hit_band, size_band)
)
UNION ALL BY NAME
SELECT 'rates' AS part, provider, model, input, cache_read, cache_write FROM model_rates
"""
_PARTS = {
    "cells": ("grp", "bucket", "provider", "model", "self_hosted", "input", "cache_read", "cache_write"),
    "kinds": ("task_kind", "has_fingerprint", "self_hosted", "input", "cache_read", "cache_write"),
    "breaks": ("task_kind", "has_fingerprint", "prefix_break_kind", "prefix_break_block", "self_hosted", "input",
               "cache_read", "cache_write"),
}  # fmt: skip
"""The keys of each table of the per-call answer (``_PER_CALL_TABLES``' grouping sets)."""


def per_call_parts(answer: pl.DataFrame) -> pl.DataFrame:
    """The per-call answer with its ``finest`` rows (``_PER_CALL_FINEST``) rolled up into the tables the folded query
    gives (``cells``, ``kinds``, ``breaks``: the same columns, keys outside a table's grain empty, a sum NULL when
    every value summed is, as in SQL); an answer without such rows is returned as it is."""
    finest = answer.filter(pl.col("part") == "finest")
    if not finest.height:
        return answer
    keys = {k for grain in _PARTS.values() for k in grain}
    measures = [c for c in answer.columns if c not in keys and c not in ("part", "hit_band", "size_band")]
    measures.remove("ttft_quantiles")
    out = [answer.filter(pl.col("part") != "finest")]
    for part, grain in _PARTS.items():
        rolled = finest.group_by(list(grain)).agg(
            pl.when(pl.col(m).is_not_null().any()).then(pl.col(m).sum()).cast(answer.schema[m]).alias(m)
            for m in measures
        )
        out.append(
            rolled.with_columns(part=pl.lit(part)).select(
                pl.col(c) if c in rolled.columns or c == "part" else pl.lit(None, answer.schema[c]).alias(c)
                for c in answer.columns
            )
        )
    return pl.concat(out)


_BREAK_BLOCK_OTHER = -1
"""The block index of the prefix breaks past max_groups, added up with the block kind ``other``."""


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


# -- the bound on the groups: the values past max_groups, ranked and folded in SQL (``_groups``) ------------------
def _model_key(alias: str) -> str:
    """A model as one value, to rank and fold: provider and model name (never NULL)."""
    return f"coalesce({alias}provider, '') || chr(31) || coalesce({alias}model, '')"


def _break_key(alias: str) -> str:
    """A prefix break as one value: its block kind and index."""
    return f"coalesce({alias}prefix_break_kind, '') || chr(31) || CAST({alias}prefix_break_block AS VARCHAR)"


@dataclass(frozen=True)
class _Folds:
    """The values that keep their own row: of ``by`` (None without it), the models, the task kinds (the prefix report).
    The prefix breaks (block kind and index) are ranked and folded inside the per-call query (``break_exprs``), over
    the calls it measures: a query of their own would read every call once more."""

    group: Top | None
    models: Top
    kinds: Top
    breaks: bool = True
    """Whether the per-call query ranks and folds the prefix breaks (False: every break keeps its row; its answer tells
    whether they fit, ``breaks_fit``)."""

    def group_expr(self, column: str) -> Sql:
        return Sql(column) if self.group is None else self.group.expr(column)

    def model_exprs(self, alias: str, suffix: str = "") -> Sql:
        """``provider, model`` of a row after the fold (a folded model: no provider, the model ``other``), named
        ``provider<suffix>``, ``model<suffix>``."""
        if not self.models.folded:
            return Sql(f"{alias}provider AS provider{suffix}, {alias}model AS model{suffix}")
        other = self.models.is_other(_model_key(alias))
        return (
            Sql("CASE WHEN ")
            + other
            + Sql(f" THEN NULL ELSE {alias}provider END AS provider{suffix}, CASE WHEN ")
            + other
            + Sql(f" THEN ? ELSE {alias}model END AS model{suffix}", [OTHER])
        )

    def break_exprs(self) -> Sql:
        """``break_kind_f, break_block_f`` of a call after the fold (a folded break: ``other``, block -1): the breaks
        past the ``limit`` with the most measured calls (CTE ``break_top``), when there are more than ``limit`` + 1
        (``break_values``)."""
        if not self.breaks:
            return Sql("c.prefix_break_kind AS break_kind_f, c.prefix_break_block AS break_block_f")
        limit = self.models.limit
        other = (
            f"c.prefix_break_block IS NOT NULL AND (SELECT n FROM break_values) > {limit + 1} "
            f"AND {_break_key('c.')} NOT IN (SELECT k FROM break_top)"
        )
        return Sql(
            f"CASE WHEN {other} THEN ? ELSE c.prefix_break_kind END AS break_kind_f, CASE WHEN {other} THEN "
            f"{_BREAK_BLOCK_OTHER} ELSE c.prefix_break_block END AS break_block_f",
            [OTHER],
        )

    def notes(self, by: str | None, breaks: int) -> list[str]:
        """The folds said; ``breaks``: the distinct prefix breaks among the measured calls."""
        out = fold_note(self.group, f"values of {by}", f"--{(by or '').replace('_', '-')}")
        out += fold_note(self.models, "models", "--model")
        if by != "kind":  # by kind: the same fold, said once
            out += fold_note(self.kinds, "task kinds of the prefix report", "--kind")
        limit = self.models.limit
        if breaks > limit + 1:
            out.append(
                f"{breaks - limit:,} of {breaks:,} prefix breaks (block kind and index; the fewest calls) are added up "
                f"as block kind '{OTHER}', block {_BREAK_BLOCK_OTHER}; raise max_groups (now {limit:,}) to see them"
            )
        return out


_SPEND = "sum(c.cost_usd) AS spend, sum(c.attempts) AS n"
_TASK_SPEND = "sum(cost_usd) AS spend, count(*) AS n"
_BY_SPEND = "spend DESC NULLS LAST, n DESC"


def _unfolded(by: str | None, limit: int) -> _Folds:
    """Nothing folded (the prefix breaks neither): the first reading, kept when every value fits."""
    none = Top((), 0, limit)
    return _Folds(None if by is None else none, none, none, breaks=False)


def _fits(values: pl.DataFrame, columns: list[str], limit: int) -> Top | None:
    """The unfolded ``Top`` of the distinct ``columns`` of ``values`` (a complete answer's rows), None past the
    limit."""
    return unranked(values.select(columns).unique().iter_rows(), limit)


def _folds(
    store: ReadStore,
    filters: Filters,
    by: str | None,
    limit: int,
    misses: bool,
    known: dict[str, Top] | None = None,
    breaks: bool = True,
) -> _Folds:
    """Ranks the values of every dimension the answer groups by (a query each, at most ``limit`` + 1 rows back), but
    those ``known`` holds already (``"models"``, ``"group"``, ``"kinds"``: found to fit unfolded): the models and a
    call dimension by the calls' spend, then attempts; a task kind (and a task dimension) by its tasks' spend, then
    tasks (over the tasks the filters' task dimensions select)."""
    known = known or {}
    hours = Sql("WITH ") + hours_scope(filters) + Sql("\n")
    tasks = Sql("WITH ") + task_scope(filters.narrowed(**dict.fromkeys(CALL_DIMENSIONS))) + Sql("\n")

    def task_top(column: str) -> Top:
        return top_values(store, filters, tasks, "scoped_tasks", column, _TASK_SPEND, _BY_SPEND, limit)

    models = known.get("models") or top_values(
        store, filters, hours, "scoped_hours AS c", _model_key("c."), _SPEND, _BY_SPEND, limit
    )
    kinds = known.get("kinds") or (task_top("kind") if misses else Top((), 0, limit))
    group = known.get("group")
    if by is None or group is not None:
        pass
    elif by == "kind":
        group = kinds if misses else task_top("kind")
    elif _task_valued(by):
        group = task_top(TASK_DIMENSIONS[str(by)])
    else:
        column = "c.project" if by == "project" else f"c.{CALL_DIMENSIONS[by]}"
        group = top_values(store, filters, hours, "scoped_hours AS c", column, _SPEND, _BY_SPEND, limit)
    return _Folds(group, models, kinds, breaks)


def _rates_window(filters: Filters) -> Filters:
    """The calls a model's rates are learned from: the project's in the window (``--since`` / ``--until``); the other
    filters do not change a model's rate (a narrow filter, e.g. one task kind that never hit the cache, would
    otherwise lose the cache-read rate its misses are priced at)."""
    return Filters.model_validate({"project": filters.project, "since": filters.since, "until": filters.until})


def _totals_sql(filters: Filters, by: str | None, bucket: str | None, folds: _Folds) -> Sql:
    """The totals; when no model is folded and the per-call query is read unfolded (``rates_later``), without their
    models' rates (``input``, ``cache_read`` NULL): the per-call answer's ``rates`` rows give them (``with_rates``),
    the rates read once."""
    # no join with the tasks: a task's value is grouped on in the per-call query (at 10M calls, the join is a second)
    grp = Sql("CAST(NULL AS VARCHAR)") if _task_valued(by) else folds.group_expr(_group_column(by))
    at = "CAST(NULL AS TIMESTAMP)" if bucket is None else f"date_trunc('{bucket}', c.hour)"
    scope = hours_scope(filters, grain="minute") if bucket == "minute" else hours_scope(filters)
    if not rates_later(folds):
        sql = Sql("WITH ") + scope + Sql(",\n") + rates_cte(_rates_window(filters)) + Sql("\nSELECT ") + grp
        totals = _TOTALS
    else:
        sql = Sql("WITH ") + scope + Sql("\nSELECT ") + grp
        totals = _TOTALS.replace(_RATE_COLUMNS, _NO_RATES).replace(_RATES_JOIN, "")
    sql += Sql(f" AS grp, {at} AS bucket, ") + folds.model_exprs("c.") + Sql(",")
    return sql + Sql(totals)


def rates_later(folds: _Folds) -> bool:
    """Whether the totals are read without rates (``with_rates`` adds them): no model folded (a row's model is its own,
    so a join on it finds its rates) and the per-call query unfolded (its answer has the ``rates`` rows)."""
    return not folds.breaks and not folds.models.folded


_NO_RATES = ", ".join(f"CAST(NULL AS DECIMAL(38, 18)) AS {unit}" for unit in ("input", "cache_read", "cache_write"))


def with_rates(totals: pl.DataFrame, answer: pl.DataFrame) -> pl.DataFrame:
    """``totals`` read without rates (``_totals_sql``) with each model's rates from the per-call ``answer``'s
    ``rates`` rows."""
    rates = answer.filter(pl.col("part") == "rates").select("provider", "model", "input", "cache_read", "cache_write")
    columns = totals.columns
    joined = totals.drop("input", "cache_read", "cache_write").join(
        rates, on=["provider", "model"], how="left", nulls_equal=True
    )
    return joined.select(columns)


def _per_call_sql(filters: Filters, by: str | None, bucket: str | None, threshold: int | None, folds: _Folds) -> Sql:
    # a call's own value travels with it; a task's is read with its kind, after the join
    task_value = _task_valued(by)
    call_grp = Sql("CAST(NULL AS VARCHAR)") if task_value else folds.group_expr(_group_column(by))
    grp = folds.group_expr(_group_column(by)) if task_value else Sql("c.call_grp")
    sql = Sql("WITH ") + call_scope(filters) + Sql(",\n") + rates_cte(_rates_window(filters))
    sql += Sql(",\nsampled AS (\n    SELECT c.project, c.task_id, c.start_time, ") + call_grp
    sql += Sql(f" AS call_grp, {_bucket_column(bucket)} AS bucket," + _SAMPLED.format(sample=_sample(threshold)))
    if folds.breaks:
        sql += Sql(
            f""",
break_keys AS (
    SELECT {_break_key("")} AS k, count(*) AS n FROM sampled WHERE prefix_break_block IS NOT NULL GROUP BY 1
),
break_top AS (SELECT k FROM break_keys ORDER BY n DESC, k LIMIT ?),
break_values AS (SELECT count(*) AS n FROM break_keys)""",
            [folds.models.limit],
        )
    sql += Sql(",\ncalls AS (\n    SELECT c.*, ") + grp + Sql(" AS grp, ") + folds.kinds.expr("t.kind")
    sql += Sql(" AS task_kind, ") + folds.model_exprs("c.", "_f") + Sql(", ") + folds.break_exprs()
    sql += Sql(
        "\n    FROM (SELECT * FROM measured UNION ALL SELECT * FROM estimated) AS c\n"
        f"    LEFT JOIN tasks AS t ON t.project = c.project AND t.task_id = c.task_id AND {_sample(threshold, 't')}\n)"
    )
    return sql + Sql(_PER_CALL_TABLES if folds.breaks else _PER_CALL_FINEST)
