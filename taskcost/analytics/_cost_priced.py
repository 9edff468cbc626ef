"""Unpriced is never $0: which tasks a per-task dollar figure is taken over (``taskcost cost``, ``canary``,
``per-token``).

A task is **fully priced** when none of its LLM call attempts and none of its tool calls lacks a price (``tasks``'
``unpriced_calls`` is 0, and no row of ``tool_calls`` for it has a NULL ``cost_usd``). A task with no call and no tool
call at all has nothing unpriced and costs $0. Every per-task dollar figure (cost per completed task, its interval, a
canary arm's) is taken over the fully priced tasks only; the others are left out of it and counted beside it (tasks,
call attempts, tool calls), never counted as $0. Totals (spend, waste) keep the priced part of every task, with the
unpriced attempts and tool calls counted beside them.

The ``tasks`` roll-up counts unpriced LLM attempts per task but not unpriced tool calls, so those are read from
``tool_calls`` (only its unpriced rows, grouped per task: a small aggregate).
"""

from __future__ import annotations

from taskcost.analytics._filters import Filters, Sql

__all__ = ["UNPRICED_TOOLS", "fully_priced", "unpriced_tools_cte", "unpriced_tools_join"]

UNPRICED_TOOLS = "unpriced_tools"
"""The CTE of ``unpriced_tools_cte``: project, task_id, ``unpriced_tool_calls``."""


def unpriced_tools_cte(filters: Filters) -> Sql:
    """A CTE (no ``WITH``, no leading comma) of the unpriced tool calls per task (tasks without one are absent)."""
    sql = Sql(
        f"{UNPRICED_TOOLS} AS (SELECT project, task_id, count(*) AS unpriced_tool_calls FROM tool_calls "
        "WHERE cost_usd IS NULL AND task_id IS NOT NULL"
    )
    if filters.project is not None:
        sql += Sql(" AND project = ?", [filters.project])
    return sql + Sql(" GROUP BY project, task_id)")


def unpriced_tools_join(alias: str = "ut") -> str:
    """The ``LEFT JOIN`` of a task relation (with ``project`` and ``task_id`` columns) with ``unpriced_tools_cte``;
    its count is then ``coalesce(<alias>.unpriced_tool_calls, 0)``."""
    return f" LEFT JOIN {UNPRICED_TOOLS} AS {alias} USING (project, task_id)"


def fully_priced(alias: str = "ut") -> str:
    """SQL: the task (a ``tasks`` row joined by ``unpriced_tools_join``) has no unpriced attempt nor tool call."""
    return f"(coalesce(unpriced_calls, 0) = 0 AND coalesce({alias}.unpriced_tool_calls, 0) = 0)"
