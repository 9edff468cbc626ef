"""Engine spans tied to the calls they served, and engine/topology data per call: the row tables (both stores: the
ClickHouse store builds its tables from these column lists) and the DuckDB store's migration (``_migrations``).

Matching is decided at read time, in the views, so that any arrival order (an engine span stored before its call)
and any number of writers give the same answer. An engine span (deduplicated by its key) served the call

1. whose (project, trace_id, span_id) is the engine span's (project, trace_id, parent_span_id): the client injected
   its call span's W3C ``traceparent`` into the request; else
2. whose ``response_id`` is the engine span's request id, or ``chatcmpl-`` + the request id (vLLM's OpenAI server's
   response id), in the same project.

Ties: one engine span matches at most one call: by rule 1 before rule 2, by rule 2 a call of the same trace first,
then the call that started first (then the smaller trace and span id). A call takes at most one engine span: of those
that matched it, by the same order (rule, then the earliest start, then the smaller trace and span id).

Never edit this migration once shipped; add a new one.
"""

from __future__ import annotations

__all__ = ["CALL_ENGINE_COLUMNS", "ENGINE_CALLS_0017", "ENGINE_CALL_COLUMNS", "ENGINE_SPAN_COLUMNS"]

# (name, DuckDB type, nullable), in the records' field order (taskcost/normalize/_records.py), then received_ns
ENGINE_SPAN_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("project", "VARCHAR", False),
    ("trace_id", "VARCHAR", False),
    ("span_id", "VARCHAR", False),
    ("parent_span_id", "VARCHAR", True),
    ("request_id", "VARCHAR", True),
    ("response_model", "VARCHAR", True),
    ("engine", "VARCHAR", True),
    ("cluster_id", "VARCHAR", True),
    ("prompt_tokens", "BIGINT", True),
    ("completion_tokens", "BIGINT", True),
    ("cached_tokens", "BIGINT", True),
    ("queue_s", "DOUBLE", True),
    ("ttft_s", "DOUBLE", True),
    ("e2e_s", "DOUBLE", True),
    ("prefill_s", "DOUBLE", True),
    ("decode_s", "DOUBLE", True),
    ("inference_s", "DOUBLE", True),
    ("start_ns", "BIGINT", False),
    ("end_ns", "BIGINT", False),
    ("received_ns", "BIGINT", False),
)
CALL_ENGINE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("project", "VARCHAR", False),
    ("trace_id", "VARCHAR", False),
    ("span_id", "VARCHAR", False),
    ("prefill_s", "DOUBLE", True),
    ("decode_s", "DOUBLE", True),
    ("prefill_tokens", "BIGINT", True),
    ("cached_tokens", "BIGINT", True),
    ("decode_tokens", "BIGINT", True),
    ("spec_draft_tokens", "BIGINT", True),
    ("spec_accepted_tokens", "BIGINT", True),
    ("tp_size", "INTEGER", True),
    ("pp_size", "INTEGER", True),
    ("dp_size", "INTEGER", True),
    ("pd_disaggregated", "BOOLEAN", True),
    ("prefill_gpu_type", "VARCHAR", True),
    ("decode_gpu_type", "VARCHAR", True),
    ("spec_method", "VARCHAR", True),
    ("spec_draft_model", "VARCHAR", True),
    ("received_ns", "BIGINT", False),
)

# engine_calls' columns after the call's own (both stores write them in this order)
ENGINE_CALL_COLUMNS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "pd_disaggregated",
    "prefill_gpu_type",
    "decode_gpu_type",
    "spec_method",
    "spec_draft_model",
)

# engine_spans' columns: the row's, but received_ns, then the match's
ENGINE_SPAN_VIEW_COLUMNS = ", ".join(f"s.{c[0]}" for c in ENGINE_SPAN_COLUMNS if c[0] != "received_ns")


def _table(name: str, columns: tuple[tuple[str, str, bool], ...]) -> str:
    default = " DEFAULT 'default'"
    body = ",\n".join(
        f"    {n} {t}{'' if nullable else ' NOT NULL'}{default if n == 'project' else ''}" for n, t, nullable in columns
    )
    return f"CREATE TABLE {name} (\n{body}\n);\n"


# The matches of each engine span (one row per candidate call, ranked), then the best; internal views.
_MATCH = """
CREATE OR REPLACE VIEW engine_span_once AS
SELECT * FROM engine_span_rows
QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id ORDER BY received_ns) = 1;

CREATE OR REPLACE VIEW engine_span_match AS
WITH c AS (
    SELECT project, trace_id, span_id, task_id, call_id, attempt, start_ns, response_id
    FROM llm_call_rows WHERE NOT duplicate
),
m AS (
    SELECT s.project, s.trace_id, s.span_id, 0 AS rule, c.trace_id AS call_trace_id, c.span_id AS call_span_id,
        c.start_ns AS call_start_ns, c.task_id, c.call_id, c.attempt
    FROM engine_span_once AS s
    JOIN c ON c.project = s.project AND c.trace_id = s.trace_id AND c.span_id = s.parent_span_id
    UNION ALL
    SELECT s.project, s.trace_id, s.span_id, CASE WHEN c.trace_id = s.trace_id THEN 1 ELSE 2 END,
        c.trace_id, c.span_id, c.start_ns, c.task_id, c.call_id, c.attempt
    FROM engine_span_once AS s JOIN c ON c.project = s.project AND c.response_id = s.request_id
    UNION ALL
    SELECT s.project, s.trace_id, s.span_id, CASE WHEN c.trace_id = s.trace_id THEN 1 ELSE 2 END,
        c.trace_id, c.span_id, c.start_ns, c.task_id, c.call_id, c.attempt
    FROM engine_span_once AS s JOIN c ON c.project = s.project AND c.response_id = 'chatcmpl-' || s.request_id
)
SELECT * FROM m
QUALIFY row_number() OVER (
    PARTITION BY project, trace_id, span_id ORDER BY rule, call_start_ns, call_trace_id, call_span_id
) = 1;
"""

_ENGINE_SPANS = f"""
CREATE OR REPLACE VIEW engine_spans AS
SELECT {ENGINE_SPAN_VIEW_COLUMNS},
    m.call_span_id IS NOT NULL AS matched, m.task_id, m.call_id, m.attempt
FROM engine_span_once AS s
LEFT JOIN engine_span_match AS m ON m.project = s.project AND m.trace_id = s.trace_id AND m.span_id = s.span_id;
"""

_ENGINE_CALLS = """
CREATE OR REPLACE VIEW engine_calls AS
WITH e AS (
    SELECT * FROM llm_call_engine_rows
    QUALIFY row_number() OVER (PARTITION BY project, trace_id, span_id ORDER BY received_ns) = 1
),
x AS (
    SELECT m.project, m.call_trace_id, m.call_span_id, s.engine, s.cluster_id, s.queue_s, s.prefill_s, s.decode_s,
        s.ttft_s, s.e2e_s, s.cached_tokens
    FROM engine_span_match AS m
    JOIN engine_span_once AS s ON s.project = m.project AND s.trace_id = m.trace_id AND s.span_id = m.span_id
    QUALIFY row_number() OVER (
        PARTITION BY m.project, m.call_trace_id, m.call_span_id ORDER BY m.rule, s.start_ns, m.trace_id, m.span_id
    ) = 1
),
k AS (
    SELECT project, trace_id, span_id FROM e
    UNION SELECT project, call_trace_id, call_span_id FROM x
)
SELECT c.project, c.trace_id, c.span_id, c.task_id, c.call_id, c.attempt,
    epoch_us(c.start_time) * 1000 AS start_ns, c.status, c.model,
    coalesce(c.engine, x.engine) AS engine, c.engine_version, c.quantization, c.gpu_type, c.gpu_count,
    coalesce(c.cluster_id, x.cluster_id) AS cluster_id, c.deployment,
    e.tp_size, e.pp_size, e.dp_size, e.pd_disaggregated, e.prefill_gpu_type, e.decode_gpu_type, e.spec_method,
    e.spec_draft_model,
    c.input_tokens, c.output_tokens, c.cache_read_tokens, c.duration_s AS latency_s, c.ttft_s,
    CASE WHEN x.call_span_id IS NOT NULL THEN 'engine_span' ELSE 'response' END AS engine_source,
    x.queue_s,
    coalesce(x.prefill_s, e.prefill_s) AS prefill_s,
    coalesce(x.decode_s, e.decode_s) AS decode_s,
    x.ttft_s AS engine_ttft_s,
    x.e2e_s AS engine_e2e_s,
    coalesce(x.cached_tokens, e.cached_tokens) AS engine_cached_tokens,
    e.spec_draft_tokens, e.spec_accepted_tokens,
    c.duration_s - x.e2e_s AS client_overhead_s,
    c.cost_usd
FROM llm_calls AS c
JOIN k ON k.project = c.project AND k.trace_id = c.trace_id AND k.span_id = c.span_id
LEFT JOIN e ON e.project = c.project AND e.trace_id = c.trace_id AND e.span_id = c.span_id
LEFT JOIN x ON x.project = c.project AND x.call_trace_id = c.trace_id AND x.call_span_id = c.span_id;
"""

ENGINE_CALLS_0017 = (
    _table("engine_span_rows", ENGINE_SPAN_COLUMNS)
    + _table("llm_call_engine_rows", CALL_ENGINE_COLUMNS)
    + _MATCH
    + _ENGINE_SPANS
    + _ENGINE_CALLS
)
"""Migration 0017's SQL: the two row tables, the internal matching views and the public ``engine_spans`` and
``engine_calls``."""
