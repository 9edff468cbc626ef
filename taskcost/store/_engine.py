"""Opening the DuckDB engine with the server's limits and hardening, and reading its errors.

DuckDB invalidates a whole database instance after an internal error of one statement (one ``reservoir_quantile``
with an absurd sample size is enough): every later statement of every connection fails until the instance is closed
and opened again. ``is_fatal`` tells such errors apart, so the store can reopen itself (``DuckDBStore._heal``);
``engine_message`` is what a caller may read of any DuckDB error (never its native stack trace).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from taskcost.store._base import StoreLockedError, StoreUnavailableError

__all__ = ["MAX_EXPRESSION_DEPTH", "EngineOptions", "connect", "engine_message", "harden", "is_fatal"]

# DuckDB's own bound on the nesting of an expression in the parser (its default is 1000): deep enough for any
# query a person writes or the analytics make, shallow enough that no recursion in the engine runs out of stack.
MAX_EXPRESSION_DEPTH = 250

# Auto-checkpoint once the WAL holds this much (DuckDB's default is 16MiB). A checkpoint compresses and rewrites the
# row groups a commit touched, the partly filled last one of each table included; intake writes about 1.4 KB of WAL
# per span, so at 16MiB the same rows were recompressed about every 12,000 spans. Writing 400k spans through the
# store alone cost 32.9 CPU us/span at 16MiB and 24.4 at 64MiB; through the server with 2 decode workers, 600k spans
# went in at 23.3k spans/s at 64MiB, 27.2k at 128MiB and 26.4k at 256MiB, the server's peak RSS 813, 770 and 748 MB
# (ad hoc runs, not committed). A crash replays at most this much WAL (about 1 s here).
_CHECKPOINT_THRESHOLD = "128MiB"

_HARDEN = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)
_TRACE = re.compile(r"\n\s*Stack Trace:.*", re.DOTALL)
_ADDRESS = re.compile(r"\[?0x[0-9a-fA-F]{6,}\]?")


@dataclass(frozen=True)
class EngineOptions:
    """How the store opens DuckDB: again the same way when it reopens after a fatal error."""

    memory_limit: str | None = None
    threads: int | None = None


def connect(path: Path, read_only: bool, options: EngineOptions) -> duckdb.DuckDBPyConnection:
    """A connection to ``path`` with ``options``, the parser's depth bound and the hardening (no file, network or
    extension access; configuration locked). Migrations are the caller's, before ``harden``."""
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        text = engine_message(exc)
        if "lock" in text.lower():
            raise StoreLockedError(
                f"{path} is held by another process (DuckDB allows one process per file). "
                f"Ask the server that owns it (taskcost sql --url ...). DuckDB said: {text}"
            ) from None
        raise StoreUnavailableError(f"cannot open {path}: {text}") from None
    except duckdb.Error as exc:
        raise StoreUnavailableError(f"cannot open {path}: {engine_message(exc)}") from None
    try:
        if options.memory_limit is not None:
            con.execute("SET memory_limit = ?", [options.memory_limit])
        if options.threads is not None:
            con.execute(f"SET threads = {int(options.threads)}")
        con.execute(f"SET max_expression_depth = {MAX_EXPRESSION_DEPTH}")
        if not read_only:
            con.execute(f"SET checkpoint_threshold = '{_CHECKPOINT_THRESHOLD}'")
            # the writer's inserts run in parallel without keeping the rows' order: a commit's ~12k calls went in in
            # two-thirds of the time; in interleaved 200k-span server runs (ad hoc), 13.3k against 12.5k spans/s and
            # 60 against 66 server CPU us/span (medians of 6 and 7; the runs overlap). So a query without ORDER BY
            # may get its rows in another order than they arrived in (docs/schema.md says so)
            con.execute("SET preserve_insertion_order = false")
    except Exception:
        con.close()
        raise
    return con


def harden(con: duckdb.DuckDBPyConnection) -> None:
    for stmt in _HARDEN:
        con.execute(stmt)


def is_fatal(exc: BaseException) -> bool:
    """An error after which DuckDB's instance is unusable (or an internal error, which invalidates it)."""
    if isinstance(exc, duckdb.FatalException | duckdb.InternalException):
        return True
    return isinstance(exc, duckdb.Error) and "database has been invalidated" in str(exc)


def engine_message(exc: BaseException) -> str:
    """A DuckDB error as a caller may read it: its first paragraph, no native stack trace, no memory address."""
    text = _TRACE.sub("", str(exc)).strip()
    return _ADDRESS.sub("", text).strip() or type(exc).__name__
