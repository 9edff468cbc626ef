"""The engines question's roll-ups, kept by the DuckDB store's single writer (migration 0021): per deployment
configuration and hour, the calls' sums (``engine_config_hours``) and the parts of the union of their intervals
(``engine_config_busy``), so that the question reads a few rows per configuration and hour instead of every call.

A configuration is ``CONFIG``: the call's model, provider, engine, version, quantization, GPU type and count, cluster
and deployment (engine and cluster: the call's own, else its engine span's), and its topology and decoding tags.

Settled hours, dirty hours:

* ``engine_hour_rows`` and ``engine_busy_rows`` hold the hours the writer last settled: computed from the calls
  (``_facts``: the counted calls with their engine figures) in one statement per part of the hours.
* Whatever can change a call's figures marks its hours dirty (``mark``: the hours from its start to its end, in
  ``engine_hours_dirty``): a commit's calls, a resolved answer or a re-price moving a call (``_hours``), an engine
  span or record changing a call's figures (``_engine_match``). The public views read a dirty hour from the calls,
  a settled one from the rows: they equal the calls at every commit.
* The writer settles the hours no commit marked for ``SETTLE_AFTER_S`` (``settle_due``, in a commit or, idle, on its
  own; an hour still being written to stays dirty, and costs its readers its calls); ``fold_rollups`` settles every
  dirty hour at once.

The union of a configuration's call intervals in an hour is kept as few parts as the answer needs, not as one per
call (calls of a lightly used configuration rarely overlap: the union has about as many pieces as calls). The busy
time of a selection is the union over its hours, which the question measures with a running maximum of the parts'
ends in the order of their starts; the parts of one hour are:

* its pieces (the union's connected pieces) that start before the latest end of the configuration's calls of earlier
  hours (``carry``): calls of another hour may overlap them, so they stay as they are;
* its last piece, when it ends after the hour: the next hour's calls may overlap it;
* one part for all its other pieces, from the first one's start, as long as their lengths add up to. No call of
  another hour overlaps them (earlier ones end before them, later ones start after the hour): in the running maximum
  the part counts exactly their total, and ends no later than they do.

The same holds for any subset of hours read, and with the calls of dirty hours read one by one. Projects are not
apart in ``engine_config_busy`` (a configuration's calls of every project make its busy time): its ``project`` is
NULL, so a reader limited to one project sees none of it (the question reads that project's calls instead).
"""

from __future__ import annotations

import contextlib
import logging
import time

import duckdb

from taskcost.store._answers import MODEL
from taskcost.store._engine_columns import CONFIG, HOUR_MEASURES
from taskcost.store._migrations_engine_calls import ENGINE_CALL_COLUMNS

__all__ = [
    "ENGINE_HOURS_0021",
    "SETTLE_AFTER_S",
    "SETTLE_CHECK_S",
    "mark",
    "rebuild",
    "Settler",
    "settle_due",
]

log = logging.getLogger("taskcost.store")

HOUR_KEY = ("project", "hour", *CONFIG, "call_engine", "call_cluster_id")
"""``engine_config_hours``' key: the project, the hour of the calls' start, the configuration, and the calls' own
engine and cluster (what a filter by engine or cluster selects; ``engine`` and ``cluster_id`` may be the engine
span's)."""

SETTLE_AFTER_S = 60.0
"""The writer settles a dirty hour once no commit marked it for this long."""
SETTLE_PER_COMMIT = 4
"""At most this many hours settled in one commit (the rest in the next ones)."""
SETTLE_CHECK_S = 5.0
"""The writer looks for hours to settle at most this often (the current hour is dirty while calls come in)."""

_HOUR_US = 3_600_000_000
_HOUR_NS = 1000 * _HOUR_US
_LIVE = "id NOT IN (SELECT id FROM engine_retracted)"
_SETTLE = "_taskcost_settle_hours"
_settling = f"(SELECT hour FROM {_SETTLE})"


def _facts(lo: str, hi: str, calls: str = "TRUE") -> str:
    """The counted calls that started in [``lo``, ``hi``) (SQL of nanoseconds) and meet ``calls`` (over
    ``llm_call_rows``), each with its kept engine figures, in the columns the sums and parts read (those of
    ``engine_calls`` they need, ``start_ns``, ``end_ns``, ``hour``, and the call's own ``call_engine`` and
    ``call_cluster_id``). A call's figure row has its start (``call_start_ns``): both sides are read in the range."""
    return f"""(SELECT c.project, c.trace_id, c.span_id, c.start_ns, c.end_ns,
    date_trunc('hour', make_timestamp(c.start_ns // 1000)) AS hour,
    {MODEL} AS model, c.provider, coalesce(c.engine, f.engine) AS engine, c.engine_version, c.quantization,
    c.gpu_type, c.gpu_count, coalesce(c.cluster_id, f.cluster_id) AS cluster_id, c.deployment,
    {", ".join(f"f.{col}" for col in ENGINE_CALL_COLUMNS)},
    c.engine AS call_engine, c.cluster_id AS call_cluster_id,
    c.status, c.cost_usd, c.input_tokens, c.output_tokens, c.cache_read_tokens,
    (c.end_ns - c.start_ns) / 1e9 AS latency_s, c.ttft_s, f.engine_source, f.decode_s, f.engine_cached_tokens,
    f.spec_draft_tokens, f.spec_accepted_tokens
FROM (SELECT * FROM llm_call_rows WHERE NOT duplicate AND start_ns >= {lo} AND start_ns < {hi} AND {calls}) AS c
LEFT JOIN (SELECT * FROM engine_figure_rows WHERE call_start_ns >= {lo} AND call_start_ns < {hi} AND {_LIVE}) AS f
    ON f.project = c.project AND f.trace_id = c.trace_id AND f.span_id = c.span_id)"""


def _sums(src: str) -> str:
    """``engine_config_hours``' rows from call rows ``src`` (``_facts``' columns)."""
    sums = ", ".join(
        f"sum({e}) AS {n}" if n == "spend_usd" else f"CAST(sum({e}) AS BIGINT) AS {n}" for n, e in HOUR_MEASURES
    )
    return f"SELECT {', '.join(HOUR_KEY)}, {sums} FROM {src} GROUP BY {', '.join(HOUR_KEY)}"


_CONFIG_LIST = ", ".join(CONFIG)
_SAME_CONFIG = " AND ".join(f"a.{c} IS NOT DISTINCT FROM b.{c}" for c in ("hour", *CONFIG))


def _parts(calls: str, carry_from: str) -> str:
    """``engine_busy_rows``' rows for the calls of ``calls`` (``_facts`` rows of whole hours, every call of
    each), the latest end of earlier calls read from ``carry_from`` (``_facts`` rows: the calls of every
    hour that may run into those hours)."""
    return f"""
WITH hours AS (SELECT DISTINCT hour FROM {calls}),
c AS (SELECT hour, {_CONFIG_LIST}, start_ns // 1000 AS lo, end_ns // 1000 AS hi FROM {calls}
      WHERE end_ns // 1000 > start_ns // 1000),
-- per hour and configuration: the latest end of the calls started before the hour and still running in it
carry AS (
    SELECT h AS hour, {_CONFIG_LIST}, max(hi) AS carry
    FROM (SELECT {_CONFIG_LIST}, end_ns // 1000 AS hi,
                 unnest(range(hour + INTERVAL 1 HOUR, make_timestamp(end_ns // 1000), INTERVAL 1 HOUR)) AS h
          FROM {carry_from} WHERE end_ns // 1000 > start_ns // 1000)
    WHERE h IN (SELECT hour FROM hours)
    GROUP BY ALL
),
o AS (
    SELECT *, max(hi) OVER (PARTITION BY hour, {_CONFIG_LIST} ORDER BY lo, hi
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM c
),
g AS (
    SELECT *, sum(CASE WHEN before IS NULL OR lo > before THEN 1 ELSE 0 END)
                  OVER (PARTITION BY hour, {_CONFIG_LIST} ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS piece
    FROM o
),
pieces AS (SELECT hour, {_CONFIG_LIST}, piece, min(lo) AS lo, max(hi) AS hi FROM g GROUP BY ALL),
kept AS (
    SELECT a.*, coalesce(a.lo < b.carry, false) OR a.hi > epoch_us(a.hour) + {_HOUR_US} AS apart
    FROM pieces AS a LEFT JOIN carry AS b ON {_SAME_CONFIG}
)
SELECT hour, {_CONFIG_LIST}, lo AS lo_us, hi AS hi_us FROM kept WHERE apart
UNION ALL
SELECT hour, {_CONFIG_LIST}, min(lo), min(lo) + sum(hi - lo) FROM kept WHERE NOT apart GROUP BY ALL
"""


def _table(name: str, columns: list[tuple[str, str]]) -> str:
    return f"CREATE TABLE {name} (\n" + ",\n".join(f"    {c} {t}" for c, t in columns) + "\n);\n"


_CONFIG_TYPES = {"gpu_count": "INTEGER", "tp_size": "INTEGER", "pp_size": "INTEGER", "dp_size": "INTEGER"}
_CONFIG_TYPES["pd_disaggregated"] = "BOOLEAN"
_CONFIG_COLUMNS = [(c, _CONFIG_TYPES.get(c, "VARCHAR")) for c in CONFIG]

_DIRTY = "(SELECT hour FROM engine_hours_dirty)"
# the calls of the dirty hours (the range first: with no dirty hour, none is read)
_DIRTY_CALLS = _facts(
    "(SELECT coalesce(min(epoch_ns(hour)), 0) FROM engine_hours_dirty)",
    f"(SELECT coalesce(max(epoch_ns(hour)) + {_HOUR_NS}, 0) FROM engine_hours_dirty)",
    f"date_trunc('hour', make_timestamp(start_ns // 1000)) IN {_DIRTY}",
)
_VIEWS = f"""
CREATE OR REPLACE VIEW engine_config_hours AS
SELECT * FROM engine_hour_rows WHERE hour NOT IN {_DIRTY}
UNION ALL BY NAME
{_sums(_DIRTY_CALLS)};
CREATE OR REPLACE VIEW engine_config_busy AS
SELECT CAST(NULL AS VARCHAR) AS project, * FROM engine_busy_rows WHERE hour NOT IN {_DIRTY}
UNION ALL BY NAME
SELECT CAST(NULL AS VARCHAR) AS project, hour, {_CONFIG_LIST}, start_ns // 1000 AS lo_us, end_ns // 1000 AS hi_us
FROM {_DIRTY_CALLS} WHERE end_ns // 1000 > start_ns // 1000;
"""

_FIGURES = f"""
CREATE OR REPLACE VIEW engine_call_figures AS
SELECT project, trace_id, span_id, call_start_ns AS start_ns, engine AS span_engine, cluster_id AS span_cluster_id,
    {", ".join(ENGINE_CALL_COLUMNS)}, engine_source, queue_s, prefill_s, decode_s, engine_ttft_s, engine_e2e_s,
    engine_cached_tokens, spec_draft_tokens, spec_accepted_tokens
FROM engine_figure_rows WHERE {_LIVE};
"""
# (public: engine_calls' figures without the call's columns, one table read: a condition on start_ns is applied
# as it is read, before any join; the engines question samples calls so)

ENGINE_HOURS_0021 = (
    _FIGURES
    + _table(
        "engine_hour_rows",
        [
            ("project", "VARCHAR NOT NULL"),
            ("hour", "TIMESTAMP NOT NULL"),
            *_CONFIG_COLUMNS,
            ("call_engine", "VARCHAR"),
            ("call_cluster_id", "VARCHAR"),
            *((n, "DECIMAL(38, 12)" if n == "spend_usd" else "BIGINT NOT NULL") for n, _ in HOUR_MEASURES),
        ],
    )
    + _table(
        "engine_busy_rows",
        [("hour", "TIMESTAMP NOT NULL"), *_CONFIG_COLUMNS, ("lo_us", "BIGINT NOT NULL"), ("hi_us", "BIGINT NOT NULL")],
    )
    + _table("engine_hours_dirty", [("hour", "TIMESTAMP NOT NULL"), ("marked_ns", "BIGINT NOT NULL")])
    + _VIEWS
)
"""Migration 0021's SQL (its tables then filled by ``rebuild``, in the same transaction)."""


def mark(cur: duckdb.DuckDBPyConnection, calls: str) -> None:
    """Mark dirty the hours of the calls of ``calls`` (a relation with ``start_ns`` and ``end_ns``), from the hour of
    each one's start to that of its end: a change to a call may change a later hour's parts (``carry``)."""
    cur.execute(
        "INSERT INTO engine_hours_dirty SELECT DISTINCT unnest(range(date_trunc('hour', make_timestamp(start_ns // "
        "1000)), make_timestamp(greatest(end_ns, start_ns + 1000) // 1000), INTERVAL 1 HOUR)) AS hour, "
        f"{time.time_ns()} AS marked_ns FROM {calls}"
    )


def _settle(cur: duckdb.DuckDBPyConnection) -> None:
    """Settle the hours of the temporary table ``_SETTLE`` (hour): their rows computed again from the calls."""
    span = cur.execute(f"SELECT epoch_ns(min(hour)), epoch_ns(max(hour)) FROM {_SETTLE}").fetchone()
    if span is None or span[0] is None:
        return
    lo, hi = int(span[0]), int(span[1]) + _HOUR_NS
    calls = _facts(str(lo), str(hi), f"date_trunc('hour', make_timestamp(start_ns // 1000)) IN {_settling}")
    for table in ("engine_hour_rows", "engine_busy_rows", "engine_hours_dirty"):
        cur.execute(f"DELETE FROM {table} WHERE hour IN {_settling}")
    cur.execute(f"INSERT INTO engine_hour_rows BY NAME {_sums(calls)}")
    # the calls that run past the end of their own hour into one of these (their starts first: the table's zone maps
    # on end_ns skip the older ones)
    running = "NOT duplicate AND end_ns > {} AND start_ns < {} AND end_ns > start_ns - start_ns % {} + {}"
    running = running.format(lo, hi, _HOUR_NS, _HOUR_NS)
    first = cur.execute(f"SELECT min(start_ns) FROM llm_call_rows WHERE {running}").fetchone()
    carry_from = _facts(str(first[0] if first and first[0] is not None else hi), str(hi), running)
    cur.execute(f"INSERT INTO engine_busy_rows BY NAME {_parts(calls, carry_from)}")


def settle_due(cur: duckdb.DuckDBPyConnection, after_s: float = SETTLE_AFTER_S, most: int = SETTLE_PER_COMMIT) -> int:
    """Settle up to ``most`` dirty hours no commit marked for ``after_s`` seconds (0 and ``most`` < 1: every dirty
    hour), oldest first, in the caller's transaction; returns how many."""
    limit = "" if most < 1 else f" LIMIT {most}"
    due = cur.execute(
        f"SELECT hour FROM engine_hours_dirty GROUP BY hour HAVING max(marked_ns) <= ? ORDER BY hour{limit}",
        [time.time_ns() - int(after_s * 1e9)],
    ).fetchall()
    if due:
        cur.execute(f"CREATE OR REPLACE TEMP TABLE {_SETTLE} (hour TIMESTAMP)")
        cur.executemany(f"INSERT INTO {_SETTLE} VALUES (?)", [list(r) for r in due])
        _settle(cur)
        cur.execute(f"DROP TABLE {_SETTLE}")
    return len(due)


class Settler:
    """When the single writer settles (its state; it calls ``after_commit`` in each commit's transaction and, when its
    queue stays empty for ``idle_wait()`` seconds, ``when_idle`` on its own cursor)."""

    def __init__(self) -> None:
        self._check_at = 0.0  # (monotonic) when a commit next looks for hours to settle
        self._last_commit = time.monotonic()
        self._idle_done = False  # no hour left dirty since the last commit: the idle writer just waits for work

    def after_commit(self, cur: duckdb.DuckDBPyConnection, everything: bool) -> None:
        """In a commit's transaction: every dirty hour (``everything``: the writer folds all now), else those due, at
        most every ``SETTLE_CHECK_S``."""
        if everything:
            settle_due(cur, after_s=0, most=0)
        elif time.monotonic() >= self._check_at:
            settle_due(cur, SETTLE_AFTER_S, SETTLE_PER_COMMIT)
            self._check_at = time.monotonic() + SETTLE_CHECK_S
        self._last_commit, self._idle_done = time.monotonic(), False

    def idle_wait(self) -> float | None:
        """How long the idle writer waits for work before ``when_idle``: ``SETTLE_AFTER_S`` after the last commit
        (then every ``SETTLE_CHECK_S`` while hours stay dirty); None: no hour is (until a commit)."""
        if self._idle_done:
            return None
        return max(self._last_commit + SETTLE_AFTER_S - time.monotonic(), SETTLE_CHECK_S, 0.01)

    def when_idle(self, cur: duckdb.DuckDBPyConnection) -> None:
        """``settle_due`` in a transaction of its own; an error leaves the hours dirty until the next commit."""
        try:
            cur.execute("BEGIN TRANSACTION")
            settle_due(cur, SETTLE_AFTER_S, SETTLE_PER_COMMIT)
            left = cur.execute("SELECT count(*) FROM engine_hours_dirty").fetchone()
            cur.execute("COMMIT")
            self._idle_done = not (left and left[0])
        except duckdb.Error:
            log.exception("could not settle the engines question's hours; they stay dirty until the next commit")
            with contextlib.suppress(duckdb.Error):
                cur.execute("ROLLBACK")
            self._idle_done = True


CHUNK_CALLS = 100_000
"""The rebuild settles the hours of about this many calls at a time."""


def rebuild(cur: duckdb.DuckDBPyConnection) -> None:
    """Every hour settled again from the calls (the caller's transaction), the hours of about ``CHUNK_CALLS`` calls
    at a time."""
    for table in ("engine_hour_rows", "engine_busy_rows", "engine_hours_dirty"):
        cur.execute(f"DELETE FROM {table}")
    rows = cur.execute(
        "SELECT hour, count(*) FROM (SELECT date_trunc('hour', make_timestamp(start_ns // 1000)) AS hour "
        "FROM llm_call_rows WHERE NOT duplicate) GROUP BY hour ORDER BY hour"
    ).fetchall()
    part: list[object] = []
    size = 0
    for i, (hour, n) in enumerate(rows):
        part.append(hour)
        size += int(n)
        if size >= CHUNK_CALLS or i == len(rows) - 1:
            cur.execute(f"CREATE OR REPLACE TEMP TABLE {_SETTLE} (hour TIMESTAMP)")
            cur.executemany(f"INSERT INTO {_SETTLE} VALUES (?)", [[h] for h in part])
            _settle(cur)
            cur.execute(f"DROP TABLE {_SETTLE}")
            part, size = [], 0
