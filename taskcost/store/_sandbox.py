"""User SQL: one SELECT over the public views, checked on DuckDB's own parse tree and run as exactly that tree.

Two layers, each enough on its own for the project boundary:

1. **The check** (``Sandbox.prepare``). DuckDB parses the text (``json_serialize_sql``); the tree is turned back
   into SQL by DuckDB (``json_deserialize_sql``), and *that* SQL is parsed again and checked: what runs is what was
   checked, whatever the text's comments, quoting or case. The check walks the tree with scopes as DuckDB binds
   them: a CTE is visible in the body of its own statement and in the CTEs declared after it (a CTE's own body, and
   an earlier CTE's, see the table of that name, not the CTE), and nowhere else; a recursive CTE sees itself in its
   recursive part. Everything is an allow-list: statement kind (SELECT), query node and table reference kinds, the
   relations (the public views and CTEs in scope, never qualified), the table functions that only generate values,
   and DuckDB's built-in scalar/aggregate/window functions less those that reveal or change the server's state
   (``current_setting``, ``getvariable``, ``sleep_ms``...). Anything else is refused with a QueryError naming it.
2. **The cursor** (``Sandbox.cursor_for``). The query runs on its own cursor whose search path is the temporary
   schema alone, where temporary views with the public names read the real views filtered by the caller's project
   (a literal the server writes; the user cannot set it). The internal tables (``*_rows``, ``api_keys``...) do not
   resolve by an unqualified name there at all, and ``main.llm_calls`` is the filtered view too: only a name
   qualified with the database's own catalog would reach them, and the check refuses every qualified name.

Instance-wide hardening (no file, network or extension access; configuration locked) is set where the store opens.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import duckdb

from taskcost.store._base import QueryError
from taskcost.store._sizeguard import guard_sizes, guard_template

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "DENIED_FUNCTIONS",
    "MAX_TREE_DEPTH",
    "PUBLIC_RELATIONS",
    "TABLE_FUNCTIONS",
    "Sandbox",
]

DEFAULT_MAX_VALUE_BYTES = 64 * 1024

# What user SQL may read. The typed *_rows tables, keys and ledgers are internal.
PUBLIC_RELATIONS = (
    "llm_calls",
    "tool_calls",
    "tasks",
    "spans",
    "llm_call_hours",
    "engine_metrics",
    "engine_spans",
    "engine_calls",
    "engine_call_figures",
    "engine_config_hours",
    "engine_config_busy",
)
# Table functions that only generate values from their arguments.
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
# Built-in functions refused, with why: they read the server's configuration, session or files, change session
# state, or only waste a slot. Every other built-in scalar, aggregate, window function and macro is allowed.
DENIED_FUNCTIONS = {
    **dict.fromkeys(
        (
            "current_setting",
            "getvariable",
            "current_database",
            "current_catalog",
            "current_schema",
            "current_schemas",
            "current_query",
            "current_query_id",
            "current_connection_id",
            "current_transaction_id",
            "current_user",
            "current_role",
            "session_user",
            "user",
            "version",
            "txid_current",
            "json_serialize_sql",
            "json_deserialize_sql",
            "json_serialize_plan",
            "parse_filename",
            "write_log",
            "vector_type",
            "stats",
        ),
        "it reveals the server's configuration or session",
    ),
    **dict.fromkeys(("nextval", "currval", "setval", "setseed"), "it changes session state"),
    "sleep_ms": "it only holds a query slot",
}
# Scalar forms refused for their table form (taskcost/store/_sizeguard.py).
_LIST_BUILDERS = {"range", "generate_series"}
# Nesting depth of the parse tree (JSON levels) at most: a few levels per nested expression or subquery; a query
# nested deeper is refused instead of recursing without bound in DuckDB, Python or the JSON encoder.
MAX_TREE_DEPTH = 400
_PREPARED_KEPT = 512  # checked renderings kept (by SQL text); all are dropped when full
_IDLE_PER_PROJECT = 4  # idle cursors kept per project (about the queries a dashboard page asks at once)
_IDLE_PROJECTS = 16  # projects with idle cursors; the first one kept is dropped for another beyond that
# A check's own query stopped by a limit (the watchdog's interrupt, the engine's memory) is not the text's fault:
# it goes up to the caller, which says which limit stopped it (DuckDBStore._sandboxed)
_STOPPED = (duckdb.InterruptException, duckdb.OutOfMemoryException)
_TOO_DEEP = f"the query is nested too deeply (at most {MAX_TREE_DEPTH} levels of its parse tree)"

_QUERY_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
_ALL_QUERY_NODES = _QUERY_NODES | {"BOUND_SUBQUERY_NODE", "STATEMENT_NODE"}
_TABLE_REFS = frozenset({"BASE_TABLE", "JOIN", "SUBQUERY", "TABLE_FUNCTION", "EXPRESSION_LIST", "EMPTY", "PIVOT"})
_ALL_TABLE_REFS = _TABLE_REFS | {"SHOW_REF", "CTE", "COLUMN_DATA", "DELIM_GET", "BOUND_TABLE_REF", "INVALID"}
_SHOWN_QUERIES = frozenset({"DESCRIBE", "SUMMARY"})  # DESCRIBE / SUMMARIZE of a query (or of a view: the same)
_REFUSED_REF_WHY = {
    "SHOW_REF": "only DESCRIBE or SUMMARIZE of a view or query is available here, not SHOW (docs/schema.md lists "
    "every view's columns)",
}
_EXPRESSIONS = frozenset(
    {
        "BETWEEN",
        "CASE",
        "CAST",
        "COLLATE",
        "COLUMN_REF",
        "COMPARISON",
        "CONJUNCTION",
        "CONSTANT",
        "FUNCTION",
        "LAMBDA",
        "LAMBDA_REF",
        "OPERATOR",
        "PARAMETER",
        "POSITIONAL_REFERENCE",
        "STAR",
        "SUBQUERY",
        "TYPE",
        "WINDOW",
    }
)


def _serialize(cur: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    try:
        text = cur.execute("SELECT system.main.json_serialize_sql(?)", [sql]).fetchall()[0][0]
    except _STOPPED:
        raise
    except duckdb.Error as exc:
        raise QueryError(f"SQL does not parse: {exc}") from None
    try:
        tree: dict[str, Any] = json.loads(text)
    except RecursionError:
        raise QueryError(_TOO_DEEP) from None
    if tree.get("error"):
        message = str(tree.get("error_message", "unknown error"))
        if "Only SELECT statements" in message:
            raise QueryError("only read-only SELECT queries are allowed here") from None
        raise QueryError(f"SQL does not parse: {message}")
    return tree


def _shadow_macros(arities: Mapping[str, Iterable[int]]) -> list[str]:
    """``CREATE TEMP MACRO`` statements that make each denied function fail by its plain name, at every arity."""
    out = []
    for name, counts in sorted(arities.items()):
        message = f"function {name}() is not allowed here: {DENIED_FUNCTIONS[name]}".replace("'", "''")
        forms = ", ".join(
            "(" + ", ".join(f"a{i}" for i in range(n)) + f") AS error('{message}')" for n in sorted(set(counts))
        )
        out.append(f'CREATE TEMP MACRO "{name}"{forms}')
    return out


class Sandbox:
    """The check and the cursor for one store (``functions``: the built-in function names DuckDB has;
    ``max_value_bytes``: the largest value a size argument may ask for, taskcost/store/_sizeguard.py)."""

    def __init__(
        self,
        database: str,
        functions: Iterable[str],
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        denied_arities: Mapping[str, Iterable[int]] | None = None,
    ) -> None:
        self._database = '"' + database.replace('"', '""') + '"'
        self.functions = frozenset(f.lower() for f in functions) - DENIED_FUNCTIONS.keys()
        # The binder's layer of the function denylist: on a query's cursor each denied function is shadowed by a
        # temporary macro of the same name and arities that fails, so that a form the check does not see as a call
        # (the keyword forms ``current_catalog``, ``current_role``, ``user``... parse as column names) still cannot
        # run the function. One statement per name (``_shadow_macros``), made once per cursor.
        self._shadows = _shadow_macros(denied_arities or {})
        self.max_value_bytes = max_value_bytes
        self._guards: dict[tuple[str, int], dict[str, Any]] = {}  # (function, arity) -> its checked call, parsed
        # SQL text -> its checked rendering (a pure function of the text: the dashboards ask the same SQL, with other
        # parameters, on every load; about 3-12 ms saved each time)
        self._prepared: dict[str, str] = {}
        self._lock = threading.Lock()
        self._idle: dict[str | None, list[duckdb.DuckDBPyConnection]] = {}

    @classmethod
    def for_connection(cls, con: duckdb.DuckDBPyConnection, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> Sandbox:
        database = str(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        rows = con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE internal AND database_name = 'system' "
            "AND schema_name = 'main' AND function_type IN ('scalar', 'aggregate', 'window', 'macro')"
        ).fetchall()
        arities: dict[str, set[int]] = {}
        for name, params, varargs in con.execute(
            "SELECT function_name, len(parameters), varargs IS NOT NULL FROM duckdb_functions() "
            "WHERE database_name = 'system' AND function_name IN (SELECT unnest(?))",
            [list(DENIED_FUNCTIONS)],
        ).fetchall():
            arities.setdefault(name, set()).update(range(params, params + 4) if varargs else (params,))
        return cls(database, (r[0] for r in rows), max_value_bytes, arities)

    # -- the check --------------------------------------------------------------------------------------
    def prepare(self, cur: duckdb.DuckDBPyConnection, sql: str) -> str:
        """The SQL to run for ``sql``: DuckDB's own rendering of its parse, checked. Raises QueryError."""
        rendered = self._prepared.get(sql)
        if rendered is None:
            rendered = self._prepare(cur, sql)
            with self._lock:
                if len(self._prepared) >= _PREPARED_KEPT:
                    self._prepared.clear()
                self._prepared[sql] = rendered
        return rendered

    def _prepare(self, cur: duckdb.DuckDBPyConnection, sql: str) -> str:
        first = _serialize(cur, sql)
        statements = first.get("statements", [])
        if len(statements) != 1:
            raise QueryError(f"send exactly one statement, got {len(statements)}")

        def template(function: str, arity: int) -> dict[str, Any]:
            key = (function, arity)
            if key not in self._guards:
                text = guard_template(self.max_value_bytes, function, arity)
                self._guards[key] = _serialize(cur, text)["statements"][0]["node"]["select_list"][0]
            return self._guards[key]

        guard_sizes(first, template)
        try:
            rendered = cur.execute("SELECT system.main.json_deserialize_sql(?)", [json.dumps(first)]).fetchall()[0][0]
        except _STOPPED:
            raise
        except (duckdb.Error, RecursionError) as exc:
            if "nesting depth" in str(exc):
                raise QueryError(_TOO_DEEP) from None
            raise QueryError(f"this query form is not supported here: {exc}") from None
        tree = _serialize(cur, rendered)  # what will run: the rendering, parsed again
        if len(tree.get("statements", [])) != 1:
            raise QueryError("this query form is not supported here (it does not render as one statement)")
        self.check(tree["statements"][0]["node"])
        return str(rendered)

    def check(self, root: dict[str, Any]) -> None:
        """Walk one statement's query node (iteratively: depth is bounded, not the interpreter's stack)."""
        stack: list[tuple[Any, frozenset[str], int]] = [(root, frozenset(), 0)]
        while stack:
            node, scope, depth = stack.pop()
            if depth > MAX_TREE_DEPTH:
                raise QueryError(_TOO_DEEP)
            if isinstance(node, list):
                stack.extend((v, scope, depth + 1) for v in node)
                continue
            if not isinstance(node, dict):
                continue
            kind = node.get("type")
            if not isinstance(kind, str):  # a value's type ({"id": "BIGINT"...}: a sample's size), not a node's
                kind = None
            if "class" in node:
                self._expression(node)
            elif kind in _ALL_QUERY_NODES:
                stack.extend(self._query_node(node, scope, depth))
                continue
            elif kind in _ALL_TABLE_REFS:
                self._table_ref(node, scope)
                if kind == "TABLE_FUNCTION":  # the function itself is checked above; its arguments as expressions
                    stack.extend((a, scope, depth + 1) for a in node["function"].get("children", []))
                    stack.extend((a, scope, depth + 1) for a in node["function"].get("arguments", []))
                    stack.extend((v, scope, depth + 1) for k, v in node.items() if k != "function")
                    continue
            stack.extend((v, scope, depth + 1) for v in node.values() if isinstance(v, dict | list))

    def _query_node(
        self, node: dict[str, Any], scope: frozenset[str], depth: int
    ) -> list[tuple[Any, frozenset[str], int]]:
        kind = node["type"]
        if kind not in _QUERY_NODES:
            raise QueryError(f"this query form is not supported here ({kind})")
        todo: list[tuple[Any, frozenset[str], int]] = []
        declared: list[str] = []
        for entry in (node.get("cte_map") or {}).get("map", []):
            # a CTE's body sees the CTEs declared before it (DuckDB binds its own name and later ones to tables)
            todo.append((entry.get("value"), scope | frozenset(declared), depth + 1))
            declared.append(str(entry.get("key", "")).lower())
        inner = scope | frozenset(declared)
        for key, value in node.items():
            if key == "cte_map" or not isinstance(value, dict | list):
                continue
            if kind == "RECURSIVE_CTE_NODE" and key == "right":
                todo.append((value, inner | {str(node.get("cte_name", "")).lower()}, depth + 1))
            else:
                todo.append((value, inner, depth + 1))
        return todo

    def _table_ref(self, node: dict[str, Any], scope: frozenset[str]) -> None:
        kind = node["type"]
        if kind == "SHOW_REF" and node.get("show_type") in _SHOWN_QUERIES and isinstance(node.get("query"), dict):
            return  # its query is walked like any other
        if kind not in _TABLE_REFS:
            raise QueryError(_REFUSED_REF_WHY.get(kind, f"this table form is not allowed here ({kind})"))
        if kind == "BASE_TABLE":
            table = str(node.get("table_name", ""))
            parts = [p for p in (node.get("catalog_name"), node.get("schema_name")) if p]
            if parts:
                raise QueryError(f"refer to views by their plain name, not {'.'.join([*parts, table])}")
            if node.get("at_clause"):
                raise QueryError("time travel (AT ...) is not available here")
            name = table.lower()
            if name not in scope and name not in PUBLIC_RELATIONS:
                raise QueryError(f"unknown or private relation {table!r}; queryable: {', '.join(PUBLIC_RELATIONS)}")
        elif kind == "TABLE_FUNCTION":
            function = node.get("function") or {}
            name = str(function.get("function_name", "?")).lower()
            if function.get("schema") or function.get("catalog") or name not in TABLE_FUNCTIONS:
                raise QueryError(
                    f"table function {name}() is not allowed here; allowed: {', '.join(sorted(TABLE_FUNCTIONS))}"
                )

    def _expression(self, node: dict[str, Any]) -> None:
        cls = node["class"]
        if cls not in _EXPRESSIONS:
            raise QueryError(f"this expression form is not allowed here ({cls})")
        if cls in ("FUNCTION", "WINDOW"):
            name = str(node.get("function_name", "?"))
            if node.get("schema") or node.get("catalog"):
                raise QueryError(f"call functions by their plain name, not {node.get('schema')}.{name}()")
            if node.get("is_operator") and not name.replace("_", "").isalnum():
                return  # +, -, ||, ~~ ...: operators, always built in
            lowered = name.lower()
            if lowered in _LIST_BUILDERS and cls == "FUNCTION":
                raise QueryError(
                    f"{name}() as a value builds its whole list in memory: use it as a table (FROM {name}(...))"
                )
            if lowered in DENIED_FUNCTIONS:
                raise QueryError(f"function {name}() is not allowed here: {DENIED_FUNCTIONS[lowered]}")
            if lowered not in self.functions:
                raise QueryError(f"function {name}() is not allowed here (not a built-in function)")

    # -- the cursor -------------------------------------------------------------------------------------
    def borrow(self, con: duckdb.DuckDBPyConnection, project: str | None) -> duckdb.DuckDBPyConnection:
        """``cursor_for``'s cursor, an idle one of the same project when there is one (making one costs its temporary
        views, about 10 ms). Hand it back with ``give_back`` after a query that ended normally, else close it."""
        with self._lock:
            idle = self._idle.get(project)
            if idle:
                return idle.pop()
        return self.cursor_for(con, project)

    def give_back(self, project: str | None, cur: duckdb.DuckDBPyConnection) -> None:
        """Keep ``cur`` (a borrowed cursor, idle now) for the next query of ``project``; closed when enough are kept."""
        with self._lock:
            if project not in self._idle and len(self._idle) >= _IDLE_PROJECTS:
                for other in self._idle.pop(next(iter(self._idle))):
                    other.close()
            idle = self._idle.setdefault(project, [])
            if len(idle) < _IDLE_PER_PROJECT:
                idle.append(cur)
                return
        cur.close()

    def close_idle(self) -> None:
        with self._lock:
            for idle in self._idle.values():
                for cur in idle:
                    cur.close()
            self._idle.clear()

    def cursor_for(self, con: duckdb.DuckDBPyConnection, project: str | None) -> duckdb.DuckDBPyConnection:
        """A new cursor on which the public names are temporary views of the real ones, limited to ``project``
        (every project: None), and nothing else resolves by an unqualified name."""
        cur = con.cursor()
        try:
            where = "" if project is None else " WHERE project = '" + project.replace("'", "''") + "'"
            for name in PUBLIC_RELATIONS:
                cur.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM {self._database}.main.{name}{where}")
            for stmt in self._shadows:
                cur.execute(stmt)
            cur.execute("SET search_path = 'temp.main'")
        except Exception:
            cur.close()
            raise
        return cur
