"""The engines question's configuration columns and per-call sums, which the DuckDB store's roll-up
(``_engine_hours``), the ClickHouse store's views and the question's reads of single calls share. No DuckDB here:
the analytics import it through ``taskcost.store``."""

from __future__ import annotations

from taskcost.store._migrations_engine_calls import ENGINE_CALL_COLUMNS

__all__ = ["CALL_CONFIG", "CLIENT_DECODE", "CONFIG", "ENGINE_DECODE", "HOUR_MEASURES"]

CALL_CONFIG = (
    "model", "provider", "engine", "engine_version", "quantization", "gpu_type", "gpu_count", "cluster_id",
    "deployment",
)  # fmt: skip
"""A configuration's columns that the call holds (``engine`` and ``cluster_id``: else its engine span's)."""
CONFIG = (*CALL_CONFIG, *ENGINE_CALL_COLUMNS)
"""A deployment configuration's columns: the call's, then its topology and decoding tags."""

OK = "coalesce(status, 'ok') <> 'error' AND output_tokens > 0"
ENGINE_DECODE = f"{OK} AND decode_s > 0"
"""A call whose decode speed is the engine's: output tokens / the engine's decode seconds."""
CLIENT_DECODE = f"{OK} AND coalesce(decode_s, 0) <= 0 AND ttft_s IS NOT NULL AND latency_s > ttft_s"
"""A call whose decode speed is the client's: output tokens / (latency - TTFT)."""

HOUR_MEASURES = (
    ("calls", "1"),
    ("errors", "CASE WHEN status = 'error' THEN 1 ELSE 0 END"),
    ("priced_calls", "CASE WHEN cost_usd IS NOT NULL THEN 1 ELSE 0 END"),
    ("spend_usd", "cost_usd"),
    (
        "priced_tokens",
        "CASE WHEN cost_usd IS NOT NULL THEN coalesce(input_tokens, 0) + coalesce(output_tokens, 0) ELSE 0 END",
    ),
    ("input_tokens", "coalesce(input_tokens, 0)"),
    ("cache_read_tokens", "coalesce(cache_read_tokens, 0)"),
    ("output_tokens", "coalesce(output_tokens, 0)"),
    ("engine_input_tokens", "CASE WHEN engine_cached_tokens IS NOT NULL THEN coalesce(input_tokens, 0) ELSE 0 END"),
    ("engine_cached_tokens", "coalesce(engine_cached_tokens, 0)"),
    ("spec_draft_tokens", "CASE WHEN spec_draft_tokens > 0 THEN spec_draft_tokens ELSE 0 END"),
    ("spec_accepted_tokens", "CASE WHEN spec_draft_tokens > 0 THEN coalesce(spec_accepted_tokens, 0) ELSE 0 END"),
    ("engine_rows", "CASE WHEN engine_source IS NOT NULL THEN 1 ELSE 0 END"),
    ("engine_decode_calls", f"CASE WHEN {ENGINE_DECODE} THEN 1 ELSE 0 END"),
    ("client_decode_calls", f"CASE WHEN {CLIENT_DECODE} THEN 1 ELSE 0 END"),
    ("ok_calls", "CASE WHEN coalesce(status, 'ok') <> 'error' THEN 1 ELSE 0 END"),
)
"""``engine_config_hours``' sums: (name, each call's value over the columns of ``engine_calls``); a sum of money is
``spend_usd`` (NULL: no priced call), the others count a missing figure as 0."""
