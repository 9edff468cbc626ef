"""The ClickHouse store's engine spans and per-call engine rows: their tables (ReplacingMergeTrees keyed like the other
row tables) and the views ``engine_spans`` and ``engine_calls``, the DuckDB store's columns, Arrow types and matching
rule (taskcost/store/_migrations_engine_calls.py), decided at read time over the deduplicated rows: any number of
writers and any arrival order give the same answer."""

from __future__ import annotations

from taskcost.store._engine_columns import CALL_CONFIG, CONFIG, HOUR_MEASURES
from taskcost.store._engine_match import NEAR
from taskcost.store._migrations_engine_calls import (
    CALL_ENGINE_COLUMNS,
    ENGINE_CALL_COLUMNS,
    ENGINE_SPAN_COLUMNS,
)

__all__ = ["ENGINE_CALL_TABLES", "ENGINE_CALL_VIEWS", "ENGINE_MATCH_NEAR", "engine_hour_views"]

ENGINE_CALL_TABLES = {
    "engine_span_rows": list(ENGINE_SPAN_COLUMNS),
    "llm_call_engine_rows": list(CALL_ENGINE_COLUMNS),
}
"""The batch tables (by the batch's names, the same in ClickHouse), keyed by span."""

_SPAN_COLUMNS = [c[0] for c in ENGINE_SPAN_COLUMNS if c[0] != "received_ns"]

# Each engine span's call: the candidates of the three rules, ranked, the first kept (the DuckDB store's order);
# ``{start}``, ``{near}``: the engine span's start and each rule's bound in time (neither in migration 0006).
_MATCH_VIEW = """CREATE OR REPLACE VIEW engine_span_match AS
WITH
c AS (SELECT project, trace_id, span_id, task_id, call_id, attempt, start_ns, response_id FROM llm_call_counted),
s AS (SELECT project, trace_id, span_id, parent_span_id, request_id{start} FROM engine_span_rows FINAL)
SELECT project, trace_id, span_id, rule, call_trace_id, call_span_id, call_start_ns, task_id, call_id, attempt
FROM (
    SELECT s.project AS project, s.trace_id AS trace_id, s.span_id AS span_id, toUInt8(0) AS rule,
        toNullable(c.trace_id) AS call_trace_id, toNullable(c.span_id) AS call_span_id,
        toNullable(c.start_ns) AS call_start_ns, toNullable(c.task_id) AS task_id, toNullable(c.call_id) AS call_id,
        toNullable(c.attempt) AS attempt
    FROM s INNER JOIN c ON c.project = s.project AND c.trace_id = s.trace_id AND c.span_id = s.parent_span_id{near}
    UNION ALL
    SELECT s.project, s.trace_id, s.span_id, toUInt8(if(c.trace_id = s.trace_id, 1, 2)), toNullable(c.trace_id),
        toNullable(c.span_id), toNullable(c.start_ns), toNullable(c.task_id), toNullable(c.call_id),
        toNullable(c.attempt)
    FROM s INNER JOIN c ON c.project = s.project AND c.response_id = s.request_id{near}
    UNION ALL
    SELECT s.project, s.trace_id, s.span_id, toUInt8(if(c.trace_id = s.trace_id, 1, 2)), toNullable(c.trace_id),
        toNullable(c.span_id), toNullable(c.start_ns), toNullable(c.task_id), toNullable(c.call_id),
        toNullable(c.attempt)
    FROM s INNER JOIN c ON c.project = s.project AND c.response_id = concat('chatcmpl-', s.request_id){near}
)
ORDER BY project, trace_id, span_id, rule, call_start_ns, call_trace_id, call_span_id
LIMIT 1 BY project, trace_id, span_id"""
_MATCH = _MATCH_VIEW.format(start="", near="")

_ENGINE_SPANS = f"""CREATE OR REPLACE VIEW engine_spans AS
SELECT {", ".join(f"s.{c} AS {c}" for c in _SPAN_COLUMNS)},
    CAST(m.call_span_id IS NOT NULL AS Bool) AS matched, m.task_id AS task_id, m.call_id AS call_id,
    m.attempt AS attempt
FROM engine_span_rows AS s FINAL
LEFT JOIN engine_span_match AS m ON m.project = s.project AND m.trace_id = s.trace_id AND m.span_id = s.span_id"""

_X = ("engine", "cluster_id", "queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s", "cached_tokens")
# a call's engine figures: its engine span's (x), else its own record's (e)
_FIGURES = """    x.x_queue_s AS queue_s,
    coalesce(x.x_prefill_s, e.prefill_s) AS prefill_s,
    coalesce(x.x_decode_s, e.decode_s) AS decode_s,
    x.x_ttft_s AS engine_ttft_s,
    x.x_e2e_s AS engine_e2e_s,
    coalesce(x.x_cached_tokens, e.cached_tokens) AS engine_cached_tokens,
    e.spec_draft_tokens AS spec_draft_tokens, e.spec_accepted_tokens AS spec_accepted_tokens"""
_ENGINE_CALLS = f"""CREATE OR REPLACE VIEW engine_calls AS
WITH
e AS (SELECT * FROM llm_call_engine_rows FINAL),
x AS (
    SELECT m.project AS project, m.call_trace_id AS call_trace_id, m.call_span_id AS call_span_id,
        m.rule AS x_rule, s.start_ns AS x_start_ns, m.trace_id AS x_trace_id, m.span_id AS x_span_id,
        {", ".join(f"toNullable(s.{c}) AS x_{c}" for c in _X)}
    FROM engine_span_match AS m
    INNER JOIN (SELECT * FROM engine_span_rows FINAL) AS s
        ON s.project = m.project AND s.trace_id = m.trace_id AND s.span_id = m.span_id
    ORDER BY project, call_trace_id, call_span_id, x_rule, x_start_ns, x_trace_id, x_span_id
    LIMIT 1 BY project, call_trace_id, call_span_id
),
k AS (
    SELECT project, toNullable(trace_id) AS trace_id, toNullable(span_id) AS span_id FROM e
    UNION DISTINCT SELECT project, call_trace_id, call_span_id FROM x
)
SELECT c.project AS project, c.trace_id AS trace_id, c.span_id AS span_id, c.task_id AS task_id,
    c.call_id AS call_id, c.attempt AS attempt, toUnixTimestamp64Micro(c.start_time) * 1000 AS start_ns,
    c.status AS status, c.model AS model, coalesce(c.engine, x.x_engine) AS engine,
    c.engine_version AS engine_version, c.quantization AS quantization, c.gpu_type AS gpu_type,
    c.gpu_count AS gpu_count, coalesce(c.cluster_id, x.x_cluster_id) AS cluster_id, c.deployment AS deployment,
    {", ".join(f"e.{col} AS {col}" for col in ENGINE_CALL_COLUMNS)},
    c.input_tokens AS input_tokens, c.output_tokens AS output_tokens, c.cache_read_tokens AS cache_read_tokens,
    c.duration_s AS latency_s, c.ttft_s AS ttft_s,
    if(x.call_span_id IS NOT NULL, 'engine_span', 'response') AS engine_source,
{_FIGURES},
    c.duration_s - x.x_e2e_s AS client_overhead_s,
    c.cost_usd AS cost_usd
FROM llm_calls AS c
INNER JOIN k ON k.project = c.project AND k.trace_id = c.trace_id AND k.span_id = c.span_id
LEFT JOIN e ON e.project = c.project AND e.trace_id = c.trace_id AND e.span_id = c.span_id
LEFT JOIN x ON x.project = c.project AND x.call_trace_id = c.trace_id AND x.call_span_id = c.span_id"""

ENGINE_CALL_VIEWS = (_MATCH, _ENGINE_SPANS, _ENGINE_CALLS)
"""The internal matching view, then the public ``engine_spans`` and ``engine_calls``."""

# Within the hour (migration 0007; the DuckDB store's 0020, taskcost/store/_engine_match.py): a call is a candidate of
# an engine span only if it started within an hour of it.
ENGINE_MATCH_NEAR = _MATCH_VIEW.format(start=", start_ns", near=f" WHERE {NEAR}")
"""The matching view again, a call a candidate only within the hour of the engine span."""

# The engines question's views (the DuckDB store's 0021, taskcost/store/_engine_hours.py, where the writer keeps them):
# here read from the calls each time. ``engine_call_figures`` is ``engine_calls``' engine part (the WITH above) with
# the engine span's own engine and cluster, every column Nullable (a call without figures, outer-joined to it, gets
# NULLs whatever ``join_use_nulls`` says); the two others are written in DuckDB's SQL over the public views, in this
# store's dialect.
_WITH, _FROM = _ENGINE_CALLS.split("\nSELECT c.project AS project", 1)[0], _ENGINE_CALLS.split("\nFROM llm_calls", 1)[1]
_ENGINE_CALL_FIGURES = (
    _WITH.replace("VIEW engine_calls AS", "VIEW engine_call_figures AS")
    + f"""
SELECT c.project AS project, c.trace_id AS trace_id, c.span_id AS span_id,
    toUnixTimestamp64Micro(c.start_time) * 1000 AS start_ns, x.x_engine AS span_engine,
    x.x_cluster_id AS span_cluster_id,
    {", ".join(f"e.{col} AS {col}" for col in ENGINE_CALL_COLUMNS)},
    toNullable(if(x.call_span_id IS NOT NULL, 'engine_span', 'response')) AS engine_source,
{_FIGURES}
FROM llm_calls"""
    + _FROM
)
# every counted call with its configuration (engine and cluster: the call's own, else its engine span's)
_CALLS = (
    "(SELECT c.project AS project, date_trunc('hour', c.start_time) AS hour, c.start_time AS start_time, "
    "c.end_time AS end_time, "
    + ", ".join(
        f"coalesce(c.{col}, f.span_{col}) AS {col}" if col in ("engine", "cluster_id") else f"c.{col} AS {col}"
        for col in CALL_CONFIG
    )
    + ", "
    + ", ".join(f"f.{col} AS {col}" for col in ENGINE_CALL_COLUMNS)
    + ", c.engine AS call_engine, c.cluster_id AS call_cluster_id, c.status AS status, c.cost_usd AS cost_usd, "
    "c.input_tokens AS input_tokens, c.output_tokens AS output_tokens, c.cache_read_tokens AS cache_read_tokens, "
    "c.duration_s AS latency_s, c.ttft_s AS ttft_s, f.engine_source AS engine_source, f.decode_s AS decode_s, "
    "f.engine_cached_tokens AS engine_cached_tokens, f.spec_draft_tokens AS spec_draft_tokens, "
    "f.spec_accepted_tokens AS spec_accepted_tokens FROM llm_calls AS c LEFT JOIN engine_call_figures AS f "
    "ON f.project = c.project AND f.trace_id = c.trace_id AND f.span_id = c.span_id)"
)
_KEY = ("project", "hour", *CONFIG, "call_engine", "call_cluster_id")
# each call's values first (a sum named as a column is what that name means after it, in ClickHouse)
_VALUES = ", ".join(f"{e} AS m_{n}" for n, e in HOUR_MEASURES)
_SUMS = ", ".join(
    f"sum(m_{n}) AS {n}" if n == "spend_usd" else f"CAST(sum(m_{n}) AS BIGINT) AS {n}" for n, _ in HOUR_MEASURES
)
_ENGINE_CONFIG_HOURS = (
    f"SELECT {', '.join(_KEY)}, {_SUMS} FROM (SELECT {', '.join(_KEY)}, {_VALUES} FROM {_CALLS}) "
    f"GROUP BY {', '.join(_KEY)}"
)
_ENGINE_CONFIG_BUSY = (
    f"SELECT CAST(NULL AS VARCHAR) AS project, hour, {', '.join(CONFIG)}, epoch_us(start_time) AS lo_us, "
    f"epoch_us(end_time) AS hi_us FROM {_CALLS} WHERE epoch_us(end_time) > epoch_us(start_time)"
)


def engine_hour_views() -> tuple[str, ...]:
    """Migration 0008's statements: ``engine_call_figures``, then ``engine_config_hours`` and ``engine_config_busy``
    (a call's interval is a part of its hour: the union is the same)."""
    from taskcost.store.clickhouse._dialect import to_clickhouse

    return (
        _ENGINE_CALL_FIGURES,
        "CREATE OR REPLACE VIEW engine_config_hours AS " + to_clickhouse(_ENGINE_CONFIG_HOURS),
        "CREATE OR REPLACE VIEW engine_config_busy AS " + to_clickhouse(_ENGINE_CONFIG_BUSY),
    )
