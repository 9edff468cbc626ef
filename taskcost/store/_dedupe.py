"""Re-sent spans and repeated provider responses, recognised within a window of recent keys.

A span's key is md5 of (project, trace id, span id); a response's is md5 of (project, trace id, response id).
Each kind of key lives in two plain tables, without an index: the current generation (``span_keys``,
``response_keys``) and the one before it (``span_keys_old``, ``response_keys_old``). A commit looks its keys up
in both (one hash join over the keys of the window) and appends its new ones to the current generation. Once
that holds ``window`` keys, the writer drops the old generation and the current one becomes the old one.

What that promises: a span re-sent while fewer than ``window`` spans were stored after it is recognised and not
stored twice (nor counted twice); so is a response reported again within ``window`` responses. After between
``window`` and twice as many, it is stored again. OTLP exporters re-send within seconds to minutes; at the
default of 1,000,000 the horizon is 40 s at this machine's ingest ceiling (25k spans/s) and 4.6 hours at 60
spans/s.

Why not a PRIMARY KEY, as before: DuckDB's ART index has to fit in memory, about 58 bytes a key, and it held one
key per span ever stored. At 5M keys it took 280-290 MB; inserting 20k new keys then failed under a 128MB memory
limit, and at 20M keys under 512MB (ad hoc runs, not committed), so a long-running collector would have stopped
committing at some millions of spans. Here the keys are ordinary columns (16 bytes each, paged like any table).
A commit's span keys are looked up with an anti join (hashing the commit's keys, scanning the window's): 25 ms for
20k spans against 1.5M keys, one DuckDB thread, where ``NOT IN`` over the window took 79 ms and grew with it (it
hashed the window; ad hoc, 2026-12-06).
"""

from __future__ import annotations

import duckdb

from taskcost.store._sql import transaction

__all__ = ["DEFAULT_WINDOW", "KINDS", "RESPONSE_KEY", "rebuild", "rotate_full", "seen", "span_key"]


def span_key(table: str = "") -> str:
    """A span's key (of ``table``'s columns when given: an alias, for a query that joins)."""
    t = f"{table}." if table else ""
    return f"md5_number({t}project || chr(31) || {t}trace_id || {t}span_id)"


RESPONSE_KEY = "md5_number(project || chr(31) || trace_id || chr(31) || response_id)"
KINDS = ("span_keys", "response_keys")
DEFAULT_WINDOW = 1_000_000


def seen(kind: str) -> str:
    """A relation of the keys in the window of ``kind`` (``span_keys`` or ``response_keys``)."""
    return f"(SELECT k FROM {kind} UNION ALL SELECT k FROM {kind}_old)"


def rotate_full(cur: duckdb.DuckDBPyConnection, window: int) -> list[str]:
    """Start a new generation of each kind whose current one holds ``window`` keys or more, in one transaction
    of its own; returns the kinds rotated."""
    row = cur.execute(f"SELECT {', '.join(f'(SELECT count(*) FROM {kind})' for kind in KINDS)}").fetchone()
    full = [kind for kind, n in zip(KINDS, row or (), strict=False) if n >= window]
    if not full:
        return []
    with transaction(cur):
        for kind in full:
            cur.execute(f"DROP TABLE {kind}_old")
            cur.execute(f"ALTER TABLE {kind} RENAME TO {kind}_old")
            cur.execute(f"CREATE TABLE {kind} (k UHUGEINT NOT NULL)")
    return full


def rebuild(cur: duckdb.DuckDBPyConnection, window: int) -> None:
    """Both windows from the row tables: the keys of the ``window`` spans and responses received last (in the
    caller's transaction; for rows loaded into the tables directly)."""
    for kind in KINDS:
        cur.execute(f"DELETE FROM {kind}")
        cur.execute(f"DELETE FROM {kind}_old")
    cur.execute(f"INSERT INTO span_keys SELECT {span_key()} FROM spans ORDER BY received_ns DESC LIMIT {int(window)}")
    cur.execute(
        f"INSERT INTO response_keys SELECT {RESPONSE_KEY} FROM llm_call_rows "
        f"WHERE response_id IS NOT NULL AND NOT duplicate ORDER BY received_ns DESC LIMIT {int(window)}"
    )
