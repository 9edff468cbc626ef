"""DuckDB's SQL, as ClickHouse's: the one place where the two dialects differ.

The analytics and the SQL API speak DuckDB's dialect (docs/schema.md's examples, every question's SQL). On the
ClickHouse store each statement is parsed by SQLGlot as DuckDB SQL and written out as ClickHouse SQL, with the
statement's ``?`` parameters inlined as literals (SQLGlot writes them, quoted and escaped; ClickHouse's own parser
then reads the whole text again before anything runs: see ``_sandbox``). Differences SQLGlot does not cover are
rewritten here, on the tree, one function each.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Tokenizer, TokenType

from taskcost.store._base import QueryError

__all__ = ["DUCKDB_SEMANTICS", "as_duckdb_types", "to_clickhouse"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


DUCKDB_SEMANTICS: dict[str, int] = {
    # a column keeps its name where the SELECT list gives an expression the same alias (``min(outcome) AS outcome``
    # and ``outcome`` elsewhere in that query are two things in DuckDB, one in ClickHouse by default)
    "prefer_column_name_to_alias": 1,
    # the columns a grouping set leaves out are NULL, not their type's default
    "group_by_use_nulls": 1,
    # sum, min, max... of no row are NULL, not 0 (count stays 0)
    "aggregate_functions_null_for_empty": 1,
    # an outer join's missing side is NULL, not the type's default
    "join_use_nulls": 1,
}
"""The query settings under which ClickHouse answers DuckDB's SQL as DuckDB does: every query of the store carries them
(the sandbox's check binds each query under them too)."""


def to_clickhouse(sql: str, params: Sequence[Any] | None = None) -> str:
    """``sql`` (DuckDB's dialect, ``?`` placeholders) as one ClickHouse statement with ``params`` inlined.
    Raises QueryError when it does not parse or the placeholders and parameters do not match."""
    values = list(params or [])
    try:
        # the placeholders in the order they are written (the tokens'; a tree's order need not be the text's),
        # each replaced by its value as a DuckDB literal, from the last so that the earlier positions hold
        holes = [t for t in Tokenizer(dialect="duckdb").tokenize(sql) if t.token_type == TokenType.PLACEHOLDER]
        if len(holes) != len(values):
            raise QueryError(f"the query has {len(holes)} placeholder(s) and {len(values)} parameter(s)")
        for hole, value in reversed(list(zip(holes, values, strict=True))):
            sql = sql[: hole.start] + _literal(value).sql(dialect="duckdb") + sql[hole.end + 1 :]
        trees = [t for t in sqlglot.parse(sql, read="duckdb") if t is not None]
    except (ParseError, TokenError) as exc:
        # (SQLGlot underlines the token with terminal escapes, on a line of its own: one plain line instead)
        said = " ".join(_ANSI.sub("", str(exc)).split())
        raise QueryError(f"syntax error: {said}") from None
    if len(trees) != 1:
        raise QueryError("one statement per query")
    tree = trees[0]
    return _rewrite(tree).sql(dialect="clickhouse")


def _rewrite(tree: exp.Expr) -> exp.Expr:
    """What SQLGlot leaves in DuckDB's terms, in ClickHouse's: one rule per difference."""
    for select in list(tree.find_all(exp.Select)):
        _name_star_columns(select)
        _unnest_joins(select)
    for table in list(tree.find_all(exp.Table)):
        if isinstance(table.this, exp.GenerateSeries):
            table.replace(_series(table))
    for union in list(tree.find_all(exp.Union)):
        if union.args.get("by_name"):
            _union_by_position(union)
    return tree.transform(_fix)


def _first_select(node: exp.Expr) -> exp.Select:
    while isinstance(node, exp.SetOperation | exp.Subquery):
        node = node.this
    if not isinstance(node, exp.Select):
        raise QueryError("UNION BY NAME needs SELECT arms")
    return node


def _union_by_position(union: exp.Union) -> None:
    """``a UNION ALL BY NAME b`` -> ``a UNION ALL b'``: b's columns put in a's order, NULL for those it lacks (a
    column only b has is not supported: ClickHouse has no BY NAME)."""
    names = _first_select(union.this).named_selects
    right = _first_select(union.expression)
    if "*" in names or any(isinstance(e, exp.Star) for e in right.expressions):
        raise QueryError("UNION BY NAME over * is not supported on ClickHouse")
    by_name = {e.alias_or_name: e for e in right.expressions}
    extra = set(by_name) - set(names)
    if extra:
        raise QueryError(f"UNION BY NAME: columns only the second part has: {sorted(extra)}")
    right.set("expressions", [by_name.get(n) or exp.alias_(exp.null(), n) for n in names])
    union.set("by_name", None)


_DUCK_TO_CH_TYPES = {"VARCHAR": "Nullable(String)", "BIGINT": "Nullable(Int64)", "DOUBLE": "Nullable(Float64)"}


def _json_type(duck: str) -> str:
    """A ``from_json`` structure (DuckDB's JSON type notation) as the ClickHouse type ``JSONExtract`` reads."""
    import json

    def walk(t: Any) -> str:
        if isinstance(t, list):
            return f"Array({walk(t[0])})"
        if isinstance(t, dict):
            return "Tuple(" + ", ".join(f"{k} {walk(v)}" for k, v in t.items()) + ")"
        name = str(t).upper()
        if name.startswith("DECIMAL"):
            return f"Nullable({name.replace('DECIMAL', 'Decimal')})"
        if name not in _DUCK_TO_CH_TYPES:
            raise QueryError(f"from_json type {t!r} has no ClickHouse form here")
        return _DUCK_TO_CH_TYPES[name]

    return walk(json.loads(duck))


def _name_star_columns(select: exp.Select) -> None:
    """``t.*`` in a SELECT with a JOIN -> ``t.a AS a, t.b AS b, ...`` when ``t`` is a CTE or a subquery of the
    statement whose columns all have names: DuckDB names each column as ``t`` does; ClickHouse names one that another
    joined table also has ``t.a`` (the right table's with one JOIN, every table's with two or more), so a query further
    out does not find ``a``. A star over a stored table or view, or with EXCLUDE / REPLACE, is left as it is."""
    if not select.args.get("joins"):
        return
    projections: list[exp.Expr] = []
    for e in select.expressions:
        star = e.this if isinstance(e, exp.Column) else None
        names = _source_columns(select, e.table) if isinstance(star, exp.Star) and not any(star.args.values()) else None
        if names is None:
            projections.append(e)
            continue
        table = e.args["table"]
        projections += [exp.alias_(exp.column(n.copy(), table=table.copy()), n.copy()) for n in names]
    select.set("expressions", projections)


def _source_columns(select: exp.Select, name: str) -> list[exp.Identifier] | None:
    """The column names of the table expression ``name`` in ``select``'s FROM and JOINs, when it is a CTE or a
    subquery whose columns all have names (its alias's column list first); None otherwise."""
    sources = [select.args["from_"].this] if select.args.get("from_") else []
    sources += [j.this for j in select.args.get("joins") or []]
    found = [s for s in sources if s.alias_or_name == name]
    if len(found) != 1:
        return None
    [source] = found
    renamed = list(source.args["alias"].columns) if source.args.get("alias") else []
    if isinstance(source, exp.Subquery):
        body = source.this
    elif isinstance(source, exp.Table) and not source.args.get("db"):
        cte = _cte(select, source.name)
        if cte is None:
            return None
        renamed = renamed or list(cte.args["alias"].columns)
        body = cte.this
    else:
        return None
    if not isinstance(body, exp.Select):
        return None
    names: list[exp.Identifier] = []
    for i, p in enumerate(body.expressions):
        if i < len(renamed):
            names.append(renamed[i])
        elif isinstance(p, exp.Alias):
            names.append(p.args["alias"])
        elif isinstance(p, exp.Column) and isinstance(p.this, exp.Identifier):
            names.append(p.this)
        else:
            return None  # a star, or an expression DuckDB names by its text
    return names


def _cte(node: exp.Expr, name: str) -> exp.CTE | None:
    """The CTE ``name`` as seen from ``node``: the nearest WITH that defines it."""
    scope: exp.Expr | None = node
    while scope is not None:
        with_ = scope.args.get("with_")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if cte.alias == name:
                    return cte
        scope = scope.parent
    return None


def _unnest_joins(select: exp.Select) -> None:
    """``FROM unnest(list) AS t(c)`` -> ``FROM (SELECT arrayJoin(list) AS c) AS t``; a lateral ``FROM x, unnest(
    from_json(json_extract(x.j, '$.k'), '<type>')) AS u(w)`` -> ``FROM x ARRAY JOIN JSONExtract(x.j, 'k', '<type>')
    AS w``, its references ``u.w.f`` becoming ``w.f`` (the element is a named tuple)."""
    source = select.args.get("from_")
    if source is not None and isinstance(source.this, exp.Unnest):
        source.set("this", _array_join_subquery(source.this))
    for join in select.args.get("joins") or []:
        unnest = join.this
        if not isinstance(unnest, exp.Unnest):
            continue
        alias = unnest.args.get("alias")
        [value] = unnest.expressions
        if isinstance(value, exp.FromJson) and isinstance(value.this, exp.JSONExtract):
            path = value.this.expression
            keys = [k.this for k in path.expressions if isinstance(k, exp.JSONPathKey)] if path else []
            # a NULL document is no element (ClickHouse refuses a Nullable array): '' extracts an empty one
            text = exp.Anonymous(this="ifNull", expressions=[value.this.this, exp.Literal.string("")])
            args = [text, *(exp.Literal.string(k) for k in keys), exp.Literal.string(_json_type(value.expression.name))]
            if alias is None or len(alias.columns) != 1:
                raise QueryError("a lateral unnest needs an alias with one column: unnest(...) AS u(w)")
            table, [column] = alias.name, alias.columns
            join.set("this", exp.alias_(exp.Anonymous(this="JSONExtract", expressions=args), column.name))
            join.set("kind", "ARRAY")
            for col in list(select.find_all(exp.Column)):
                if col.args.get("db") is not None and col.args["db"].name == table:
                    col.replace(exp.Dot(this=exp.column(col.table), expression=exp.to_identifier(col.name)))
        else:
            join.set("this", _array_join_subquery(unnest))


def _series(table: exp.Table) -> exp.Expr:
    """DuckDB's ``range(a, b[, s])`` (b excluded) or ``generate_series(a, b[, s])`` (b included) in FROM ->
    ``(SELECT generate_series AS <column> FROM generate_series(a, b[, s])) AS <alias>``: ClickHouse's includes its
    end and takes no column names after the alias."""
    series: exp.GenerateSeries = table.this
    start, end, step = (series.args.get(k) for k in ("start", "end", "step"))
    if end is None:
        raise QueryError("range() / generate_series() in FROM needs an end")
    start = _sub(start) if start is not None else exp.Literal.number(0)
    end = _sub(end)
    if series.args.get("is_end_exclusive"):
        backwards = isinstance(step, exp.Neg) or (isinstance(step, exp.Literal) and step.this.startswith("-"))
        end = (exp.Add if backwards else exp.Sub)(this=end, expression=exp.Literal.number(1))
    args = [start, end, *([_sub(step)] if step is not None else [])]
    alias = table.args.get("alias")
    column = (
        alias.columns[0].name
        if alias is not None and alias.columns
        else ("range" if series.args.get("is_end_exclusive") else "generate_series")
    )
    inner = exp.select(exp.alias_(exp.column("generate_series"), column)).from_(
        exp.Anonymous(this="generate_series", expressions=args)
    )
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias.name if alias else "series")))


def _array_join_subquery(unnest: exp.Unnest) -> exp.Expr:
    alias = unnest.args.get("alias")
    [value] = unnest.expressions
    column = alias.columns[0].name if alias is not None and alias.columns else "unnest"
    inner = exp.select(exp.alias_(exp.Anonymous(this="arrayJoin", expressions=[value]), column))
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias.name if alias else "u")))


def _exact_quantile(level: exp.Expr, value: exp.Expr, where: exp.Expr | None) -> exp.Expr:
    """DuckDB's ``quantile_cont`` (linear between the two nearest values) is ClickHouse's
    ``quantileExactInclusive``; ClickHouse's plain ``quantile`` and ``median`` sample. A FILTER becomes its -If."""
    args = [value] if where is None else [value, where]
    levels = level.expressions if isinstance(level, exp.Array) else [level]  # several: an array of quantiles
    name = ("quantilesExactInclusive" if isinstance(level, exp.Array) else "quantileExactInclusive") + (
        "" if where is None else "If"
    )
    agg = exp.ParameterizedAgg(this=name, expressions=levels, params=args)
    if not isinstance(level, exp.Array):
        return agg
    # quantiles of no value: DuckDB's NULL, not ClickHouse's array of NaN (an array cannot be Nullable there: the
    # CASE is a Variant, read back as the array or NULL)
    counted = exp.Anonymous(this="count" if where is None else "countIf", expressions=args)
    return exp.Case(ifs=[exp.If(this=exp.GT(this=counted, expression=exp.Literal.number(0)), true=agg)])


def _quantile_parts(node: exp.Expr) -> tuple[exp.Expr, exp.Expr] | None:
    if isinstance(node, exp.PercentileCont) and node.expression is not None:  # quantile_cont(x, p)
        return node.expression, node.this
    if isinstance(node, exp.Median):
        return exp.Literal.number("0.5"), node.this
    return None


def _json_keys(path: exp.Expr | None) -> list[exp.Expr] | None:
    """A JSON path's keys and indexes as ClickHouse's JSON functions take them (``'$.a.b'`` -> ``'a', 'b'``); None
    when the path has another step (a wildcard, a filter)."""
    if isinstance(path, exp.Literal) and path.is_string:
        try:
            path = exp.JSONPath(expressions=sqlglot.parse_one(f"SELECT j -> '{path.this}'", read="duckdb")
                                .expressions[0].expression.expressions)  # fmt: skip
        except (ParseError, AttributeError):
            return None
    if not isinstance(path, exp.JSONPath):
        return None
    keys: list[exp.Expr] = []
    for step in path.expressions:
        if isinstance(step, exp.JSONPathRoot):
            continue
        if isinstance(step, exp.JSONPathKey):
            keys.append(exp.Literal.string(str(step.this)))
        elif isinstance(step, exp.JSONPathSubscript) and isinstance(step.this, int):
            keys.append(exp.Literal.number(step.this + 1))  # ClickHouse counts from 1
        else:
            return None
    return keys


def _json_text(doc: exp.Expr, keys: list[exp.Expr]) -> exp.Expr:
    """DuckDB's ``json_extract_string`` / ``->>`` / ``json_value``: a string value as itself, any other value as its
    JSON text, NULL for JSON null or a missing key (ClickHouse's JSONExtractString says '' for all three)."""

    def call(name: str) -> exp.Expr:
        return exp.Anonymous(this=name, expressions=[doc.copy(), *(k.copy() for k in keys)])

    kind = exp.Anonymous(this="toString", expressions=[call("JSONType")])
    return exp.Case(
        ifs=[
            exp.If(this=exp.EQ(this=kind, expression=exp.Literal.string("String")), true=call("JSONExtractString")),
            exp.If(
                this=exp.And(
                    this=call("JSONHas"), expression=exp.NEQ(this=kind.copy(), expression=exp.Literal.string("Null"))
                ),
                true=call("JSONExtractRaw"),
            ),
        ],
        default=exp.null(),
    )


_TIMESTAMPS = (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPNTZ)


def _sub(node: exp.Expr) -> exp.Expr:
    """A part of a node ``_fix`` replaces, rewritten itself first: SQLGlot's ``transform`` does not visit what a
    replacement carries."""
    return node.transform(_fix)


def _fix(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.DataType) and node.this in _TIMESTAMPS:
        # DuckDB's TIMESTAMP has microseconds; SQLGlot's ClickHouse DateTime has seconds
        nullable = isinstance(node.parent, exp.Cast)  # as SQLGlot writes every CAST's type: NULL casts too
        return exp.DataType.build("Nullable(DateTime64(6))" if nullable else "DateTime64(6)", dialect="clickhouse")
    if isinstance(node, exp.TimestampTrunc):
        # ClickHouse's dateTrunc answers a DateTime (seconds); DuckDB's date_trunc keeps the TIMESTAMP's type
        trunc = exp.Anonymous(
            this="dateTrunc", expressions=[exp.Literal.string(node.text("unit").lower()), node.this.transform(_fix)]
        )
        return exp.Anonymous(this="toDateTime64", expressions=[trunc, exp.Literal.number(6)])
    if isinstance(node, exp.Limit | exp.Offset):
        value = node.expression
        if isinstance(value, exp.Literal) and value.is_string and value.this.isdigit():
            node.set("expression", exp.Literal.number(value.this))  # a parameter sent as text: DuckDB casts it
        return node
    if isinstance(node, exp.JSONExtractScalar) or (
        isinstance(node, exp.Anonymous) and node.name.lower() == "json_value"
    ):
        doc, path = (node.this, node.expression) if isinstance(node, exp.JSONExtractScalar) else node.expressions[:2]
        keys = _json_keys(path)
        if keys is not None:  # the document's own expression is rewritten first: the copies are not visited again
            return _json_text(doc.transform(_fix), keys)
    if (
        isinstance(node, exp.Cast)
        and isinstance(node.this, exp.JSONExtract)
        and node.to.is_type(exp.DataType.Type.ARRAY)
        and node.to.expressions
        and node.to.expressions[0].is_type(exp.DataType.Type.JSON)
    ):
        keys = _json_keys(node.this.expression)
        if keys is not None:  # CAST(json_extract(d, path) AS JSON[]): the array's elements as JSON texts
            text = exp.Anonymous(this="ifNull", expressions=[_sub(node.this.this), exp.Literal.string("")])
            return exp.Anonymous(this="JSONExtractArrayRaw", expressions=[text, *keys])
    if isinstance(node, exp.Anonymous) and node.name.lower() == "epoch_us":
        # DuckDB's microseconds since 1970 of a TIMESTAMP
        return exp.Anonymous(this="toUnixTimestamp64Micro", expressions=[_sub(e) for e in node.expressions])
    if isinstance(node, exp.Anonymous) and node.name.lower() == "hash":
        # DuckDB's 64-bit hash of its arguments: ClickHouse's sipHash64 of the same (other values: a hash orders or
        # samples rows within one engine's answer, never across engines); of several, their tuple: sipHash64(a, b)
        # is NULL where one is NULL, sipHash64(tuple(a, b)) is not (and is the same where none is)
        args = [_sub(e) for e in node.expressions]
        if len(args) > 1:
            args = [exp.Anonymous(this="tuple", expressions=args)]
        return exp.Anonymous(this="sipHash64", expressions=args)
    if isinstance(node, exp.Filter):
        parts = _quantile_parts(node.this)
        if parts is not None:
            level, value = parts
            return _exact_quantile(_sub(level), _sub(value), where=_sub(node.expression.this))
    if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
        order = node.this
        [key] = order.expressions
        if key.this != order.this:
            raise QueryError("list(x ORDER BY y) is supported on ClickHouse only ordered by x itself")
        agg = exp.Anonymous(this="groupArray", expressions=[_sub(order.this)])
        return exp.Anonymous(this="arrayReverseSort" if key.args.get("desc") else "arraySort", expressions=[agg])
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
        # list[a:b] (1-based, both ends in) -> arraySlice(list, a, b - a + 1)
        lo, hi = _sub(node.expressions[0].this), _sub(node.expressions[0].expression)
        length = exp.Add(this=exp.Sub(this=hi.copy(), expression=lo.copy()), expression=exp.Literal.number(1))
        return exp.Anonymous(this="arraySlice", expressions=[node.this.transform(_fix), lo, length])
    if (
        isinstance(node, exp.Window)
        and isinstance(node.this, exp.IgnoreNulls)
        and isinstance(node.this.this, exp.Lag)
        and node.this.this.args.get("offset") in (None, exp.Literal.number(1))
        and not node.args.get("spec")
    ):
        # lag(x IGNORE NULLS): the last non-NULL value before this row; ClickHouse's last_value skips NULLs
        value = exp.Anonymous(this="toNullable", expressions=[node.this.this.this.transform(_fix)])
        spec = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="1", end_side="PRECEDING")
        return exp.Window(
            this=exp.Anonymous(this="last_value", expressions=[value]),
            partition_by=[e.transform(_fix) for e in node.args.get("partition_by") or []],
            order=node.args["order"].transform(_fix) if node.args.get("order") else None,
            spec=spec,
            over="OVER",
        )
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Lag | exp.Lead) and not node.args.get("spec"):
        # DuckDB's lag/lead: the neighbour row of the partition, NULL at its ends; ClickHouse's lagInFrame /
        # leadInFrame: within the frame, the type's default at its ends (0 for a non-Nullable column)
        fn = node.this
        name = "lagInFrame" if isinstance(fn, exp.Lag) else "leadInFrame"
        args = [exp.Anonymous(this="toNullable", expressions=[fn.this.transform(_fix)])]
        if fn.args.get("offset") is not None:
            args.append(fn.args["offset"])
        spec = exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED", end_side="FOLLOWING"
        )
        return exp.Window(
            this=exp.Anonymous(this=name, expressions=args),
            partition_by=[e.transform(_fix) for e in node.args.get("partition_by") or []],
            order=node.args["order"].transform(_fix) if node.args.get("order") else None,
            spec=spec,
            over="OVER",
        )
    if isinstance(node, exp.Round):
        # DuckDB rounds half away from zero; ClickHouse's round of a float rounds half to even
        value = node.this.transform(_fix)
        digits = node.args.get("decimals")
        if digits is not None and not (isinstance(digits, exp.Literal) and digits.this.isdigit()):
            raise QueryError("round(x, n) on ClickHouse needs n written as a whole number")
        scale = exp.Literal.number(10 ** int(digits.this)) if digits is not None else None
        scaled = exp.Abs(this=value) if scale is None else exp.Mul(this=exp.Abs(this=value), expression=scale)
        half_up = exp.Add(this=scaled, expression=exp.Literal.number("0.5"))
        magnitude = exp.Anonymous(this="floor", expressions=[half_up])
        signed = exp.Mul(this=exp.Anonymous(this="sign", expressions=[value.copy()]), expression=magnitude)
        return signed if scale is None else exp.Div(this=signed, expression=scale.copy(), typed=True)
    if isinstance(node, exp.IntDiv):
        # DuckDB's a // b of integers: ClickHouse's intDiv (SQLGlot's CAST(a / b) divides in Float64 first, which
        # loses the low digits of a nanosecond timestamp)
        return exp.Anonymous(this="intDiv", expressions=[node.this.transform(_fix), node.expression.transform(_fix)])
    if isinstance(node, exp.Div) and not node.args.get("typed"):
        # DuckDB divides in DOUBLE (DECIMAL / DECIMAL too); ClickHouse keeps a DECIMAL at the dividend's scale
        dividend = exp.Anonymous(this="toFloat64", expressions=[_sub(node.this)])
        return exp.Div(this=dividend, expression=_sub(node.expression))
    parts = _quantile_parts(node)
    if parts is not None and not isinstance(node.parent, exp.Filter):
        level, value = parts
        return _exact_quantile(_sub(level), _sub(value), where=None)
    if isinstance(node, exp.Select):
        # a predicate is UInt8 in ClickHouse and BOOLEAN in DuckDB: a projection that is one is cast to Bool
        node.set("expressions", [_as_bool(e) for e in node.expressions])
    return node


_PREDICATES = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)


def _is_boolean(node: exp.Expr) -> bool:
    """A predicate, a boolean literal, or a COALESCE / CASE of only those (NULL aside)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, _PREDICATES):
        return True
    if isinstance(node, exp.Coalesce):
        parts = [node.this, *node.expressions]
    elif isinstance(node, exp.Case):
        parts = [i.args["true"] for i in node.args.get("ifs") or []] + [node.args.get("default") or exp.null()]
    else:
        return False
    parts = [p for p in parts if not isinstance(p, exp.Null)]
    return bool(parts) and all(_is_boolean(p) for p in parts)


def _as_bool(projection: exp.Expr) -> exp.Expr:
    inner = projection.this if isinstance(projection, exp.Alias) else projection
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if not _is_boolean(inner):
        return projection
    cast = exp.Cast(this=inner.copy(), to=exp.DataType.build("Bool", dialect="clickhouse"))
    name = projection.alias_or_name if isinstance(projection, exp.Alias) else inner.sql(dialect="duckdb")
    return exp.alias_(cast, name, quoted=not isinstance(projection, exp.Alias))


def as_duckdb_types(table: pa.Table) -> pa.Table:
    """ClickHouse's Arrow answer with DuckDB's types where they differ only in form: a Variant of one type and NULL as
    that type; a timestamp with a time zone (DateTime64 in UTC) as the naive UTC timestamp DuckDB gives; lists with
    pyarrow's default item name; every field nullable."""
    for i, f in enumerate(table.schema):
        if pa.types.is_union(f.type):
            # a Variant of one type and NULL (ClickHouse's CASE of an array and NULL: an array cannot be Nullable)
            # is that type, NULL where it was NULL
            kinds = [
                f.type.field(k).type for k in range(f.type.num_fields) if not pa.types.is_null(f.type.field(k).type)
            ]
            if len(kinds) == 1:
                values = pa.array(table.column(i).to_pylist(), type=kinds[0])
                table = table.set_column(i, f.with_type(kinds[0]).with_nullable(True), values)
    fields, columns, changed = [], [], False
    for f, col in zip(table.schema, table.columns, strict=True):
        t = f.type
        if pa.types.is_timestamp(t) and t.tz is not None:
            t = pa.timestamp(t.unit)  # the same UTC instants, as DuckDB's TIMESTAMP gives them
        elif pa.types.is_list(t):
            t = pa.list_(pa.field("item", t.value_type))  # pyarrow's default item name, as DuckDB's lists
        if t != f.type or not f.nullable:  # every field nullable, as DuckDB marks them
            changed = True
            col = col.cast(t) if t != f.type else col
        fields.append(pa.field(f.name, t))
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields)) if changed else table


def _literal(value: Any) -> exp.Expr:
    """A parameter as a SQL literal (SQLGlot quotes and escapes it)."""
    if isinstance(value, bool) or value is None:
        return exp.convert(value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float | Decimal):
        return exp.Literal.number(str(value))
    if isinstance(value, dt.datetime):
        stamp = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        return exp.cast(exp.Literal.string(stamp.isoformat(sep=" ")), exp.DataType.build("TIMESTAMP"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, list | tuple):
        return exp.Array(expressions=[_literal(v) for v in value])
    raise QueryError(f"a parameter of type {type(value).__name__} is not supported")
