"""The model that answered a logical call, on each of its attempts.

An attempt no response came back for (a 429, a timeout, a 500) carries only the name it asked for (``gpt-4o``); the
attempt that answered carries the dated one (``gpt-4o-2024-08-06``). Grouped by ``model``, the failed attempts would
be a model of their own, and a canary by model would compare error rates without its errors. So every attempt of a
logical call shares the model that answered it (``answered_model``, kept by the writer on the attempts without a
``response_model``); when no attempt of the call answered, the model that answered the task (when one did), else the
name it asked for. ``llm_calls.model`` is ``coalesce(response_model, answered_model, request_model)``; the requested
name stays in ``request_model``.

The writer resolves it in each commit, over the commit's tasks' attempts stored from ``ANSWER_HORIZON_NS`` before the
commit's earliest call (a retry comes within seconds or minutes; the bound keeps the lookup to the recent row groups),
and moves the changed attempts in the hourly roll-up (out at the old model, in at the new), in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from taskcost.store._sql import count

__all__ = ["ANSWER_HORIZON_NS", "MODEL", "OPEN_TASKS", "backfill_sql", "open_tasks_sql", "resolve_answers"]

MODEL = "coalesce(response_model, answered_model, request_model)"
"""A call's model: the one that answered it (or its logical call, or its task), else the one it asked for."""
ANSWER_HORIZON_NS = 3600 * 10**9
"""How far back, before a commit's earliest call, the writer looks for the attempts a commit's answer resolves."""
_CHANGES = "_taskcost_answers"
_OPEN_STAGE = "_taskcost_open_tasks"
OPEN_TASKS = "answer_open_tasks"
"""The tasks with an attempt without a response (project, task_id), each once: the writer adds a commit's, and nothing
removes them (a row per such task: about a quarter of the tasks in the bench's fleet traffic, where 3% of calls fail;
the task roll-up keeps a row per task)."""


def _changes_sql(scope: str) -> str:
    """SELECT (rid, project, trace_id, span_id, old, new) of the attempts with no response whose answered model
    changes, among ``scope`` (a relation of counted ``llm_call_rows`` rows with their ``rowid`` as ``rid``)."""
    return f"""
WITH w AS (SELECT rid, project, task_id, call_id, trace_id, span_id, response_model, answered_model FROM {scope}),
by_call AS (
    SELECT project, task_id, call_id, min(response_model) AS m FROM w
    WHERE response_model IS NOT NULL AND call_id IS NOT NULL GROUP BY ALL HAVING count(DISTINCT response_model) = 1
),
by_task AS (
    SELECT project, task_id, min(response_model) AS m FROM w
    WHERE response_model IS NOT NULL AND task_id IS NOT NULL GROUP BY ALL HAVING count(DISTINCT response_model) = 1
)
SELECT w.rid, w.project, w.trace_id, w.span_id, w.answered_model AS old, coalesce(c.m, t.m) AS new
FROM w
LEFT JOIN by_call AS c ON c.project = w.project AND c.task_id IS NOT DISTINCT FROM w.task_id AND c.call_id = w.call_id
LEFT JOIN by_task AS t ON t.project = w.project AND t.task_id = w.task_id
WHERE w.response_model IS NULL AND w.answered_model IS DISTINCT FROM coalesce(c.m, t.m)"""


def _opens(c: str) -> str:
    """Whether call ``c`` (an alias) puts its task in ``OPEN_TASKS``: no response came back for it."""
    return f"{c}.response_model IS NULL AND {c}.task_id IS NOT NULL"


def open_tasks_sql() -> str:
    """``OPEN_TASKS`` from the stored attempts (a migration's, or a rebuild's, statement)."""
    return (
        f"INSERT INTO {OPEN_TASKS} SELECT DISTINCT c.project, c.task_id FROM llm_call_rows AS c "
        f"WHERE NOT c.duplicate AND {_opens('c')};\n"
    )


_ALL = "(SELECT rowid AS rid, * FROM llm_call_rows WHERE NOT duplicate)"


def backfill_sql() -> str:
    """The answered model of every stored attempt without a response (a migration's statement)."""
    return (
        f"CREATE TEMP TABLE {_CHANGES} AS {_changes_sql(_ALL)};\n"
        f"UPDATE llm_call_rows AS r SET answered_model = a.new FROM {_CHANGES} AS a "
        "WHERE r.project = a.project AND r.trace_id = a.trace_id AND r.span_id = a.span_id;\n"
        f"DROP TABLE {_CHANGES};\n"
    )


def resolve_answers(
    cur: duckdb.DuckDBPyConnection, calls: str, move: Callable[[duckdb.DuckDBPyConnection, str], None]
) -> None:
    """In a commit's transaction, after its calls (``calls``: a relation of the counted rows, stored) were inserted and
    added to the hourly roll-up: set the answered model of the attempts without a response of the commit's tasks, and
    move those that changed in the roll-up (``move``: ``_hours.move_hours``).

    Only a task with an attempt without a response (``OPEN_TASKS``: stored before, or in this commit) can change: the
    stored calls are read for those of the commit's tasks alone (all of them were read for every commit's tasks)."""
    cur.execute(
        f"INSERT INTO {OPEN_TASKS} SELECT DISTINCT c.project, c.task_id FROM {calls} AS c "
        f"ANTI JOIN {OPEN_TASKS} AS o ON o.project = c.project AND o.task_id = c.task_id "
        f"WHERE {_opens('c')}"
    )
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE {_OPEN_STAGE} AS SELECT DISTINCT c.project, c.task_id "
        f"FROM {calls} AS c SEMI JOIN {OPEN_TASKS} AS o ON o.project = c.project AND o.task_id = c.task_id"
    )
    try:
        row = cur.execute(
            f"SELECT (SELECT count(*) FROM {_OPEN_STAGE}), (SELECT min(start_ns) FROM {calls})"
        ).fetchone()
        if row is None or not row[0]:  # none of the commit's tasks has an attempt without a response
            return
        lo = int(row[1]) - ANSWER_HORIZON_NS
        scope = (
            f"(SELECT rowid AS rid, * FROM llm_call_rows WHERE start_ns >= {lo} AND NOT duplicate "
            f"AND (project, task_id) IN (SELECT project, task_id FROM {_OPEN_STAGE}))"
        )
        _apply(cur, scope, move)
    finally:
        cur.execute(f"DROP TABLE IF EXISTS {_OPEN_STAGE}")


def _apply(cur: duckdb.DuckDBPyConnection, scope: str, move: Callable[[duckdb.DuckDBPyConnection, str], None]) -> None:
    """The answered models of ``scope``'s attempts without a response, set where they change and moved in the
    hourly roll-up."""
    cur.execute(f"CREATE OR REPLACE TEMP TABLE {_CHANGES} AS {_changes_sql(scope)}")
    try:
        if not count(cur, f"SELECT count(*) FROM {_CHANGES}"):
            return
        # the changed rows by their row ids (stable within this transaction): fetched, not looked for (joined by
        # their keys, each commit that changed an answer read every stored call's ids three times)
        moved = (
            f"(SELECT r.* REPLACE (a.new AS answered_model), 1 AS sign FROM llm_call_rows AS r JOIN {_CHANGES} AS a "
            "ON r.rowid = a.rid "
            f"UNION ALL BY NAME SELECT r.* REPLACE (a.old AS answered_model), -1 AS sign FROM llm_call_rows AS r "
            f"JOIN {_CHANGES} AS a ON r.rowid = a.rid)"
        )
        move(cur, moved)
        cur.execute(f"UPDATE llm_call_rows AS r SET answered_model = a.new FROM {_CHANGES} AS a WHERE r.rowid = a.rid")
    finally:
        cur.execute(f"DROP TABLE IF EXISTS {_CHANGES}")
