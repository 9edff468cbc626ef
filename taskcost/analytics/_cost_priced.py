"""Unpriced is never $0: which tasks a per-task dollar figure is taken over (``taskcost cost``, ``canary``,
``per-token``).

A task is **fully priced** when none of its LLM call attempts and none of its tool calls lacks a price (``tasks``'
``unpriced_calls`` is 0, and no row of ``tool_calls`` for it has a NULL ``cost_usd``). A task with no call and no tool
call at all has nothing unpriced and costs $0. Every per-task dollar figure (cost per completed task, its interval, a
canary arm's) is taken over the fully priced tasks only; the others are left out of it and counted beside it (tasks,
call attempts, tool calls), never counted as $0. Totals (spend, waste) keep the priced part of every task, with the
unpriced attempts and tool calls counted beside them.

The ``tasks`` view counts both per task: ``unpriced_calls`` (LLM call attempts) and ``unpriced_tool_calls`` (from the
task roll-up since migration 0016: no read of ``tool_calls`` per question).
"""

from __future__ import annotations

from taskcost.analytics._filters import Filters, Sql

__all__ = ["UNPRICED_TOOLS", "fully_priced", "unpriced_tools_cte", "unpriced_tools_join"]

UNPRICED_TOOLS = "unpriced_tools"
"""The CTE of ``unpriced_tools_cte``: project, task_id, ``unpriced_tool_calls``."""


def unpriced_tools_cte(filters: Filters) -> Sql:
    """A CTE (no ``WITH``, no leading comma) kept for the queries that name it: the unpriced tool calls are a column of
    ``tasks`` (``unpriced_tool_calls``), so it holds nothing and DuckDB drops it, unread."""
    del filters
    return Sql(f"{UNPRICED_TOOLS} AS (SELECT 1 AS unused)")


def unpriced_tools_join(alias: str = "ut") -> str:
    """Nothing to join: a task relation over ``tasks`` has its ``unpriced_tool_calls``."""
    del alias
    return ""


def fully_priced(alias: str = "ut") -> str:
    """SQL: the task (a row of ``tasks``) has no unpriced attempt nor tool call."""
    del alias
    return "(coalesce(unpriced_calls, 0) = 0 AND coalesce(unpriced_tool_calls, 0) = 0)"
