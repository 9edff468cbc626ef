"""Schema migrations: small, named, ordered, each applied once in its own transaction and recorded.

Never edit a migration that has shipped; add a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskcost.store import _engine_hours
from taskcost.store._engine_hours import ENGINE_HOURS_0021
from taskcost.store._engine_match import ENGINE_MATCH_0020, rebuild
from taskcost.store._migrations_analytics import analytics_columns_0009, latest_view, task_dimensions_0010
from taskcost.store._migrations_engine_calls import ENGINE_CALLS_0017
from taskcost.store._migrations_engines import ENGINE_METRICS
from taskcost.store._migrations_later import ANSWER_OPEN_TASKS, DEDUPE_WINDOW, DROPPED_COUNTS, SPOOL
from taskcost.store._migrations_rollups import (
    answered_model_0013,
    answered_model_0015,
    call_hours_0012,
    task_golden_0011,
    unpriced_tool_calls_0016,
)

__all__ = ["MIGRATIONS", "Migration", "apply_migrations", "pending_migrations"]


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str
    then: Callable[[Any], None] | None = None  # run after ``sql``, in its transaction (a backfill done in parts)


_RAW_SPANS = """
CREATE TABLE spans (
    project VARCHAR NOT NULL DEFAULT 'default',
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    name VARCHAR NOT NULL,
    kind TINYINT NOT NULL,
    start_ns BIGINT NOT NULL,
    end_ns BIGINT NOT NULL,
    status_code TINYINT NOT NULL,
    status_message VARCHAR,
    service_name VARCHAR,
    scope_name VARCHAR,
    scope_version VARCHAR,
    attributes JSON NOT NULL,
    resource_attributes JSON NOT NULL,
    events JSON NOT NULL,
    received_ns BIGINT NOT NULL
);
"""

_TYPED = """
CREATE TABLE llm_call_rows (
    project VARCHAR NOT NULL DEFAULT 'default',
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    call_id VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    start_ns BIGINT NOT NULL,
    end_ns BIGINT NOT NULL,
    operation VARCHAR,
    provider VARCHAR,
    request_model VARCHAR,
    response_model VARCHAR,
    response_id VARCHAR,
    input_tokens BIGINT,
    output_tokens BIGINT,
    cache_read_tokens BIGINT,
    cache_write_tokens BIGINT,
    reasoning_tokens BIGINT,
    ttft_s DOUBLE,
    status VARCHAR NOT NULL,
    error_type VARCHAR,
    server_address VARCHAR,
    service_name VARCHAR,
    conversation_id VARCHAR,
    agent_name VARCHAR,
    agent_version VARCHAR,
    harness_version VARCHAR,
    engine VARCHAR,
    engine_version VARCHAR,
    quantization VARCHAR,
    gpu_type VARCHAR,
    gpu_count INTEGER,
    cluster_id VARCHAR,
    deployment VARCHAR,
    container_image_name VARCHAR,
    container_image_tags VARCHAR[],
    k8s_cluster_name VARCHAR,
    cloud_region VARCHAR,
    cost_usd DECIMAL(38, 12),
    input_cost_usd DECIMAL(38, 12),
    output_cost_usd DECIMAL(38, 12),
    price_source VARCHAR,
    priced_provider VARCHAR,
    priced_model VARCHAR,
    unpriced_reason VARCHAR,
    received_ns BIGINT NOT NULL
);

CREATE TABLE tool_call_rows (
    project VARCHAR NOT NULL DEFAULT 'default',
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    tool_name VARCHAR,
    start_ns BIGINT NOT NULL,
    end_ns BIGINT NOT NULL,
    status VARCHAR NOT NULL,
    error_type VARCHAR,
    cost_usd DECIMAL(38, 12),
    service_name VARCHAR,
    received_ns BIGINT NOT NULL
);

CREATE TABLE task_rows (
    project VARCHAR NOT NULL DEFAULT 'default',
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    kind VARCHAR,
    outcome VARCHAR NOT NULL,
    start_ns BIGINT NOT NULL,
    end_ns BIGINT NOT NULL,
    status VARCHAR NOT NULL,
    error_type VARCHAR,
    harness_version VARCHAR,
    agent_name VARCHAR,
    agent_version VARCHAR,
    conversation_id VARCHAR,
    service_name VARCHAR,
    received_ns BIGINT NOT NULL
);
"""

_TS = "make_timestamp({col} // 1000)"

_VIEWS = f"""
CREATE OR REPLACE VIEW llm_calls AS
SELECT
    project, task_id, call_id, attempt, trace_id, span_id,
    {_TS.format(col="start_ns")} AS start_time,
    {_TS.format(col="end_ns")} AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s,
    operation, provider,
    coalesce(response_model, request_model) AS model,
    request_model, response_model, response_id,
    input_tokens, cache_read_tokens, cache_write_tokens,
    input_tokens - coalesce(cache_read_tokens, 0) - coalesce(cache_write_tokens, 0) AS uncached_input_tokens,
    output_tokens, reasoning_tokens, ttft_s,
    status, error_type,
    cost_usd, input_cost_usd, output_cost_usd, price_source, priced_provider, priced_model, unpriced_reason,
    server_address, service_name, conversation_id, agent_name, agent_version, harness_version,
    engine, engine_version, quantization, gpu_type, gpu_count, cluster_id, deployment,
    container_image_name, container_image_tags, k8s_cluster_name, cloud_region
FROM llm_call_rows
-- one provider response counts once, also when its duplicate spans came in different requests
QUALIFY response_id IS NULL
    OR row_number() OVER (PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) = 1;

CREATE OR REPLACE VIEW tool_calls AS
SELECT
    project, task_id, tool_name, trace_id, span_id,
    {_TS.format(col="start_ns")} AS start_time,
    {_TS.format(col="end_ns")} AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s,
    status, error_type, cost_usd, service_name
FROM tool_call_rows;

CREATE OR REPLACE VIEW tasks AS
WITH t AS (
    SELECT project, task_id,
        any_value(kind) AS kind,
        arg_max(outcome, end_ns) AS outcome,
        {_TS.format(col="min(start_ns)")} AS start_time,
        {_TS.format(col="max(end_ns)")} AS end_time,
        any_value(harness_version) AS harness_version,
        any_value(agent_name) AS agent_name,
        any_value(agent_version) AS agent_version,
        any_value(conversation_id) AS conversation_id,
        any_value(service_name) AS service_name
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
        min(start_time) AS c_start_time, max(end_time) AS c_end_time
    FROM llm_calls GROUP BY project, task_id
), tl AS (
    SELECT project, task_id, count(*) AS tool_calls, sum(cost_usd) AS tool_cost_usd
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
    t.harness_version, t.agent_name, t.agent_version, t.conversation_id, t.service_name
FROM t FULL OUTER JOIN c USING (project, task_id) FULL OUTER JOIN tl USING (project, task_id);
"""

_KEYS = """
-- One row per span ever committed: md5 of (project, trace id, span id). Its primary key is how a
-- re-sent batch (a client retry after a lost answer) is recognised and not counted twice.
CREATE TABLE span_keys (k UHUGEINT PRIMARY KEY);

-- API keys: only a SHA-256 of the secret is kept; the secret is shown once, when created.
CREATE TABLE api_keys (
    id VARCHAR PRIMARY KEY,
    project VARCHAR NOT NULL,
    kind VARCHAR NOT NULL CHECK (kind IN ('ingest', 'read')),
    secret_sha256 VARCHAR NOT NULL UNIQUE,
    prefix VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
    revoked_at TIMESTAMP
);
"""

_PRICING = f"""
-- Provenance of every cost (issue 3): the fee part, the price book's version, the rates and arithmetic
-- (price_detail), and when the cost was computed (ingest, or the last `taskcost reprice` that changed it).
ALTER TABLE llm_call_rows ADD COLUMN fee_usd DECIMAL(38, 12);
ALTER TABLE llm_call_rows ADD COLUMN price_book_version VARCHAR;
ALTER TABLE llm_call_rows ADD COLUMN price_detail JSON;
ALTER TABLE llm_call_rows ADD COLUMN priced_at_ns BIGINT;
ALTER TABLE tool_call_rows ADD COLUMN cost_source VARCHAR;

-- What `taskcost reprice` allocated of each self-hosted cluster's bill, per window: attributed + idle = bill.
CREATE TABLE cluster_cost_rows (
    cluster_id VARCHAR NOT NULL,
    window_start_ns BIGINT NOT NULL,
    window_end_ns BIGINT NOT NULL,
    gpu_type VARCHAR,
    gpu_count INTEGER NOT NULL,
    usd_per_gpu_hour DECIMAL(38, 12) NOT NULL,
    rate_source VARCHAR NOT NULL,
    bill_usd DECIMAL(38, 12) NOT NULL,
    attributed_usd DECIMAL(38, 12) NOT NULL,
    idle_usd DECIMAL(38, 12) NOT NULL,
    busy_s DOUBLE NOT NULL,
    calls BIGINT NOT NULL,
    clusters_version VARCHAR NOT NULL,
    computed_at_ns BIGINT NOT NULL
);

CREATE OR REPLACE VIEW llm_calls AS
SELECT
    project, task_id, call_id, attempt, trace_id, span_id,
    {_TS.format(col="start_ns")} AS start_time,
    {_TS.format(col="end_ns")} AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s,
    operation, provider,
    coalesce(response_model, request_model) AS model,
    request_model, response_model, response_id,
    input_tokens, cache_read_tokens, cache_write_tokens,
    input_tokens - coalesce(cache_read_tokens, 0) - coalesce(cache_write_tokens, 0) AS uncached_input_tokens,
    output_tokens, reasoning_tokens, ttft_s,
    status, error_type,
    cost_usd, input_cost_usd, output_cost_usd, price_source, priced_provider, priced_model, unpriced_reason,
    fee_usd, price_book_version, price_detail,
    {_TS.format(col="coalesce(priced_at_ns, received_ns)")} AS priced_at,
    server_address, service_name, conversation_id, agent_name, agent_version, harness_version,
    engine, engine_version, quantization, gpu_type, gpu_count, cluster_id, deployment,
    container_image_name, container_image_tags, k8s_cluster_name, cloud_region
FROM llm_call_rows
-- one provider response counts once, also when its duplicate spans came in different requests
QUALIFY response_id IS NULL
    OR row_number() OVER (PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) = 1;

CREATE OR REPLACE VIEW tool_calls AS
SELECT
    project, task_id, tool_name, trace_id, span_id,
    {_TS.format(col="start_ns")} AS start_time,
    {_TS.format(col="end_ns")} AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s,
    status, error_type, cost_usd, cost_source, service_name
FROM tool_call_rows;
"""

# 0006 (performance): what every read used to recompute is decided or added up once, at write time, by
# the single writer (taskcost/store/_rollup.py). Existing rows are converted here: `duplicate` follows the
# order the old view applied ((received_ns, span_id) within a response), and the roll-up aggregates the
# row tables.
_ROLLUP_COLUMNS = """
    tk UHUGEINT NOT NULL,
    project VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    kind VARCHAR,
    outcome VARCHAR,
    task_start_ns BIGINT,
    task_end_ns BIGINT,
    harness_version VARCHAR,
    agent_name VARCHAR,
    agent_version VARCHAR,
    conversation_id VARCHAR,
    service_name VARCHAR,
    call_ids UBIGINT[] NOT NULL,
    attempts BIGINT NOT NULL,
    failed_attempts BIGINT NOT NULL,
    priced_calls BIGINT NOT NULL,
    input_tokens BIGINT,
    cache_read_tokens BIGINT,
    cache_write_tokens BIGINT,
    output_tokens BIGINT,
    reasoning_tokens BIGINT,
    call_start_ns BIGINT,
    call_end_ns BIGINT,
    tool_calls BIGINT NOT NULL,
    priced_tool_calls BIGINT NOT NULL,
    llm_cost_usd DECIMAL(38, 12) NOT NULL,
    tool_cost_usd DECIMAL(38, 12) NOT NULL"""

_ROLLUPS = f"""
ALTER TABLE llm_call_rows ADD COLUMN duplicate BOOLEAN NOT NULL DEFAULT false;

UPDATE llm_call_rows AS c SET duplicate = true FROM (
    SELECT rowid AS rid FROM llm_call_rows
    WHERE response_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY project, trace_id, response_id ORDER BY received_ns, span_id) > 1
) AS m
WHERE c.rowid = m.rid;

-- One row per provider response stored: md5 of (project, trace id, response id).
CREATE TABLE response_keys (k UHUGEINT PRIMARY KEY);
INSERT INTO response_keys
SELECT md5_number(project || chr(31) || trace_id || chr(31) || response_id)
FROM llm_call_rows WHERE response_id IS NOT NULL AND NOT duplicate;

-- The tasks view's figures, one row per task: tk = md5 of (project, task id), the key it is joined on;
-- call_ids: its distinct call ids (md5_number_upper each), llm_calls: how many. Each sum of money has the
-- count of priced rows beside it: with none, tasks shows NULL.
CREATE TABLE task_rollup ({_ROLLUP_COLUMNS},
    llm_calls BIGINT NOT NULL
);

-- What commits (and re-prices) added since the writer last folded this into task_rollup: a row per task
-- and commit. Append-only; tasks reads both.
CREATE TABLE task_rollup_delta ({_ROLLUP_COLUMNS}
);

INSERT INTO task_rollup BY NAME
WITH t AS (
    SELECT project, task_id,
        any_value(kind) AS kind,
        arg_max(outcome, end_ns) AS outcome,
        min(start_ns) AS task_start_ns,
        max(end_ns) AS task_end_ns,
        any_value(harness_version) AS harness_version,
        any_value(agent_name) AS agent_name,
        any_value(agent_version) AS agent_version,
        any_value(conversation_id) AS conversation_id,
        any_value(service_name) AS service_name
    FROM task_rows GROUP BY project, task_id
), c AS (
    SELECT project, task_id,
        list(DISTINCT md5_number_upper(call_id)) AS call_ids,
        count(*) AS attempts,
        count(*) FILTER (WHERE status = 'error') AS failed_attempts,
        count(cost_usd) AS priced_calls,
        sum(input_tokens)::BIGINT AS input_tokens,
        sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
        sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
        min(start_ns) AS call_start_ns,
        max(end_ns) AS call_end_ns,
        sum(cost_usd) AS llm_cost_usd
    FROM llm_call_rows WHERE NOT duplicate GROUP BY project, task_id
), tl AS (
    SELECT project, task_id, count(*) AS tool_calls, count(cost_usd) AS priced_tool_calls,
        sum(cost_usd) AS tool_cost_usd
    FROM tool_call_rows GROUP BY project, task_id
)
SELECT md5_number(project || chr(31) || task_id) AS tk, project, task_id,
    t.kind, t.outcome, t.task_start_ns, t.task_end_ns,
    t.harness_version, t.agent_name, t.agent_version, t.conversation_id, t.service_name,
    coalesce(c.call_ids, []::UBIGINT[]) AS call_ids,
    coalesce(len(c.call_ids), 0) AS llm_calls,
    coalesce(c.attempts, 0) AS attempts,
    coalesce(c.failed_attempts, 0) AS failed_attempts,
    coalesce(c.priced_calls, 0) AS priced_calls,
    c.input_tokens, c.cache_read_tokens, c.cache_write_tokens, c.output_tokens, c.reasoning_tokens,
    c.call_start_ns, c.call_end_ns,
    coalesce(tl.tool_calls, 0) AS tool_calls,
    coalesce(tl.priced_tool_calls, 0) AS priced_tool_calls,
    coalesce(c.llm_cost_usd, 0) AS llm_cost_usd,
    coalesce(tl.tool_cost_usd, 0) AS tool_cost_usd
FROM t FULL OUTER JOIN c USING (project, task_id) FULL OUTER JOIN tl USING (project, task_id);

CREATE OR REPLACE VIEW llm_calls AS
SELECT
    project, task_id, call_id, attempt, trace_id, span_id,
    {_TS.format(col="start_ns")} AS start_time,
    {_TS.format(col="end_ns")} AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s,
    operation, provider,
    coalesce(response_model, request_model) AS model,
    request_model, response_model, response_id,
    input_tokens, cache_read_tokens, cache_write_tokens,
    input_tokens - coalesce(cache_read_tokens, 0) - coalesce(cache_write_tokens, 0) AS uncached_input_tokens,
    output_tokens, reasoning_tokens, ttft_s,
    status, error_type,
    cost_usd, input_cost_usd, output_cost_usd, price_source, priced_provider, priced_model, unpriced_reason,
    fee_usd, price_book_version, price_detail,
    {_TS.format(col="coalesce(priced_at_ns, received_ns)")} AS priced_at,
    server_address, service_name, conversation_id, agent_name, agent_version, harness_version,
    engine, engine_version, quantization, gpu_type, gpu_count, cluster_id, deployment,
    container_image_name, container_image_tags, k8s_cluster_name, cloud_region
FROM llm_call_rows
-- one provider response counts once, also when its duplicate spans came in different requests
WHERE NOT duplicate;

CREATE OR REPLACE VIEW tasks AS
WITH d AS (
    -- what is not folded into task_rollup yet, per task
    SELECT tk, any_value(project) AS project, any_value(task_id) AS task_id,
        any_value(kind) AS kind,
        arg_max(outcome, task_end_ns) AS outcome,
        min(task_start_ns) AS task_start_ns,
        max(task_end_ns) AS task_end_ns,
        any_value(harness_version) AS harness_version,
        any_value(agent_name) AS agent_name,
        any_value(agent_version) AS agent_version,
        any_value(conversation_id) AS conversation_id,
        any_value(service_name) AS service_name,
        flatten(list(call_ids)) AS call_ids,
        sum(attempts)::BIGINT AS attempts,
        sum(failed_attempts)::BIGINT AS failed_attempts,
        sum(priced_calls)::BIGINT AS priced_calls,
        sum(input_tokens)::BIGINT AS input_tokens,
        sum(cache_read_tokens)::BIGINT AS cache_read_tokens,
        sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
        sum(output_tokens)::BIGINT AS output_tokens,
        sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
        min(call_start_ns) AS call_start_ns,
        max(call_end_ns) AS call_end_ns,
        sum(tool_calls)::BIGINT AS tool_calls,
        sum(priced_tool_calls)::BIGINT AS priced_tool_calls,
        sum(llm_cost_usd) AS llm_cost_usd,
        sum(tool_cost_usd) AS tool_cost_usd
    FROM task_rollup_delta GROUP BY tk
), r AS (
    SELECT project, task_id, kind, outcome, task_start_ns, task_end_ns,
        harness_version, agent_name, agent_version, conversation_id, service_name,
        llm_calls, attempts, failed_attempts, priced_calls,
        input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
        call_start_ns, call_end_ns, tool_calls, priced_tool_calls, llm_cost_usd, tool_cost_usd
    FROM task_rollup ANTI JOIN d USING (tk)
    UNION ALL
    SELECT d.project, d.task_id,
        coalesce(b.kind, d.kind),
        CASE WHEN b.task_end_ns IS NULL OR d.task_end_ns > b.task_end_ns
            THEN coalesce(d.outcome, b.outcome) ELSE b.outcome END,
        least(b.task_start_ns, d.task_start_ns),
        greatest(b.task_end_ns, d.task_end_ns),
        coalesce(b.harness_version, d.harness_version),
        coalesce(b.agent_name, d.agent_name),
        coalesce(b.agent_version, d.agent_version),
        coalesce(b.conversation_id, d.conversation_id),
        coalesce(b.service_name, d.service_name),
        coalesce(b.llm_calls, 0) + len(list_filter(
            list_distinct(d.call_ids), lambda h: NOT list_contains(coalesce(b.call_ids, []::UBIGINT[]), h))),
        coalesce(b.attempts, 0) + d.attempts,
        coalesce(b.failed_attempts, 0) + d.failed_attempts,
        coalesce(b.priced_calls, 0) + d.priced_calls,
        coalesce(b.input_tokens + d.input_tokens, b.input_tokens, d.input_tokens),
        coalesce(b.cache_read_tokens + d.cache_read_tokens, b.cache_read_tokens, d.cache_read_tokens),
        coalesce(b.cache_write_tokens + d.cache_write_tokens, b.cache_write_tokens, d.cache_write_tokens),
        coalesce(b.output_tokens + d.output_tokens, b.output_tokens, d.output_tokens),
        coalesce(b.reasoning_tokens + d.reasoning_tokens, b.reasoning_tokens, d.reasoning_tokens),
        least(b.call_start_ns, d.call_start_ns),
        greatest(b.call_end_ns, d.call_end_ns),
        coalesce(b.tool_calls, 0) + d.tool_calls,
        coalesce(b.priced_tool_calls, 0) + d.priced_tool_calls,
        coalesce(b.llm_cost_usd, 0) + d.llm_cost_usd,
        coalesce(b.tool_cost_usd, 0) + d.tool_cost_usd
    FROM d LEFT JOIN task_rollup AS b USING (tk)
)
SELECT
    project, task_id, kind, outcome,
    {_TS.format(col="coalesce(task_start_ns, call_start_ns)")} AS start_time,
    {_TS.format(col="coalesce(task_end_ns, call_end_ns)")} AS end_time,
    epoch_us({_TS.format(col="coalesce(task_end_ns, call_end_ns)")}) / 1e6
        - epoch_us({_TS.format(col="coalesce(task_start_ns, call_start_ns)")}) / 1e6 AS duration_s,
    llm_calls,
    attempts,
    attempts - llm_calls AS retries,
    failed_attempts,
    tool_calls,
    input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
    CASE WHEN priced_calls > 0 THEN llm_cost_usd END AS llm_cost_usd,
    CASE WHEN priced_tool_calls > 0 THEN tool_cost_usd END AS tool_cost_usd,
    CASE WHEN priced_calls > 0 OR priced_tool_calls > 0 THEN llm_cost_usd + tool_cost_usd END AS cost_usd,
    attempts - priced_calls AS unpriced_calls,
    harness_version, agent_name, agent_version, conversation_id, service_name
FROM r;
"""

# The intake-spool records committed (taskcost/store/_spool.py): each commit appends its highest seq in the same
# transaction as the rows, so a restart replays exactly the records after max(seq). Appended, not updated: DuckDB
# skips its automatic checkpoint after a transaction that updated or deleted rows, and the data of commits not
# checkpointed stays in memory.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_raw_spans", _RAW_SPANS),
    Migration("0002_typed_call_tool_task_rows", _TYPED),
    Migration("0003_views_llm_calls_tool_calls_tasks", _VIEWS),
    Migration("0004_span_keys_and_api_keys", _KEYS),
    Migration("0005_cost_provenance_and_cluster_costs", _PRICING),
    Migration("0006_write_time_dedupe_and_task_rollup", _ROLLUPS),
    Migration("0007_intake_spool_commits", SPOOL),
    Migration("0008_dedupe_window", DEDUPE_WINDOW),
    Migration("0009_prompt_fingerprint_and_golden_tasks", analytics_columns_0009(_ROLLUPS)),
    Migration("0010_task_call_dimensions", task_dimensions_0010(_ROLLUPS)),
    Migration("0011_golden_in_the_task_rollup", task_golden_0011(_ROLLUPS)),
    Migration("0012_hourly_call_rollup", call_hours_0012()),
    Migration("0013_answered_model_of_a_task", answered_model_0013(_ROLLUPS)),
    Migration("0014_span_dropped_counts", DROPPED_COUNTS),
    Migration(
        "0015_answered_model_of_each_attempt",
        answered_model_0015(latest_view(analytics_columns_0009(_ROLLUPS), "llm_calls")),
    ),
    Migration(
        "0016_unpriced_tool_calls_of_a_task",
        unpriced_tool_calls_0016(latest_view(answered_model_0013(_ROLLUPS), "tasks")),
    ),
    Migration("0017_engine_spans_and_call_engines", ENGINE_CALLS_0017),
    Migration("0018_engine_metrics", ENGINE_METRICS),
    Migration("0019_answer_open_tasks", ANSWER_OPEN_TASKS),
    Migration("0020_engine_matches_kept_by_the_writer", ENGINE_MATCH_0020, then=rebuild),
    Migration("0021_engine_hours_kept_by_the_writer", ENGINE_HOURS_0021, then=_engine_hours.rebuild),
)

_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name VARCHAR PRIMARY KEY,
    applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp
)
"""


def pending_migrations(con: Any) -> list[Migration]:
    have = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_name = 'schema_migrations'"
        ).fetchall()
    }
    if not have:
        return list(MIGRATIONS)
    applied = {r[0] for r in con.execute("SELECT name FROM schema_migrations").fetchall()}
    return [m for m in MIGRATIONS if m.name not in applied]


def apply_migrations(con: Any) -> list[str]:
    """Apply what is pending, each in its own transaction; returns the names applied."""
    con.execute(_LEDGER)
    done = []
    for m in pending_migrations(con):
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(m.sql)
            if m.then is not None:
                m.then(con)
            con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [m.name])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        done.append(m.name)
    return done
