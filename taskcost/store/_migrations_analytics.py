"""Migrations 0009 and 0010, for the analytics: each extends the views of migration 0006 (whose text it is given:
this module does not import the migration list) with the columns the questions read.

- 0009: the SDK's prompt fingerprint per call and the golden-task tag.
- 0010: each task's call dimensions kept by the roll-up (``TASK_DIMENSIONS_0010``, which the writer uses too).
"""

from __future__ import annotations

__all__ = [
    "TASK_DIMENSIONS",
    "TASK_DIMENSIONS_0010",
    "analytics_columns_0009",
    "latest_view",
    "task_dimensions_0010",
    "with_replaced",
]


def latest_view(sql: str, name: str) -> str:
    """The last ``CREATE OR REPLACE VIEW <name>`` statement in a migration's text (a later one extends it)."""
    start = sql.rindex(f"CREATE OR REPLACE VIEW {name} AS")
    return sql[start : sql.index(";", start) + 1]


def with_replaced(view: str, old: str, new: str) -> str:
    assert view.count(old) == 1, old
    return view.replace(old, new)


# Each task's call dimensions in the roll-up (min and max per dimension: they fold like any min and max), so that
# `tasks` says which model, engine, GPU... a task ran on (the value its calls share, 'mixed' when they disagree)
# without grouping every call on each read.
TASK_DIMENSIONS_0010 = {
    "model": "coalesce(response_model, request_model)",
    "provider": "provider",
    "engine": "engine",
    "engine_version": "engine_version",
    "quantization": "quantization",
    "gpu_type": "gpu_type",
    "cluster_id": "cluster_id",
    "deployment": "deployment",
}


# Since 0013, the writer also keeps the task's answered models (its attempts' ``response_model``): a task's model is
# the one that answered. An attempt no response came back for (a 429, a timeout) carries only the name it asked for
# ("gpt-4o", not "gpt-4o-2024-08-06"), and a retry of it that succeeded made the task "mixed" without a second model.
TASK_DIMENSIONS = {**TASK_DIMENSIONS_0010, "answered_model": "response_model"}


def _tasks_0009(rollups: str) -> str:
    return with_replaced(
        with_replaced(
            latest_view(rollups, "tasks"),
            "harness_version, agent_name, agent_version, conversation_id, service_name\nFROM r;",
            "harness_version, agent_name, agent_version, conversation_id, service_name,\n"
            "    coalesce(g.golden, FALSE) AS golden\n"
            "FROM r LEFT JOIN (SELECT DISTINCT project, task_id, TRUE AS golden FROM task_rows WHERE golden) AS g\n"
            "    USING (project, task_id);",
        ),
        "SELECT\n    project, task_id, kind, outcome,",
        "SELECT\n    r.project, r.task_id, kind, outcome,",
    )


def analytics_columns_0009(rollups: str) -> str:
    """Migration 0009's SQL, from migration 0006's (``rollups``: its views are extended)."""
    calls = with_replaced(
        latest_view(rollups, "llm_calls"),
        "container_image_name, container_image_tags, k8s_cluster_name, cloud_region\n",
        "container_image_name, container_image_tags, k8s_cluster_name, cloud_region,\n"
        "    prompt_chars, stable_prefix_chars, prefix_break_block, prefix_break_kind\n",
    )
    tasks = with_replaced(
        with_replaced(
            latest_view(rollups, "tasks"),
            "harness_version, agent_name, agent_version, conversation_id, service_name\nFROM r;",
            "harness_version, agent_name, agent_version, conversation_id, service_name,\n"
            "    coalesce(g.golden, FALSE) AS golden\n"
            "FROM r LEFT JOIN (SELECT DISTINCT project, task_id, TRUE AS golden FROM task_rows WHERE golden) AS g\n"
            "    USING (project, task_id);",
        ),
        "SELECT\n    project, task_id, kind, outcome,",
        "SELECT\n    r.project, r.task_id, kind, outcome,",
    )
    sql = (
        """
ALTER TABLE llm_call_rows ADD COLUMN prompt_chars BIGINT;
ALTER TABLE llm_call_rows ADD COLUMN stable_prefix_chars BIGINT;
ALTER TABLE llm_call_rows ADD COLUMN prefix_break_block INTEGER;
ALTER TABLE llm_call_rows ADD COLUMN prefix_break_kind VARCHAR;
ALTER TABLE task_rows ADD COLUMN golden BOOLEAN;
"""
        + calls
        + "\n"
        + tasks
    )
    return sql


def task_dimensions_0010(rollups: str) -> str:
    """Migration 0010's SQL, from migration 0006's (``rollups``: the tasks view of 0009 is extended)."""
    tasks_0009 = _tasks_0009(rollups)
    _DIMS = tuple(TASK_DIMENSIONS_0010)
    tasks = with_replaced(
        with_replaced(
            with_replaced(
                with_replaced(
                    tasks_0009,
                    "        sum(tool_cost_usd) AS tool_cost_usd\n    FROM task_rollup_delta GROUP BY tk",
                    "        sum(tool_cost_usd) AS tool_cost_usd,\n"
                    + ",\n".join(f"        min({d}_min) AS {d}_min, max({d}_max) AS {d}_max" for d in _DIMS)
                    + "\n    FROM task_rollup_delta GROUP BY tk",
                ),
                "llm_cost_usd, tool_cost_usd\n    FROM task_rollup ANTI JOIN d USING (tk)",
                "llm_cost_usd, tool_cost_usd,\n        "
                + ", ".join(f"{d}_min, {d}_max" for d in _DIMS)
                + "\n    FROM task_rollup ANTI JOIN d USING (tk)",
            ),
            "        coalesce(b.tool_cost_usd, 0) + d.tool_cost_usd\n    FROM d LEFT JOIN task_rollup AS b USING (tk)",
            "        coalesce(b.tool_cost_usd, 0) + d.tool_cost_usd,\n"
            + ",\n".join(f"        least(b.{d}_min, d.{d}_min), greatest(b.{d}_max, d.{d}_max)" for d in _DIMS)
            + "\n    FROM d LEFT JOIN task_rollup AS b USING (tk)",
        ),
        "    coalesce(g.golden, FALSE) AS golden\n",
        "    coalesce(g.golden, FALSE) AS golden,\n"
        + ",\n".join(
            f"    CASE WHEN {d}_min = {d}_max THEN {d}_min WHEN {d}_min IS NULL THEN NULL ELSE 'mixed' END AS {d}"
            for d in _DIMS
        )
        + "\n",
    )
    sql = (
        "".join(
            f"ALTER TABLE {t} ADD COLUMN {d}_min VARCHAR;\nALTER TABLE {t} ADD COLUMN {d}_max VARCHAR;\n"
            for t in ("task_rollup", "task_rollup_delta")
            for d in _DIMS
        )
        # every stored call's values, folded into the roll-up (and the delta: min and max take them twice unchanged)
        + "CREATE TEMP TABLE _taskcost_dims AS SELECT md5_number(project || chr(31) || task_id) AS tk, "
        + ", ".join(f"min({e}) AS {d}_min, max({e}) AS {d}_max" for d, e in TASK_DIMENSIONS_0010.items())
        + " FROM llm_call_rows WHERE NOT duplicate GROUP BY project, task_id;\n"
        + "".join(
            f"UPDATE {t} AS b SET "
            + ", ".join(f"{d}_min = x.{d}_min, {d}_max = x.{d}_max" for d in _DIMS)
            + " FROM _taskcost_dims AS x WHERE b.tk = x.tk;\n"
            for t in ("task_rollup", "task_rollup_delta")
        )
        + "DROP TABLE _taskcost_dims;\n"
        + tasks
    )
    return sql
