"""Browsing tasks: a searchable, sorted page of the selected tasks; one task's call attempts and tool calls (its
timeline); and the explanation of one call's cost (what ``taskcost explain-cost`` prints).

Plain reads of the public views (``tasks``, ``llm_calls``, ``tool_calls``): a top-N over ``tasks`` (kept by the
roll-up, so it answers at once on any history) and the rows of one task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskcost._internal.lazy import pl
from taskcost.analytics._answer import frame
from taskcost.analytics._calls import call_costs
from taskcost.analytics._filters import Filters, Sql, task_scope
from taskcost.analytics._question import UsageError
from taskcost.pricing import explain, format_usd
from taskcost.store import ReadStore

__all__ = [
    "MAX_TASK_ROWS",
    "TASK_SORTS",
    "TaskDetail",
    "TaskList",
    "explain_call",
    "task_detail",
    "task_list",
]

TASK_SORTS: dict[str, str] = {
    "start": "start_time",
    "cost": "cost_usd",
    "duration": "duration_s",
    "attempts": "attempts",
    "task": "task_id",
    "kind": "kind",
    "outcome": "outcome",
}
"""Sort key -> its ``tasks`` column. ``-key`` sorts descending (``-start``: newest first, the default)."""

_LIST_COLUMNS = (
    "project", "task_id", "kind", "outcome", "start_time", "end_time", "duration_s", "llm_calls", "attempts",
    "retries", "failed_attempts", "tool_calls", "cost_usd", "unpriced_calls", "model", "provider", "engine",
    "engine_version", "gpu_type", "deployment",
)  # fmt: skip
_SEARCHED = ("task_id", "kind", "outcome", "model", "engine")
"""What the search box matches (case-insensitive substring)."""

MAX_TASK_ROWS = 1000
"""One task's call attempts (and tool calls) read at most: a timeline of more is not readable anyway."""

_CALL_COLUMNS = (
    "span_id", "trace_id", "call_id", "attempt", "start_time", "end_time", "duration_s", "ttft_s", "status",
    "error_type", "provider", "model", "deployment", "engine", "engine_version", "input_tokens", "cache_read_tokens",
    "cache_write_tokens", "uncached_input_tokens", "output_tokens", "reasoning_tokens", "cost_usd", "unpriced_reason",
)  # fmt: skip
_TOOL_COLUMNS = ("span_id", "trace_id", "tool_name", "start_time", "end_time", "duration_s", "status", "cost_usd")


@dataclass(frozen=True)
class TaskList:
    """A page of tasks: ``rows`` (``tasks`` columns), the first ``limit`` that match. ``more``: others match too;
    ``total`` is how many match when they all fit (None when ``more``: counting every match would cost a second pass
    over the tasks, as much as the page itself)."""

    rows: pl.DataFrame
    more: bool
    limit: int
    sort: str
    search: str | None

    @property
    def total(self) -> int | None:
        return None if self.more else self.rows.height


def _order(sort: str) -> str:
    key = sort.removeprefix("-")
    if key not in TASK_SORTS:
        raise UsageError(f"unknown sort {sort!r}: one of {', '.join(TASK_SORTS)} (with '-' for descending)")
    direction = "DESC" if sort.startswith("-") else "ASC"
    column = TASK_SORTS[key]
    tie = "" if column == "task_id" else ", task_id"
    return f"{column} {direction} NULLS LAST{tie}"


def task_list(
    store: ReadStore, filters: Filters, *, search: str | None = None, sort: str = "-start", limit: int = 100
) -> TaskList:
    """The tasks ``filters`` select (running ones included: their outcome is empty), those whose id, kind, outcome,
    model or engine contain ``search`` (any case), sorted by ``sort`` (a ``TASK_SORTS`` key, ``-`` for
    descending): the first ``limit`` of them, and whether more match. One top-N over ``tasks``."""
    if limit < 1:
        raise UsageError("limit must be at least 1")
    order = _order(sort)
    text = (search or "").strip().lower()
    where = Sql("TRUE")
    if text:
        where = Sql(
            "(" + " OR ".join(f"strpos(lower(coalesce({c}, '')), ?) > 0" for c in _SEARCHED) + ")",
            [text] * len(_SEARCHED),
        )
    sql = Sql("WITH ") + task_scope(filters) + Sql(f" SELECT {', '.join(_LIST_COLUMNS)} FROM scoped_tasks WHERE ")
    sql += where + Sql(f" ORDER BY {order} LIMIT ?", [limit + 1])
    df = frame(store, sql, filters)
    return TaskList(df.head(limit), df.height > limit, limit, sort, text or None)


@dataclass(frozen=True)
class TaskDetail:
    """One task: its ``tasks`` row, its call attempts and its tool calls in start order (at most
    ``MAX_TASK_ROWS`` each; the row's ``attempts`` and ``tool_calls`` say how many there are)."""

    task: dict[str, Any]
    calls: pl.DataFrame
    tools: pl.DataFrame

    @property
    def project(self) -> str:
        return str(self.task["project"])

    def notes(self) -> list[str]:
        out = []
        for what, shown, total in (
            ("call attempts", self.calls.height, self.task.get("attempts")),
            ("tool calls", self.tools.height, self.task.get("tool_calls")),
        ):
            if total is not None and int(total) > shown:
                out.append(f"the first {shown} of {int(total)} {what} are shown")
        if self.task.get("unpriced_calls"):
            out.append(
                f"{self.task['unpriced_calls']} call attempts of this task are unpriced and not in its cost "
                "(explain one to see why)"
            )
        return out


def task_detail(store: ReadStore, task_id: str, project: str | None = None) -> TaskDetail | None:
    """Task ``task_id`` (in ``project`` when given): None when there is no such task. A task id found in several
    projects needs ``project`` (a usage error otherwise)."""
    filters = Filters.model_validate({"project": project})
    where = Sql("task_id = ?", [task_id]) + (Sql(" AND project = ?", [project]) if project else Sql(""))
    found = frame(store, Sql("SELECT * FROM tasks WHERE ") + where, filters)
    if found.height == 0:
        return None
    if found.height > 1:
        projects = ", ".join(sorted(str(p) for p in found["project"]))
        raise UsageError(f"task {task_id!r} is in several projects ({projects}): pick a project")
    task = found.row(0, named=True)
    one = Sql(" WHERE project = ? AND task_id = ? ORDER BY start_time, span_id LIMIT ?", [task["project"], task_id])
    one.params.append(MAX_TASK_ROWS)
    calls = frame(store, Sql(f"SELECT {', '.join(_CALL_COLUMNS)} FROM llm_calls") + one, filters)
    tools = frame(store, Sql(f"SELECT {', '.join(_TOOL_COLUMNS)} FROM tool_calls") + one, filters)
    return TaskDetail(task, calls, tools)


def explain_call(store: ReadStore, span_id: str, trace_id: str | None = None) -> list[str]:
    """How one call's stored cost was computed, line by line (the rates, the token counts, discounts and fees, the
    source; or why it has none): what ``taskcost explain-cost`` prints. A tool call's span id gives its cost and
    where it came from; an unknown span id, an empty list."""
    found = call_costs(store, span_id, trace_id)
    out: list[str] = []
    for i, row in enumerate(found.calls):
        if i:
            out.append("")
        out += explain(row)
    for t in found.tools:
        out.append(
            f"tool call {t['span_id']} ({t['tool_name']}), task {t['task_id']}: cost {format_usd(t['cost_usd'])}, "
            f"from {t['cost_source'] or 'nowhere (no cost given, no price in the book)'}"
        )
    return out
