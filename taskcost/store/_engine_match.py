"""Engine spans matched to the calls they served, kept by the DuckDB store's single writer as it commits (migration
0020), so that no read ranks every engine span's candidate calls again.

The rule is the one docs/schema.md gives (``engine_spans``), the ClickHouse store's read-time views decide alike: an
engine span (its first received row per key) served the call, among the counted calls that started within
``BOUND_NS`` of it, (0) whose span is the engine span's parent, else (1, 2) whose response id is the engine span's
request id or ``chatcmpl-`` + it (a call of the same trace first); ties to the call that started first, then the
smaller trace and span id. A call's engine figures are those of the best engine span that chose it (by rule, its
start, its ids) and of its own first received engine record (``llm_call_engine_rows``).

What the writer keeps, appended in each commit's transaction (an UPDATE or DELETE would cost DuckDB its automatic
checkpoint after that commit):

* ``engine_match_rows``: one row per matched engine span, with its call and its own figures;
* ``engine_figure_rows``: one row per counted call with an engine span or an engine record, its engine figures;
* ``engine_retracted``: the ids of rows above a later commit replaced (a call that came after its engine span's
  first commit, a second engine span ranked first, a call's engine span arriving after it). The views leave them
  out; the writer deletes them once ``fold_rows`` are retracted (``fold``).

A commit re-decides only what it can change: the engine spans it brings and the stored ones its calls are candidates
of (looked up among those that started within ``BOUND_NS`` of its calls: the table's zone maps skip the rest), then
the calls whose best engine span changed and those whose engine record it brings. ``rebuild`` decides everything
again from the row tables (``DuckDBStore.rebuild_rollups``, and the migration for what was stored before it).
"""

from __future__ import annotations

import duckdb

from taskcost.store import _engine_hours
from taskcost.store._migrations_engine_calls import CALL_ENGINE_COLUMNS, ENGINE_CALL_COLUMNS, ENGINE_SPAN_COLUMNS
from taskcost.store._sql import count

__all__ = ["BOUND_NS", "CHUNK_CALLS", "CHUNK_SPANS", "ENGINE_MATCH_0020", "NEAR", "fold", "rebuild", "update"]

BOUND_NS = 3_600 * 1_000_000_000
"""An engine span and its call started at most an hour apart: the server side of a request starts while its client
waits. The bound also keeps a request id an engine reuses (a counter after a restart) from matching an old call."""

# the engine span's own figures a match keeps (engine_span_rows' names)
_SPAN_FIGURES = ("engine", "cluster_id", "queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s", "cached_tokens")
_TYPES = {name: kind for name, kind, _ in ENGINE_SPAN_COLUMNS}
_CALL_TYPES = {name: kind for name, kind, _ in CALL_ENGINE_COLUMNS}

_MATCH_COLUMNS = (
    ("id", "BIGINT NOT NULL"),
    ("project", "VARCHAR NOT NULL"),
    ("trace_id", "VARCHAR NOT NULL"),
    ("span_id", "VARCHAR NOT NULL"),
    ("span_start_ns", "BIGINT NOT NULL"),
    ("rule", "INTEGER NOT NULL"),
    ("call_trace_id", "VARCHAR NOT NULL"),
    ("call_span_id", "VARCHAR NOT NULL"),
    ("call_start_ns", "BIGINT NOT NULL"),
    ("task_id", "VARCHAR"),
    ("call_id", "VARCHAR"),
    ("attempt", "INTEGER"),
    *((f, _TYPES[f]) for f in _SPAN_FIGURES),
)
_FIGURE_COLUMNS = (
    ("id", "BIGINT NOT NULL"),
    ("project", "VARCHAR NOT NULL"),
    ("trace_id", "VARCHAR NOT NULL"),
    ("span_id", "VARCHAR NOT NULL"),
    ("call_start_ns", "BIGINT NOT NULL"),
    ("engine", "VARCHAR"),
    ("cluster_id", "VARCHAR"),
    *((c, _CALL_TYPES[c]) for c in ENGINE_CALL_COLUMNS),  # the call's topology and decoding tags
    ("engine_source", "VARCHAR NOT NULL"),
    ("queue_s", "DOUBLE"),
    ("prefill_s", "DOUBLE"),
    ("decode_s", "DOUBLE"),
    ("engine_ttft_s", "DOUBLE"),
    ("engine_e2e_s", "DOUBLE"),
    ("engine_cached_tokens", "BIGINT"),
    ("spec_draft_tokens", "BIGINT"),
    ("spec_accepted_tokens", "BIGINT"),
)

_LIVE = "id NOT IN (SELECT id FROM engine_retracted)"
_CALLS = "SELECT project, trace_id, span_id, task_id, call_id, attempt, start_ns, response_id FROM llm_call_rows"
_ONCE = "QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id ORDER BY received_ns) = 1"
# the three rules' join conditions (s: engine spans, c: calls), and each rule's number
_RULES = (
    ("c.project = s.project AND c.trace_id = s.trace_id AND c.span_id = s.parent_span_id", "0"),
    ("c.project = s.project AND c.response_id = s.request_id", "CASE WHEN c.trace_id = s.trace_id THEN 1 ELSE 2 END"),
    (
        "c.project = s.project AND c.response_id = 'chatcmpl-' || s.request_id",
        "CASE WHEN c.trace_id = s.trace_id THEN 1 ELSE 2 END",
    ),
)
NEAR = f"c.start_ns BETWEEN s.start_ns - {BOUND_NS} AND s.start_ns + {BOUND_NS}"
"""The bound as SQL over calls ``c`` and engine spans ``s`` (the same text in both stores' dialects)."""


def _match_sql(spans: str, calls: str) -> str:
    """The best call of each engine span of ``spans`` (first received rows, every column of ``engine_span_rows``)
    among ``calls`` (counted calls, ``_CALLS``' columns): ``engine_match_rows``' columns but the id."""
    figures = ", ".join(f"s.{f}" for f in _SPAN_FIGURES)
    branches = [
        f"SELECT s.project, s.trace_id, s.span_id, s.start_ns AS span_start_ns, {rule} AS rule, "
        "c.trace_id AS call_trace_id, c.span_id AS call_span_id, c.start_ns AS call_start_ns, c.task_id, c.call_id, "
        f"c.attempt, {figures} FROM s JOIN c ON {on} WHERE {NEAR}"
        for on, rule in _RULES
    ]
    return (
        f"WITH s AS ({spans}), c AS NOT MATERIALIZED ({calls}),\nm AS ({' UNION ALL '.join(branches)})\n"
        "SELECT * FROM m QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id "
        "ORDER BY rule, call_start_ns, call_trace_id, call_span_id) = 1"
    )


def _figures_sql(calls: str, matches: str, records: str) -> str:
    """The engine figures of each call of ``calls`` (project, trace_id, span_id, start_ns: counted calls, a key
    possibly more than once) that has a match in ``matches`` (``engine_match_rows``' live rows) or an engine record in
    ``records`` (``llm_call_engine_rows``): ``engine_figure_rows``' columns but the id."""
    on_x = "x.project = c.project AND x.call_trace_id = c.trace_id AND x.call_span_id = c.span_id"
    on_e = "e.project = c.project AND e.trace_id = c.trace_id AND e.span_id = c.span_id"
    topology = ", ".join(f"e.{col}" for col in ENGINE_CALL_COLUMNS)
    return f"""WITH c AS (SELECT project, trace_id, span_id, min(start_ns) AS start_ns FROM ({calls}) GROUP BY ALL),
x AS (
    SELECT m.* FROM ({matches}) AS m
    SEMI JOIN c ON c.project = m.project AND c.trace_id = m.call_trace_id AND c.span_id = m.call_span_id
    QUALIFY row_number() OVER (PARTITION BY m.project, m.call_trace_id, m.call_span_id
                               ORDER BY m.rule, m.span_start_ns, m.trace_id, m.span_id) = 1
),
e AS (
    SELECT r.* FROM ({records}) AS r SEMI JOIN c USING (project, trace_id, span_id)
    {_ONCE}
)
SELECT c.project, c.trace_id, c.span_id, c.start_ns AS call_start_ns, x.engine, x.cluster_id, {topology},
    CASE WHEN x.call_span_id IS NOT NULL THEN 'engine_span' ELSE 'response' END AS engine_source,
    x.queue_s, coalesce(x.prefill_s, e.prefill_s) AS prefill_s, coalesce(x.decode_s, e.decode_s) AS decode_s,
    x.ttft_s AS engine_ttft_s, x.e2e_s AS engine_e2e_s,
    coalesce(x.cached_tokens, e.cached_tokens) AS engine_cached_tokens, e.spec_draft_tokens, e.spec_accepted_tokens
FROM c LEFT JOIN x ON {on_x} LEFT JOIN e ON {on_e}
WHERE x.call_span_id IS NOT NULL OR e.span_id IS NOT NULL"""


def _append(cur: duckdb.DuckDBPyConnection, table: str, select: str) -> None:
    cur.execute(f"INSERT INTO {table} BY NAME SELECT nextval('engine_row_ids') AS id, * FROM ({select})")


def _table(name: str, columns: tuple[tuple[str, str], ...]) -> str:
    return f"CREATE TABLE {name} (\n" + ",\n".join(f"    {c} {t}" for c, t in columns) + "\n);\n"


_ENGINE_SPAN_MATCH = f"""
CREATE OR REPLACE VIEW engine_span_match AS
SELECT project, trace_id, span_id, rule, call_trace_id, call_span_id, call_start_ns, task_id, call_id, attempt
FROM engine_match_rows WHERE {_LIVE};
"""
_ENGINE_CALLS = f"""
CREATE OR REPLACE VIEW engine_calls AS
SELECT c.project, c.trace_id, c.span_id, c.task_id, c.call_id, c.attempt,
    epoch_us(c.start_time) * 1000 AS start_ns, c.status, c.model,
    coalesce(c.engine, f.engine) AS engine, c.engine_version, c.quantization, c.gpu_type, c.gpu_count,
    coalesce(c.cluster_id, f.cluster_id) AS cluster_id, c.deployment,
    {", ".join(f"f.{col}" for col in ENGINE_CALL_COLUMNS)},
    c.input_tokens, c.output_tokens, c.cache_read_tokens, c.duration_s AS latency_s, c.ttft_s,
    f.engine_source, f.queue_s, f.prefill_s, f.decode_s, f.engine_ttft_s, f.engine_e2e_s, f.engine_cached_tokens,
    f.spec_draft_tokens, f.spec_accepted_tokens,
    c.duration_s - f.engine_e2e_s AS client_overhead_s,
    c.cost_usd
FROM llm_calls AS c
JOIN (SELECT * FROM engine_figure_rows WHERE {_LIVE}) AS f
    ON f.project = c.project AND f.trace_id = c.trace_id AND f.span_id = c.span_id;
"""


CHUNK_SPANS = 100_000
"""The rebuild decides the matches of about this many engine spans at a time (by their start)."""
CHUNK_CALLS = 500_000
"""The rebuild decides the figures of about this many calls at a time (by their start). One statement over every
stored row ran out of memory under the serving process's default limit (128MB on 2 cores) at 1M calls and 200k
engine spans; in these parts, 10M calls and 2M engine spans took 29 s under it (280 MB RSS at most; ad hoc)."""


def _parts(cur: duckdb.DuckDBPyConnection, relation: str, per: int) -> list[tuple[int | None, int | None]]:
    """[lo, hi) ranges of start_ns that cut ``relation`` (a table with start_ns) into parts of about ``per`` rows
    (approximate quantiles: constant memory); None: open."""
    rows = count(cur, f"SELECT count(*) FROM {relation}")
    parts = max(1, -(-rows // per))
    cuts: list[int] = []
    if parts > 1:
        quantiles = [i / parts for i in range(1, parts)]
        found = cur.execute(f"SELECT approx_quantile(start_ns, {quantiles}) FROM {relation}").fetchone()
        cuts = sorted({int(x) for x in found[0]}) if found is not None else []
    bounds: list[int | None] = [None, *cuts, None]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _within(column: str, lo: int | None, hi: int | None, margin: int = 0) -> str:
    conds = ["TRUE"]
    if lo is not None:
        conds.append(f"{column} >= {lo - margin}")
    if hi is not None:
        conds.append(f"{column} < {hi + margin}")
    return " AND ".join(conds)


def rebuild(cur: duckdb.DuckDBPyConnection) -> None:
    """Decide every match and every call's engine figures again from the row tables (the caller's transaction), a
    part of the engine spans, then of the calls, at a time."""
    for table in ("engine_retracted", "engine_match_rows", "engine_figure_rows"):
        cur.execute(f"DELETE FROM {table}")
    for lo, hi in _parts(cur, "engine_span_rows", CHUNK_SPANS):
        here = _within("start_ns", lo, hi)
        # an engine span is its first received row: the keys of the rows here, their first rows, those starting here
        keys = f"SELECT DISTINCT project, trace_id, span_id FROM engine_span_rows WHERE {here}"
        once = (
            "SELECT * FROM (SELECT r.* FROM engine_span_rows AS r "
            f"SEMI JOIN ({keys}) AS k USING (project, trace_id, span_id) {_ONCE}) WHERE {here}"
        )
        calls = f"{_CALLS} WHERE NOT duplicate AND {_within('start_ns', lo, hi, BOUND_NS)}"
        _append(cur, "engine_match_rows", _match_sql(once, calls))
    for lo, hi in _parts(cur, "(SELECT start_ns FROM llm_call_rows WHERE NOT duplicate)", CHUNK_CALLS):
        calls = (
            "SELECT project, trace_id, span_id, start_ns FROM llm_call_rows "
            f"WHERE NOT duplicate AND {_within('start_ns', lo, hi)}"
        )
        matches = f"SELECT * FROM engine_match_rows WHERE {_within('call_start_ns', lo, hi)}"
        _append(cur, "engine_figure_rows", _figures_sql(calls, matches, "SELECT * FROM llm_call_engine_rows"))


ENGINE_MATCH_0020 = (
    "CREATE SEQUENCE engine_row_ids START 1;\n"
    + _table("engine_match_rows", _MATCH_COLUMNS)
    + _table("engine_figure_rows", _FIGURE_COLUMNS)
    + "CREATE TABLE engine_retracted (id BIGINT NOT NULL);\n"
    + _ENGINE_SPAN_MATCH
    + _ENGINE_CALLS
)
"""Migration 0020's SQL (its tables then filled by ``rebuild``, in the same transaction): the views
``engine_span_match`` (internal; ``engine_spans`` reads it) and ``engine_calls`` read what the writer keeps."""


def _range(cur: duckdb.DuckDBPyConnection, sql: str) -> tuple[int, int] | None:
    row = cur.execute(sql).fetchone()
    return None if row is None or row[0] is None else (int(row[0]), int(row[1]))


def update(
    cur: duckdb.DuckDBPyConnection, spans: str | None, calls: str | None, records: str | None, call_rows: str | None
) -> None:
    """Keep the matches and the figures exact after a commit stored ``spans`` (its new engine span rows), ``calls``
    (its counted calls), ``records`` (its new engine records) and ``call_rows`` (its call rows, counted or not):
    relations of the batch's rows, in the caller's transaction, after they were inserted."""
    if (spans is None and records is None) and (
        calls is None or not cur.execute("SELECT 1 FROM engine_span_rows LIMIT 1").fetchall()
    ):
        return
    # 1. the engine spans to decide again: the commit's own, and the stored ones its calls are candidates of
    dirty = [f"SELECT project, trace_id, span_id FROM {spans}"] if spans is not None else []
    near = _range(cur, f"SELECT min(start_ns), max(start_ns) FROM {calls}") if calls is not None else None
    if near is not None:
        stored = (
            "(SELECT project, trace_id, span_id, parent_span_id, request_id, start_ns FROM engine_span_rows "
            f"WHERE start_ns BETWEEN {near[0] - BOUND_NS} AND {near[1] + BOUND_NS})"
        )
        dirty += [
            f"SELECT s.project, s.trace_id, s.span_id FROM {stored} AS s JOIN {calls} AS c ON {on} WHERE {NEAR}"
            for on, _ in _RULES
        ]
    if dirty:
        cur.execute(
            "CREATE OR REPLACE TEMP TABLE _taskcost_dirty_spans AS SELECT DISTINCT * FROM ("
            + " UNION ALL ".join(dirty)
            + ")"
        )
    cur.execute(
        "CREATE OR REPLACE TEMP TABLE _taskcost_changed_calls "
        "(project VARCHAR, trace_id VARCHAR, span_id VARCHAR, start_ns BIGINT)"
    )
    if dirty and count(cur, "SELECT count(*) FROM _taskcost_dirty_spans"):
        _rematch(cur)
    if records is not None and call_rows is not None:
        # a call's engine record comes with the call (the same span); it counts for the counted call of that key, the
        # row it came with or one stored before (a span re-sent is stored again, marked duplicate, its record too)
        cur.execute(
            "INSERT INTO _taskcost_changed_calls SELECT c.project, c.trace_id, c.span_id, c.start_ns "
            f"FROM {call_rows} AS c SEMI JOIN {records} AS r USING (project, trace_id, span_id)"
        )
    if count(cur, "SELECT count(*) FROM _taskcost_changed_calls"):
        _refigure(cur)
    for temp in ("_taskcost_dirty_spans", "_taskcost_once", "_taskcost_best", "_taskcost_old", "_taskcost_changed"):
        cur.execute(f"DROP TABLE IF EXISTS {temp}")
    cur.execute("DROP TABLE IF EXISTS _taskcost_changed_calls")


def _rematch(cur: duckdb.DuckDBPyConnection) -> None:
    """The dirty engine spans' best calls again; the calls that gained or lost one go to _taskcost_changed_calls."""
    dirty = "SEMI JOIN _taskcost_dirty_spans USING (project, trace_id, span_id)"
    # an engine span is its first received row (a re-sent one beyond the dedupe window is stored again)
    cur.execute(f"CREATE OR REPLACE TEMP TABLE _taskcost_once AS SELECT * FROM engine_span_rows {dirty} {_ONCE}")
    starts = _range(cur, "SELECT min(start_ns), max(start_ns) FROM _taskcost_once")
    if starts is None:
        return
    near_calls = f"{_CALLS} WHERE NOT duplicate AND start_ns BETWEEN {starts[0] - BOUND_NS} AND {starts[1] + BOUND_NS}"
    best = _match_sql("SELECT * FROM _taskcost_once", near_calls)
    cur.execute(f"CREATE OR REPLACE TEMP TABLE _taskcost_best AS SELECT row_number() OVER () AS nid, * FROM ({best})")
    # the live matches of those engine spans (an engine span's start does not change: its first row stays first)
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE _taskcost_old AS SELECT * FROM engine_match_rows {dirty} "
        f"WHERE span_start_ns BETWEEN {starts[0]} AND {starts[1]} AND {_LIVE}"
    )
    same = " AND ".join(
        f"o.{c} = n.{c}" for c in ("project", "trace_id", "span_id", "rule", "call_trace_id", "call_span_id")
    )
    cur.execute(
        "CREATE OR REPLACE TEMP TABLE _taskcost_changed AS SELECT o.id AS old_id, n.nid AS new_id "
        f"FROM _taskcost_old AS o FULL JOIN _taskcost_best AS n ON {same} WHERE o.id IS NULL OR n.nid IS NULL"
    )
    cur.execute("INSERT INTO engine_retracted SELECT old_id FROM _taskcost_changed WHERE old_id IS NOT NULL")
    moved = "SELECT project, call_trace_id, call_span_id, call_start_ns FROM {} WHERE {} IN "
    moved += "(SELECT {} FROM _taskcost_changed)"
    cur.execute("INSERT INTO _taskcost_changed_calls " + moved.format("_taskcost_old", "id", "old_id"))
    cur.execute("INSERT INTO _taskcost_changed_calls " + moved.format("_taskcost_best", "nid", "new_id"))
    _append(
        cur,
        "engine_match_rows",
        "SELECT * EXCLUDE (nid) FROM _taskcost_best WHERE nid IN (SELECT new_id FROM _taskcost_changed)",
    )


def _refigure(cur: duckdb.DuckDBPyConnection) -> None:
    """The engine figures of the calls in _taskcost_changed_calls again: their live rows retracted, new ones
    appended (a call with neither an engine span nor an engine record has none)."""
    starts = _range(cur, "SELECT min(start_ns), max(start_ns) FROM _taskcost_changed_calls")
    assert starts is not None
    lo, hi = starts
    changed = "SEMI JOIN _taskcost_changed_calls USING (project, trace_id, span_id)"
    cur.execute(
        f"INSERT INTO engine_retracted SELECT id FROM engine_figure_rows {changed} "
        f"WHERE call_start_ns BETWEEN {lo} AND {hi} AND {_LIVE}"
    )
    calls = (
        f"SELECT project, trace_id, span_id, start_ns FROM llm_call_rows {changed} "
        f"WHERE NOT duplicate AND start_ns BETWEEN {lo} AND {hi}"
    )
    matches = f"SELECT * FROM engine_match_rows WHERE call_start_ns BETWEEN {lo} AND {hi} AND {_LIVE}"
    _append(cur, "engine_figure_rows", _figures_sql(calls, matches, "SELECT * FROM llm_call_engine_rows"))
    # their configuration may change: the engines question's hours of them (taskcost/store/_engine_hours.py)
    _engine_hours.mark(
        cur, f"(SELECT start_ns, end_ns FROM llm_call_rows {changed} WHERE start_ns BETWEEN {lo} AND {hi})"
    )


def fold(cur: duckdb.DuckDBPyConnection, fold_rows: int) -> None:
    """Delete the retracted rows once there are ``fold_rows`` of them (the caller's transaction)."""
    if count(cur, "SELECT count(*) FROM engine_retracted") < fold_rows:
        return
    for table in ("engine_match_rows", "engine_figure_rows"):
        cur.execute(f"DELETE FROM {table} WHERE id IN (SELECT id FROM engine_retracted)")
    cur.execute("DELETE FROM engine_retracted")
