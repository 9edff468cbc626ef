"""Builders for the roll-up tests and those that check a store against it: canonical call, task and tool rows
with their raw spans, batches made by the real prepare_batch, and the from-scratch aggregation ``tasks`` and
``llm_calls`` must equal (``assert_exact``)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from taskcost.normalize import NormalizedBatch, SpanRecord, TaskRecord, ToolCallRecord
from taskcost.store import DuckDBStore, PreparedBatch, prepare_batch
from tests.builders.pricing import call, followed_pricer, ns

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

# The tasks view as migration 0003 defined it, over the rows deduplicated as migration 0005's llm_calls did:
# every figure recomputed from every stored row.
REFERENCE_TASKS = """
WITH calls AS (
    SELECT * FROM llm_call_rows
    QUALIFY response_id IS NULL
        OR row_number() OVER (PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) = 1
), t AS (
    SELECT project, task_id,
        any_value(kind) AS kind,
        arg_max(outcome, end_ns) AS outcome,
        make_timestamp(min(start_ns) // 1000) AS start_time,
        make_timestamp(max(end_ns) // 1000) AS end_time,
        any_value(harness_version) AS harness_version,
        any_value(agent_name) AS agent_name,
        any_value(agent_version) AS agent_version,
        any_value(conversation_id) AS conversation_id,
        any_value(service_name) AS service_name,
        coalesce(bool_or(golden), FALSE) AS golden
    FROM task_rows GROUP BY project, task_id
), c AS (
    SELECT project, task_id,
        count(DISTINCT call_id) AS llm_calls,
        count(*) AS attempts,
        count(*) FILTER (WHERE status = 'error') AS failed_attempts,
        sum(input_tokens)::BIGINT AS input_tokens,
        sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
        sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
        sum(cost_usd) AS llm_cost_usd,
        count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_calls,
        make_timestamp(min(start_ns) // 1000) AS c_start_time,
        make_timestamp(max(end_ns) // 1000) AS c_end_time,
        count(DISTINCT coalesce(response_model, request_model)) AS n_model,
        min(coalesce(response_model, request_model)) AS model,
        count(DISTINCT response_model) AS n_answered, min(response_model) AS answered,
        count(DISTINCT provider) AS n_provider, min(provider) AS provider,
        count(DISTINCT engine) AS n_engine, min(engine) AS engine,
        count(DISTINCT engine_version) AS n_engine_version, min(engine_version) AS engine_version,
        count(DISTINCT quantization) AS n_quantization, min(quantization) AS quantization,
        count(DISTINCT gpu_type) AS n_gpu_type, min(gpu_type) AS gpu_type,
        count(DISTINCT cluster_id) AS n_cluster_id, min(cluster_id) AS cluster_id,
        count(DISTINCT deployment) AS n_deployment, min(deployment) AS deployment
    FROM calls GROUP BY project, task_id
), tl AS (
    SELECT project, task_id, count(*) AS tool_calls, sum(cost_usd) AS tool_cost_usd,
        count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_tool_calls
    FROM tool_call_rows GROUP BY project, task_id
)
SELECT
    project, task_id, t.kind, t.outcome,
    coalesce(t.start_time, c.c_start_time) AS start_time,
    coalesce(t.end_time, c.c_end_time) AS end_time,
    epoch_us(coalesce(t.end_time, c.c_end_time)) / 1e6 - epoch_us(coalesce(t.start_time, c.c_start_time)) / 1e6
        AS duration_s,
    coalesce(c.llm_calls, 0) AS llm_calls,
    coalesce(c.attempts, 0) AS attempts,
    coalesce(c.attempts, 0) - coalesce(c.llm_calls, 0) AS retries,
    coalesce(c.failed_attempts, 0) AS failed_attempts,
    coalesce(tl.tool_calls, 0) AS tool_calls,
    c.input_tokens, c.cache_read_tokens, c.cache_write_tokens, c.output_tokens, c.reasoning_tokens,
    c.llm_cost_usd, tl.tool_cost_usd,
    CASE WHEN c.llm_cost_usd IS NULL AND tl.tool_cost_usd IS NULL THEN NULL
         ELSE coalesce(c.llm_cost_usd, 0) + coalesce(tl.tool_cost_usd, 0) END AS cost_usd,
    coalesce(c.unpriced_calls, 0) AS unpriced_calls,
    coalesce(tl.unpriced_tool_calls, 0) AS unpriced_tool_calls,
    t.harness_version, t.agent_name, t.agent_version, t.conversation_id, t.service_name,
    coalesce(t.golden, FALSE) AS golden,
    CASE WHEN c.n_answered > 1 THEN 'mixed' WHEN c.n_answered = 1 THEN c.answered  -- the model that answered
         WHEN c.n_model > 1 THEN 'mixed' ELSE c.model END AS model,
    CASE WHEN c.n_provider > 1 THEN 'mixed' ELSE c.provider END AS provider,
    CASE WHEN c.n_engine > 1 THEN 'mixed' ELSE c.engine END AS engine,
    CASE WHEN c.n_engine_version > 1 THEN 'mixed' ELSE c.engine_version END AS engine_version,
    CASE WHEN c.n_quantization > 1 THEN 'mixed' ELSE c.quantization END AS quantization,
    CASE WHEN c.n_gpu_type > 1 THEN 'mixed' ELSE c.gpu_type END AS gpu_type,
    CASE WHEN c.n_cluster_id > 1 THEN 'mixed' ELSE c.cluster_id END AS cluster_id,
    CASE WHEN c.n_deployment > 1 THEN 'mixed' ELSE c.deployment END AS deployment
FROM t FULL OUTER JOIN c USING (project, task_id) FULL OUTER JOIN tl USING (project, task_id)
ORDER BY project, task_id
"""
REFERENCE_CALLS = """
SELECT project, trace_id, span_id FROM llm_call_rows
QUALIFY response_id IS NULL
    OR row_number() OVER (PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) = 1
ORDER BY 1, 2, 3
"""
REFERENCE_OPEN_TASKS = """
SELECT DISTINCT project, task_id FROM llm_call_rows
WHERE NOT duplicate AND response_model IS NULL AND task_id IS NOT NULL
ORDER BY ALL
"""
HOUR_KEY = (
    "project, hour, provider, model, deployment, engine, engine_version, quantization, gpu_type, cluster_id, priced"
)
_HOUR_COLUMNS = HOUR_KEY + (
    ", attempts, errors, cost_usd, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens"
)


def hours_from(calls: str) -> str:
    """``llm_call_hours``'s rows worked out from scratch from the call rows ``calls`` (``llm_calls`` columns)."""
    return f"""
SELECT project, date_trunc('hour', start_time) AS hour, provider, model, deployment, engine, engine_version,
    quantization, gpu_type, cluster_id, cost_usd IS NOT NULL AS priced,
    count(*)::BIGINT AS attempts, count(*) FILTER (WHERE status = 'error')::BIGINT AS errors, sum(cost_usd) AS cost_usd,
    coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens,
    coalesce(sum(cache_read_tokens), 0)::BIGINT AS cache_read_tokens,
    coalesce(sum(cache_write_tokens), 0)::BIGINT AS cache_write_tokens,
    coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens,
    coalesce(sum(reasoning_tokens), 0)::BIGINT AS reasoning_tokens
FROM {calls} GROUP BY ALL ORDER BY ALL
"""


def assert_exact(store: DuckDBStore) -> list[tuple[Any, ...]]:
    """``tasks``, ``llm_calls``, ``llm_call_hours`` and ``answer_open_tasks`` equal the from-scratch aggregation;
    returns the tasks rows."""
    tasks = store.query("SELECT * FROM tasks ORDER BY project, task_id").rows
    assert tasks == store.admin_query(REFERENCE_TASKS).rows
    calls = store.query("SELECT project, trace_id, span_id FROM llm_calls ORDER BY 1, 2, 3").rows
    assert calls == store.admin_query(REFERENCE_CALLS).rows
    hours = store.query(f"SELECT {_HOUR_COLUMNS} FROM llm_call_hours ORDER BY ALL").rows
    assert hours == store.admin_query(hours_from("llm_calls")).rows
    # the tasks the writer reads to resolve answered models: each task with a counted attempt without a response
    open_tasks = store.admin_query("SELECT project, task_id FROM answer_open_tasks ORDER BY ALL").rows
    assert open_tasks == store.admin_query(REFERENCE_OPEN_TASKS).rows
    return tasks


def _span(trace: str, span_id: str, start: int, end: int) -> SpanRecord:
    return SpanRecord(trace, span_id, None, "s", 1, start, end, 0, "", "agent", "tests", "", "{}", "{}", "[]")


def llm(
    span_id: str,
    *,
    task: str = "task-1",
    call_id: str | None = None,
    attempt: int = 1,
    response_id: str | None = None,
    trace: str = "t1",
    minute: int = 0,
    model: str = "gpt-4o",
    status: str = "ok",
    input_tokens: int | None = 1000,
    response_model: str | None = None,
) -> tuple[Any, SpanRecord]:
    record, _ = call(span_id, T0 + timedelta(minutes=minute), model=model, task=task, input_tokens=input_tokens)
    record = dataclasses.replace(
        record,
        trace_id=trace,
        call_id=call_id or span_id,
        attempt=attempt,
        response_id=response_id,
        status=status,
        response_model=response_model,
    )
    return record, _span(trace, span_id, record.start_ns, record.end_ns)


def task_row(
    span_id: str,
    *,
    task: str = "task-1",
    outcome: str = "completed",
    minute: int = 0,
    trace: str = "t1",
    start_minute: int = 0,
    golden: bool = False,
) -> tuple[TaskRecord, SpanRecord]:
    start = ns(T0 + timedelta(minutes=start_minute))
    end = ns(T0 + timedelta(minutes=minute, seconds=30))
    kind = f"kind-of-{task}"  # a task's context is the same on all its spans (any_value picks one)
    record = TaskRecord(
        trace, span_id, task, kind, outcome, start, end, "ok", None, "h1", None, None, None, "agent", golden
    )
    return record, _span(trace, span_id, start, end)


def tool_row(
    span_id: str, *, task: str = "task-1", cost: Decimal | None = None, trace: str = "t1"
) -> tuple[ToolCallRecord, SpanRecord]:
    start = ns(T0)
    record = ToolCallRecord(trace, span_id, task, "web_search", start, start + 1000, "ok", None, cost, "agent")
    return record, _span(trace, span_id, start, start + 1000)


def batch(records: list[tuple[Any, SpanRecord]], received_ns: int, project: str = "default") -> PreparedBatch:
    b = NormalizedBatch()
    for record, span in records:
        b.spans.append(span)
        if isinstance(record, TaskRecord):
            b.tasks.append(record)
        elif isinstance(record, ToolCallRecord):
            b.tool_calls.append(record)
        else:
            b.llm_calls.append(record)
    return prepare_batch(b, received_ns, project=project, pricer=followed_pricer())


# -- duplicates and retries, by example -----------------------------------------------------------------
