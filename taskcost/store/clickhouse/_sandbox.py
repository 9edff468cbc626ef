"""User SQL on the ClickHouse store: one SELECT over the public views, checked on ClickHouse's own parse and binding
and run as exactly the text that was checked, limited to the caller's project.

Three layers, each enough on its own for the project boundary (the first for what may run at all):

1. **The parse check.** ClickHouse writes the statement's canonical text (``formatQuerySingleLine``: its own parser,
   comments dropped, every literal and identifier re-quoted by its formatter; more than one statement does not
   parse). ``EXPLAIN AST`` of that text gives ClickHouse's tree, walked with an allow-list: a SELECT (with
   UNION/INTERSECT/EXCEPT, subqueries, CTEs) and the node kinds of ordinary queries; no SETTINGS, FORMAT, INTO
   OUTFILE or query parameters; table names never qualified; table functions only those that generate values;
   functions only ClickHouse's built-ins less ``DENIED_FUNCTIONS``. The dump prints identifiers raw, so a name with a
   line break could forge lines: the walk rebuilds the tree from the ``(children N)`` counts and the indentation and
   refuses any inconsistency. A consistent forgery can only hang extra nodes under a real leaf (a real node's
   children keep their real lines and indentation), and every line is checked, so it only refuses more.
2. **The scope.** What runs is ``WITH llm_calls AS (SELECT * FROM <db>.llm_calls WHERE project = '<p>'), ...
   SELECT * FROM (<canonical text>)``: the public names are CTEs over the real views, filtered by a literal the
   server writes, and ClickHouse resolves a CTE name before a table's in every nested scope (subqueries, JOINs,
   ``IN``, scalar subqueries, union arms, nested CTEs: the tests show each). Every other relation of the current
   database (tables, views, dictionaries, temporary tables: ``*_rows``, ``api_keys``...) is shadowed too, by an
   empty CTE of its name, and its name is reserved (refused before the binder runs). So no unqualified name reaches
   a real table, not even in the binder check's EXPLAIN, which runs scalar subqueries to fold them (an error
   message could otherwise carry a value). On a server, a reader user and row policies are a further layer where the
   server allows them (``_access``); chDB has no access management, and this check holds alone there.
3. **The binder check.** ``EXPLAIN QUERY TREE`` of that very final text (the analyzer, which the query then runs
   with: ``enable_analyzer=1``) lists every storage it reads. Each ``TABLE`` must be a public view read by a
   ``JOIN TREE`` whose ``WHERE`` is exactly the project filter (the filter's subtree as ClickHouse binds it, learnt
   from the same server for each view and project), or ``system.one`` (a SELECT without FROM). So an unqualified
   internal name that resolves to a table, an ``IN table``, or a user CTE named like a public view that reads the
   view past the filter is refused by what the engine bound, whatever the parse check made of it. The table lines
   of the dump have no user text in them (aliases there are the analyzer's ``__tableN``), so they cannot be forged
   into a filtered read.

``settings`` gives each query ``readonly=1`` (last: set first, it would forbid the others on a session that applies
them with SET) and its time, row, memory and size limits; ``query_error`` turns ClickHouse's errors into QueryError.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from clickhouse_connect.driver.binding import _query_has_trailing_limit_zero

from taskcost.store._base import QueryError
from taskcost.store.clickhouse._dialect import DUCKDB_SEMANTICS
from taskcost.store.clickhouse._dumps import TSV_ESCAPE as _TSV_ESCAPE
from taskcost.store.clickhouse._dumps import Node as _Node
from taskcost.store.clickhouse._dumps import field as _field
from taskcost.store.clickhouse._dumps import filter_lines as _filter_lines
from taskcost.store.clickhouse._dumps import indented as _indented
from taskcost.store.clickhouse._dumps import tree as _tree
from taskcost.store.clickhouse._dumps import tsv_char as _tsv_char
from taskcost.store.clickhouse._dumps import walk as _walk

__all__ = [
    "DEFAULT_MAX_MEMORY_BYTES",
    "DENIED_FUNCTIONS",
    "DENIED_PREFIXES",
    "PUBLIC_RELATIONS",
    "TABLE_FUNCTIONS",
    "ClickHouseSandbox",
    "query_error",
]

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
# Table functions that only generate values from their arguments (no storage, file, network or server state).
TABLE_FUNCTIONS = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "generate_series", "generateSeries", "primes", "values"}
)
_REVEALS = "it reveals the server's configuration, identity or session"
_OUTSIDE = "it reads outside the public views (files, dictionaries, tables, the network or the host)"
# Built-in functions refused (compared case-insensitively), with why. Every other built-in is allowed: the rest of
# ``system.functions`` computes on its arguments (``throwIf`` and ``initializeAggregation`` included: an error with
# the user's own message, an aggregate state of the user's own values). Introspection (``addressToSymbol``...) is
# also off by ``allow_introspection_functions=0``; ``sleep`` by ``function_sleep_max_microseconds_per_block=0``.
_REVEALING = """
    hostname fqdn version revision buildid uptime serveruuid getoskernelversion tcpport getserverport displayname
    getmacro getsetting getsettingordefault getserversetting getmergetreesetting getmaxtablenamelengthfordatabase
    currentdatabase current_database currentschemas current_schemas currentuser current_user user currentroles
    enabledroles defaultroles currentprofiles enabledprofiles defaultprofiles currentqueryid current_query_id queryid
    query_id initialqueryid initial_query_id initialquerystarttime initial_query_start_time querystring
    querystringandfragment currentrequesturl currenthandler getclienthttpheader shardnum shardcount
    zookeepersessionuptime transactionid transactionlatestsnapshot transactionoldestsnapshot showcertificate
    globalvariable connectionid connection_id hascolumnintable addresstoline addresstolinewithinlines addresstosymbol
    demangle logtrace
"""
_REACHING_OUT = "file url joinget joingetornull dicthas dictisin catboostevaluate naivebayesclassifier executable input"
DENIED_FUNCTIONS: dict[str, str] = {
    **dict.fromkeys(_REVEALING.split(), _REVEALS),
    **dict.fromkeys(_REACHING_OUT.split(), _OUTSIDE),
    "sleep": "it only holds a query slot",
    "sleepeachrow": "it only holds a query slot",
}


# Internal functions the analyzer itself puts in a query tree for ordinary SQL (GROUPING() of grouping sets, a scalar
# subquery's value): allowed there, never in the user's text (the parse check refuses every ``__`` name).
_ANALYZER_INTERNALS = frozenset({"__groupingforgroupingsets", "__getscalar"})
# Name prefixes refused (lower case): dictionaries, the engine's internal functions (``__getScalar``...), files.
DENIED_PREFIXES: dict[str, str] = {
    "dictget": _OUTSIDE,
    "__": "it is one of the engine's internal functions",
    "filesystem": _REVEALS,
}
# Names the parser writes for syntax (``x -> y``, ``(a, b)``, ``[a]``...) that are not all in system.functions.
_SYNTAX_FUNCTIONS = frozenset(
    {"lambda", "tuple", "array", "arrayelement", "tupleelement", "cast", "_cast", "exists", "grouping", "untuple"}
)
DEFAULT_MAX_MEMORY_BYTES = 1 << 30
_MAX_QUERY_BYTES = 256 * 1024
_MAX_AST_DEPTH = 300
_MAX_AST_ELEMENTS = 50_000
_EXPLAIN_SECONDS = 5.0  # the binder check's own time limit (it folds scalar subqueries by running them)
_PRIVATE = "`taskcost private relation`"
_KEPT = 512  # prepared texts kept (by project and SQL); all are dropped when full

# ClickHouse's AST node kinds an ordinary SELECT is made of. ``SetQuery`` (SETTINGS), ``QueryParameter``
# (``{name:Type}``), every statement but SELECT and everything else are refused by being absent.
_AST_KINDS = frozenset(
    {
        "SelectWithUnionQuery",
        "SelectIntersectExceptQuery",
        "SelectQuery",
        "ExpressionList",
        "WithElement",
        "Subquery",
        "TablesInSelectQuery",
        "TablesInSelectQueryElement",
        "TableExpression",
        "TableJoin",
        "TableIdentifier",
        "ArrayJoin",
        "Identifier",
        "Asterisk",
        "QualifiedAsterisk",
        "ColumnsListMatcher",
        "ColumnsRegexpMatcher",
        "QualifiedColumnsListMatcher",
        "QualifiedColumnsRegexpMatcher",
        "ColumnsTransformerList",
        "ColumnsExceptTransformer",
        "ColumnsReplaceTransformer",
        "ColumnsReplaceTransformerReplacement",
        "ColumnsApplyTransformer",
        "Literal",
        "Function",
        "OrderByElement",
        "InterpolateElement",
        "WindowDefinition",
        "WindowListElement",
        "SampleRatio",
        "DataType",
        "NameTypePair",
    }
)
_ROOTS = frozenset({"SelectWithUnionQuery", "SelectIntersectExceptQuery"})
_WHY_KIND = {
    "SetQuery": "a SETTINGS clause is not allowed here (the server sets each query's settings)",
    "QueryParameter": "query parameters ({name:Type}) are not available here: send the values in the SQL",
    "ExplainQuery": "EXPLAIN is not available here",
    "Set": "a SETTINGS clause is not allowed here (the server sets each query's settings)",
}


def _literal(text: str) -> str:
    """``text`` as a ClickHouse string literal (its formatter's escaping: backslash, quote, and NUL)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0") + "'"


def _ident(name: str) -> str:
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def query_error(exc: BaseException, timeout_s: float | None = None) -> QueryError:
    """A ClickHouse error of a user query as the QueryError to answer: its first line, and for the limits of
    ``settings`` a sentence saying which limit stopped the query."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    first = re.sub(r"^.*?DB::Exception: ", "", first)  # the server's words, not the client's wrapping
    # the text the server ran (the project's filter, the private names shadowed) and its guesses at other names
    # (``Maybe you meant store.api_keys?``) are not the user's business
    first = re.sub(r"\. In (?:scope|query) .*|\. Maybe you meant .*|: While processing .*", ".", first)
    first = first.replace(" ((", " (").rstrip(". ") + "."
    found = re.search(r"\(([A-Z_]+)\)", text)
    if found and found.group(1) not in first:
        first = f"{first} ({found.group(1)})"
    limits = {
        "UNKNOWN_TABLE": "unknown relation (a name that is neither a public view nor a CTE in scope); queryable: "
        + ", ".join(PUBLIC_RELATIONS),
        "UNKNOWN_QUERY_PARAMETER": "query parameters ({name:Type}) are not available here",
        "TIMEOUT_EXCEEDED": "the query ran past its time limit"
        + (f" of {timeout_s:g} s" if timeout_s is not None else ""),
        "MEMORY_LIMIT_EXCEEDED": "the query needed more memory than a query may use here",
        "TOO_MANY_ROWS": "the query reads more rows than a query may read here",
        "TOO_MANY_BYTES": "the query reads more data than a query may read here",
        "TOO_MANY_ROWS_OR_BYTES": "the query's result or reads are larger than allowed here",
        "READONLY": "only read-only SELECT queries are allowed here",
        "TOO_DEEP_AST": "the query is nested too deeply",
        "TOO_BIG_AST": "the query is too large",
        "QUERY_IS_TOO_LARGE": "the query is too large",
    }
    for code, why in limits.items():
        if f"({code})" in text:
            return QueryError(f"{why}: {first}")
    return QueryError(first)


class ClickHouseSandbox:
    """The checks and the runnable text of user SQL for the store in ``database`` (its public views are there).

    ``max_value_bytes`` bounds the values a query may build from a size argument where ClickHouse has a setting for
    it (``function_range_max_elements_in_block``); ClickHouse tracks the memory of the values it builds, so
    ``max_memory_usage`` bounds the rest (unlike DuckDB, no rewrite of ``repeat``/``leftPad`` calls is needed)."""

    def __init__(self, database: str, max_value_bytes: int = 64 * 1024) -> None:
        self.database = database
        self.max_value_bytes = max_value_bytes
        self.max_memory_bytes = DEFAULT_MAX_MEMORY_BYTES
        self._database_names: frozenset[str] | None = None
        self._functions: frozenset[str] | None = None  # built-in names, and lower-cased the case-insensitive ones
        self._aggregates: frozenset[str] = frozenset()
        self._combinators: tuple[str, ...] = ()
        self._filters: dict[tuple[str, str], list[str]] = {}  # (view, project) -> its filter, as bound
        self._prepared: dict[tuple[str | None, str], str] = {}
        self._lock = threading.Lock()

    # -- the settings ---------------------------------------------------------------------------------------
    def settings(self, timeout_s: float, max_rows: int) -> dict[str, Any]:
        """Per-query settings. Rows past ``max_rows`` are dropped by ClickHouse (``result_overflow_mode='break'``
        at a block boundary: a caller gets at least ``max_rows + 1`` rows of a longer answer, so it can tell the
        answer was cut, and keeps ``max_rows``). ``readonly`` comes last: once set, no other setting may change."""
        return {
            **DUCKDB_SEMANTICS,  # DuckDB's SQL as DuckDB answers it (``_dialect``): the check binds under them too
            "enable_analyzer": 1,  # the binder the check used (layer 3) is the one the query runs with
            "max_execution_time": max(float(timeout_s), 0.001),
            "timeout_overflow_mode": "throw",
            "max_result_rows": int(max_rows) + 1,
            "result_overflow_mode": "break",
            "max_memory_usage": self.max_memory_bytes,
            "max_bytes_before_external_group_by": 0,
            "max_bytes_before_external_sort": 0,
            "max_query_size": _MAX_QUERY_BYTES,
            "max_ast_depth": _MAX_AST_DEPTH,
            "max_ast_elements": _MAX_AST_ELEMENTS,
            "max_expanded_ast_elements": _MAX_AST_ELEMENTS * 10,
            "max_subquery_depth": 50,
            "function_range_max_elements_in_block": max(int(self.max_value_bytes), 1),
            "function_sleep_max_microseconds_per_block": 0,
            "allow_introspection_functions": 0,
            "allow_ddl": 0,
            "readonly": 1,
        }

    # -- the check ------------------------------------------------------------------------------------------
    def prepare(self, client: Any, sql: str, project: str | None, timeout_s: float = _EXPLAIN_SECONDS) -> str:
        """The SQL to run for user ``sql`` (ClickHouse dialect): checked on ClickHouse's own parse, restricted to
        ``project``'s rows (None: all projects, the server's own analytics). Raises QueryError naming what was
        refused. The same text for the same project is checked once (kept, a bounded number of them). The binder
        check runs the query's scalar subqueries (ClickHouse folds them): it has the query's own time limit
        (``timeout_s``), at least ``_EXPLAIN_SECONDS``."""
        key = (project, sql)
        with self._lock:
            done = self._prepared.get(key)
        if done is not None:
            return done
        canonical = self._canonical(client, sql)
        named = self._check_parse(client, canonical)
        private = self._private_names(client)
        # the internal relations' names are reserved, as relations and as CTE names alike (the binder check below
        # sees only what the analyzer keeps: a subquery in a column nothing reads is dropped unseen)
        hidden = sorted(named & set(private))
        if hidden:
            raise QueryError(f"unknown or private relation {hidden[0]!r}; queryable: {', '.join(PUBLIC_RELATIONS)}")
        final = self._wrap(canonical, project, private)
        self._check_binding(client, final, project, private, max(timeout_s, _EXPLAIN_SECONDS))
        with self._lock:
            if len(self._prepared) >= _KEPT:
                self._prepared.clear()
            self._prepared[key] = final
        return final

    def _rows(self, client: Any, sql: str, settings: dict[str, Any] | None = None) -> list[Any]:
        """The first column of ``sql``'s rows. No parameters, and settings only as the query's own SETTINGS clause
        (clickhouse-connect's chDB backend applies the settings of a query with parameters by SET on the shared
        session, where ``readonly=1`` would then stay)."""
        try:
            if not settings and _query_has_trailing_limit_zero(sql):
                # clickhouse-connect takes a text ending in ``LIMIT 0`` for a columns-only probe (and refuses the rows
                # an EXPLAIN of it has): the same text with the same FORMAT Native after it as ``query`` sends, its
                # rows read as TabSeparated lines (no settings, so nothing is SET on a shared chDB session)
                raw = client.raw_query(sql, fmt="Native")
                return [_TSV_ESCAPE.sub(_tsv_char, line) for line in raw.decode().split("\n")[:-1]]
            return [r[0] for r in client.query(sql, settings=settings).result_rows]
        except Exception as exc:
            raise query_error(exc) from None

    def _canonical(self, client: Any, sql: str) -> str:
        if not sql.strip():
            raise QueryError("send one SELECT query")
        if len(sql.encode()) > _MAX_QUERY_BYTES // 2:
            raise QueryError(f"the query is too large (at most {_MAX_QUERY_BYTES // 2} bytes)")
        try:
            text = self._rows(client, f"SELECT formatQuerySingleLine({_literal(sql)})")[0]
        except QueryError as exc:
            if "Multi-statements" in str(exc):  # the parser's own verdict, worded for the user
                raise QueryError("send exactly one statement") from None
            raise QueryError(f"SQL does not parse: {exc}") from None
        return str(text)

    def _check_parse(self, client: Any, canonical: str) -> set[str]:
        """Layer 1: ClickHouse's AST of the canonical text, allow-listed. Returns the relation names it reads."""
        try:
            lines = [str(x) for x in self._rows(client, "EXPLAIN AST " + canonical)]
        except QueryError as exc:
            if "SYNTAX_ERROR" not in str(exc.__cause__ or exc) and "Syntax error" not in str(exc):
                raise
            # the text parses alone (it is ClickHouse's own rendering) but not with the FORMAT the client appends:
            # it already ends with an output clause of its own
            raise QueryError(
                f"FORMAT and INTO OUTFILE clauses are not allowed here (the API returns the rows): {exc}"
            ) from None
        root = _tree(lines)
        if root.kind not in _ROOTS:
            raise QueryError(_WHY_KIND.get(root.kind, f"only read-only SELECT queries are allowed here ({root.kind})"))
        # the root's children: the query, and the FORMAT the client appended (``Identifier Native``); an INTO
        # OUTFILE, a FORMAT of the user's own or a SETTINGS of the whole union would be more
        extra = [c for c in root.children[1:] if not (c.kind == "Identifier" and c.text == "Native")]
        if root.kind == "SelectWithUnionQuery" and (extra or len(root.children) > 2):
            kinds = ", ".join(c.kind for c in root.children[1:])
            raise QueryError(f"only a plain SELECT is allowed here: no FORMAT, INTO OUTFILE or SETTINGS ({kinds})")
        functions = self._known_functions(client)
        databases = self._databases(client)
        names: set[str] = set()
        stack = [root]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if node.kind not in _AST_KINDS:
                raise QueryError(_WHY_KIND.get(node.kind, f"this query form is not allowed here ({node.kind})"))
            if node.kind == "TableIdentifier":
                name = node.text.split(" (alias ")[0]
                if "." in name:
                    raise QueryError(f"refer to views by their plain name, not {name}")
                if name.lower() in ("system", "information_schema"):
                    raise QueryError(f"{name} is not available here")
                names.add(name)
            elif node.kind == "Function":
                name = node.text.split(" ")[0]
                if node.parent is not None and node.parent.kind == "TableExpression":
                    if name not in TABLE_FUNCTIONS:
                        allowed = ", ".join(sorted(TABLE_FUNCTIONS))
                        raise QueryError(f"table function {name}() is not allowed here; allowed: {allowed}")
                else:
                    self._check_function(name, functions)
                    names.update(self._check_in(name, node))
            elif node.kind == "Identifier" and "." in node.text.split(" (alias ")[0]:
                first = node.text.split(".")[0]
                if first.lower() in databases:
                    raise QueryError(f"refer to views by their plain name, not {node.text.split(' (alias ')[0]}")
        return names

    @staticmethod
    def _check_in(name: str, node: _Node) -> list[str]:
        """``x IN name`` reads the relation ``name``: only a plain name (resolved in the final text's scope, where
        every name is a CTE) may stand there, never a qualified one."""
        if not name.lower().endswith("in") or not node.children or len(node.children[0].children) != 2:
            return []
        right = node.children[0].children[1]
        if right.kind != "Identifier":
            return []
        plain = right.text.split(" (alias ")[0]
        if "." in plain:
            raise QueryError(f"refer to views by their plain name, not {plain} (after IN)")
        return [plain]

    def _databases(self, client: Any) -> frozenset[str]:
        if self._database_names is None:
            rows = self._rows(client, "SELECT name FROM system.databases")
            self._database_names = frozenset(str(n).lower() for n in rows) | {self.database.lower(), "system"}
        return self._database_names

    def _known_functions(self, client: Any) -> frozenset[str]:
        if self._functions is None:
            rows = client.query(
                "SELECT name, case_insensitive, is_aggregate FROM system.functions WHERE origin = 'System'"
            ).result_rows
            names = {str(n) for n, _, _ in rows} | {str(n).lower() for n, ci, _ in rows if ci}
            self._aggregates = frozenset(str(n) for n, _, agg in rows if agg) | frozenset(
                str(n).lower() for n, ci, agg in rows if agg and ci
            )
            combinators = client.query("SELECT name FROM system.aggregate_function_combinators").result_rows
            self._combinators = tuple(sorted((str(r[0]) for r in combinators), key=len, reverse=True))
            self._functions = frozenset(names)
        return self._functions

    def _check_function(self, name: str, functions: frozenset[str]) -> None:
        lowered = name.lower()
        prefixed = (w for p, w in DENIED_PREFIXES.items() if lowered.startswith(p))
        why = DENIED_FUNCTIONS.get(lowered) or next(prefixed, "")
        if why:
            raise QueryError(f"function {name}() is not allowed here: {why}")
        if name in functions or lowered in functions or lowered in _SYNTAX_FUNCTIONS:
            return
        base = name  # an aggregate with combinators: sumIf, uniqStateMerge, avgOrNullIf...
        while True:
            suffix = next((c for c in self._combinators if base.endswith(c) and len(base) > len(c)), None)
            if suffix is None:
                break
            base = base[: -len(suffix)]
            if base in self._aggregates or base.lower() in self._aggregates:
                return self._check_function(base, functions)
        raise QueryError(f"function {name}() is not allowed here (not a built-in function)")

    # -- the scope --------------------------------------------------------------------------------------------
    def _private_names(self, client: Any) -> tuple[str, ...]:
        """The relations an unqualified name could reach besides the public views: the current database's tables,
        views and dictionaries, and the session's temporary tables. Each is shadowed by an empty CTE, so that not even
        the binder check's EXPLAIN (which runs scalar subqueries to fold them) reads one."""
        rows = self._rows(
            client,
            "SELECT DISTINCT name FROM system.tables WHERE database = currentDatabase() OR is_temporary ORDER BY name",
        )
        return tuple(str(n) for n in rows if str(n) not in PUBLIC_RELATIONS)

    def _shadow(self, view: str, project: str | None) -> str:
        where = "" if project is None else f" WHERE project = {_literal(project)}"
        return f"{_ident(view)} AS (SELECT * FROM {_ident(self.database)}.{_ident(view)}{where})"

    def _wrap(self, canonical: str, project: str | None, private: tuple[str, ...] = ()) -> str:
        shadows = [self._shadow(v, project) for v in PUBLIC_RELATIONS]
        shadows += [f"{_ident(name)} AS (SELECT NULL AS {_PRIVATE} WHERE 0)" for name in private]
        return f"WITH {', '.join(shadows)} SELECT * FROM ({canonical})"

    # -- the binder check -------------------------------------------------------------------------------------
    def _filter(self, client: Any, view: str, project: str) -> list[str]:
        """The ``JOIN TREE`` and ``WHERE`` of ``view``'s shadow as ClickHouse binds them, ids renumbered."""
        key = (view, project)
        if key not in self._filters:
            final = self._wrap(f"SELECT * FROM {_ident(view)}", project)
            tree = _indented([str(x) for x in self._rows(client, "EXPLAIN QUERY TREE " + final)])
            found = [_filter_lines(n) for n in _walk(tree) if n.kind == "JOIN" and n.text == "TREE"]
            found = [f for f in found if f]
            if len(found) != 1:
                raise QueryError(f"the view {view} is not available on this store")
            with self._lock:
                if len(self._filters) >= _KEPT:
                    self._filters.clear()
                self._filters[key] = found[0]
        return self._filters[key]

    def _check_binding(
        self,
        client: Any,
        final: str,
        project: str | None,
        private: tuple[str, ...],
        timeout_s: float = _EXPLAIN_SECONDS,
    ) -> None:
        """Layer 3: every storage the analyzer bound for ``final`` is a public view read through the filter."""
        limits = {**self.settings(timeout_s, 1), "max_result_rows": 0}
        tree = _indented([str(x) for x in self._rows(client, "EXPLAIN QUERY TREE " + final, limits)])
        public = {f"{self.database}.{v}": v for v in PUBLIC_RELATIONS}
        filtered: set[int] = set()  # the TABLE lines read through the project's filter
        for node in _walk(tree):
            if node.kind == "JOIN" and node.text == "TREE" and len(node.children) == 1:
                table = node.children[0]
                view = public.get(_field(table.line, "table_name") or "")
                if view is not None and (project is None or _filter_lines(node) == self._filter(client, view, project)):
                    filtered.add(id(table))
        for node in _walk(tree):
            stripped = node.line.strip()
            if stripped.startswith("TABLE id:"):
                name = _field(node.line, "table_name")
                if name == "system.one" or id(node) in filtered:
                    continue
                shown = (name or stripped).removeprefix(f"{self.database}.")
                if name in public:
                    raise QueryError(
                        f"{shown} is read here past the project's filter (a CTE named like a public view?)"
                    )
                raise QueryError(f"unknown or private relation {shown!r}; queryable: {', '.join(PUBLIC_RELATIONS)}")
            if stripped.startswith("TABLE_FUNCTION id:"):
                name = _field(node.line, "table_function_name")
                if name not in TABLE_FUNCTIONS:
                    raise QueryError(f"table function {name or stripped}() is not allowed here")
            if stripped.startswith("FUNCTION id:"):
                for name in re.findall(r"function_name: ([^,]+),", stripped):  # the real one among any forged
                    lowered = name.lower()
                    if lowered in _ANALYZER_INTERNALS:
                        continue  # what the analyzer writes for GROUPING() and scalar subqueries (layer 1 refused
                        # these names in the user's own text)
                    if lowered in DENIED_FUNCTIONS or any(lowered.startswith(p) for p in DENIED_PREFIXES):
                        self._check_function(name, frozenset())
            cte = _field(node.line, "cte_name")
            if cte in private:
                raise QueryError(f"unknown or private relation {cte!r}; queryable: {', '.join(PUBLIC_RELATIONS)}")
            if cte in PUBLIC_RELATIONS:
                joins = [c for c in node.children if c.kind == "JOIN" and c.text == "TREE"]
                read = joins[0].children[0] if joins and len(joins[0].children) == 1 else None
                if read is None or id(read) not in filtered:
                    raise QueryError(f"a CTE may not be named like the public view {cte}")
