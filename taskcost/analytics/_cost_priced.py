"""Unpriced is never $0: which tasks a per-task dollar figure is taken over (``taskcost cost``, ``canary``,
``per-token``).

A task is **fully priced** when none of its LLM call attempts and none of its tool calls lacks a price (``tasks``'
``unpriced_calls`` and ``unpriced_tool_calls`` are 0). A task with no call and no tool
call at all has nothing unpriced and costs $0. Every per-task dollar figure (cost per completed task, its interval, a
canary arm's) is taken over the fully priced tasks only; the others are left out of it and counted beside it (tasks,
call attempts, tool calls), never counted as $0. Totals (spend, waste) keep the priced part of every task, with the
unpriced attempts and tool calls counted beside them.

The ``tasks`` view counts both per task: ``unpriced_calls`` (LLM call attempts) and ``unpriced_tool_calls`` (from the
task roll-up since migration 0016: no read of ``tool_calls`` per question).
"""

from __future__ import annotations

__all__ = ["fully_priced"]


def fully_priced() -> str:
    """SQL: the task (a row of ``tasks``) has no unpriced attempt nor tool call."""
    return "(coalesce(unpriced_calls, 0) = 0 AND coalesce(unpriced_tool_calls, 0) = 0)"
