"""The hourly call roll-up the single writer keeps, as it keeps the task roll-up (taskcost/store/_rollup.py): so that a
question about call traffic (tokens and spend by model, by hour; hit rates by engine) reads a row per (hour, project,
call dimensions) instead of every call.

* ``call_hours``: one row per key (``HOUR_KEYS``: the project, the hour of the call's start, its dimensions, and
  whether it is priced) with the counted calls' figures added up (``HOUR_MEASURES``). Duplicates are not counted,
  as in ``llm_calls``.
* ``call_hours_delta``: what each commit adds, a row per key and commit, appended in the commit that stores the rows;
  the writer folds it into ``call_hours`` once it holds ``fold_rows`` rows (re-grouping only the hours it touches).
* ``taskcost reprice`` appends its changes to ``call_hours_delta`` in its own transaction: each changed call is taken
  out at its old price and put in at its new one (a call priced for the first time moves to the priced key), so the
  roll-up equals the calls at every commit.
* The public view ``llm_call_hours`` adds the two up per key: a row per key, never an empty one.

Money stays DECIMAL(38,12); token sums count a missing figure as 0 (as every question reading them does).
"""

from __future__ import annotations

import duckdb

from taskcost.store import _engine_hours
from taskcost.store._answers import MODEL
from taskcost.store._sql import count

__all__ = [
    "HOUR_KEYS",
    "HOUR_MEASURES",
    "add_to_hours",
    "adjust_hours",
    "create_hours",
    "fold_hours",
    "move_hours",
    "rebuild_hours",
    "rebuild_sql",
]

# key column -> its SQL over llm_call_rows (the expressions of the llm_calls view)
HOUR_KEYS = {
    "project": "project",
    "hour": "date_trunc('hour', make_timestamp(start_ns // 1000))",
    "provider": "provider",
    "model": MODEL,
    "deployment": "deployment",
    "engine": "engine",
    "engine_version": "engine_version",
    "quantization": "quantization",
    "gpu_type": "gpu_type",
    "cluster_id": "cluster_id",
    "priced": "cost_usd IS NOT NULL",
}
_KEY_TYPES = {"project": "VARCHAR NOT NULL", "hour": "TIMESTAMP NOT NULL", "priced": "BOOLEAN NOT NULL"}

# measure column -> a call's value (summed)
HOUR_MEASURES = {
    "attempts": "1",
    "errors": "CASE WHEN status = 'error' THEN 1 ELSE 0 END",
    "cost_usd": "coalesce(cost_usd, 0)",
    "input_tokens": "coalesce(input_tokens, 0)",
    "cache_read_tokens": "coalesce(cache_read_tokens, 0)",
    "cache_write_tokens": "coalesce(cache_write_tokens, 0)",
    "output_tokens": "coalesce(output_tokens, 0)",
    "reasoning_tokens": "coalesce(reasoning_tokens, 0)",
}
_MONEY = "DECIMAL(38, 12)"

_KEY_LIST = ", ".join(HOUR_KEYS)
_FOLD = "_taskcost_fold_hours"
_FOLD_HOURS = "_taskcost_fold_hour_list"


def _sum(measure: str, value: str) -> str:
    return f"sum({value})::{_MONEY if measure == 'cost_usd' else 'BIGINT'} AS {measure}"


def _per_hour(src: str, sign: str | None = None) -> str:
    """A SELECT of roll-up rows (every column) from call rows ``src`` (the counted ones); ``sign``: a column of ``src``
    each row's figures are multiplied by (+1 / -1), for a re-price's moves."""
    keys = ", ".join(f"{e} AS {k}" for k, e in HOUR_KEYS.items())
    sums = ", ".join(_sum(m, e if sign is None else f"{sign} * {e}") for m, e in HOUR_MEASURES.items())
    return f"SELECT {keys}, {sums} FROM {src} GROUP BY ALL"


def _regroup(src: str) -> str:
    """Roll-up rows from roll-up rows: a row per key, none whose calls add up to nothing."""
    sums = ", ".join(_sum(m, m) for m in HOUR_MEASURES)
    return f"SELECT {_KEY_LIST}, {sums} FROM {src} GROUP BY {_KEY_LIST} HAVING sum(attempts) <> 0"


def create_hours() -> str:
    """SQL creating the two tables and the public view (migration 0012; the caller fills the table)."""
    cols = ",\n    ".join(
        [f"{k} {_KEY_TYPES.get(k, 'VARCHAR')}" for k in HOUR_KEYS]
        + [f"{m} {_MONEY if m == 'cost_usd' else 'BIGINT'} NOT NULL" for m in HOUR_MEASURES]
    )
    sums = ",\n    ".join(
        "CASE WHEN priced THEN sum(cost_usd) END AS cost_usd" if m == "cost_usd" else _sum(m, m) for m in HOUR_MEASURES
    )
    return f"""
-- The calls that count (no duplicates), added up per hour of their start, project, call dimensions and whether
-- they are priced; the writer keeps it (taskcost/store/_hours.py).
CREATE TABLE call_hours (
    {cols}
);
-- What commits (and re-prices) added since the writer last folded this into call_hours. Append-only.
CREATE TABLE call_hours_delta (
    {cols}
);
CREATE OR REPLACE VIEW llm_call_hours AS
SELECT {_KEY_LIST},
    {sums}
FROM (SELECT * FROM call_hours UNION ALL SELECT * FROM call_hours_delta)
GROUP BY {_KEY_LIST}
HAVING sum(attempts) <> 0;
"""


def rebuild_sql(model: str = MODEL) -> str:
    """An INSERT of every stored call that counts into (an empty) ``call_hours``; ``model``: the model key's SQL (a
    migration's own: before 0015 the rows had no ``answered_model``)."""
    src = "(SELECT * FROM llm_call_rows WHERE NOT duplicate)"
    if model != MODEL:
        src = f"(SELECT *, {model} AS answered_model FROM llm_call_rows WHERE NOT duplicate)"
    return f"INSERT INTO call_hours BY NAME {_per_hour(src)}"


def rebuild_hours(cur: duckdb.DuckDBPyConnection) -> None:
    """``call_hours`` from the stored rows (the caller's transaction; no writer meanwhile)."""
    cur.execute("DELETE FROM call_hours_delta")
    cur.execute("DELETE FROM call_hours")
    cur.execute(rebuild_sql())


def add_to_hours(cur: duckdb.DuckDBPyConnection, calls: str) -> None:
    """Append a commit's counted calls (``calls``: a relation of llm_call_rows rows as a batch carries them, without
    ``answered_model``, which the writer sets after: ``_answers``), per key."""
    src = f"(SELECT *, CAST(NULL AS VARCHAR) AS answered_model FROM {calls})"
    cur.execute(f"INSERT INTO call_hours_delta BY NAME {_per_hour(src)}")
    _engine_hours.mark(cur, calls)  # (and the engines question's hours: taskcost/store/_engine_hours.py)


def move_hours(cur: duckdb.DuckDBPyConnection, moves: str) -> None:
    """Append moves (``moves``: a relation of llm_call_rows rows with a ``sign`` column, +1 in, -1 out), per key; a key
    whose moves add up to nothing is left out. (Attempts and cost alone were not enough: one attempt moved into a key
    as another moved out of it nets no attempt, but their tokens differ.)"""
    changed = " OR ".join(f"{m} <> 0" for m in HOUR_MEASURES)
    cur.execute(f"INSERT INTO call_hours_delta BY NAME SELECT * FROM ({_per_hour(moves, 'sign')}) WHERE {changed}")
    _engine_hours.mark(cur, moves)


def fold_hours(cur: duckdb.DuckDBPyConnection, fold_rows: int) -> None:
    """Fold call_hours_delta into call_hours when it holds ``fold_rows`` rows or more (0: whenever it holds any): the
    hours it touches are grouped again with it. The writer's job, in its transaction (a re-price appending meanwhile
    is not seen by this snapshot, and stays for the next fold)."""
    if count(cur, "SELECT count(*) FROM call_hours_delta") < max(fold_rows, 1):
        return
    cur.execute(f"CREATE OR REPLACE TEMP TABLE {_FOLD_HOURS} AS SELECT DISTINCT hour FROM call_hours_delta")
    touched = f"(SELECT hour FROM {_FOLD_HOURS})"
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE {_FOLD} AS "
        + _regroup(
            f"(SELECT * FROM call_hours WHERE hour IN {touched} UNION ALL BY NAME SELECT * FROM call_hours_delta)"
        )
    )
    cur.execute(f"DELETE FROM call_hours WHERE hour IN {touched}")
    cur.execute(f"INSERT INTO call_hours BY NAME SELECT * FROM {_FOLD}")
    cur.execute("DELETE FROM call_hours_delta")
    cur.execute(f"DROP TABLE {_FOLD}")
    cur.execute(f"DROP TABLE {_FOLD_HOURS}")


def adjust_hours(cur: duckdb.DuckDBPyConnection, changed: str, old: str) -> None:
    """Append, in a re-price's transaction, what it changed per key: ``changed``, a relation of the changed
    ``llm_call_rows`` rows as stored now; ``old``: a relation of (project, trace_id, span_id, old_cost_usd). Each
    counted call is taken out at its old cost and put in at its new one."""
    moves = (
        f"(SELECT *, 1 AS sign FROM {changed} WHERE NOT duplicate "
        f"UNION ALL BY NAME SELECT c.* REPLACE (o.old_cost_usd AS cost_usd), -1 AS sign FROM {changed} AS c "
        f"JOIN {old} AS o USING (project, trace_id, span_id) WHERE NOT c.duplicate)"
    )
    move_hours(cur, moves)
