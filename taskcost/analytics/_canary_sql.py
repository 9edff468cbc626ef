"""The canary's reads: each arm's calls (after their warm-up), their counts, the latency sample and the tasks."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._canary_stats import TASK_BOOTSTRAP_MAX_UNITS
from taskcost.analytics._cost_priced import fully_priced
from taskcost.analytics._filters import CALL_DIMENSIONS, TASK_DIMENSIONS, Filters, Sql, call_scope, task_scope, utc_text
from taskcost.store import ReadStore

__all__ = ["ARMS", "_arm_calls", "_counts", "_sample", "_task_frame"]

ARMS = ("baseline", "candidate")
_SAMPLE_SCALE = 1_000_000
"""A call is in the sample when ``hash(start_time) % 1e6`` is below ``1e6 · call_sample / successful calls``."""


def _arm_label(expr: str, baseline: str) -> Sql:
    return Sql(f"CASE WHEN {expr} = ? THEN 'baseline' ELSE 'candidate' END AS arm", [baseline])


def _warmup_condition(expr: str, time_column: str, cutoffs: dict[str, datetime], values: dict[str, str]) -> Sql:
    """Each arm from its own cut-off on (an arm without one: all of it)."""
    parts = []
    for arm in ARMS:
        if arm in cutoffs:
            params = [values[arm], utc_text(cutoffs[arm])]
            parts.append(Sql(f"({expr} = ? AND {time_column} >= CAST(? AS TIMESTAMP))", params))
        else:
            parts.append(Sql(f"{expr} = ?", [values[arm]]))
    return Sql(" AND (") + parts[0] + Sql(" OR ") + parts[1] + Sql(")")


def _arm_calls(
    filters: Filters, dim: str, values: dict[str, str], cutoffs: dict[str, datetime], sampled_below: int | None = None
) -> Sql:
    """CTEs ``scoped_calls`` and ``arm_calls`` (value, status, start_time, duration_s, ttft_s, input_tokens): the
    calls of both arms, ``value`` the dimension's. A task dimension is the call's task's value (as ``call_scope``
    filters it). ``sampled_below``: only calls whose start time hashes below it (a sample's widest fraction, applied
    before the join with the tasks)."""
    if dim in CALL_DIMENSIONS:
        expr, join = f"c.{CALL_DIMENSIONS[dim]}", ""
    else:
        expr, join = f"t.{TASK_DIMENSIONS[dim]}", " JOIN tasks AS t ON t.project = c.project AND t.task_id = c.task_id"
    sql = (
        Sql("WITH ")
        + call_scope(filters)
        + Sql(
            f",\narm_calls AS (SELECT {expr} AS value, c.status, c.start_time, c.duration_s, c.ttft_s, c.input_tokens "
            f"FROM scoped_calls AS c{join} WHERE {expr} IN (?, ?)",
            [values["baseline"], values["candidate"]],
        )
    )
    if sampled_below is not None:
        sql += Sql(f" AND hash(c.start_time) % {_SAMPLE_SCALE} < ?", [sampled_below])
    if cutoffs:
        sql += _warmup_condition(expr, "c.start_time", cutoffs, values)
    return sql + Sql(")")


# The arms' exact counts: grouped by the dimension's own value (a label per row would cost a third more).
_COUNTS = """
SELECT value, count(*) AS calls, sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS errors,
       min(start_time) AS first_call, max(start_time) AS last_call
FROM arm_calls GROUP BY value
"""
# The sample of each arm's successful calls: a call is in when the hash of its start time falls under the arm's
# fraction (``_SAMPLE_SCALE`` parts), worked out from the counts. Deterministic (the same data gives the same
# sample), uniform, one pass: no ORDER BY over millions of calls.
_SAMPLE = f"""
SELECT value, duration_s, ttft_s, input_tokens FROM arm_calls
WHERE coalesce(status, 'ok') <> 'error'
  AND ((value = ? AND hash(start_time) % {_SAMPLE_SCALE} < ?) OR (value = ? AND hash(start_time) % {_SAMPLE_SCALE} < ?))
"""


def _counts(
    store: ReadStore, filters: Filters, dim: str, values: dict[str, str], cutoffs: dict[str, datetime]
) -> dict[str, dict[str, Any]]:
    """arm -> calls, errors, first_call, last_call (an arm without calls is missing)."""
    df = frame(store, _arm_calls(filters, dim, values, cutoffs) + Sql(_COUNTS), filters)
    arm_of = {v: arm for arm, v in values.items()}
    return {arm_of[r["value"]]: r for r in df.iter_rows(named=True)}


def _sample(
    store: ReadStore,
    filters: Filters,
    dim: str,
    values: dict[str, str],
    cutoffs: dict[str, datetime],
    counts: dict[str, dict[str, Any]],
    size: int,
) -> pl.DataFrame:
    """About ``size`` successful calls of each arm (all of them when it has fewer): value, duration_s, ttft_s,
    input_tokens."""
    params: list[Any] = []
    for arm in ARMS:
        ok = (counts[arm]["calls"] - counts[arm]["errors"]) if arm in counts else 0
        params += [values[arm], _SAMPLE_SCALE if ok <= size else math.ceil(_SAMPLE_SCALE * size / ok)]
    widest = max(params[1], params[3])
    sql = _arm_calls(filters, dim, values, cutoffs, widest if widest < _SAMPLE_SCALE else None) + Sql(_SAMPLE, params)
    return frame(store, sql, filters)


def _task_frame(
    store: ReadStore, filters: Filters, dim: str, values: dict[str, str], cutoffs: dict[str, datetime]
) -> pl.DataFrame:
    """One row per task of either arm: arm, outcome, cost_usd, unpriced_calls, attempts, tokens, tool_calls,
    unpriced_tools, priced (fully priced: ``_cost_priced``); ordered by task when the arms will be bootstrapped."""
    column = dim if dim in CALL_DIMENSIONS else TASK_DIMENSIONS[dim]  # task_scope names cluster_id "cluster"
    sql = Sql("WITH ") + task_scope(filters, (dim,))
    sql += Sql(" SELECT ") + _arm_label(column, values["baseline"])
    sql += Sql(
        ", outcome, cost_usd, coalesce(unpriced_calls, 0) AS unpriced_calls, coalesce(attempts, 0) AS attempts, "
        "coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens, coalesce(tool_calls, 0) AS tool_calls, "
        f"coalesce(unpriced_tool_calls, 0) AS unpriced_tools, {fully_priced()} AS priced, project, task_id "
        f"FROM scoped_tasks WHERE {column} IN (?, ?)",
        [values["baseline"], values["candidate"]],
    )
    if cutoffs:
        sql += _warmup_condition(column, "start_time", cutoffs, values)
    tasks = frame(store, sql, filters, max_rows=20_000_000)
    if len(tasks) <= 2 * TASK_BOOTSTRAP_MAX_UNITS:
        # arms small enough to be bootstrapped: in one order whatever the store's (the same interval on any engine)
        tasks = tasks.sort("project", "task_id", nulls_last=True)
    return tasks.drop("project", "task_id")
