"""DuckDB's SQL, as ClickHouse's: the one place where the two dialects differ.

The analytics and the SQL API speak DuckDB's dialect (docs/schema.md's examples, every question's SQL). On the
ClickHouse store each statement is parsed by SQLGlot as DuckDB SQL and written out as ClickHouse SQL, with the
statement's ``?`` parameters inlined as literals (SQLGlot writes them, quoted and escaped; ClickHouse's own parser
then reads the whole text again before anything runs: see ``_sandbox``). Differences SQLGlot does not cover are
rewritten here, on the tree, one function each.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Tokenizer, TokenType

from taskcost.store._base import QueryError

__all__ = ["to_clickhouse"]


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
        raise QueryError(f"syntax error: {exc}") from None
    if len(trees) != 1:
        raise QueryError("one statement per query")
    tree = trees[0]
    return tree.sql(dialect="clickhouse")


def _literal(value: Any) -> exp.Expression:
    if isinstance(value, bool) or value is None:
        return exp.convert(value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float | Decimal):
        return exp.Literal.number(str(value))
    if isinstance(value, dt.datetime):
        stamp = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        return exp.cast(exp.Literal.string(stamp.isoformat(sep=" ")), exp.DataType.build("DateTime64(6)", "clickhouse"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, list | tuple):
        return exp.Array(expressions=[_literal(v) for v in value])
    raise QueryError(f"a parameter of type {type(value).__name__} is not supported")
