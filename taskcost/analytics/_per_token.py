"""Per token vs per task, by model: the ranking flip.

A model's price list says what a token costs; what a team pays for is finished work. A model that is cheap per token
but needs many attempts, or fails tasks that must then be paid for anyway, can be the expensive one per completed
task. This question ranks each model (or provider, or engine) both ways and names where the two rankings disagree.

Definitions (docs/analytics.md, "Per token vs per task"):

- blended $/1M tokens = spend of the group's priced call attempts / (their input + output tokens) x 1e6, input
  inclusive of cache reads and writes. Unpriced attempts are in neither side (their count and tokens are beside it).
- per task, over the tasks whose calls all share the group's value (``task_scope``): $/completed task = spend of the
  finished tasks (LLM + tools; failed and abandoned ones too) / completed tasks; success rate = completed / finished;
  attempts per completed task = call attempts of the finished tasks / completed tasks. Tasks whose calls disagree are
  ``mixed``: one row, never ranked (their calls still count per token, in each group's own row).
- rank 1 is the cheapest on each measure (ties share the lower rank); rank change = per-task rank - per-token rank,
  over the groups that can be ranked both ways.

Two aggregates: the calls' (from the hourly roll-up where it can: ``hours_scope``) and the tasks', in parts of one
outcome (exact DECIMAL sums, and the moments of spend the delta interval of $/completed task needs). Only a group of
at most ``BOOTSTRAP_MAX_UNITS`` finished tasks is read task by task, for its bootstrap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any, ClassVar, Literal

from pydantic import Field

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import Answer, Table, frame
from taskcost.analytics._cost_intervals import SPEND_MOMENTS, delta_intervals, moments
from taskcost.analytics._cost_priced import fully_priced
from taskcost.analytics._filters import CALL_DIMENSIONS, MIXED, Filters, Sql, any_of, hours_scope, task_scope
from taskcost.analytics._groups import OTHER, Top, capped, fold_note, max_groups_option, top_values, unranked
from taskcost.analytics._idle import UNKNOWN_NOTE, group_idle
from taskcost.analytics._question import Options, Question
from taskcost.analytics._stats import BOOTSTRAP_MAX_UNITS, MAX_CONFIDENCE, Interval, micro_usd, ratio_ci, wilson_ci
from taskcost.analytics._waste import task_order
from taskcost.pricing import format_usd
from taskcost.store import ReadStore

__all__ = ["QUESTION", "PerTokenAnswer", "PerTokenOptions", "per_token"]

_MICRO = Decimal("0.000001")


class PerTokenOptions(Options):
    by: Literal["model", "provider", "engine"] = Field(
        "model", description="What to rank: each model, provider or inference engine."
    )
    confidence: float = Field(
        0.95,
        gt=0,
        le=MAX_CONFIDENCE,
        description="Confidence level of the interval of $/completed task (and of the success rate).",
    )
    min_completed: int = Field(
        1,
        ge=1,
        le=1_000_000_000,
        description="Rank only groups with at least this many completed tasks (the others are listed).",
    )
    max_groups: int = max_groups_option()


@dataclass(frozen=True)
class PerTokenAnswer(Answer):
    """Each group's blended $/1M tokens and $/completed task, both rankings and the change; ``headline`` names the
    flips in words, ``flips`` lists them (largest change first; ``clear``: the group's $/completed task interval
    overlaps none of the groups it changed places with, so the flip is not noise)."""

    question: ClassVar[str] = "per-token"
    by: str
    ranking: pl.DataFrame
    detail: pl.DataFrame
    headline: str
    flips: list[dict[str, Any]]
    totals: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        ranked = self.ranking.filter(pl.col("per_token_rank").is_not_null())

        def cheapest(rank: str) -> Any:
            first = ranked.filter(pl.col(rank) == 1).sort(self.by)
            return first[self.by][0] if first.height else None

        return {
            "by": self.by,
            "headline": self.headline,
            "ranked_groups": ranked.height,
            "cheapest_per_token": cheapest("per_token_rank"),
            "cheapest_per_completed_task": cheapest("per_task_rank"),
            "rank_changes": len(self.flips),
            **self.totals,
            "flips": self.flips,
        }

    def tables(self) -> list[Table]:
        hidden = ("unpriced_attempts", "task_unpriced_attempts", "loaded_per_token_rank", "loaded_per_task_rank")
        ranking = [c for c in _RANKING if c not in hidden]
        detail = ("call_attempts", "unpriced_attempts", "priced_input_tokens", "priced_output_tokens", "call_spend_usd",
                  "finished_tasks", "completed_tasks", "task_spend_usd", "task_unpriced_attempts")  # fmt: skip
        # a terminal shows the main columns (coverage in the summary and the detail); CSV and JSON carry them all
        return [
            Table("ranking", f"Per token vs per completed task, by {self.by}", self.ranking, (self.by, *ranking)),
            Table("detail", f"Counts, tokens, spend and intervals, by {self.by}", self.detail, (self.by, *detail)),
        ]


# -- SQL ------------------------------------------------------------------------------------------------------------
# ``{value}``: the group's value, after the fold of the values past max_groups (``_groups``)
_CALLS = """
       CASE WHEN priced THEN 0 ELSE 1 END AS unpriced,
       CAST(sum(attempts) AS BIGINT) AS attempts,
       sum(cost_usd) AS spend_usd,
       CAST(coalesce(sum(input_tokens), 0) AS BIGINT) AS input_tokens,
       CAST(coalesce(sum(output_tokens), 0) AS BIGINT) AS output_tokens
FROM scoped_hours
GROUP BY value, priced
"""

_TASKS = f"""
       CASE WHEN outcome IS NULL THEN 0 ELSE 1 END AS finished,
       CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END AS y,
       {fully_priced()} AS fp,
       count(*) AS n,
       sum(cost_usd) AS cost_usd, count(cost_usd) AS priced,
       sum(tool_cost_usd) AS tool_cost_usd, count(tool_cost_usd) AS tool_priced,
       CAST(coalesce(sum(attempts), 0) AS BIGINT) AS attempts,
       CAST(coalesce(sum(unpriced_calls), 0) AS BIGINT) AS unpriced_calls,
       {SPEND_MOMENTS}
FROM scoped_tasks
GROUP BY value, finished, y, fp
"""

_FINISHED = """ AS value, cost_usd, CASE WHEN outcome = 'completed' THEN 1 ELSE 0 END AS completed, {order} AS o
FROM scoped_tasks
WHERE outcome IS NOT NULL AND {fp}) AS f
WHERE """


def _top(store: ReadStore, filters: Filters, by: str, limit: int) -> Top:
    """The values of ``by`` that keep a row each: the most call spend first (then the most attempts), among the
    selected calls' and tasks' values; ``mixed`` and the empty value always keep theirs (never ranked anyway)."""
    col = CALL_DIMENSIONS[by]
    ctes = Sql("WITH ") + hours_scope(filters) + Sql(", ") + task_scope(filters, dimensions=(by,)) + Sql(" ")
    source = (
        f"(SELECT {col} AS v, cost_usd AS usd, attempts FROM scoped_hours"
        f" UNION ALL SELECT {by} AS v, NULL AS usd, 0 AS attempts FROM scoped_tasks) AS u"
    )
    measures = "sum(usd) AS spend, sum(attempts) AS n"
    return top_values(
        store, filters, ctes, source, "v", measures, "spend DESC NULLS LAST, n DESC", limit, keep=(MIXED,),
        keep_null=True,
    )  # fmt: skip


def _calls_sql(filters: Filters, by: str, top: Top) -> Sql:
    """Per group and priced or not: call attempts, spend and tokens (plain sums, cheaper than a conditional sum per
    column; ``_call_groups`` puts a group's two rows side by side)."""
    value = top.expr(CALL_DIMENSIONS[by])
    return Sql("WITH ") + hours_scope(filters) + Sql("\nSELECT ") + value + Sql(" AS value," + _CALLS)


def _call_groups(calls: pl.DataFrame) -> pl.DataFrame:
    """Per group: call attempts, priced ones, their spend and tokens, and the unpriced ones' tokens."""
    priced, unpriced = pl.col("unpriced") == 0, pl.col("unpriced") == 1
    return calls.group_by("value").agg(
        call_attempts=pl.col("attempts").sum().cast(pl.Int64),
        priced_attempts=pl.col("attempts").filter(priced).sum().cast(pl.Int64),
        call_spend_usd=pl.col("spend_usd").filter(priced).first().cast(pl.Decimal(38, 12)),
        priced_input_tokens=pl.col("input_tokens").filter(priced).sum().cast(pl.Int64),
        priced_output_tokens=pl.col("output_tokens").filter(priced).sum().cast(pl.Int64),
        unpriced_input_tokens=pl.col("input_tokens").filter(unpriced).sum().cast(pl.Int64),
        unpriced_output_tokens=pl.col("output_tokens").filter(unpriced).sum().cast(pl.Int64),
    )


def _task_ctes(filters: Filters, by: str) -> Sql:
    """``WITH`` the selected tasks (their ``unpriced_calls`` and ``unpriced_tool_calls``: ``_cost_priced``)."""
    return Sql("WITH ") + task_scope(filters, dimensions=(by,))


def _tasks_sql(filters: Filters, by: str, top: Top) -> Sql:
    return _task_ctes(filters, by) + Sql("\nSELECT ") + top.expr(by) + Sql(" AS value," + _TASKS)


def _read(store: ReadStore, filters: Filters, by: str, limit: int) -> tuple[Top, pl.DataFrame, pl.DataFrame]:
    """The calls' and the tasks' parts per group, and the fold they were read with: unfolded when both came back
    whole with few enough values (``capped``: a value has at most 2 rows of calls and 6 of tasks; ``mixed`` and the
    empty value are never folded), else ranked (``_top``) and read again, folded."""
    none = Top((), 0, limit)
    calls = frame(store, capped(_calls_sql(filters, by, none), 2 * (limit + 3)), filters)
    tasks = frame(store, capped(_tasks_sql(filters, by, none), 6 * (limit + 3)), filters)
    top = None
    if calls.height <= 2 * (limit + 3) and tasks.height <= 6 * (limit + 3):
        values = [*calls["value"].to_list(), *tasks["value"].to_list()]
        top = unranked(values, limit, keep=(MIXED,), keep_null=True)
    if top is None:
        top = _top(store, filters, by, limit)
        calls = frame(store, _calls_sql(filters, by, top), filters)
        tasks = frame(store, _tasks_sql(filters, by, top), filters)
    return top, calls, tasks.with_columns(pl.col("n").cast(pl.Int64))


def _task_groups(parts: pl.DataFrame) -> pl.DataFrame:
    """Per group: task counts and the finished tasks' spend (exact Decimal sums), attempts and unpriced attempts. The
    spend of $/completed task is the fully priced finished tasks' (``_cost_priced``), the others counted beside it."""
    fin, fp = pl.col("finished") == 1, pl.col("fp")

    def money(column: str, priced: str) -> pl.Expr:  # NULL (not $0) when no finished task has a priced amount
        return (
            pl.when(pl.col(priced).filter(fin).sum() > 0)
            .then(pl.col(column).filter(fin).sum())
            .otherwise(None)
            .cast(pl.Decimal(38, 12))
        )

    return parts.group_by("value").agg(
        tasks=pl.col("n").sum(),
        finished_tasks=pl.col("n").filter(fin).sum(),
        completed_tasks=pl.col("n").filter(pl.col("y") == 1).sum(),
        priced_completed_tasks=pl.col("n").filter((pl.col("y") == 1) & fp).sum(),
        unpriced_tasks=pl.col("n").filter(fin & ~fp).sum(),
        unpriced_completed_tasks=pl.col("n").filter((pl.col("y") == 1) & ~fp).sum(),
        task_spend_usd=pl.when(pl.col("n").filter(fin & fp).sum() > 0)
        .then(pl.col("cost_usd").filter(fin & fp).sum())
        .otherwise(None)
        .cast(pl.Decimal(38, 12)),
        tool_spend_usd=money("tool_cost_usd", "tool_priced"),
        task_attempts=pl.col("attempts").filter(fin).sum(),
        task_unpriced_attempts=pl.col("unpriced_calls").filter(fin).sum(),
    )


def _intervals(
    store: ReadStore, filters: Filters, by: str, parts: pl.DataFrame, confidence: float, top: Top
) -> dict[Any, Interval]:
    """The interval of $/completed task of each group (``ratio_ci`` over its finished tasks: spend, completed): the
    delta method from the parts' moments above ``BOOTSTRAP_MAX_UNITS`` tasks, else a bootstrap of its tasks, read in
    one query for all such groups (ordered by ``task_order``: the same data resamples the same way, on any engine)."""
    m = moments(parts.filter((pl.col("finished") == 1) & pl.col("fp")), ["value"])
    out = delta_intervals(m.filter(pl.col("n") > BOOTSTRAP_MAX_UNITS), ["value"], confidence)
    small = m.filter(pl.col("n") <= BOOTSTRAP_MAX_UNITS)["value"].to_list()
    if not small:
        return out
    which = any_of(Sql("value IS NOT DISTINCT FROM ?", [value]) for value in small)
    sql = _task_ctes(filters, by) + Sql("\nSELECT * FROM (SELECT ") + top.expr(by)
    sql += Sql(_FINISHED.format(order=task_order(), fp=fully_priced())) + which
    rows = frame(store, sql + Sql("\nORDER BY o"), filters)
    # a resample without a completed task has no ratio (NaN), and then neither has the interval: "none" below
    for key, part in rows.partition_by("value", as_dict=True, maintain_order=True).items():
        out[key[0]] = ratio_ci(micro_usd(part["cost_usd"]), part["completed"].to_numpy(), confidence)
    return out


def _ratio(numerator: Decimal | None, denominator: int, scale: int = 1) -> Decimal | None:
    """``numerator * scale / denominator`` in Decimal, to micro-dollars (None without a numerator or denominator)."""
    if numerator is None or not denominator:
        return None
    with localcontext() as ctx:
        ctx.prec = 60
        return (Decimal(numerator) * scale / denominator).quantize(_MICRO, rounding=ROUND_HALF_EVEN)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _unranked_because(row: dict[str, Any], by: str, min_completed: int, folded: int) -> str | None:
    """Why a group is listed but not ranked (None: it is ranked both ways)."""
    if row["value"] is None:
        return f"no {by}"
    if row["value"] == MIXED:
        return f"tasks using several {by}s"
    if folded and row["value"] == OTHER:
        return f"{folded:,} {by}s added up (past max_groups)"
    tokens = sum(row[c] for c in ("priced_input_tokens", "priced_output_tokens", "unpriced_input_tokens",
                                  "unpriced_output_tokens"))  # fmt: skip
    if row["per_mtok_usd"] is None and not tokens:
        # attempts no response came back for (a 429, a timeout) keep the name they asked for (`gpt-4o`); a task
        # that was answered counts under the model that answered (docs/analytics.md, Filters)
        return "only unanswered attempts" + (
            "" if row["tasks"] else f": their tasks count under the {by} that answered"
        )
    if row["per_mtok_usd"] is None:
        return "no priced calls"
    if not row["tasks"]:
        return f"no task used only this {by}"
    if row["completed_tasks"] < min_completed:
        return f"fewer than {min_completed} completed tasks"
    if row["per_completed_task_usd"] is None:
        return "no fully priced completed task"
    return None


def _groups(
    calls: pl.DataFrame,
    tasks: pl.DataFrame,
    intervals: dict[Any, Interval],
    options: PerTokenOptions,
    folded: int,
    idle: tuple[dict[Any, Decimal], dict[Any, Decimal]] | None,
) -> pl.DataFrame:
    """One row per group (calls and tasks joined on the value), with the ratios in Decimal, attributed and fully
    loaded (``idle``: each group's part of the idle GPU cost, and its per-task part; None: unknown). Python runs over
    the groups here (a few rows), never over calls or tasks."""
    joined = calls.join(tasks, on="value", how="full", nulls_equal=True, coalesce=True)
    out = []
    for r in joined.iter_rows(named=True):
        r = {k: (0 if v is None and k.endswith(("attempts", "tokens", "tasks")) else v) for k, v in r.items()}
        tokens = r["priced_input_tokens"] + r["priced_output_tokens"]
        ci = intervals.get(r["value"], Interval.none())
        low, high = ci.usd()
        rate = wilson_ci(r["completed_tasks"], r["finished_tasks"], options.confidence)
        finished = r["finished_tasks"]
        own = None if idle is None else idle[0].get(r["value"], Decimal(0))
        per_task = None if idle is None else idle[1].get(r["value"], Decimal(0))
        loaded = None if own is None or r["call_spend_usd"] is None else r["call_spend_usd"] + own
        loaded_tasks = None if per_task is None or r["task_spend_usd"] is None else r["task_spend_usd"] + per_task
        row = {
            **r,
            "per_mtok_usd": _ratio(r["call_spend_usd"], tokens, 1_000_000),
            "per_completed_task_usd": _ratio(r["task_spend_usd"], r["priced_completed_tasks"]),
            "idle_usd": own,
            "task_idle_usd": per_task,
            "loaded_usd_per_mtok": _ratio(loaded, tokens, 1_000_000),
            "loaded_usd_per_completed_task": _ratio(loaded_tasks, r["priced_completed_tasks"]),
            "per_completed_task_low_usd": low,
            "per_completed_task_high_usd": high,
            "ci_method": ci.method if (low, high) != (None, None) else "none",
            "success_rate": r["completed_tasks"] / finished if finished else None,
            "success_rate_low": _finite(rate.low),
            "success_rate_high": _finite(rate.high),
            "attempts_per_completed_task": r["task_attempts"] / r["completed_tasks"] if r["completed_tasks"] else None,
            "running_tasks": r["tasks"] - finished,
        }
        row["unranked_because"] = _unranked_because(row, options.by, options.min_completed, folded)
        out.append(row)
    schema: dict[str, Any] = {
        "value": pl.String,
        **dict.fromkeys(["call_attempts", "priced_attempts", "priced_input_tokens", "priced_output_tokens"], pl.Int64),
        **dict.fromkeys(["unpriced_input_tokens", "unpriced_output_tokens", "tasks", "finished_tasks"], pl.Int64),
        **dict.fromkeys(["completed_tasks", "running_tasks", "task_attempts", "task_unpriced_attempts"], pl.Int64),
        **dict.fromkeys(["priced_completed_tasks", "unpriced_tasks", "unpriced_completed_tasks"], pl.Int64),
        **dict.fromkeys(["call_spend_usd", "task_spend_usd", "tool_spend_usd"], pl.Decimal(38, 12)),
        **dict.fromkeys(["idle_usd", "task_idle_usd"], pl.Decimal(38, 12)),
        **dict.fromkeys(["per_mtok_usd", "per_completed_task_usd"], pl.Decimal(38, 6)),
        **dict.fromkeys(["loaded_usd_per_mtok", "loaded_usd_per_completed_task"], pl.Decimal(38, 6)),
        **dict.fromkeys(["per_completed_task_low_usd", "per_completed_task_high_usd"], pl.Decimal(38, 6)),
        "ci_method": pl.String,
        **dict.fromkeys(["success_rate", "success_rate_low", "success_rate_high"], pl.Float64),
        "attempts_per_completed_task": pl.Float64,
        "unranked_because": pl.String,
    }
    df = pl.DataFrame([{k: row[k] for k in schema} for row in out], schema=schema)
    ok = pl.col("unranked_because").is_null()
    return df.with_columns(
        per_token_rank=pl.when(ok).then(pl.col("per_mtok_usd")).rank("min").cast(pl.Int64),
        per_task_rank=pl.when(ok).then(pl.col("per_completed_task_usd")).rank("min").cast(pl.Int64),
        loaded_per_token_rank=pl.when(ok).then(pl.col("loaded_usd_per_mtok")).rank("min").cast(pl.Int64),
        loaded_per_task_rank=pl.when(ok).then(pl.col("loaded_usd_per_completed_task")).rank("min").cast(pl.Int64),
    ).with_columns(
        rank_change=pl.col("per_task_rank") - pl.col("per_token_rank"),
        unpriced_attempts=pl.col("call_attempts") - pl.col("priced_attempts"),
    )


def _place(rank: int, last: int, measure: str) -> str:
    if rank == 1:
        return f"the cheapest {measure} (rank 1)"
    if rank == last:
        return f"the most expensive {measure} (rank {rank})"
    return f"rank {rank} of {last} {measure}"


def _clear(group: dict[str, Any], ranked: list[dict[str, Any]]) -> bool | None:
    """Whether a group's $/completed task interval is clear of the interval of every group it changed places with
    (cheaper per token but dearer per task, or the reverse): False when one overlaps (the flip may be noise), None
    when an interval is missing (too few tasks)."""
    lo, hi = "per_completed_task_low_usd", "per_completed_task_high_usd"
    partners = [
        o
        for o in ranked
        if (o["per_token_rank"] - group["per_token_rank"]) * (o["per_task_rank"] - group["per_task_rank"]) < 0
    ]
    if any(g[lo] is None or g[hi] is None for g in (group, *partners)):
        return None
    return all(group[hi] < o[lo] or o[hi] < group[lo] for o in partners)


def _flips(groups: pl.DataFrame, by: str) -> tuple[str, list[dict[str, Any]]]:
    """The rank changes in words, largest first, and the headline sentence."""
    ranked = groups.filter(pl.col("per_token_rank").is_not_null())
    if ranked.height == 0:
        return f"no {by} can be ranked both per token and per completed task (see unranked_because)", []
    if ranked.height == 1:
        return f"only {ranked['value'][0]} can be ranked both ways: nothing to compare it with", []
    last_token = ranked.select(pl.col("per_token_rank").max()).item()
    last_task = ranked.select(pl.col("per_task_rank").max()).item()
    changed = ranked.filter(pl.col("rank_change") != 0).sort(
        [pl.col("rank_change").abs(), "per_token_rank", "value"], descending=[True, False, False]
    )
    rows = list(ranked.iter_rows(named=True))  # the ranked groups: a few rows
    flips = []
    for r in changed.iter_rows(named=True):
        sentence = (
            f"{r['value']} is {_place(r['per_token_rank'], last_token, 'per token')} "
            f"but {_place(r['per_task_rank'], last_task, 'per completed task')}"
        )
        clear = _clear(r, rows)
        if clear is False:
            sentence += " (the $/completed task intervals overlap: this may be noise)"
        flips.append(
            {
                by: r["value"],
                "per_token_rank": r["per_token_rank"],
                "per_task_rank": r["per_task_rank"],
                "rank_change": r["rank_change"],
                "clear": clear,
                "sentence": sentence,
            }
        )
    if not flips:
        first = ranked.sort("per_token_rank", "value")["value"][0]
        return f"the rankings agree: {first} is the cheapest both per token and per completed task", []
    headline = "; ".join(f["sentence"] for f in flips[:3])
    if len(flips) > 3:
        headline += f" (and {len(flips) - 3} more rank changes)"
    return headline, flips


def _notes(groups: pl.DataFrame, options: PerTokenOptions) -> list[str]:
    by = options.by
    notes = []
    calls, unpriced = int(groups["call_attempts"].sum()), int(groups["unpriced_attempts"].sum())
    if unpriced:
        notes.append(
            f"{unpriced:,} of {calls:,} call attempts are unpriced: left out of the spend and of the tokens of "
            "$/1M tokens alike (unpriced_attempts in each row)"
        )
    task_unpriced = int(groups["task_unpriced_attempts"].sum())
    if task_unpriced:
        notes.append(
            f"{task_unpriced:,} call attempts of finished tasks are unpriced: not in the spend of $/completed task "
            "(task_unpriced_attempts in each row)"
        )
    left_out = int(groups["unpriced_tasks"].sum())
    if left_out:
        notes.append(
            f"$/completed task is over the fully priced finished tasks only: {left_out:,} finished task(s) with an "
            "unpriced call attempt or tool call are left out of it, not counted as $0 (unpriced_tasks in each row)"
        )
    running = int(groups["running_tasks"].sum())
    if running:
        notes.append(f"{running:,} task(s) still running: left out of the per-task figures")
    mixed = groups.filter(pl.col("value") == MIXED)
    if mixed.height and mixed["tasks"][0]:
        notes.append(
            f"{mixed['tasks'][0]:,} tasks used more than one {by}: shown as '{MIXED}', not ranked (their calls still "
            f"count per token in each {by}'s row)"
        )
    if groups.filter(pl.col("value").is_null()).height:
        notes.append(f"calls and tasks with no {by} are listed as an empty {by}, not ranked")
    few = groups.filter(pl.col("unranked_because") == f"fewer than {options.min_completed} completed tasks").height
    if few:
        notes.append(f"{few} {by}(s) with fewer than {options.min_completed} completed tasks are listed but not ranked")
    notes.append(
        f"$/completed task interval: {options.confidence:.0%}, resampling finished tasks (seeded bootstrap up to "
        f"{BOOTSTRAP_MAX_UNITS:,} tasks, delta method above)"
    )
    return notes


def _idle_notes(totals: dict[str, Any]) -> list[str]:
    """Which figure ranks, and what the fully loaded ones add (or that the bills are unknown)."""
    idle, shared = totals["gpu_idle_usd"], totals["gpu_idle_shared_usd"]
    if idle is None:
        return [UNKNOWN_NOTE + "; the loaded_* columns are empty, the attributed figures rank"]
    notes = [
        "ranks use the attributed figures (per_mtok_usd, per_completed_task_usd: what more traffic would cost); "
        "loaded_usd_per_mtok and loaded_usd_per_completed_task add each self-hosted group's part of the idle GPU "
        f"cost ({format_usd(shared, places=2)} shared: each cluster window's idle, pro rata to the groups' attributed "
        "dollars in it): what was paid. loaded_per_token_rank and loaded_per_task_rank rank those"
    ]
    if idle - shared >= Decimal("0.005"):
        notes.append(
            f"{format_usd(idle - shared, places=2)} of the {format_usd(idle, places=2)} idle GPU cost is in cluster "
            "windows no selected call ran in: in no group's loaded figure (`taskcost cost` shows it all)"
        )
    return notes


_RANKING = [
    "per_token_rank",
    "per_task_rank",
    "rank_change",
    "per_mtok_usd",
    "unpriced_attempts",
    "per_completed_task_usd",
    "per_completed_task_low_usd",
    "per_completed_task_high_usd",
    "loaded_usd_per_mtok",
    "loaded_usd_per_completed_task",
    "loaded_per_token_rank",
    "loaded_per_task_rank",
    "task_unpriced_attempts",
    "unpriced_tasks",
    "success_rate",
    "attempts_per_completed_task",
    "completed_tasks",
    "unranked_because",
]
_DETAIL = [
    "call_attempts",
    "unpriced_attempts",
    "priced_input_tokens",
    "priced_output_tokens",
    "unpriced_input_tokens",
    "unpriced_output_tokens",
    "call_spend_usd",
    "tasks",
    "running_tasks",
    "finished_tasks",
    "completed_tasks",
    "task_spend_usd",
    "tool_spend_usd",
    "idle_usd",
    "task_idle_usd",
    "priced_completed_tasks",
    "unpriced_completed_tasks",
    "task_attempts",
    "task_unpriced_attempts",
    "success_rate_low",
    "success_rate_high",
    "ci_method",
]


def per_token(store: ReadStore, filters: Filters, options: PerTokenOptions) -> PerTokenAnswer:
    """Each ``options.by`` group's blended $/1M tokens and $/completed task, ranked both ways, with the flips named."""
    by = options.by
    top, calls, parts = _read(store, filters, by, options.max_groups)
    intervals = _intervals(store, filters, by, parts, options.confidence, top)
    # the idle GPU cost, read once: each group's part of it (``_idle``), for the fully loaded figures
    bills, idle, task_idle = group_idle(store, filters, top.expr(f"c.{CALL_DIMENSIONS[by]}"), top.expr(by))
    loads = (idle, task_idle) if bills.known else None
    groups = _groups(_call_groups(calls), _task_groups(parts), intervals, options, top.folded, loads)
    other = (pl.col("value") == OTHER).fill_null(False) & pl.lit(top.folded > 0)
    groups = groups.sort(
        [pl.col("per_token_rank").is_null(), "per_token_rank", "per_task_rank", other, pl.col("value") == MIXED,
         "value"],
        nulls_last=True,
    )  # fmt: skip
    headline, flips = _flips(groups, by)
    finished = groups["finished_tasks"].sum()
    totals = {
        "call_attempts": int(groups["call_attempts"].sum()),
        "unpriced_attempts": int(groups["unpriced_attempts"].sum()),
        "finished_tasks": int(finished),
        "completed_tasks": int(groups["completed_tasks"].sum()),
        "running_tasks": int(groups["running_tasks"].sum()),
        "mixed_tasks": int(groups.filter(pl.col("value") == MIXED)["tasks"].sum()),
        "task_unpriced_attempts": int(groups["task_unpriced_attempts"].sum()),
        "priced_completed_tasks": int(groups["priced_completed_tasks"].sum()),
        "unpriced_tasks": int(groups["unpriced_tasks"].sum()),
        "unpriced_completed_tasks": int(groups["unpriced_completed_tasks"].sum()),
        "gpu_idle_usd": None if loads is None else bills.total_idle(idle),
        "gpu_idle_shared_usd": None if loads is None else sum(idle.values(), Decimal(0)),
        "ranking_basis": "attributed",
        "folded_groups": top.folded,
    }
    named = groups.rename({"value": by})
    return PerTokenAnswer(
        filters,
        by=by,
        ranking=named.select(by, *_RANKING),
        detail=named.select(by, *_DETAIL),
        headline=headline,
        flips=flips,
        totals=totals,
        notes=_notes(groups, options) + _idle_notes(totals) + fold_note(top, f"{by}s", f"--{by}"),
    )


QUESTION = Question(
    name="per-token", help="per token vs per task, by model: the ranking flip", run=per_token, options=PerTokenOptions
)
