"""Cost per completed task, with its waste: what finishing work really costs, and how much of it bought nothing.

- **Cost per completed task** = spend of every fully priced finished task selected (completed, failed and abandoned:
  LLM + tools) / its completed tasks, with a confidence interval resampling those tasks (``_stats.ratio_ci``). Tasks
  with an unpriced call attempt or tool call are left out of it and counted beside it (``unpriced_tasks``: unpriced
  is never $0, ``_cost_priced``), as are tasks still running (no outcome). **Success rate** = completed / finished
  (Wilson interval).
- **Waste**, disjoint so the parts add up: (1) the whole spend of failed and abandoned tasks; in completed tasks,
  (2) superseded attempts (every attempt of a call but its last: failed ones and retried-but-ok ones) and (3) cache
  misses (``_waste.py``). Tool spend is shown beside it, not as waste.
- Every dollar figure excludes unpriced attempts and tool calls and says how many there were (``unpriced_calls``,
  ``unpriced_tool_calls``, ``priced_share``); a figure with nothing priced under it is None, not $0.

Task-level figures come from the ``tasks`` roll-up, aggregated in SQL per group and outcome (exact DECIMAL sums, and
the moments of spend the delta intervals need: ``_cost_intervals``); only the tasks the waste is measured on, and
those of a bootstrapped group, are read one by one. Call-level waste comes from one pass over the measured tasks'
calls. Optionally grouped by a dimension
(``--by model``) and/or by time bucket of the task's start (``--bucket day``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, ClassVar

from pydantic import Field

from taskcost._internal.lazy import pl
from taskcost.analytics import _cost_intervals
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._cost_figures import (
    _CALL_SUMS,
    _coverage,
    _d,
    _measure,
    _per_completed,
    _priced_share,
    _share,
    _tool_spend,
)
from taskcost.analytics._cost_intervals import (
    ABANDONED,
    BOOTSTRAP_BUDGET_UNITS,
    COMPLETED,
    FAILED,
    KEYS,
    RUNNING,
    SPEND_MOMENTS,
    Rows,
    delta_intervals,
    group_intervals,
    interval,
    moments,
)
from taskcost.analytics._cost_priced import fully_priced
from taskcost.analytics._facts import Bucket, check_bucket, check_dimension
from taskcost.analytics._filters import CALL_DIMENSIONS, DIMENSIONS, Filters, Sql, any_of, task_scope, utc_text
from taskcost.analytics._groups import OTHER, Top, fold_note, max_groups_option, top_values
from taskcost.analytics._idle import idle_notes, read_bills
from taskcost.analytics._question import Options, Question
from taskcost.analytics._rates import model_rates
from taskcost.analytics._stats import MAX_CONFIDENCE, Interval, micro_usd, wilson_ci
from taskcost.analytics._waste import (
    COUNTS,
    SAMPLE_ATTEMPTS,
    Discounts,
    Slices,
    call_waste,
    call_windows,
    miss_discounts,
    priced_misses,
    sample_slices,
    task_hash,
    task_order,
    waste_notes,
)
from taskcost.store import ReadStore

__all__ = ["QUESTION", "Bucket", "CostAnswer", "CostOptions", "cost"]

MAX_GROUPS = 200
"""Rows of the groups table at most (the costliest; with ``bucket`` alone, the latest); the summary covers all. With
``by``, the values past ``max_groups`` are folded into one row in SQL first (``_groups``)."""

# outcome as a small integer: it groups a million tasks several times faster than the text
_OUTCOME = (
    "CAST(coalesce(CASE outcome WHEN 'completed' THEN 1 WHEN 'failed' THEN 2 WHEN 'abandoned' THEN 3 END, 0) "
    "AS TINYINT)"
)
_SHOWN = (
    "tasks", "completed", "success_rate", "spend_usd", "cost_per_completed_task_usd", "ci_low_usd", "ci_high_usd",
    "waste_usd", "waste_share", "attempts_per_completed_task", "unpriced_calls",
)  # fmt: skip
"""The groups' columns a terminal and the Cost page show (after the group's keys); CSV and JSON carry them all."""


class CostOptions(Options):
    by: str | None = Field(
        None,
        description="Group by this dimension (kind, agent_version, model, engine_version, ...): one row per value; "
        "for a call dimension a task whose calls disagree is its own row, `mixed`.",
    )
    bucket: Bucket | None = Field(
        None, description="A time series: one row per minute, hour, day or week (UTC) of the tasks' start."
    )
    confidence: float = Field(0.95, gt=0, le=MAX_CONFIDENCE, description="Confidence level of the intervals.")
    exact: bool = Field(
        False,
        description=f"Measure retries and cache misses on every completed task. Without it, above {SAMPLE_ATTEMPTS:,} "
        "attempts they are measured on the tasks started in a few evenly spaced time slices, and scaled to the rest.",
    )
    max_groups: int = max_groups_option()


@dataclass(frozen=True)
class CostAnswer(Answer):
    """Everything selected: its cost per completed task (and interval), spend and waste; the other headline figures
    (``figures``: the summary's keys, see docs/analytics.md); the waste table; one row per group when grouped."""

    question: ClassVar[str] = "cost"
    terminal_keys: ClassVar[tuple[str, ...]] = (
        "cost_per_completed_task_usd", "ci_low_usd", "ci_high_usd", "spend_usd", "tasks", "completed", "failed",
        "abandoned", "in_progress_tasks", "success_rate", "waste_usd", "waste_share", "tool_spend_usd",
        "gpu_idle_usd", "gpu_bill_usd", "attempts_per_completed_task", "resent_uncached_tokens_per_completed_task",
        "unpriced_calls", "priced_share",
    )  # fmt: skip
    cost_per_completed_task_usd: Decimal | None
    interval: Interval
    spend_usd: Decimal | None
    waste_usd: Decimal
    figures: dict[str, Any]
    waste: pl.DataFrame
    groups: pl.DataFrame | None = None

    def summary(self) -> dict[str, Any]:
        return dict(self.figures)

    def tables(self) -> list[Table]:
        out = [
            Table(
                "waste",
                "Waste: what bought nothing (disjoint parts), and tool spend beside it",
                self.waste,
                display=("kind", "amount_usd", "share_of_spend", "tasks", "calls", "tokens", "unpriced_calls"),
            )
        ]
        if self.groups is not None:
            keys = tuple(c for c in self.groups.columns if c in (*DIMENSIONS, "bucket"))
            out.insert(0, Table("groups", "Cost per completed task, per group", self.groups, display=keys + _SHOWN))
        return out


# -- SQL: the selected tasks, aggregated in parts -------------------------------------------------------------------
def _tasks(scope: Sql, group: Sql, bucket: str, filters: Filters) -> Sql:
    """``WITH`` the selected tasks (``t``): each one's group (``grp``: the value of ``by``, or ``other`` past
    ``max_groups``), time bucket, outcome code and figures, its unpriced tool calls and whether it is fully priced
    (``fp``: ``_cost_priced``)."""
    return (
        Sql("WITH ")
        + scope
        + Sql(",\nt AS (SELECT ")
        + group
        + Sql(
            f" AS grp, {bucket} AS bucket, {_OUTCOME} AS outcome, start_time, end_time, "
            "cost_usd, tool_cost_usd, coalesce(tool_calls, 0) AS tool_calls, coalesce(attempts, 0) AS attempts, "
            "coalesce(unpriced_calls, 0) AS unpriced_calls, "
            f"coalesce(unpriced_tool_calls, 0) AS unpriced_tools, {fully_priced()} AS fp, {task_hash()} AS h, "
            "project, task_id FROM scoped_tasks)\n"
        )
    )


_PARTS = f"""
SELECT grp, bucket, outcome, fp, count(*) AS n, coalesce(sum(cost_usd), 0) AS usd, count(cost_usd) AS priced,
    coalesce(sum(tool_cost_usd), 0) AS tool_usd, CAST(sum(tool_calls) AS BIGINT) AS tool_calls,
    CAST(sum(attempts) AS BIGINT) AS attempts, CAST(sum(unpriced_calls) AS BIGINT) AS unpriced,
    CAST(sum(unpriced_tools) AS BIGINT) AS unpriced_tools,
    min(start_time) AS first_start, max(start_time) AS last_start,
    CAST(coalesce(sum(attempts) FILTER (WHERE start_time IS NOT NULL), 0) AS BIGINT) AS timed_attempts,
    {SPEND_MOMENTS}
FROM t
GROUP BY grp, bucket, outcome, fp
"""
"""Per (group, bucket, outcome, fully priced or not): the additive task-level figures (exact DECIMAL sums), the start
times and attempts the waste sample is drawn from, and the spend's moments (the delta intervals)."""


def _sum(expr: pl.Expr, when: pl.Expr) -> pl.Expr:
    return expr.filter(when).sum()


def _group_figures(parts: pl.DataFrame, measured: pl.DataFrame) -> pl.DataFrame:
    """Per (grp, bucket): the task-level figures, folded from the parts (a few rows per group), and those of the tasks
    the waste was measured on (``measured``: one row per task)."""
    o, n, fp = pl.col("outcome"), pl.col("n"), pl.col("fp")
    done, ok, running = o != RUNNING, o == COMPLETED, o == RUNNING
    llm = pl.col("usd") - pl.col("tool_usd")  # cost = llm + tool, so their sums differ by exactly that
    groups = parts.group_by(KEYS).agg(
        tasks=_sum(n, done),
        completed=_sum(n, ok),
        failed=_sum(n, o == FAILED),
        abandoned=_sum(n, o == ABANDONED),
        in_progress=_sum(n, running),
        spend_usd=_sum(pl.col("usd"), done),
        priced_tasks=_sum(pl.col("priced"), done),
        in_progress_usd=_sum(pl.col("usd"), running),
        tool_usd=_sum(pl.col("tool_usd"), done),
        tool_calls=_sum(pl.col("tool_calls"), done),
        unpriced_tool_calls=_sum(pl.col("unpriced_tools"), done),
        priced_finished=_sum(n, done & fp),
        priced_completed=_sum(n, ok & fp),
        priced_finished_usd=_sum(pl.col("usd"), done & fp),
        unpriced_tasks=_sum(n, done & ~fp),
        unpriced_completed=_sum(n, ok & ~fp),
        failed_priced=_sum(pl.col("priced"), o == FAILED),
        abandoned_priced=_sum(pl.col("priced"), o == ABANDONED),
        failed_usd=_sum(pl.col("usd"), o == FAILED),
        failed_task_attempts=_sum(pl.col("attempts"), o == FAILED),
        failed_task_unpriced=_sum(pl.col("unpriced"), o == FAILED),
        abandoned_usd=_sum(pl.col("usd"), o == ABANDONED),
        abandoned_task_attempts=_sum(pl.col("attempts"), o == ABANDONED),
        abandoned_task_unpriced=_sum(pl.col("unpriced"), o == ABANDONED),
        attempts=_sum(pl.col("attempts"), done),
        unpriced_calls=_sum(pl.col("unpriced"), done),
        in_progress_unpriced=_sum(pl.col("unpriced"), running),
        completed_llm_usd=_sum(llm, ok),
    )
    sampled = measured.group_by(KEYS).agg(
        sampled_completed=pl.len().cast(pl.Int64),
        sampled_llm_usd=pl.col("cost_usd").sum() - pl.col("tool_cost_usd").sum(),
    )
    joined = groups.join(sampled, on=KEYS, how="left", nulls_equal=True)
    return joined.with_columns(pl.col("sampled_completed").fill_null(0))


# -- exact arithmetic --------------------------------------------------------------------------------------------
def _row(r: dict[str, Any], by: str | None, bucket: str | None) -> dict[str, Any]:
    """A groups-table row (interval columns are added once the rows to show are known)."""
    out: dict[str, Any] = {}
    if by is not None:
        out[by] = r["grp"]
    if bucket is not None:
        out["bucket"] = r["bucket"]
    completed, attempts = int(r["completed"]), int(r["attempts"])
    return out | {
        "tasks": int(r["tasks"]),
        "completed": completed,
        "failed": int(r["failed"]),
        "abandoned": int(r["abandoned"]),
        "in_progress": int(r["in_progress"]),
        "success_rate": None if not r["tasks"] else completed / int(r["tasks"]),
        "spend_usd": r["spend"],
        "cost_per_completed_task_usd": _per_completed(r),
        "waste_usd": r["waste_usd"],
        "waste_share": _share(r["waste_usd"], r["spend"]),
        "failed_tasks_usd": r["failed_tasks_usd"],
        "superseded_attempts_usd": r["superseded_usd"],
        "cache_miss_usd": r["cache_miss_usd"],
        "tool_spend_usd": _tool_spend(r),
        "attempts_per_completed_task": None if not completed else attempts / completed,
        "resent_uncached_tokens_per_completed_task": None if not completed else r["resent_uncached_tokens"] / completed,
        "unpriced_calls": int(r["unpriced_calls"]),
        "priced_share": _priced_share(r),
        **_coverage(r),
    }


_GROUP_MONEY = (
    "spend_usd",
    "cost_per_completed_task_usd",
    "waste_usd",
    "failed_tasks_usd",
    "superseded_attempts_usd",
    "cache_miss_usd",
    "tool_spend_usd",
)


# -- the question ------------------------------------------------------------------------------------------------
def _shown(rows: pl.DataFrame, by: str | None, bucket: str | None, folded: bool) -> pl.DataFrame:
    """The groups to show, at most ``MAX_GROUPS``: the costliest (with ``bucket`` alone, the latest), in display
    order (by spend, the ``other`` row of a fold last; by group and time when bucketed)."""
    if by is None:
        return rows.sort("bucket", nulls_last=True).tail(MAX_GROUPS)
    rest = (pl.col("grp") == OTHER).fill_null(False) & pl.lit(folded)
    ranked = rows.sort([rest, "spend", "grp", "bucket"], descending=[False, True, False, False], nulls_last=True)
    ranked = ranked.head(MAX_GROUPS)
    return ranked if bucket is None else ranked.sort([rest, "grp", "bucket"], nulls_last=True)


def _waste_table(t: dict[str, Any], gpu: dict[str, Any]) -> pl.DataFrame:
    """The waste parts, tool spend beside them and the idle GPU cost (``gpu_idle``: the clusters' bills no call
    used, in no task's spend; None when the store gives no bills), neither of them waste."""
    spend = t["spend"]

    def line(kind: str, usd: Decimal | None, tasks: int | None, calls: int | None, tokens: int | None,
             unpriced_calls: int, unpriced_tokens: int | None, waste: bool) -> dict[str, Any]:  # fmt: skip
        return {
            "kind": kind,
            "amount_usd": usd,
            "share_of_spend": _share(usd, spend),
            "tasks": tasks,
            "calls": calls,
            "tokens": tokens,
            "unpriced_calls": unpriced_calls,
            "unpriced_tokens": unpriced_tokens,
            "is_waste": waste,
        }

    m = t["measured"]
    # a kind of task none of whose tasks has a priced part has no dollar figure (not $0)
    failed_usd = _d(t["failed_usd"]) if t["failed_priced"] or not t["failed"] else None
    abandoned_usd = _d(t["abandoned_usd"]) if t["abandoned_priced"] or not t["abandoned"] else None
    rows = [
        line("failed_tasks", failed_usd, int(t["failed"]), int(t["failed_task_attempts"]), None,
             int(t["failed_task_unpriced"]), None, True),
        line("abandoned_tasks", abandoned_usd, int(t["abandoned"]), int(t["abandoned_task_attempts"]), None,
             int(t["abandoned_task_unpriced"]), None, True),
        line("failed_attempts", t["failed_attempts_usd"] if m else None, None, t["failed_attempts"],
             t["failed_attempts_tokens"], t["failed_attempts_unpriced"], None, True),
        line("retried_attempts", t["retried_attempts_usd"] if m else None, None, t["retried_attempts"],
             t["retried_attempts_tokens"], t["retried_attempts_unpriced"], None, True),
        line("cache_misses", t["cache_miss_usd"], None, t["missed_calls"],
             t["missed_tokens"] + t["missed_tokens_unpriced_calls"],
             t["missed_unpriced_calls"], t["missed_unpriced_tokens"], True),
        line("total_waste", t["waste_usd"], int(t["failed"]) + int(t["abandoned"]), None, None,
             int(t["failed_task_unpriced"]) + int(t["abandoned_task_unpriced"]) + t["failed_attempts_unpriced"]
             + t["retried_attempts_unpriced"] + t["missed_unpriced_calls"], t["missed_unpriced_tokens"], True),
        line("tool_spend", _tool_spend(t), None, int(t["tool_calls"]), None, int(t["unpriced_tool_calls"]), None,
             False),
        line("gpu_idle", gpu["gpu_idle_usd"], None, None, None, 0, None, False),
    ]  # fmt: skip
    schema: dict[str, Any] = {
        "kind": pl.String,
        "amount_usd": pl.Decimal(38, 12),
        "share_of_spend": pl.Float64,
        "tasks": pl.Int64,
        "calls": pl.Int64,
        "tokens": pl.Int64,
        "unpriced_calls": pl.Int64,
        "unpriced_tokens": pl.Int64,
        "is_waste": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def _total(
    raw: list[dict[str, Any]], measured: list[dict[str, Any]], sampled: bool, columns: list[str]
) -> dict[str, Any]:
    """The whole selection. Exact, or every group measured: the sum of the groups (each sampled group scaled on its
    own, which stays right when the sample's share differs by time bucket). Otherwise (a group had no task in the
    sample): one estimate over the whole sample, so the total still counts what those groups wasted."""
    whole: dict[str, Any] = dict.fromkeys(columns, 0) | {"grp": None, "bucket": None}
    for r in raw:
        for k, v in r.items():
            if k not in KEYS and v is not None:
                whole[k] = whole.get(k, 0) + v
    unmeasured = sum(1 for r in measured if not r["measured"])
    total = _measure(whole, sampled)
    if not unmeasured:  # the scaled parts: the sum of the groups' own estimates
        for k in (*_CALL_SUMS, "superseded_usd", "cache_miss_usd", "waste_usd", "superseded_attempts",
                  "resent_uncached_tokens"):  # fmt: skip
            total[k] = sum((r[k] for r in measured), Decimal(0) if k.endswith("usd") else 0)
    return total | {"unmeasured_groups": unmeasured}


def _call_figures(
    store: ReadStore, filters: Filters, tasks: Sql, parts: pl.DataFrame, options: CostOptions
) -> tuple[pl.DataFrame, pl.DataFrame, Slices | None, Discounts]:
    """The completed tasks measured (one row each: the sample, or all of them); the call-level waste per (grp, bucket,
    provider, model), its misses priced; the sample's slices (None: every completed task); the cache discounts."""
    strata = None if options.bucket is None else "bucket"
    slices = sample_slices(parts.filter(pl.col("outcome") == COMPLETED), options.exact, strata)
    member = Sql("TRUE") if slices is None else slices.sql()
    sql = tasks + Sql(
        f"SELECT h, grp, bucket, start_time, end_time, cost_usd, tool_cost_usd FROM t WHERE outcome = {COMPLETED} AND "
    )
    measured = frame(store, sql + member, filters, max_rows=100_000_000)
    windows = call_windows(measured.select("start_time", "end_time"))
    calls = call_waste(store, filters, measured["h"].to_list(), windows)
    calls = calls.join(measured.select("h", *KEYS).unique("h"), on="h", how="inner")
    per_model = calls.group_by(*KEYS, "provider", "model").agg(
        pl.col(c).sum() for c in (*COUNTS, "failed_attempts_usd", "retried_attempts_usd")
    )
    missed = (
        per_model.filter(pl.col("missed_tokens") > 0).select("provider", "model").unique().sort("provider", "model")
    )
    latest = measured["start_time"].max()
    at = latest if isinstance(latest, datetime) else datetime.now(UTC).replace(tzinfo=None)
    rates = model_rates(store, filters) if len(missed) else {}
    discounts = miss_discounts(list(missed.iter_rows()), rates, at)
    per_model = priced_misses(per_model.with_columns(pl.col(c).cast(pl.Int64) for c in COUNTS), discounts)
    return measured, per_model, slices, discounts


def _finished_rows(store: ReadStore, filters: Filters, tasks: Sql) -> Rows:
    """Reads the fully priced finished tasks of some groups one by one (for a bootstrap: a few thousand at most)."""

    def read(keys: list[tuple[Any, Any]] | None) -> pl.DataFrame:
        sql = tasks + Sql(
            f"SELECT grp, bucket, outcome, cost_usd, {task_order()} AS o FROM t WHERE outcome <> {RUNNING} AND fp"
        )
        if keys is not None:
            sql += Sql(" AND ") + any_of(
                Sql(
                    "grp IS NOT DISTINCT FROM ? AND bucket IS NOT DISTINCT FROM CAST(? AS TIMESTAMP)",
                    [g, None if b is None else utc_text(b)],
                )
                for g, b in keys
            )
        rows = frame(store, sql, filters, max_rows=100_000_000)
        return rows.with_columns(micro_usd=pl.Series(micro_usd(rows["cost_usd"]), dtype=pl.Int64))

    return read


def cost(store: ReadStore, filters: Filters, options: CostOptions) -> CostAnswer:
    """Cost per completed task (and its interval), success rate and waste, for everything ``filters`` select and,
    with ``options.by`` / ``options.bucket``, per group."""
    by, bucket = options.by, options.bucket
    check_dimension(by)
    check_bucket(store, filters, bucket)
    scope = task_scope(filters, (by,) if by in CALL_DIMENSIONS else ())
    top: Top | None = None
    group = Sql("CAST(NULL AS VARCHAR)")
    if by is not None:
        # the values with the most spend keep a row each, the rest are one row: ranked and folded in SQL
        top = top_values(
            store, filters, Sql("WITH ") + scope, "scoped_tasks", by,
            "sum(cost_usd) FILTER (WHERE outcome IS NOT NULL) AS spend, count(*) AS n", "spend DESC NULLS LAST, n DESC",
            options.max_groups,
        )  # fmt: skip
        group = top.expr(by)
    time = "CAST(NULL AS TIMESTAMP)" if bucket is None else f"date_trunc('{bucket}', start_time)"
    tasks = _tasks(scope, group, time, filters)
    parts = frame(store, tasks + Sql(_PARTS), filters, max_rows=100_000_000)
    parts = parts.with_columns(pl.col("n").cast(pl.Int64), y=(pl.col("outcome") == COMPLETED).cast(pl.Int8))
    measured, per_model, slices, discounts = _call_figures(store, filters, tasks, parts, options)
    per_group = per_model.group_by(KEYS).agg(pl.col(c).sum() for c in _CALL_SUMS)
    groups = _group_figures(parts, measured)
    joined = groups.join(per_group, on=KEYS, how="left", nulls_equal=True)
    raw = joined.to_dicts()
    measured_groups = [_measure(r, slices is not None) for r in raw]
    t = _total(raw, measured_groups, slices is not None, groups.columns)

    # the interval, as the point figure, is over the fully priced finished tasks (``_cost_priced``)
    finished = parts.filter((pl.col("outcome") != RUNNING) & pl.col("fp"))
    rows = _finished_rows(store, filters, tasks)
    whole = moments(finished.with_columns(_all=pl.lit(0)), ["_all"])
    n_finished = int(whole["n"].sum()) if len(whole) else 0
    if n_finished <= _cost_intervals.BOOTSTRAP_MAX_UNITS:
        ci = interval(rows(None), options.confidence) if n_finished else Interval.none()
    else:
        ci = delta_intervals(whole, ["_all"], options.confidence)[0]
    success = wilson_ci(int(t["completed"]), int(t["tasks"]), options.confidence)
    notes = waste_notes(t, slices, discounts) + _unpriced_notes(t)
    table = None
    folded = top is not None and top.folded > 0
    if (by is not None or bucket is not None) and measured_groups:
        table = _groups_table(
            measured_groups, moments(finished, KEYS), rows, by, bucket, options.confidence, ci, notes, folded
        )
    notes += fold_note(top, f"values of {by}", f"--{(by or '').replace('_', '-')}")
    figures = _summary(t, ci, success, options.confidence, slices)
    figures["groups"] = len(measured_groups) if table is not None else 0
    figures["folded_groups"] = top.folded if top is not None else 0
    bills = read_bills(store, filters)  # read once: the idle GPU cost, its own line (``_idle``)
    gpu = bills.line(store)
    figures |= gpu
    notes += idle_notes(gpu, bills.known, bills.whole)
    return CostAnswer(
        filters,
        cost_per_completed_task_usd=figures["cost_per_completed_task_usd"],
        interval=ci,
        spend_usd=figures["spend_usd"],
        waste_usd=figures["waste_usd"],
        figures=figures,
        waste=_waste_table(t, gpu),
        groups=table,
        notes=notes,
    )


def _groups_table(
    measured: list[dict[str, Any]],
    m: pl.DataFrame,
    rows: Rows,
    by: str | None,
    bucket: str | None,
    confidence: float,
    whole: Interval,
    notes: list[str],
    folded: bool,
) -> pl.DataFrame:
    everything = pl.DataFrame(measured, infer_schema_length=None)
    shown = _shown(everything, by, bucket, folded)
    keys = list(zip(shown["grp"].to_list(), shown["bucket"].to_list(), strict=True))
    intervals, skipped = group_intervals(m, keys, confidence, whole, rows)
    rows_out = [_row(r, by, bucket) | _ci_columns(i) for r, i in zip(shown.to_dicts(), intervals, strict=True)]
    money = dict.fromkeys((*_GROUP_MONEY, "ci_low_usd", "ci_high_usd"), pl.Decimal(38, 12))
    if len(everything) > len(shown):
        which = "the latest" if by is None else "the costliest"
        notes.append(f"showing {len(shown)} of {len(everything)} groups ({which}); the summary covers all")
    if skipped:
        notes.append(
            f"no interval for {skipped} smaller groups: the bootstrap budget ({BOOTSTRAP_BUDGET_UNITS:,} "
            "tasks) went to the costlier ones; narrow the filters to get theirs"
        )
    return pl.DataFrame(rows_out, schema_overrides=money, infer_schema_length=None)


def _ci_columns(i: Interval) -> dict[str, Any]:
    low, high = i.usd()
    return {"ci_low_usd": low, "ci_high_usd": high, "ci_method": i.method}


def _unpriced_notes(t: dict[str, Any]) -> list[str]:
    """What the per-task dollar figures and the tool spend leave out (``_cost_priced``): never counted as $0."""
    notes = []
    tools, unpriced_tools = int(t["tool_calls"]), int(t["unpriced_tool_calls"])
    if unpriced_tools:
        notes.append(
            f"coverage, tools: {tools - unpriced_tools:,} of {tools:,} tool calls of finished tasks priced; "
            f"{unpriced_tools:,} unpriced, not in the tool spend"
            + (" (none is priced: no tool spend figure, not $0)" if unpriced_tools >= tools else "")
        )
    if t["unpriced_tasks"]:
        completed, priced_completed = int(t["completed"]), int(t["priced_completed"])
        what = f"{int(t['unpriced_calls']):,} unpriced call attempts and {unpriced_tools:,} unpriced tool calls"
        notes.append(
            f"cost per completed task is over the {int(t['priced_finished']):,} of {int(t['tasks']):,} finished tasks "
            f"that are fully priced ({priced_completed:,} of {completed:,} completed): the other "
            f"{int(t['unpriced_tasks']):,} ({what} in them) are left out of it, not counted as $0"
            + ("; none of the completed tasks is fully priced, so there is no figure" if completed and not
               priced_completed else "")
        )  # fmt: skip
    return notes


def _summary(
    t: dict[str, Any], ci: Interval, success: Interval, confidence: float, slices: Slices | None
) -> dict[str, Any]:
    completed, tasks, attempts = int(t["completed"]), int(t["tasks"]), int(t["attempts"])
    low, high = ci.usd()
    return {
        "tasks": tasks,
        "completed": completed,
        "failed": int(t["failed"]),
        "abandoned": int(t["abandoned"]),
        "in_progress_tasks": int(t["in_progress"]),
        "in_progress_spend_usd": _d(t["in_progress_usd"]),
        "success_rate": None if not tasks else completed / tasks,
        "success_ci_low": None if success.method == "none" else success.low,
        "success_ci_high": None if success.method == "none" else success.high,
        "spend_usd": t["spend"],
        "cost_per_completed_task_usd": _per_completed(t),
        "ci_low_usd": low,
        "ci_high_usd": high,
        "ci_method": ci.method,
        "confidence": confidence,
        "waste_usd": t["waste_usd"],
        "waste_share": _share(t["waste_usd"], t["spend"]),
        "failed_tasks_usd": t["failed_tasks_usd"],
        "superseded_attempts_usd": t["superseded_usd"],
        "cache_miss_usd": t["cache_miss_usd"],
        "tool_spend_usd": _tool_spend(t),
        "attempts": attempts,
        "attempts_per_completed_task": None if not completed else attempts / completed,
        "superseded_attempts": int(t["superseded_attempts"]),
        "resent_uncached_tokens": int(t["resent_uncached_tokens"]),
        "resent_uncached_tokens_per_completed_task": (
            None if not completed else int(t["resent_uncached_tokens"]) / completed
        ),
        "unpriced_calls": int(t["unpriced_calls"]),
        "priced_share": _priced_share(t),
        **_coverage(t),
        "priced_completed_tasks": int(t["priced_completed"]),
        "priced_tasks_spend_usd": None if not t["priced_finished"] else _d(t["priced_finished_usd"]),
        "cache_miss_fingerprint_calls": int(t["fingerprint_calls"]),
        "cache_miss_estimated_calls": int(t["estimated_calls"]),
        "cache_miss_unpriced_tokens": int(t["missed_unpriced_tokens"]),
        "waste_sampled": slices is not None,
        "waste_measured_tasks": int(t["sampled_completed"]),
    }


def _run(store: ReadStore, filters: Filters, options: CostOptions) -> CostAnswer:
    return cost(store, filters, options)


QUESTION = Question(
    name="cost",
    help="cost per completed task, with its waste (failed tasks, retries, cache misses)",
    run=_run,
    options=CostOptions,
)
