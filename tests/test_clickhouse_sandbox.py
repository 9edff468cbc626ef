"""The ClickHouse store's SQL sandbox (taskcost/store/clickhouse/_sandbox.py) on an in-process chDB.

A small database of its own: the five public names (a view over an internal table, and four tables), each with a
``project`` column and rows of projects ``a`` and ``b``, and internal tables that must stay unreachable. The
client's current database is the store's, as the store's would be, so an unqualified internal name would resolve.

Property-based, like tests/test_sql_isolation.py: a generator of nested queries (CTEs, subqueries, joins, IN,
EXISTS, scalar subqueries, set operations, quoted and mixed-case spellings, literals with quotes, comment markers and
backslashes, comments between tokens) that knows by construction whether each query reads only what it may. Oracles:

- an allowed query answers exactly what the same query answers unsandboxed with every public view replaced by its
  project-filtered subquery (so: only the caller's rows, and no more refused than the engine itself refuses);
- a query that reads anything else (internal or qualified names, ``system``, table functions, a CTE named like a
  public view or an internal table) is refused with QueryError;
- the scope alone (the final text run without the checks) shows one project's rows only.

Budget: ``TASKCOST_ISOLATION_EXAMPLES`` (default 40) examples each. chDB opens one database directory per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from taskcost.store._base import QueryError
from taskcost.store.clickhouse._sandbox import DENIED_FUNCTIONS, PUBLIC_RELATIONS, ClickHouseSandbox, query_error

EXAMPLES = int(os.environ.get("TASKCOST_ISOLATION_EXAMPLES", "40"))
BUDGET = settings(
    max_examples=EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
DB = "store"
OURS, THEIRS = "a", "b"
SECRET = "sekret-key-hash"
THEIR_MARK = "beta-only-marker"
PUBLIC = list(PUBLIC_RELATIONS)
INTERNAL = ["llm_call_rows", "api_keys", "schema_migrations"]
PLAIN = ["x", "y", "q"]
QUALIFIED = [
    f"{DB}.llm_calls",
    f"{DB}.api_keys",
    f"`{DB}`.`llm_call_rows`",
    "default.x",
    "system.tables",
    "system.one",
    "information_schema.tables",
    "INFORMATION_SCHEMA.TABLES",
]
TABLE_FUNCTIONS_REFUSED = [
    "file('/etc/passwd')",
    "url('http://127.0.0.1:1/x', CSV, 'a String')",
    f"remote('127.0.0.1', {DB}.api_keys)",
    f"merge('{DB}', '.*')",
    "s3('http://127.0.0.1:1/b/k', 'CSV')",
    "mysql('127.0.0.1:1', 'd', 't', 'u', 'p')",
    "view(SELECT * FROM api_keys)",
    "python('x')",
]
COMMENTS = [" ", "  ", " /* api_keys */ ", " -- llm_call_rows\n ", "\n", " /* ; SELECT * FROM api_keys */ "]
LITERALS = ["x", "it's", "--", "/*", "*/", "a\\b", "\\'", "'; DROP TABLE tasks; --", "\\n", '`"', "%_"]


@dataclass(frozen=True)
class Q:
    sql: str  # as a user sends it
    oracle: str  # the same, every public view replaced by its filtered subquery (for project OURS)
    ok: bool  # reads only public views and its own CTEs
    check_only: bool = False  # a qualified name or a refused table function: the checks' part alone


def _kw(draw: st.DrawFn, word: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in word)


def _quoted(draw: st.DrawFn, name: str) -> str:
    style = draw(st.sampled_from(["plain", "backtick", "double"]))
    return {"plain": name, "backtick": f"`{name}`", "double": f'"{name}"'}[style]


def _c(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(COMMENTS))


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _relation(draw: st.DrawFn, scope: frozenset[str]) -> Q:
    kind = draw(st.sampled_from(["public"] * 4 + ["scoped"] * 2 + ["internal", "cased", "qualified", "function"]))
    if kind == "public" or (kind == "scoped" and not scope):
        name = draw(st.sampled_from(PUBLIC))
        filtered = f"(SELECT * FROM {DB}.{name} WHERE project = '{OURS}')"
        return Q(_quoted(draw, name), filtered, True)
    if kind == "scoped":
        name = draw(st.sampled_from(sorted(scope)))
        spelled = _quoted(draw, name)
        return Q(spelled, spelled, True)
    if kind == "internal":
        name = _quoted(draw, draw(st.sampled_from(INTERNAL)))
        return Q(name, name, False)
    if kind == "cased":  # ClickHouse's names are case-sensitive: LLM_CALLS names nothing
        name = draw(st.sampled_from(PUBLIC)).upper()
        return Q(_quoted(draw, name), name, False)
    if kind == "qualified":
        name = draw(st.sampled_from(QUALIFIED))
        return Q(name, name, False, True)
    if draw(st.booleans()):
        return Q("numbers(3)", "numbers(3)", True)
    call = draw(st.sampled_from(TABLE_FUNCTIONS_REFUSED))
    return Q(call, call, False, True)


def _select(draw: st.DrawFn, rel: Q, alias: str = "") -> Q:
    """``SELECT project, id, n FROM rel`` (numbers() has none of those: its ``number`` stands in)."""
    numbers = rel.sql.startswith("numbers(")
    cols = "'a' AS project, toString(number) AS id, toInt64(number) AS n" if numbers else "project, id, n"
    where = ""
    if draw(st.booleans()):
        text = draw(st.sampled_from(LITERALS))
        where = f" {_kw(draw, 'WHERE')} id != {_string(text)}" if not numbers else " WHERE number < 2"
    head = f"{_kw(draw, 'SELECT')}{_c(draw)}{cols}{_c(draw)}{_kw(draw, 'FROM')} "
    return Q(f"{head}{rel.sql}{alias}{where}", f"{head}{rel.oracle}{alias}{where}", rel.ok, rel.check_only)


@st.composite
def queries(draw: st.DrawFn, scope: frozenset[str] = frozenset(), depth: int = 0) -> Q:
    shapes = ["leaf"] if depth >= 3 else ["leaf", "leaf", "sub", "set", "with", "scalar", "in", "join", "exists"]
    shape = draw(st.sampled_from(shapes))
    if shape == "leaf":
        alias = f" AS {_quoted(draw, draw(st.sampled_from(PLAIN + INTERNAL)))}" if draw(st.booleans()) else ""
        return _select(draw, _relation(draw, scope), alias)
    if shape == "with":
        names = draw(st.lists(st.sampled_from(PLAIN + PUBLIC + INTERNAL), min_size=1, max_size=3, unique=True))
        parts, oracle_parts, ok, check_only = [], [], True, False
        for i, name in enumerate(names):
            body = draw(queries(scope | frozenset(names[:i]) - set(PUBLIC + INTERNAL), depth + 1))
            spelled = _quoted(draw, name)
            parts.append(f"{spelled} {_kw(draw, 'AS')}{_c(draw)}({body.sql})")
            oracle_parts.append(f"{spelled} AS ({body.oracle})")
            ok = ok and body.ok and name in PLAIN  # a CTE named like a public view or internal table: refused
            check_only = check_only or body.check_only
        main = draw(queries(scope | frozenset(n for n in names if n in PLAIN), depth + 1))
        # every CTE is read (an unread one is never bound, so never checked by the binder: harmless either way)
        uses = [f"SELECT project, id, n FROM {_quoted(draw, n)}" for n in names]
        body_sql = " UNION ALL ".join([f"({u})" for u in uses] + [f"({main.sql})"])
        body_oracle = " UNION ALL ".join([f"({u})" for u in uses] + [f"({main.oracle})"])
        head = f"{_kw(draw, 'WITH')} "
        return Q(
            f"{head}{', '.join(parts)} SELECT * FROM ({body_sql})",
            f"WITH {', '.join(oracle_parts)} SELECT * FROM ({body_oracle})",
            ok and main.ok,
            check_only or main.check_only,
        )
    a = draw(queries(scope, depth + 1))
    if shape == "sub":
        alias = f" AS {_quoted(draw, draw(st.sampled_from(PLAIN + PUBLIC)))}" if draw(st.booleans()) else ""
        t = f"SELECT project, id, n FROM{_c(draw)}({{}}){alias}"
        return Q(t.format(a.sql), t.format(a.oracle), a.ok, a.check_only)
    b = draw(queries(scope, depth + 1))
    both, check_only = a.ok and b.ok, a.check_only or b.check_only
    if shape == "set":
        op = draw(st.sampled_from(["UNION ALL", "UNION DISTINCT", "INTERSECT", "EXCEPT"]))
        t = "({}) " + _kw(draw, op) + _c(draw) + " ({})"
    elif shape == "scalar":
        t = "SELECT project, id, n + (SELECT count() FROM ({})) AS n FROM ({}) AS s"
        return Q(t.format(b.sql, a.sql), t.format(b.oracle, a.oracle), both, check_only)
    elif shape == "in":
        t = "SELECT project, id, n FROM ({}) AS s WHERE id " + _kw(draw, "IN") + " (SELECT id FROM ({}))"
    elif shape == "join":
        how = draw(st.sampled_from(["JOIN", "INNER JOIN", "LEFT SEMI JOIN", "ANY JOIN"]))
        t = "SELECT l.project, l.id, r.n FROM ({}) AS l " + _kw(draw, how) + " ({}) AS r ON l.id = r.id"
    else:
        t = "SELECT project, id, n FROM ({}) AS s WHERE " + _kw(draw, "EXISTS") + " ({})"
    return Q(t.format(a.sql, b.sql), t.format(a.oracle, b.oracle), both, check_only)


# -- the data ----------------------------------------------------------------------------------------------------
@dataclass
class World:
    client: Any  # current database: the store's
    sandbox: ClickHouseSandbox
    path: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    path = tmp_path_factory.mktemp("chdb-sandbox")
    admin = clickhouse_connect.get_client(dsn=f"chdb://{path}")
    admin.command(f"CREATE DATABASE {DB}")
    cols = "project LowCardinality(String), id String, n Int64"
    admin.command(f"CREATE TABLE {DB}.llm_call_rows ({cols}, secret String) ENGINE = MergeTree ORDER BY id")
    admin.command(f"CREATE VIEW {DB}.llm_calls AS SELECT project, id, n FROM {DB}.llm_call_rows")
    rows = f"('{OURS}', 'a1', 1), ('{OURS}', 'a2', 2), ('{THEIRS}', '{THEIR_MARK}', 3), ('{THEIRS}', 'b2', 4)"
    admin.command(f"INSERT INTO {DB}.llm_call_rows SELECT *, '{SECRET}' FROM values('{cols}', {rows})")
    for view in PUBLIC[1:]:
        admin.command(f"CREATE TABLE {DB}.{view} ({cols}) ENGINE = MergeTree ORDER BY id")
        admin.command(f"INSERT INTO {DB}.{view} VALUES {rows}")
    admin.command(f"CREATE TABLE {DB}.api_keys (id String, project String, secret String) ENGINE = Memory")
    admin.command(f"INSERT INTO {DB}.api_keys VALUES ('k1', '{THEIRS}', '{SECRET}')")
    admin.command(f"CREATE TABLE {DB}.schema_migrations (version Int64) ENGINE = Memory")
    client = clickhouse_connect.get_client(dsn=f"chdb://{path}", database=DB)
    yield World(client, ClickHouseSandbox(DB), path)
    # chDB serves one data directory per process at a time: closed, the next module's directory can open
    client.close()
    admin.close()


def run(world: World, sql: str, project: str | None = OURS, timeout_s: float = 10.0, max_rows: int = 1000) -> Any:
    """What the store does with user SQL: prepare, then run that text with the sandbox's settings."""
    final = world.sandbox.prepare(world.client, sql, project)
    try:
        return world.client.query(final, settings=world.sandbox.settings(timeout_s, max_rows))
    except Exception as exc:
        raise query_error(exc, timeout_s) from None


def _rows(result: Any) -> list[str]:
    return sorted(json.dumps(r, default=str) for r in result.result_rows)


def _check_answer(result: Any, sql: str, project: str = OURS) -> None:
    for row in result.result_rows:
        for name, value in zip(result.column_names, row, strict=True):
            if name.lower() == "project" or name.lower().endswith(".project"):
                assert value in (project, ""), f"a row of project {value!r} answered for {sql!r}"
    text = json.dumps(result.result_rows, default=str)
    for other in (SECRET, THEIR_MARK if project == OURS else "a1"):
        assert other not in text, f"{other!r} answered for {sql!r}"


# -- the tests ---------------------------------------------------------------------------------------------------
def test_the_world_has_both_projects(world: World) -> None:
    """The oracles mean something only if the other project's rows exist, ours are visible, and unqualified internal
    names would resolve (the current database is the store's)."""
    assert world.client.query("SELECT currentDatabase()").result_rows == [(DB,)]
    for view in PUBLIC:
        counts = dict(world.client.query(f"SELECT project, count() FROM {view} GROUP BY project").result_rows)
        assert counts == {OURS: 2, THEIRS: 2}
        assert _rows(run(world, f"SELECT DISTINCT project FROM {view}")) == ['["a"]']
        assert _rows(run(world, f"SELECT DISTINCT project FROM {view}", THEIRS)) == ['["b"]']
        assert _rows(run(world, f"SELECT DISTINCT project FROM {view}", None)) == ['["a"]', '["b"]']
    assert world.client.query("SELECT count() FROM api_keys").result_rows == [(1,)]


@BUDGET
@given(q=queries())
def test_a_project_sees_its_own_rows_only(world: World, q: Q) -> None:
    try:
        result = run(world, q.sql)
    except QueryError as exc:
        event(f"refused; reads only what it may: {q.ok}")
        if q.ok:  # refused: only if the engine refuses the same query over filtered subqueries too
            with pytest.raises(Exception):  # noqa: B017,PT011
                world.client.query(q.oracle)
            event(f"refused as the engine refuses it: {str(exc)[:40]}")
        return
    event(f"answered; reads only what it may: {q.ok}")
    assert q.ok, f"answered although it reads what it may not: {q.sql!r}"
    _check_answer(result, q.sql)
    assert _rows(result) == _rows(world.client.query(q.oracle)), f"not the filtered answer for {q.sql!r}"


@BUDGET
@given(q=queries())
def test_the_scope_alone_shows_one_project(world: World, q: Q) -> None:
    """Defence in depth: the final text's scope, run unchecked (no parse check, no binder check). Qualified names
    and table functions are the checks' part alone (the scope cannot stop a name that does not ask for it)."""
    if q.check_only:
        return
    sandbox = world.sandbox
    private = sandbox._private_names(world.client)
    try:
        canonical = sandbox._canonical(world.client, q.sql)
        result = world.client.query(sandbox._wrap(canonical, OURS, private), settings=sandbox.settings(10, 1000))
    except Exception:
        event("scope alone: refused by the engine")
        return
    event("scope alone: answered")
    _check_answer(result, q.sql)


# Shapes of CTE scoping, checked one by one: a public name in each of them reads the caller's rows only, as the
# same query over explicitly filtered subqueries does (ClickHouse 26.9, enable_analyzer=1).
F = f"(SELECT * FROM {DB}.llm_calls WHERE project = 'a')"
SCOPES = {
    "subquery": ("SELECT * FROM (SELECT * FROM llm_calls)", f"SELECT * FROM (SELECT * FROM {F})"),
    "join": (
        "SELECT l.id, r.id FROM llm_calls AS l JOIN tasks AS r ON l.id = r.id",
        f"SELECT l.id, r.id FROM {F} AS l JOIN (SELECT * FROM {DB}.tasks WHERE project = 'a') AS r ON l.id = r.id",
    ),
    "cross join": ("SELECT count() FROM llm_calls, llm_calls AS b", f"SELECT count() FROM {F} AS a, {F} AS b"),
    "in subquery": (
        "SELECT id FROM tasks WHERE id IN (SELECT id FROM llm_calls)",
        f"SELECT id FROM (SELECT * FROM {DB}.tasks WHERE project = 'a') WHERE id IN (SELECT id FROM {F})",
    ),
    "in name": (
        "SELECT id FROM tasks WHERE (project, id, n) IN llm_calls",
        f"SELECT id FROM (SELECT * FROM {DB}.tasks WHERE project = 'a')",
    ),
    "scalar": ("SELECT (SELECT max(n) FROM llm_calls), (SELECT count() FROM llm_calls)", "SELECT 2, 2"),
    "union arms": (
        "SELECT id FROM llm_calls UNION ALL SELECT id FROM spans UNION ALL SELECT id FROM llm_call_hours",
        "SELECT 'a1' UNION ALL SELECT 'a2' UNION ALL SELECT 'a1' UNION ALL SELECT 'a2' UNION ALL SELECT 'a1' "
        "UNION ALL SELECT 'a2'",
    ),
    "nested ctes": (
        "WITH x AS (SELECT * FROM llm_calls), y AS (WITH z AS (SELECT * FROM x) SELECT * FROM z) SELECT id FROM y",
        f"SELECT id FROM {F}",
    ),
    "cte in subquery": ("SELECT * FROM (WITH x AS (SELECT id FROM llm_calls) SELECT * FROM x)", f"SELECT id FROM {F}"),
    "exists": ("SELECT count() FROM tasks WHERE EXISTS (SELECT 1 FROM llm_calls WHERE id = 'b2')", "SELECT 0"),
    "intersect": (
        "SELECT id FROM llm_calls INTERSECT SELECT id FROM tool_calls",
        "SELECT 'a1' UNION ALL SELECT 'a2'",
    ),
    "window": ("SELECT count() OVER () FROM llm_calls", "SELECT 2 UNION ALL SELECT 2"),
    "array join": ("SELECT x FROM llm_calls ARRAY JOIN [id] AS x", f"SELECT id FROM {F}"),
    "lambda": ("SELECT arrayFilter(x -> x != '', groupArray(project)) FROM llm_calls", "SELECT ['a', 'a']"),
    "numbers": ("SELECT count() FROM numbers(10) AS t, llm_calls", "SELECT 20"),
}


@pytest.mark.parametrize("name", list(SCOPES))
def test_a_public_name_reads_the_callers_rows_in_every_scope(world: World, name: str) -> None:
    sql, oracle = SCOPES[name]
    result = run(world, sql)
    _check_answer(result, sql)
    assert _rows(result) == _rows(world.client.query(oracle))


def test_the_analyzer_is_the_default_and_is_set(world: World) -> None:
    """The scoping above is the analyzer's (ClickHouse 26.9's default); the settings make sure of it."""
    assert world.client.query("SELECT value FROM system.settings WHERE name = 'enable_analyzer'").result_rows == [
        ("1",)
    ]
    sandbox = ClickHouseSandbox(DB)
    assert sandbox.settings(1, 1)["enable_analyzer"] == 1
    assert list(sandbox.settings(1, 1))[-1] == "readonly"  # last: set first, it would forbid the others


HOSTILE = {
    "SELECT * FROM api_keys": "private relation 'api_keys'",
    "SELECT * FROM llm_call_rows": "private relation 'llm_call_rows'",
    "SELECT id FROM llm_calls WHERE id IN api_keys": "private relation 'api_keys'",
    "SELECT (SELECT max(secret) FROM api_keys)": "private relation 'api_keys'",
    f"SELECT * FROM {DB}.llm_calls": f"not {DB}.llm_calls",
    f"SELECT * FROM {DB}.api_keys": f"not {DB}.api_keys",
    "SELECT * FROM default.x": "not default.x",
    "SELECT * FROM system.tables": "not system.tables",
    "SELECT * FROM information_schema.tables": "plain name",
    f"SELECT id FROM llm_calls WHERE id IN {DB}.api_keys": "after IN",
    f"SELECT {DB}.api_keys.secret FROM llm_calls": "plain name",
    "SELECT * FROM file('/etc/passwd')": "table function file()",
    "SELECT file('/etc/passwd')": "function file()",
    "SELECT * FROM url('http://127.0.0.1:1/', CSV, 'a String')": "table function url()",
    f"SELECT * FROM remote('127.0.0.1', {DB}.api_keys)": "table function remote()",
    f"SELECT * FROM merge('{DB}', '.*')": "table function merge()",
    "SELECT * FROM python('x')": "table function python()",
    "SELECT dictGet('d', 'a', 1)": "function dictGet()",
    "SELECT joinGet('j', 'a', 1)": "function joinGet()",
    "SELECT currentDatabase()": "function currentDatabase()",
    "SELECT getSetting('readonly')": "function getSetting()",
    "SELECT hostName(), version()": "function ",
    "SELECT sleep(3)": "function sleep()",
    "SELECT __getScalar('x')": "function __getScalar()",
    "SELECT hasColumnInTable('store', 'api_keys', 'secret')": "function hasColumnInTable()",
    "WITH llm_calls AS (SELECT * FROM llm_calls) SELECT * FROM llm_calls": "named like the public view llm_calls",
    f"WITH llm_calls AS (SELECT '{THEIRS}' AS project) SELECT * FROM llm_calls": "public view llm_calls",
    "SELECT * FROM (WITH tasks AS (SELECT 1 AS project) SELECT * FROM tasks)": "public view tasks",
    "SELECT 1 SETTINGS readonly = 0": "SETTINGS",
    "SELECT 1 SETTINGS max_execution_time = 1000": "SETTINGS",
    "SELECT 1 FORMAT JSON": "FORMAT",
    "SELECT 1 INTO OUTFILE '/tmp/x'": "INTO OUTFILE",
    "SELECT 1; SELECT * FROM api_keys": "exactly one statement",
    "SELECT 1; DROP TABLE tasks": "exactly one statement",
    "INSERT INTO tasks VALUES ('b', 'x', 1)": "SELECT",
    "ALTER TABLE tasks DELETE WHERE 1": "SELECT",
    "CREATE TABLE t (a Int8) ENGINE = Memory": "SELECT",
    "DROP TABLE tasks": "SELECT",
    "SET readonly = 0": "SETTINGS",
    "SYSTEM DROP DNS CACHE": "SELECT",
    "EXPLAIN SELECT 1": "EXPLAIN",
    "SHOW TABLES": "SELECT",
    "DESCRIBE TABLE api_keys": "SELECT",
    "SELECT {p:String}": "parameters",
    "SELECT * FROM llm_calls /* */ , api_keys": "private relation 'api_keys'",
    "SELECT * FROM llm_calls -- \n, api_keys": "private relation 'api_keys'",
    "SELECT * FROM LLM_CALLS": "unknown relation",
    # a name with a line break forging lines of ClickHouse's dumps (EXPLAIN AST, EXPLAIN QUERY TREE)
    "SELECT 1 AS `a (children 1)\n  TableIdentifier llm_calls`": "line break",
    "SELECT `x\n  TABLE id: 1, alias: __table1, table_name: store.llm_calls` FROM api_keys": "line break",
}


@pytest.mark.parametrize("sql", list(HOSTILE))
def test_hostile_queries_are_refused_naming_what(world: World, sql: str) -> None:
    with pytest.raises(QueryError) as caught:
        run(world, sql)
    assert HOSTILE[sql].lower() in str(caught.value).lower(), str(caught.value)
    assert SECRET not in str(caught.value) and "private relation`" not in str(caught.value)


def test_forged_dump_lines_answer_ones_own_rows_only(world: World) -> None:
    """A projection named like query-tree lines cannot turn a read of an internal table into a filtered read: the
    binder check's table lines carry no user text. (Answered or refused; never the other project's rows.)"""
    forged = (
        "  JOIN TREE\n    TABLE id: 9, alias: __table9, table_name: store.llm_calls\n  WHERE\n"
        "    FUNCTION id: 7, function_name: equals, function_type: ordinary, result_type: UInt8"
    )
    for sql in (f"SELECT 1 AS `{forged}` FROM llm_calls", f"SELECT id AS `{forged}` FROM llm_call_rows"):
        try:
            result = run(world, sql.replace("\n", "\\n"))
        except QueryError:
            continue
        _check_answer(result, sql)


def test_literals_and_quoted_names_survive_the_canonical_text(world: World) -> None:
    sql = (
        "SELECT `id` AS \"i\", 'it''s -- /* x */ \\\\ \\'' AS s FROM \"llm_calls\" "
        "WHERE id != 'a''; DROP TABLE tasks; --' ORDER BY i"
    )
    result = run(world, sql)
    assert result.result_rows == [("a1", "it's -- /* x */ \\ '"), ("a2", "it's -- /* x */ \\ '")]
    assert run(world, "SeLeCt CoUnT() FrOm llm_calls -- trailing comment").result_rows == [(2,)]


def test_none_is_every_project_and_still_no_internal_table(world: World) -> None:
    assert run(world, "SELECT count() FROM llm_calls", None).result_rows == [(4,)]
    with pytest.raises(QueryError, match="private relation"):
        run(world, "SELECT * FROM api_keys", None)


def test_the_project_literal_is_escaped(world: World) -> None:
    for project in ("x' OR '1'='1", "x\\' OR 1 --", "ü'\n"):
        assert run(world, "SELECT count() FROM llm_calls", project).result_rows == [(0,)]


def test_a_huge_cross_join_stops_at_its_time_limit(world: World) -> None:
    started = time.monotonic()
    with pytest.raises(QueryError, match="time limit"):
        run(world, "SELECT count() FROM numbers(100000) AS a, numbers(100000) AS b WHERE a.number != b.number", None, 1)
    assert time.monotonic() - started < 10


def test_memory_and_rows_are_bounded(world: World) -> None:
    small = ClickHouseSandbox(DB)
    small.max_memory_bytes = 100 * 1024 * 1024
    final = small.prepare(world.client, "SELECT length(groupArray(number)) FROM numbers(100000000)", OURS)
    with pytest.raises(Exception, match="MEMORY_LIMIT_EXCEEDED") as caught:
        world.client.query(final, settings=small.settings(20, 10))
    assert "more memory" in str(query_error(caught.value))
    rows = run(world, "SELECT number FROM numbers(100000)", OURS, max_rows=10).result_rows
    assert 10 < len(rows) < 100000  # cut at a block boundary past max_rows: the caller keeps max_rows


def test_prepare_is_cached_per_project_and_text(world: World) -> None:
    sql = "SELECT DISTINCT project FROM tasks"
    first = world.sandbox.prepare(world.client, sql, OURS)
    assert world.sandbox.prepare(world.client, sql, OURS) is first
    assert world.sandbox.prepare(world.client, sql, THEIRS) != first
    started = time.perf_counter()
    fresh = ClickHouseSandbox(DB)
    fresh.prepare(world.client, sql, OURS)  # functions, databases, the filter: learnt once
    for i in range(20):
        fresh.prepare(world.client, f"SELECT id FROM llm_calls WHERE n > {i}", OURS)
    assert time.perf_counter() - started < 5


# Each statement the check refuses, run as it is with the sandbox's settings: readonly refuses it too. In a process
# of its own: clickhouse-connect's chDB backend applies a command's settings with SET on the shared session, and
# after SET readonly = 1 nothing restores them.
_READONLY_SCRIPT = """
import json, sys, clickhouse_connect
from taskcost.store.clickhouse._sandbox import ClickHouseSandbox
c = clickhouse_connect.get_client(dsn="chdb://" + sys.argv[1])
c.command("CREATE TABLE t (a Int64) ENGINE = MergeTree ORDER BY a")
out = {}
for sql in json.loads(sys.argv[2]):
    try:
        c.query(sql, settings=ClickHouseSandbox("default").settings(5, 10))
        out[sql] = "ran"
    except Exception as exc:
        out[sql] = str(exc)
print(json.dumps(out))
"""


def test_readonly_refuses_writes_even_unchecked(world: World, tmp_path: Path) -> None:
    statements = [
        "INSERT INTO t VALUES (1)",
        "INSERT INTO t SELECT 1",
        "ALTER TABLE t DELETE WHERE 1",
        "CREATE TABLE u (a Int8) ENGINE = Memory",
        "DROP TABLE t",
        "SET max_threads = 1",
    ]
    for sql in statements:
        with pytest.raises(QueryError):
            world.sandbox.prepare(world.client, sql.replace(" t ", " tasks "), OURS)
    done = subprocess.run(
        [sys.executable, "-c", _READONLY_SCRIPT, str(tmp_path / "ro"), json.dumps(statements)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    for sql in statements:
        assert "READONLY" in answers[sql] or "readonly" in answers[sql], (sql, answers[sql])


def test_every_denied_function_is_a_real_function_or_alias(world: World) -> None:
    """The deny-list names ClickHouse's functions (a typo would deny nothing)."""
    names = {str(r[0]).lower() for r in world.client.query("SELECT name FROM system.functions").result_rows}
    missing = {n for n in DENIED_FUNCTIONS if n not in names} - {
        "input",
        "executable",
        "url",
        "connectionid",
        "catboostevaluate",
    }
    assert not missing, missing
