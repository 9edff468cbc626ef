"""User SQL: one SELECT, over the public views only, scoped to one project when asked.

Defence in depth, on top of the instance-wide hardening (no file, network or extension access,
configuration locked): the statement is parsed by DuckDB itself (``json_serialize_sql``) and every
table it reads must be a public view (or a CTE of the query); the only table functions allowed
generate values. For a project-scoped query, temporary views with the public names shadow the real
ones on the query's own cursor, so even ``main.llm_calls`` sees that project's rows only.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from taskcost.store._base import QueryError

__all__ = ["PUBLIC_RELATIONS", "check_select", "scope_to_project"]

# What user SQL may read. The typed *_rows tables, keys and ledgers are internal.
PUBLIC_RELATIONS = ("llm_calls", "tool_calls", "tasks", "spans")
_TABLE_FUNCTIONS = {"range", "generate_series", "unnest"}


def _walk(node: Any, ctes: set[str], refs: list[tuple[str, str, str]], funcs: list[str]) -> None:
    if isinstance(node, dict):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            for entry in cte_map.get("map", []):
                ctes.add(str(entry.get("key", "")).lower())
        kind = node.get("type")
        if kind == "BASE_TABLE":
            refs.append((node.get("catalog_name", ""), node.get("schema_name", ""), node.get("table_name", "")))
        elif kind == "TABLE_FUNCTION":
            funcs.append(str(node.get("function", {}).get("function_name", "?")).lower())
        for value in node.values():
            _walk(value, ctes, refs, funcs)
    elif isinstance(node, list):
        for value in node:
            _walk(value, ctes, refs, funcs)


def check_select(cur: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise QueryError unless ``sql`` is one SELECT reading public views only."""
    try:
        statements = cur.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL does not parse: {exc}") from None
    if len(statements) != 1:
        raise QueryError(f"send exactly one statement, got {len(statements)}")
    kind = statements[0].type.name
    if kind != "SELECT":
        raise QueryError(f"only read-only SELECT queries are allowed here, not {kind}")
    row = cur.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(row[0]) if row else {"error": True, "error_message": "no parse tree"}
    if tree.get("error"):
        raise QueryError(f"this query form is not supported here: {tree.get('error_message', 'unknown')}")
    ctes: set[str] = set()
    refs: list[tuple[str, str, str]] = []
    funcs: list[str] = []
    _walk(tree.get("statements", []), ctes, refs, funcs)
    for catalog, schema, table in refs:
        name = table.lower()
        if catalog or schema:
            raise QueryError(
                f"refer to views by their plain name, not {'.'.join(p for p in (catalog, schema, table) if p)}"
            )
        if name not in PUBLIC_RELATIONS and name not in ctes:
            raise QueryError(f"unknown or private relation {table!r}; queryable: {', '.join(PUBLIC_RELATIONS)}")
    for func in funcs:
        if func not in _TABLE_FUNCTIONS:
            raise QueryError(f"table function {func}() is not allowed here")


def scope_to_project(cur: duckdb.DuckDBPyConnection, database: str, project: str) -> None:
    """Shadow the public views on this cursor with ones that show ``project`` only."""
    quoted_db = '"' + database.replace('"', '""') + '"'
    literal = "'" + project.replace("'", "''") + "'"
    for name in PUBLIC_RELATIONS:
        cur.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM {quoted_db}.main.{name} WHERE project = {literal}")
