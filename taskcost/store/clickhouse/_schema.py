"""The ClickHouse store's schema: its tables, the public views (the DuckDB store's names, columns and Arrow types), and
the versioned migrations that create them.

Why it looks like this: many collectors (processes) write to one database at once, so nothing here is kept up to date
incrementally. The row tables are ReplacingMergeTrees keyed by (project, trace_id, span_id): a re-sent span is
collapsed by the engine's merges, and every reader goes through a view that deduplicates at read time (``FINAL``, or
``LIMIT 1 BY`` where a second key decides, see ``llm_call_counted``), so a span is seen once however many writers
stored it. The version column ``_keep`` (max - received_ns) makes the first report received the one kept, as the
DuckDB store keeps the first it stored. ``tasks`` and ``llm_call_hours`` are GROUP BYs over the deduplicated rows at
query time (the DuckDB store keeps roll-up tables instead; two writers adding to a roll-up would count twice).

Measured (chDB 26.9 in process, 2 shared cores; 1.01M ``span_rows`` rows in 12 unmerged parts, 910k distinct spans,
100k re-sent; best of 3; an ad hoc script, not a test):

* ``SELECT count(), sum(end_ns - start_ns) FROM span_rows FINAL``: 0.045 s (the ``spans`` view: 0.042 s)
* the same over ``argMax(end_ns - start_ns, _keep) ... GROUP BY project, trace_id, span_id``: 0.099 s
* the same over ``ORDER BY received_ns LIMIT 1 BY project, trace_id, span_id``: 0.123 s

and on 1M ``llm_call_rows`` (100k tasks, half the attempts failed): ``llm_calls`` 0.95 s (``llm_call_counted`` 0.18 s;
the rest is the answered model's four window functions), ``tasks`` 0.58 s, ``llm_call_hours`` 0.80 s, whole-view
aggregates.

FINAL reads the parts in key order and merges them as it streams (no hash table, no sort), so every view whose
uniqueness is the table's key uses it. ``llm_calls`` needs one report per provider response as well (a second key:
(project, trace_id, response_id)), which FINAL cannot express; it uses ``LIMIT 1 BY`` ordered by (received_ns,
span_id), the DuckDB writer's rule for the first report.

Differences from the DuckDB store that no type can hide:

* ``container_image_tags``: a ClickHouse Array cannot be NULL; a call without tags has ``[]`` (DuckDB: NULL).
* ``llm_calls.model`` of an attempt with no response is resolved at read time over all the task's stored attempts;
  the DuckDB writer resolves it when a commit brings an attempt without a response or a retry, within an hour of
  the commit's calls (taskcost/store/_answers.py). They differ only when the answer is stored more than an hour from
  the failure, or when a first attempt of another call is what makes a task's answer unique.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from taskcost.store._migrations_analytics import TASK_DIMENSIONS
from taskcost.store._rows import arrow_schema
from taskcost.store.clickhouse._engine_views import (
    ENGINE_CALL_TABLES,
    ENGINE_CALL_VIEWS,
    ENGINE_MATCH_NEAR,
    engine_hour_views,
)

__all__ = [
    "BATCH_TABLES",
    "COUNTED_ORDER",
    "COUNTED_PER",
    "MIGRATIONS",
    "PUBLIC_VIEWS",
    "TABLE_OF",
    "Migration",
    "batch_schemas",
    "bootstrap_sql",
    "column_names",
]

# (name, DuckDB type, nullable): the DuckDB store's columns (its migrations' effective tables), minus the ones its
# writer decides itself (``duplicate``, ``answered_model``: here the views decide them at read time).
_SPANS = [
    ("project", "VARCHAR", False),
    ("trace_id", "VARCHAR", False),
    ("span_id", "VARCHAR", False),
    ("parent_span_id", "VARCHAR", True),
    ("name", "VARCHAR", False),
    ("kind", "TINYINT", False),
    ("start_ns", "BIGINT", False),
    ("end_ns", "BIGINT", False),
    ("status_code", "TINYINT", False),
    ("status_message", "VARCHAR", True),
    ("service_name", "VARCHAR", True),
    ("scope_name", "VARCHAR", True),
    ("scope_version", "VARCHAR", True),
    ("attributes", "JSON", False),
    ("resource_attributes", "JSON", False),
    ("events", "JSON", False),
    ("received_ns", "BIGINT", False),
    ("dropped_attributes_count", "BIGINT", True),
    ("dropped_events_count", "BIGINT", True),
]
_LLM = [
    ("project", "VARCHAR", False),
    ("trace_id", "VARCHAR", False),
    ("span_id", "VARCHAR", False),
    ("task_id", "VARCHAR", False),
    ("call_id", "VARCHAR", False),
    ("attempt", "INTEGER", False),
    ("start_ns", "BIGINT", False),
    ("end_ns", "BIGINT", False),
    *((c, "VARCHAR", True) for c in ("operation", "provider", "request_model", "response_model", "response_id")),
    *((c, "BIGINT", True) for c in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")),
    ("reasoning_tokens", "BIGINT", True),
    ("ttft_s", "DOUBLE", True),
    ("status", "VARCHAR", False),
    *(
        (c, "VARCHAR", True)
        for c in (
            "error_type",
            "server_address",
            "service_name",
            "conversation_id",
            "agent_name",
            "agent_version",
            "harness_version",
            "engine",
            "engine_version",
            "quantization",
            "gpu_type",
        )
    ),
    ("gpu_count", "INTEGER", True),
    ("cluster_id", "VARCHAR", True),
    ("deployment", "VARCHAR", True),
    ("container_image_name", "VARCHAR", True),
    ("container_image_tags", "VARCHAR[]", True),
    ("k8s_cluster_name", "VARCHAR", True),
    ("cloud_region", "VARCHAR", True),
    ("cost_usd", "DECIMAL(38,12)", True),
    ("input_cost_usd", "DECIMAL(38,12)", True),
    ("output_cost_usd", "DECIMAL(38,12)", True),
    *((c, "VARCHAR", True) for c in ("price_source", "priced_provider", "priced_model", "unpriced_reason")),
    ("received_ns", "BIGINT", False),
    ("fee_usd", "DECIMAL(38,12)", True),
    ("price_book_version", "VARCHAR", True),
    ("price_detail", "JSON", True),
    ("priced_at_ns", "BIGINT", True),
    ("prompt_chars", "BIGINT", True),
    ("stable_prefix_chars", "BIGINT", True),
    ("prefix_break_block", "INTEGER", True),
    ("prefix_break_kind", "VARCHAR", True),
]
_TOOLS = [
    ("project", "VARCHAR", False),
    ("trace_id", "VARCHAR", False),
    ("span_id", "VARCHAR", False),
    ("task_id", "VARCHAR", False),
    ("tool_name", "VARCHAR", True),
    ("start_ns", "BIGINT", False),
    ("end_ns", "BIGINT", False),
    ("status", "VARCHAR", False),
    ("error_type", "VARCHAR", True),
    ("cost_usd", "DECIMAL(38,12)", True),
    ("service_name", "VARCHAR", True),
    ("received_ns", "BIGINT", False),
    ("cost_source", "VARCHAR", True),
]
_TASKS = [
    ("project", "VARCHAR", False),
    ("trace_id", "VARCHAR", False),
    ("span_id", "VARCHAR", False),
    ("task_id", "VARCHAR", False),
    ("kind", "VARCHAR", True),
    ("outcome", "VARCHAR", False),
    ("start_ns", "BIGINT", False),
    ("end_ns", "BIGINT", False),
    ("status", "VARCHAR", False),
    *(
        (c, "VARCHAR", True)
        for c in ("error_type", "harness_version", "agent_name", "agent_version", "conversation_id", "service_name")
    ),
    ("received_ns", "BIGINT", False),
    ("golden", "BOOLEAN", True),
]
_CLUSTER_COSTS = [
    ("cluster_id", "VARCHAR", False),
    ("window_start_ns", "BIGINT", False),
    ("window_end_ns", "BIGINT", False),
    ("gpu_type", "VARCHAR", True),
    ("gpu_count", "INTEGER", False),
    ("usd_per_gpu_hour", "DECIMAL(38,12)", False),
    ("rate_source", "VARCHAR", False),
    ("bill_usd", "DECIMAL(38,12)", False),
    ("attributed_usd", "DECIMAL(38,12)", False),
    ("idle_usd", "DECIMAL(38,12)", False),
    ("busy_s", "DOUBLE", False),
    ("calls", "BIGINT", False),
    ("clusters_version", "VARCHAR", False),
    ("computed_at_ns", "BIGINT", False),
]

_BATCH_COLUMNS = {"spans": _SPANS, "llm_call_rows": _LLM, "tool_call_rows": _TOOLS, "task_rows": _TASKS}
# engine metric samples: a batch table too, not keyed by span (its own table and view: ``_ENGINE_METRICS``)
_ENGINE_METRIC_ROWS = [
    ("project", "VARCHAR", False),
    ("cluster_id", "VARCHAR", False),
    ("engine", "VARCHAR", False),
    ("model", "VARCHAR", True),
    ("metric", "VARCHAR", False),
    ("source_metric", "VARCHAR", False),
    ("labels", "JSON", False),
    ("kind", "VARCHAR", False),
    ("ts_ns", "BIGINT", False),
    ("value", "DOUBLE", False),
    ("source", "VARCHAR", False),
    ("received_ns", "BIGINT", False),
]
_SAMPLE_COLUMNS = {"engine_metric_rows": _ENGINE_METRIC_ROWS}
BATCH_TABLES = (*_BATCH_COLUMNS, *_SAMPLE_COLUMNS, *ENGINE_CALL_TABLES)
"""The tables a PreparedBatch fills, by the names the batch uses."""
TABLE_OF = {"spans": "span_rows", "llm_call_rows": "llm_call_rows", "tool_call_rows": "tool_call_rows"} | {
    "task_rows": "task_rows"
}
TABLE_OF["engine_metric_rows"] = "engine_metric_rows"
TABLE_OF.update({t: t for t in ENGINE_CALL_TABLES})
"""A batch table's ClickHouse table (raw spans are ``span_rows``: ``spans`` is the deduplicating public view)."""
# (``engine_metrics`` is public too, in the sandbox's PUBLIC_RELATIONS; it joins this list, which the parity suite
# compares row for row, once that suite's traffic carries engine metric samples: tests/test_engine_metrics.py holds
# the two stores to the same rows meanwhile)
PUBLIC_VIEWS = (
    "llm_calls",
    "tool_calls",
    "tasks",
    "spans",
    "llm_call_hours",
    "engine_spans",
    "engine_calls",
    "engine_call_figures",
    "engine_config_hours",
)
# (``engine_config_busy`` is public too; its rows are parts of each hour's union, which the DuckDB store keeps as few
# as it can and this one as one per call: the parity suite holds the busy time the engines question reads from them
# to the same figure)

_CH_TYPES = {
    "VARCHAR": "String",
    "JSON": "String",
    "BIGINT": "Int64",
    "INTEGER": "Int32",
    "TINYINT": "Int8",
    "DOUBLE": "Float64",
    "BOOLEAN": "Bool",
    "DECIMAL(38,12)": "Decimal(38, 12)",
    "VARCHAR[]": "Array(String)",  # an Array cannot be Nullable: NULL is stored as []
}
_DEFAULTS = {"project": "'default'", "dropped_attributes_count": "0", "dropped_events_count": "0"}


def _ch_type(duck: str, nullable: bool) -> str:
    t = _CH_TYPES[duck]
    return f"Nullable({t})" if nullable and not t.startswith("Array") else t


def column_names(table: str) -> list[str]:
    """A batch table's columns (the batch's names), in order."""
    return [c[0] for c in {**_BATCH_COLUMNS, **_SAMPLE_COLUMNS, **ENGINE_CALL_TABLES}[table]]


def batch_schemas() -> dict[str, pa.Schema]:
    """The Arrow schema of each table a PreparedBatch fills: the DuckDB store's exactly (decode workers lay rows out
    to it; the same batch can go to either store)."""
    every = {**_BATCH_COLUMNS, **_SAMPLE_COLUMNS, **ENGINE_CALL_TABLES}
    return {t: arrow_schema([(n, d) for n, d, _ in cols]) for t, cols in every.items()}


def _columns_sql(cols: list[tuple[str, str, bool]]) -> str:
    out = []
    for name, duck, nullable in cols:
        default = f" DEFAULT {_DEFAULTS[name]}" if name in _DEFAULTS else ""
        out.append(f"    `{name}` {_ch_type(duck, nullable)}{default}")
    return ",\n".join(out)


# The kept report of a span is the first received (the largest _keep); the dedupe window of identical inserts (a
# client's retry of the same block, with the same insert_deduplication_token) is the engine's.
_KEEP = "`_keep` UInt64 MATERIALIZED 18446744073709551615 - toUInt64(received_ns)"
_ROW_ENGINE = (
    "ENGINE = ReplacingMergeTree(_keep) ORDER BY (project, trace_id, span_id) "
    "SETTINGS non_replicated_deduplication_window = 10000"
)


def _row_table(name: str, cols: list[tuple[str, str, bool]]) -> str:
    return f"CREATE TABLE IF NOT EXISTS {name} (\n{_columns_sql(cols)},\n    {_KEEP}\n) {_ROW_ENGINE}"


def bootstrap_sql() -> str:
    """The migrations' own record (created before any migration runs; idempotent)."""
    return (
        "CREATE TABLE IF NOT EXISTS schema_migrations (name String, "
        "applied_at DateTime64(6, 'UTC') DEFAULT now64(6)) ENGINE = ReplacingMergeTree ORDER BY name"
    )


_TABLES = [
    *(_row_table(TABLE_OF[t], cols) for t, cols in _BATCH_COLUMNS.items()),
    # a revocation is a new version of the key's row (revision 1); readers take the last (FINAL)
    "CREATE TABLE IF NOT EXISTS api_keys (id String, project String, kind String, secret_sha256 String, "
    "prefix String, created_at DateTime64(6, 'UTC') DEFAULT now64(6), revoked_at Nullable(DateTime64(6, 'UTC')), "
    "revision UInt64 DEFAULT 0) ENGINE = ReplacingMergeTree(revision) ORDER BY id",
    f"CREATE TABLE IF NOT EXISTS cluster_cost_rows (\n{_columns_sql(_CLUSTER_COSTS)}\n) "
    "ENGINE = ReplacingMergeTree(computed_at_ns) ORDER BY (cluster_id, window_start_ns)",
]


def _ts(ns: str) -> str:
    """DuckDB's ``make_timestamp(ns // 1000)``: microseconds, UTC (the Arrow answer drops the zone: ``_store``)."""
    return f"fromUnixTimestamp64Micro(intDiv({ns}, 1000), 'UTC')"


_SPANS_VIEW = f"CREATE OR REPLACE VIEW spans AS SELECT {', '.join(column_names('spans'))} FROM span_rows FINAL"

_TOOL_CALLS_VIEW = f"""CREATE OR REPLACE VIEW tool_calls AS
SELECT project, task_id, tool_name, trace_id, span_id, {_ts("start_ns")} AS start_time, {_ts("end_ns")} AS end_time,
    (end_ns - start_ns) / 1e9 AS duration_s, status, error_type, cost_usd, cost_source, service_name
FROM tool_call_rows FINAL"""

# The call rows that count: each span once, and one row per provider response (project, trace, response id), the
# first by (received_ns, span_id): the DuckDB writer's ``duplicate`` rule, decided here on every read. A row without a
# response id is keyed by its span alone. Internal (not a public view).
_COUNTED_VIEW = """CREATE OR REPLACE VIEW llm_call_counted AS
SELECT * FROM llm_call_rows
ORDER BY received_ns, span_id
LIMIT 1 BY project, trace_id, isNull(response_id), ifNull(response_id, span_id)"""

# The same rows, sorted first by the table's key (project, trace_id, ...): ClickHouse sorts within each trace as it
# reads in key order instead of sorting the whole table at once (1M calls, chDB, 2 cores: 0.13 s and under 100 MB,
# against 0.30 s and 400 MB; the same rows kept).
_COUNTED_IN_KEY_ORDER = """CREATE OR REPLACE VIEW llm_call_counted AS
SELECT * FROM llm_call_rows
ORDER BY project, trace_id, isNull(response_id), ifNull(response_id, span_id), received_ns, span_id
LIMIT 1 BY project, trace_id, isNull(response_id), ifNull(response_id, span_id)"""

# Re-priced calls are new versions of their row (taskcost/store/clickhouse/_reprice.py): among the copies of the one
# report that counts, the one priced last. The same rule, the re-price reads its pages with.
COUNTED_PER = "project, trace_id, isNull(response_id), ifNull(response_id, span_id)"
COUNTED_ORDER = f"{COUNTED_PER}, received_ns, span_id, ifNull(priced_at_ns, 0) DESC"
_COUNTED_PRICED_LAST = f"""CREATE OR REPLACE VIEW llm_call_counted AS
SELECT * FROM llm_call_rows ORDER BY {COUNTED_ORDER} LIMIT 1 BY {COUNTED_PER}"""

_CALL_TAIL = (
    "server_address, service_name, conversation_id, agent_name, agent_version, harness_version, engine, "
    "engine_version, quantization, gpu_type, gpu_count, cluster_id, deployment, container_image_name, "
    "container_image_tags, k8s_cluster_name, cloud_region, prompt_chars, stable_prefix_chars, prefix_break_block, "
    "prefix_break_kind"
)
# A call's model: its response model; for an attempt without one, the one model that answered its logical call, else
# the one model that answered its task, else the name it asked for (taskcost/store/_answers.py's rule).
_LLM_CALLS_VIEW = f"""CREATE OR REPLACE VIEW llm_calls AS
SELECT project, task_id, call_id, attempt, trace_id, span_id, {_ts("start_ns")} AS start_time,
    {_ts("end_ns")} AS end_time, (end_ns - start_ns) / 1e9 AS duration_s, operation, provider,
    coalesce(response_model, if(call_answers = 1, call_answer, NULL), if(task_answers = 1, task_answer, NULL),
        request_model) AS model,
    request_model, response_model, response_id, input_tokens, cache_read_tokens, cache_write_tokens,
    input_tokens - coalesce(cache_read_tokens, 0) - coalesce(cache_write_tokens, 0) AS uncached_input_tokens,
    output_tokens, reasoning_tokens, ttft_s, status, error_type, cost_usd, input_cost_usd, output_cost_usd,
    price_source, priced_provider, priced_model, unpriced_reason, fee_usd, price_book_version, price_detail,
    {_ts("coalesce(priced_at_ns, received_ns)")} AS priced_at, {_CALL_TAIL}
FROM (
    SELECT *,
        uniqExact(response_model) OVER (PARTITION BY project, task_id, call_id) AS call_answers,
        min(response_model) OVER (PARTITION BY project, task_id, call_id) AS call_answer,
        uniqExact(response_model) OVER (PARTITION BY project, task_id) AS task_answers,
        min(response_model) OVER (PARTITION BY project, task_id) AS task_answer
    FROM llm_call_counted
)"""

_HOUR_KEYS = "provider, model, deployment, engine, engine_version, quantization, gpu_type, cluster_id"
_TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
_ZERO = "toDecimal128(0, 12)"
_LLM_CALL_HOURS_VIEW = f"""CREATE OR REPLACE VIEW llm_call_hours AS
SELECT project, hour, {_HOUR_KEYS}, priced,
    toInt64(count()) AS attempts, toInt64(countIf(is_error)) AS errors,
    if(priced, sum(cost), NULL) AS cost_usd,
    {", ".join(f"toInt64(sum(n_{c})) AS {c}" for c in _TOKENS)}
FROM (
    -- (renamed first: an alias of the outer SELECT would shadow the column it is computed from)
    SELECT project, toDateTime64(toStartOfHour(start_time), 6, 'UTC') AS hour, {_HOUR_KEYS},
        CAST(cost_usd IS NOT NULL AS Bool) AS priced, status = 'error' AS is_error,
        ifNull(cost_usd, {_ZERO}) AS cost, {", ".join(f"ifNull({c}, 0) AS n_{c}" for c in _TOKENS)}
    FROM llm_calls
)
GROUP BY project, hour, {_HOUR_KEYS}, priced"""

# tasks: the DuckDB store's roll-up (taskcost/store/_rollup.py), computed from the deduplicated rows on each read.
_DIMS = TASK_DIMENSIONS  # the DuckDB roll-up's dimensions, the same expressions
_CONTEXT = ("harness_version", "agent_name", "agent_version", "conversation_id", "service_name")
_COUNTS = ("llm_calls", "attempts", "failed_attempts", "priced_calls")


def _shared(d: str) -> str:
    """The value a task's calls share for dimension ``d``, 'mixed' when they disagree, NULL when none has one."""
    return f"multiIf({d}_min = {d}_max, {d}_min, {d}_min IS NULL, NULL, 'mixed') AS {d}"


_TASKS_VIEW = f"""CREATE OR REPLACE VIEW tasks AS
WITH
t AS (
    SELECT project, task_id, any(kind) AS kind, toNullable(argMax(outcome, end_ns)) AS outcome,
        toNullable(min(start_ns)) AS task_start_ns, toNullable(max(end_ns)) AS task_end_ns,
        {", ".join(f"any({c}) AS {c}" for c in _CONTEXT)}, max(ifNull(golden, false)) AS golden
    FROM task_rows FINAL GROUP BY project, task_id
),
c AS (
    SELECT project, task_id, toInt64(uniqExact(call_id)) AS llm_calls, toInt64(count()) AS attempts,
        toInt64(countIf(status = 'error')) AS failed_attempts, toInt64(count(cost_usd)) AS priced_calls,
        {", ".join(f"sum({c}) AS {c}" for c in _TOKENS)},
        toNullable(min(start_ns)) AS call_start_ns, toNullable(max(end_ns)) AS call_end_ns,
        sum(ifNull(cost_usd, {_ZERO})) AS llm_cost_usd,
        {", ".join(f"min({e}) AS {d}_min, max({e}) AS {d}_max" for d, e in _DIMS.items())}
    FROM llm_call_counted GROUP BY project, task_id
),
tl AS (
    SELECT project, task_id, toInt64(count()) AS tool_calls, toInt64(count(cost_usd)) AS priced_tool_calls,
        sum(ifNull(cost_usd, {_ZERO})) AS tool_cost_usd
    FROM tool_call_rows FINAL GROUP BY project, task_id
),
k AS (
    SELECT project, task_id FROM t
    UNION DISTINCT SELECT project, task_id FROM c
    UNION DISTINCT SELECT project, task_id FROM tl
),
r AS (
    SELECT k.project AS project, k.task_id AS task_id, t.kind AS kind, t.outcome AS outcome,
        {_ts("coalesce(t.task_start_ns, c.call_start_ns)")} AS start_time,
        {_ts("coalesce(t.task_end_ns, c.call_end_ns)")} AS end_time,
        {", ".join(f"ifNull(c.{x}, 0) AS {x}" for x in _COUNTS)},
        ifNull(tl.tool_calls, 0) AS tool_calls, ifNull(tl.priced_tool_calls, 0) AS priced_tool_calls,
        {", ".join(f"c.{x} AS {x}" for x in _TOKENS)},
        ifNull(c.llm_cost_usd, {_ZERO}) AS llm_cost, ifNull(tl.tool_cost_usd, {_ZERO}) AS tool_cost,
        {", ".join(f"t.{x} AS {x}" for x in _CONTEXT)}, ifNull(t.golden, false) AS golden,
        {", ".join(f"c.{d}_min AS {d}_min, c.{d}_max AS {d}_max" for d in _DIMS)}
    FROM k
    LEFT JOIN t ON t.project = k.project AND t.task_id = k.task_id
    LEFT JOIN c ON c.project = k.project AND c.task_id = k.task_id
    LEFT JOIN tl ON tl.project = k.project AND tl.task_id = k.task_id
)
SELECT project, task_id, kind, outcome, start_time, end_time,
    toUnixTimestamp64Micro(end_time) / 1e6 - toUnixTimestamp64Micro(start_time) / 1e6 AS duration_s,
    llm_calls, attempts, attempts - llm_calls AS retries, failed_attempts, tool_calls,
    {", ".join(_TOKENS)},
    if(priced_calls > 0, llm_cost, NULL) AS llm_cost_usd,
    if(priced_tool_calls > 0, tool_cost, NULL) AS tool_cost_usd,
    if(priced_calls > 0 OR priced_tool_calls > 0, llm_cost + tool_cost, NULL) AS cost_usd,
    attempts - priced_calls AS unpriced_calls, tool_calls - priced_tool_calls AS unpriced_tool_calls,
    {", ".join(_CONTEXT)}, golden,
    if(answered_model_min IS NOT NULL,
        if(answered_model_min = answered_model_max, answered_model_min, 'mixed'),
        multiIf(model_min = model_max, model_min, model_min IS NULL, NULL, 'mixed')) AS model,
    {", ".join(_shared(d) for d in list(_DIMS)[1:-1])}
FROM r"""


# Engine metric samples as they came (a scrape, or OTLP metrics), in the order a question reads them; a re-sent sample
# (same project, cluster, engine, model, metric, labels, time) is left out at read time, the first received kept:
# the DuckDB store's ``engine_metrics`` rule (taskcost/store/_migrations_engines.py).
_ENGINE_METRICS = (
    f"CREATE TABLE IF NOT EXISTS engine_metric_rows (\n{_columns_sql(_ENGINE_METRIC_ROWS)}\n) ENGINE = MergeTree "
    "ORDER BY (project, cluster_id, metric, ts_ns) SETTINGS non_replicated_deduplication_window = 10000",
    """CREATE OR REPLACE VIEW engine_metrics AS
SELECT project, cluster_id, engine, model, metric, source_metric, labels, kind, ts_ns, value, source, received_ns
FROM engine_metric_rows
ORDER BY project, cluster_id, metric, ts_ns, engine, model, labels, received_ns, source_metric
LIMIT 1 BY project, cluster_id, engine, model, metric, labels, ts_ns""",
)


@dataclass(frozen=True)
class Migration:
    """One step of the schema: applied once per database, in order, its statements each idempotent (several
    collectors may open a new database at once: each may run a step; the record of it is deduplicated)."""

    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_tables", tuple(_TABLES)),
    Migration(
        "0002_views",
        (_SPANS_VIEW, _TOOL_CALLS_VIEW, _COUNTED_VIEW, _LLM_CALLS_VIEW, _LLM_CALL_HOURS_VIEW, _TASKS_VIEW),
    ),
    Migration("0003_counted_calls_in_key_order", (_COUNTED_IN_KEY_ORDER,)),
    Migration("0004_counted_calls_priced_last", (_COUNTED_PRICED_LAST,)),
    Migration("0005_engine_metrics", _ENGINE_METRICS),
    Migration(
        "0006_engine_spans_and_call_engines",
        (*(_row_table(t, cols) for t, cols in ENGINE_CALL_TABLES.items()), *ENGINE_CALL_VIEWS),
    ),
    Migration("0007_engine_match_within_an_hour", (ENGINE_MATCH_NEAR,)),
    Migration("0008_engine_hours", engine_hour_views()),
)
