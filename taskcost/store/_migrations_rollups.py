"""Migrations 0011 and 0012, for read speed: what the questions read per task and per hour is kept by the writer.

- 0011: whether a task is golden, in the task roll-up (``tasks`` joined every read with the task rows for it: about
  0.07 s a read at 1M tasks).
- 0012: the hourly call roll-up (taskcost/store/_hours.py) and its public view ``llm_call_hours``, filled from the
  stored calls. Its tables follow ``_hours.HOUR_KEYS`` and ``HOUR_MEASURES``: changing those needs a new migration.
"""

from __future__ import annotations

from taskcost.store._hours import create_hours, rebuild_sql
from taskcost.store._migrations_analytics import latest_view, task_dimensions_0010, with_replaced

__all__ = ["call_hours_0012", "task_golden_0011"]


def task_golden_0011(rollups: str) -> str:
    """Migration 0011's SQL, from migration 0006's (``rollups``; the tasks view of 0010 is extended)."""
    view = latest_view(task_dimensions_0010(rollups), "tasks")
    for old, new in (
        (
            "        sum(tool_cost_usd) AS tool_cost_usd,\n",
            "        sum(tool_cost_usd) AS tool_cost_usd,\n        bool_or(golden) AS golden,\n",
        ),
        (
            "deployment_min, deployment_max\n    FROM task_rollup ANTI JOIN d USING (tk)",
            "deployment_min, deployment_max, golden\n    FROM task_rollup ANTI JOIN d USING (tk)",
        ),
        (
            "\n    FROM d LEFT JOIN task_rollup AS b USING (tk)",
            ",\n        coalesce(b.golden, FALSE) OR coalesce(d.golden, FALSE)"
            "\n    FROM d LEFT JOIN task_rollup AS b USING (tk)",
        ),
        ("coalesce(g.golden, FALSE) AS golden", "coalesce(r.golden, FALSE) AS golden"),
        (
            "FROM r LEFT JOIN (SELECT DISTINCT project, task_id, TRUE AS golden FROM task_rows WHERE golden) AS g\n"
            "    USING (project, task_id);",
            "FROM r;",
        ),
    ):
        view = with_replaced(view, old, new)
    golden = "SELECT md5_number(project || chr(31) || task_id) FROM task_rows WHERE golden"
    return (
        "".join(
            f"ALTER TABLE {t} ADD COLUMN golden BOOLEAN;\nUPDATE {t} SET golden = TRUE WHERE tk IN ({golden});\n"
            for t in ("task_rollup", "task_rollup_delta")
        )
        + view
    )


def call_hours_0012() -> str:
    """Migration 0012's SQL: the tables, the view, and the stored calls added up."""
    return create_hours() + rebuild_sql() + ";\n"
