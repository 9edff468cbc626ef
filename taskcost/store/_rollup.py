"""What the single writer keeps up to date as it commits, so that no read scans every call:

* ``llm_call_rows.duplicate``: the row reports a provider response (project, trace, ``response_id``) that
  another row already reported: decided once, at write time (the first committed wins; within one commit
  the first by (received_ns, span_id), the order the view used to apply on every read). ``llm_calls``
  hides duplicates; nothing counts them. They are recognised by their response keys (md5 of the response),
  within the dedupe window of recent keys (taskcost/store/_dedupe.py).
* ``task_rollup``: the ``tasks`` view's figures, one row per (project, task), whether it is golden included.
  Distinct logical calls are counted through the task's set of call-id hashes (``call_ids``): a retry arriving in a
  later commit is an attempt, not a new call.
* ``task_rollup_delta``: what each commit adds, a row per task and commit, appended (cheap) in the commit
  that stores the rows. ``tasks`` merges it with ``task_rollup``; the writer folds it in (one batched
  UPDATE plus INSERT) once it holds ``fold_rows`` rows. (Per-commit INSERT ... ON CONFLICT DO UPDATE was
  measured at 0.2-0.4 ms per task already stored: DuckDB updates rows one by one there.)
* ``taskcost reprice`` appends its cost changes to ``task_rollup_delta`` too, in its own transaction:
  insert-only, so a re-price never conflicts with the writer, and the roll-up is exact at every commit.

Money stays DECIMAL(38,12) throughout; next to each sum the roll-up keeps how many rows were priced, so a
sum over no priced row is NULL in ``tasks``, as ``sum()`` is.
"""

from __future__ import annotations

import duckdb

from taskcost.store import _answers, _dedupe, _engine_hours, _engine_match, _hours
from taskcost.store._dedupe import RESPONSE_KEY
from taskcost.store._migrations_analytics import TASK_DIMENSIONS
from taskcost.store._sql import count

__all__ = [
    "FOLD_ROWS",
    "RESPONSE_KEY",
    "TASK_KEY",
    "WRITER_COLUMNS",
    "add_to_tasks",
    "adjust_tasks",
    "drop_stage",
    "fold",
    "insert_calls",
    "rebuild",
]

# Columns of llm_call_rows the writer decides (not part of an incoming batch).
WRITER_COLUMNS = ("duplicate", "answered_model")

TASK_KEY = "md5_number(project || chr(31) || task_id)"

FOLD_ROWS = 5_000
"""Fold task_rollup_delta into task_rollup once it holds this many rows. Reads merge at most this many rows
(about 3 us each); a fold costs a join over task_rollup (0.1 s at 100k tasks, 0.3 s at 1M)."""

_STAGE = "_taskcost_calls"
_SEEN = "_taskcost_seen_responses"


# -- per-task figures from a set of rows (a commit's, or all of them) ----------------------------------
_CALLS = """
    SELECT project, task_id,
        list(md5_number_upper(call_id)) AS call_ids,
        count(*) AS attempts,
        count(*) FILTER (WHERE status = 'error') AS failed_attempts,
        count(cost_usd) AS priced_calls,
        sum(input_tokens)::BIGINT AS input_tokens,
        sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
        sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
        min(start_ns) AS call_start_ns,
        max(end_ns) AS call_end_ns,
        coalesce(sum(cost_usd), 0)::DECIMAL(38, 12) AS llm_cost_usd,
        {dims}
    FROM {src} GROUP BY project, task_id"""
_TASKS = """
    SELECT project, task_id,
        any_value(kind) AS kind,
        arg_max(outcome, end_ns) AS outcome,
        min(start_ns) AS task_start_ns,
        max(end_ns) AS task_end_ns,
        any_value(harness_version) AS harness_version,
        any_value(agent_name) AS agent_name,
        any_value(agent_version) AS agent_version,
        any_value(conversation_id) AS conversation_id,
        any_value(service_name) AS service_name,
        coalesce(bool_or(golden), FALSE) AS golden
    FROM {src} GROUP BY project, task_id"""
_TOOLS = """
    SELECT project, task_id,
        count(*) AS tool_calls,
        count(cost_usd) AS priced_tool_calls,
        coalesce(sum(cost_usd), 0)::DECIMAL(38, 12) AS tool_cost_usd
    FROM {src} GROUP BY project, task_id"""

# the task's call dimensions, as min and max per dimension (tasks shows the shared value, or 'mixed')
_DIMS = tuple(TASK_DIMENSIONS)
_DIM_AGGREGATES = ", ".join(f"min({e}) AS {d}_min, max({e}) AS {d}_max" for d, e in TASK_DIMENSIONS.items())
_FIRST = ("kind", "harness_version", "agent_name", "agent_version", "conversation_id", "service_name")
_TASK_COLS = (*_FIRST, "outcome", "task_start_ns", "task_end_ns")
_CALL_COUNTS = ("attempts", "failed_attempts", "priced_calls")
_CALL_SUMS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
_TOOL_COUNTS = ("tool_calls", "priced_tool_calls")
_MONEY = ("llm_cost_usd", "tool_cost_usd")
_ADDED = (*_CALL_COUNTS, *_TOOL_COUNTS, *_MONEY)  # NOT NULL: added up
# the delta's call ids the stored row has not seen yet (stored call_ids stay distinct)
_NEW_IDS = "list_filter(list_distinct(d.call_ids), lambda h: NOT list_contains(b.call_ids, h))"


def _per_task(calls: str | None, tasks: str | None, tools: str | None) -> str | None:
    """A SELECT of task_rollup_delta rows (every column) from the given row sources (``calls``: the rows
    that count, no duplicates); None when none is given."""
    given = (("t", _TASKS, tasks), ("c", _CALLS, calls), ("tl", _TOOLS, tools))
    parts = [(name, sql.format(src=src, dims=_DIM_AGGREGATES)) for name, sql, src in given if src]
    if not parts:
        return None
    first, *rest = (name for name, _ in parts)
    joined = first + "".join(f" FULL OUTER JOIN {name} USING (project, task_id)" for name in rest)
    c, t, tl = bool(calls), bool(tasks), bool(tools)
    cols = [f"{TASK_KEY} AS tk", "project", "task_id"]
    cols += [f"t.{x}" if t else f"NULL AS {x}" for x in _TASK_COLS]
    cols.append("coalesce(t.golden, FALSE) AS golden" if t else "FALSE AS golden")
    cols.append("coalesce(c.call_ids, []::UBIGINT[]) AS call_ids" if c else "[]::UBIGINT[] AS call_ids")
    cols += [f"coalesce(c.{x}, 0) AS {x}" if c else f"0 AS {x}" for x in _CALL_COUNTS]
    cols += [f"c.{x}" if c else f"NULL::BIGINT AS {x}" for x in (*_CALL_SUMS, "call_start_ns", "call_end_ns")]
    cols += [f"coalesce(tl.{x}, 0) AS {x}" if tl else f"0 AS {x}" for x in _TOOL_COUNTS]
    cols.append("coalesce(c.llm_cost_usd, 0)::DECIMAL(38, 12) AS llm_cost_usd" if c else "0 AS llm_cost_usd")
    cols.append("coalesce(tl.tool_cost_usd, 0)::DECIMAL(38, 12) AS tool_cost_usd" if tl else "0 AS tool_cost_usd")
    cols += [f"c.{d}_{m}" if c else f"NULL::VARCHAR AS {d}_{m}" for d in _DIMS for m in ("min", "max")]
    ctes = ", ".join(f"{name} AS ({sql})" for name, sql in parts)
    return f"WITH {ctes} SELECT {', '.join(cols)} FROM {joined}"


# -- the writer ----------------------------------------------------------------------------------------
def insert_calls(cur: duckdb.DuckDBPyConnection, source: str, with_id: int | None = None) -> str:
    """Insert the commit's new LLM-call rows (``source``: a relation over them), deciding ``duplicate``;
    returns a relation of those that count (no duplicate) for ``add_to_tasks``.

    The common case costs a lookup of the commit's response keys in the dedupe window (``_dedupe``) and an
    append of them, and the rows go in as they came. When a response was stored before, or the commit itself
    repeats one, the rows are staged and the repeats marked. ``with_id``: how many of the rows have a
    ``response_id``, when the caller knows it (else counted here).
    """
    if with_id is None:
        with_id = count(cur, f"SELECT count(response_id) FROM {source}")
    if not with_id:
        cur.execute(f"INSERT INTO llm_call_rows BY NAME SELECT * FROM {source}")
        return source
    keys = f"SELECT {RESPONSE_KEY} AS k FROM {source} WHERE response_id IS NOT NULL"
    # the commit's responses stored before (within the dedupe window), looked up once
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE {_SEEN} AS "
        f"SELECT DISTINCT k FROM ({keys}) WHERE k IN {_dedupe.seen('response_keys')}"
    )
    seen = f" OR {RESPONSE_KEY} IN (SELECT k FROM {_SEEN})" if count(cur, f"SELECT count(*) FROM {_SEEN}") else ""
    stored = count(
        cur,
        f"INSERT INTO response_keys SELECT DISTINCT k FROM ({keys})"
        + (f" WHERE k NOT IN (SELECT k FROM {_SEEN})" if seen else ""),
    )
    if stored == with_id:  # every response is new, and once in the commit
        cur.execute(f"INSERT INTO llm_call_rows BY NAME SELECT * FROM {source}")
        return source
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE {_STAGE} AS SELECT *, response_id IS NOT NULL AND ("
        "row_number() OVER (PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) > 1"
        f"{seen}) AS duplicate FROM {source}"
    )
    cur.execute(f"INSERT INTO llm_call_rows BY NAME SELECT * FROM {_STAGE}")
    return f"(SELECT * FROM {_STAGE} WHERE NOT duplicate)"


def drop_stage(cur: duckdb.DuckDBPyConnection) -> None:
    cur.execute(f"DROP TABLE IF EXISTS {_STAGE}")
    cur.execute(f"DROP TABLE IF EXISTS {_SEEN}")


def add_to_tasks(cur: duckdb.DuckDBPyConnection, calls: str | None, tasks: str | None, tools: str | None) -> None:
    """Append a commit's figures per task (from its counted calls, task rows, tool rows; each optional)."""
    select = _per_task(calls, tasks, tools)
    if select is not None:
        cur.execute(f"INSERT INTO task_rollup_delta BY NAME ({select})")


# The delta per task, as tasks merges it (any_value / arg_max / min / max / sums).
_DELTA = (
    "SELECT tk, any_value(project) AS project, any_value(task_id) AS task_id, "
    + ", ".join(f"any_value({c}) AS {c}" for c in _FIRST)
    + ", arg_max(outcome, task_end_ns) AS outcome, min(task_start_ns) AS task_start_ns, "
    "max(task_end_ns) AS task_end_ns, flatten(list(call_ids)) AS call_ids, "
    + ", ".join(f"sum({c})::BIGINT AS {c}" for c in (*_CALL_COUNTS, *_TOOL_COUNTS, *_CALL_SUMS))
    + ", "
    + ", ".join(f"sum({c}) AS {c}" for c in _MONEY)
    + ", min(call_start_ns) AS call_start_ns, max(call_end_ns) AS call_end_ns, bool_or(golden) AS golden, "
    + ", ".join(f"min({d}_min) AS {d}_min, max({d}_max) AS {d}_max" for d in _DIMS)
    + " FROM task_rollup_delta GROUP BY tk"
)
# How a task's stored row (b) takes its delta (d): as the tasks view merges them.
_MERGE = ", ".join(
    [f"{c} = coalesce(b.{c}, d.{c})" for c in _FIRST]
    + [
        "outcome = CASE WHEN b.task_end_ns IS NULL OR d.task_end_ns > b.task_end_ns "
        "THEN coalesce(d.outcome, b.outcome) ELSE b.outcome END",
        "task_start_ns = least(b.task_start_ns, d.task_start_ns)",
        "task_end_ns = greatest(b.task_end_ns, d.task_end_ns)",
        "call_start_ns = least(b.call_start_ns, d.call_start_ns)",
        "call_end_ns = greatest(b.call_end_ns, d.call_end_ns)",
        f"call_ids = list_concat(b.call_ids, {_NEW_IDS})",
        f"llm_calls = b.llm_calls + len({_NEW_IDS})",
        "golden = coalesce(b.golden, FALSE) OR coalesce(d.golden, FALSE)",
    ]
    + [f"{c} = b.{c} + d.{c}" for c in _ADDED]
    + [f"{c} = coalesce(b.{c} + d.{c}, b.{c}, d.{c})" for c in _CALL_SUMS]
    + [f"{d}_min = least(b.{d}_min, d.{d}_min), {d}_max = greatest(b.{d}_max, d.{d}_max)" for d in _DIMS]
)
_FOLD = "_taskcost_fold"


def fold(cur: duckdb.DuckDBPyConnection, fold_rows: int) -> None:
    """Fold task_rollup_delta into task_rollup when it holds ``fold_rows`` rows or more (0: whenever it
    holds any). The writer's job, in its transaction: it alone updates task_rollup; a re-price appending
    meanwhile is not seen by this snapshot, and stays for the next fold."""
    if count(cur, "SELECT count(*) FROM task_rollup_delta") < max(fold_rows, 1):
        return
    cur.execute(f"CREATE OR REPLACE TEMP TABLE {_FOLD} AS {_DELTA}")
    cur.execute(f"UPDATE task_rollup AS b SET {_MERGE} FROM {_FOLD} AS d WHERE b.tk = d.tk")
    cur.execute(
        "INSERT INTO task_rollup BY NAME SELECT * REPLACE (list_distinct(call_ids) AS call_ids), "
        f"list_unique(call_ids) AS llm_calls FROM {_FOLD} ANTI JOIN task_rollup USING (tk)"
    )
    cur.execute("DELETE FROM task_rollup_delta")
    cur.execute(f"DROP TABLE {_FOLD}")


# -- re-pricing ------------------------------------------------------------------------------------------
def adjust_tasks(cur: duckdb.DuckDBPyConnection, changes: str, kind: str) -> None:
    """Append, in the re-price's transaction, what it changed per task.

    ``changes``: a relation of changed rows with project, task_id, counted (the row counts in ``tasks``,
    i.e. is no duplicate), old_cost_usd and cost_usd; ``kind``: ``llm`` (call rows) or ``tool``.
    """
    priced, money = ("priced_calls", "llm_cost_usd") if kind == "llm" else ("priced_tool_calls", "tool_cost_usd")
    zero = [f"0 AS {c}" for c in _ADDED if c not in (priced, money)]
    cur.execute(
        "INSERT INTO task_rollup_delta BY NAME "
        f"SELECT {TASK_KEY} AS tk, project, task_id, []::UBIGINT[] AS call_ids, {', '.join(zero)}, "
        f"count(cost_usd) - count(old_cost_usd) AS {priced}, "
        f"(coalesce(sum(cost_usd), 0) - coalesce(sum(old_cost_usd), 0))::DECIMAL(38, 12) AS {money} "
        f"FROM {changes} WHERE counted GROUP BY project, task_id "
        f"HAVING {priced} <> 0 OR {money} <> 0"
    )


# -- from scratch ----------------------------------------------------------------------------------------
def rebuild(cur: duckdb.DuckDBPyConnection, window: int) -> None:
    """Decide ``duplicate`` again over every stored row (in (received_ns, span_id) order), and rebuild the
    dedupe window (``window`` keys of each kind), ``task_rollup``, ``call_hours`` and the engine matches
    (``_engine_match``) from the row tables: for rows loaded into the tables directly (bulk loads, repairs). In the
    caller's transaction, on a store no writer is feeding meanwhile."""
    cur.execute(
        "UPDATE llm_call_rows AS c SET duplicate = m.duplicate FROM ("
        "  SELECT rowid AS rid, response_id IS NOT NULL AND row_number() OVER ("
        "    PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) > 1 AS duplicate"
        "  FROM llm_call_rows) AS m "
        "WHERE c.rowid = m.rid AND c.duplicate <> m.duplicate"
    )
    _dedupe.rebuild(cur, window)
    cur.execute("UPDATE llm_call_rows SET answered_model = NULL WHERE answered_model IS NOT NULL")
    cur.execute(_answers.backfill_sql())
    cur.execute(f"DELETE FROM {_answers.OPEN_TASKS}")
    cur.execute(_answers.open_tasks_sql())
    cur.execute("DELETE FROM task_rollup_delta")
    cur.execute("DELETE FROM task_rollup")
    select = _per_task("(SELECT * FROM llm_call_rows WHERE NOT duplicate)", "task_rows", "tool_call_rows")
    cur.execute(
        "INSERT INTO task_rollup BY NAME SELECT * REPLACE (list_distinct(call_ids) AS call_ids), "
        f"list_unique(call_ids) AS llm_calls FROM ({select})"
    )
    _hours.rebuild_hours(cur)
    _engine_match.rebuild(cur)
    _engine_hours.rebuild(cur)
