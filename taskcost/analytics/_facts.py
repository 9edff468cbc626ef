"""Small facts about the stored data that the dashboards show beside the answers: when the selected tasks ran (to
pick a time bucket and the periods to compare), and whether the data is the demo's (so it is never taken for real).

One aggregate over ``tasks`` each (the roll-up: one row per task, whatever the number of calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from taskcost.analytics._answer import frame
from taskcost.analytics._filters import DIMENSIONS, Filters, Sql, call_scope, naive_utc, task_scope
from taskcost.analytics._question import UsageError
from taskcost.store import ReadStore

__all__ = [
    "DEMO_SERVICE",
    "MAX_BUCKETS",
    "MINUTE_BUCKETS_SPAN",
    "Bucket",
    "DataExtent",
    "DemoMarks",
    "check_bucket",
    "check_dimension",
    "data_extent",
    "demo_marks",
]

Bucket = Literal["minute", "hour", "day", "week"]
"""A time series' step: the start of each row's minute, hour, day or week (UTC; weeks start on Monday)."""

MINUTE_BUCKETS_SPAN = timedelta(days=7)
"""A time series per minute covers at most this long a selection (10,080 rows a group): more is an answer nobody can
read, built slowly."""
MAX_BUCKETS = 100_000
"""A time series has at most this many buckets (hours: about 11 years; days: 273 years; weeks always fit in the
store's range of times): a tenant's own span times could otherwise spread a selection over centuries of hours."""
_STEP = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}

DEMO_SERVICE = "taskcost-demo"
"""The ``service.name`` of every span ``taskcost demo`` sends (it also sends ``deployment.environment.name=demo``
and ``demo-`` task ids, but an id prefix alone is no proof: a user's own task ids may start with it)."""


@dataclass(frozen=True)
class DataExtent:
    """The selected tasks: how many, their first and last start, and (when asked) the last start of their selected
    call attempts. UTC, naive as in the views; None without any."""

    tasks: int
    first_start: datetime | None
    last_start: datetime | None
    last_call_start: datetime | None = None


def data_extent(store: ReadStore, filters: Filters, *, calls: bool = False) -> DataExtent:
    """When the tasks ``filters`` select started (running ones included); with ``calls``, also the last start of
    the call attempts the filters select (a task's calls run after its start: a window that ends at the last task's
    start would leave them out)."""
    sql = Sql("WITH ") + task_scope(filters)
    last_call = Sql("NULL")
    if calls:
        sql += Sql(", ") + call_scope(filters)
        last_call = Sql("(SELECT max(start_time) FROM scoped_calls)")
    sql += Sql(" SELECT count(*) AS tasks, min(start_time) AS first, max(start_time) AS last, ") + last_call
    sql += Sql(" AS last_call FROM scoped_tasks")
    row = frame(store, sql, filters).row(0, named=True)
    return DataExtent(int(row["tasks"]), row["first"], row["last"], row["last_call"])


def check_dimension(by: str | None) -> None:
    """A usage error when ``by`` is not a dimension a question can group by."""
    if by is not None and by not in DIMENSIONS:
        raise UsageError(f"by: unknown dimension {by!r} (one of: {', '.join(DIMENSIONS)})")


def check_bucket(store: ReadStore, filters: Filters, bucket: str | None) -> None:
    """A usage error when ``bucket`` is ``minute`` and the selection spans more than ``MINUTE_BUCKETS_SPAN``, or it
    spans more than ``MAX_BUCKETS`` hours or days (from ``since``, else the first selected task's start, to
    ``until``, else the last selected call's start)."""
    if bucket not in _STEP:
        return
    if filters.since is not None and filters.until is not None:
        first, last = naive_utc(filters.since), naive_utc(filters.until)
    else:
        extent = data_extent(store, filters, calls=True)
        if extent.first_start is None or extent.last_start is None:
            return
        first = naive_utc(filters.since) if filters.since is not None else extent.first_start
        ends = [extent.last_start, extent.last_call_start or extent.last_start]
        last = naive_utc(filters.until) if filters.until is not None else max(ends)
    if bucket == "minute" and last - first > MINUTE_BUCKETS_SPAN:
        raise UsageError(
            f"bucket=minute: the selection spans {(last - first).days} days, more than "
            f"{MINUTE_BUCKETS_SPAN.days} days of minutes; narrow it with since/until, or choose hour, day or week"
        )
    buckets = (last - first) // _STEP[bucket]
    if buckets > MAX_BUCKETS:
        raise UsageError(
            f"bucket={bucket}: the selection spans {buckets:,} {bucket}s, more than {MAX_BUCKETS:,}; narrow it with "
            "since/until, or choose a longer bucket"
        )


@dataclass(frozen=True)
class DemoMarks:
    """How many of the stored tasks the demo made, of all tasks."""

    demo_tasks: int
    tasks: int

    @property
    def any(self) -> bool:
        return self.demo_tasks > 0

    @property
    def only(self) -> bool:
        return self.demo_tasks > 0 and self.demo_tasks == self.tasks


def demo_marks(store: ReadStore, project: str | None = None) -> DemoMarks:
    """The tasks of ``project`` (all projects when None) that ``taskcost demo`` sent: those of its service. A task
    still running has no service yet (the task's own span names it, and it ends last): it is the demo's when its
    calls are (while the demo sent, the badge read "22 of the 29 tasks are the demo's" when all 29 were)."""
    sql = Sql(
        "SELECT count(*) FILTER (WHERE service_name = ? OR service_name IS NULL AND (project, task_id) IN ("
        "SELECT project, task_id FROM llm_calls WHERE service_name = ?)) AS demo, count(*) AS tasks FROM tasks",
        [DEMO_SERVICE, DEMO_SERVICE],
    )
    row = frame(store, sql, Filters.model_validate({"project": project})).row(0, named=True)
    return DemoMarks(int(row["demo"]), int(row["tasks"]))
