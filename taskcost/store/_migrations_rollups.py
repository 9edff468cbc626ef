"""Migrations 0011 to 0013: what the questions read per task and per hour, kept by the writer.

- 0011: whether a task is golden, in the task roll-up (``tasks`` joined every read with the task rows for it: about
  0.07 s a read at 1M tasks).
- 0012: the hourly call roll-up (taskcost/store/_hours.py) and its public view ``llm_call_hours``, filled from the
  stored calls. Its tables follow ``_hours.HOUR_KEYS`` and ``HOUR_MEASURES``: changing those needs a new migration.
- 0013: a task's answered models in the task roll-up: ``tasks.model`` is the model that answered (an attempt that got
  no response, e.g. a 429, carries only the requested name and no longer makes a retried task ``mixed``).
"""

from __future__ import annotations

from taskcost.store._answers import MODEL, backfill_sql
from taskcost.store._hours import create_hours, rebuild_sql
from taskcost.store._migrations_analytics import latest_view, task_dimensions_0010, with_replaced

__all__ = ["answered_model_0013", "call_hours_0012", "task_golden_0011"]


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
    """Migration 0012's SQL: the tables, the view, and the stored calls added up (by the model key of then)."""
    return create_hours() + rebuild_sql(model="coalesce(response_model, request_model)") + ";\n"


def answered_model_0015(llm_calls: str) -> str:
    """Migration 0015's SQL: each attempt without a response takes the model that answered its logical call (else its
    task: ``_answers``), ``llm_calls.model`` says it (``llm_calls``: the view's latest definition), and the hourly
    roll-up is counted again by it."""
    view = with_replaced(
        llm_calls,
        "    coalesce(response_model, request_model) AS model,\n",
        f"    {MODEL} AS model,\n",
    )
    return (
        "ALTER TABLE llm_call_rows ADD COLUMN IF NOT EXISTS answered_model VARCHAR;\n"
        + backfill_sql()
        + view
        + "\nDELETE FROM call_hours_delta;\nDELETE FROM call_hours;\n"
        + rebuild_sql()
        + ";\n"
    )


_MODEL_0010 = (
    "    CASE WHEN model_min = model_max THEN model_min WHEN model_min IS NULL THEN NULL ELSE 'mixed' END AS model,"
)
_MODEL = (
    "    CASE WHEN answered_model_min IS NOT NULL THEN CASE WHEN answered_model_min = answered_model_max\n"
    "            THEN answered_model_min ELSE 'mixed' END\n"
    "        WHEN model_min = model_max THEN model_min WHEN model_min IS NULL THEN NULL ELSE 'mixed' END AS model,"
)
"""A task's model: the one its answered attempts share (``mixed`` when they disagree); with no answered attempt, the
one all its attempts share (by the name each asked for)."""


def answered_model_0013(rollups: str) -> str:
    """Migration 0013's SQL, from migration 0006's (``rollups``; the tasks view of 0011 is extended): the answered
    models' min and max in the roll-up, filled from the stored calls, and the tasks view's model from them."""
    view = latest_view(task_golden_0011(rollups), "tasks")
    for old, new in (
        (
            "max(deployment_max) AS deployment_max\n    FROM task_rollup_delta GROUP BY tk",
            "max(deployment_max) AS deployment_max,\n"
            "        min(answered_model_min) AS answered_model_min, max(answered_model_max) AS answered_model_max\n"
            "    FROM task_rollup_delta GROUP BY tk",
        ),
        (
            "deployment_min, deployment_max, golden\n    FROM task_rollup ANTI JOIN d USING (tk)",
            "deployment_min, deployment_max, golden, answered_model_min, answered_model_max\n"
            "    FROM task_rollup ANTI JOIN d USING (tk)",
        ),
        (
            "coalesce(b.golden, FALSE) OR coalesce(d.golden, FALSE)\n    FROM d LEFT JOIN task_rollup AS b USING (tk)",
            "coalesce(b.golden, FALSE) OR coalesce(d.golden, FALSE),\n"
            "        least(b.answered_model_min, d.answered_model_min), "
            "greatest(b.answered_model_max, d.answered_model_max)\n"
            "    FROM d LEFT JOIN task_rollup AS b USING (tk)",
        ),
        (_MODEL_0010, _MODEL),
    ):
        view = with_replaced(view, old, new)
    answered = (
        "SELECT md5_number(project || chr(31) || task_id) AS tk, min(response_model) AS answered_model_min, "
        "max(response_model) AS answered_model_max FROM llm_call_rows WHERE NOT duplicate GROUP BY project, task_id"
    )
    return (
        "".join(
            f"ALTER TABLE {t} ADD COLUMN answered_model_min VARCHAR;\n"
            f"ALTER TABLE {t} ADD COLUMN answered_model_max VARCHAR;\n"
            for t in ("task_rollup", "task_rollup_delta")
        )
        + f"CREATE TEMP TABLE _taskcost_answered AS {answered};\n"
        # the delta too: min and max take a task's values twice unchanged
        + "".join(
            f"UPDATE {t} AS b SET answered_model_min = x.answered_model_min, answered_model_max = x.answered_model_max "
            "FROM _taskcost_answered AS x WHERE b.tk = x.tk;\n"
            for t in ("task_rollup", "task_rollup_delta")
        )
        + "DROP TABLE _taskcost_answered;\n"
        + view
    )


def unpriced_tool_calls_0016(tasks: str) -> str:
    """Migration 0016's SQL: the tasks view says how many of a task's tool calls have no price (the roll-up counted
    the priced ones): a per-task figure over fully priced tasks needs no read of ``tool_calls`` (``tasks``: the
    view's latest definition)."""
    return with_replaced(
        tasks,
        "    attempts - priced_calls AS unpriced_calls,\n",
        "    attempts - priced_calls AS unpriced_calls,\n    tool_calls - priced_tool_calls AS unpriced_tool_calls,\n",
    )
