"""Builders shared by the pricing, re-pricing and self-hosted tests (no tests here): canonical call records
and their raw spans, written through the real prepare_batch and the store's single writer."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from taskcost.normalize import LLMCallRecord, NormalizedBatch, SpanRecord, ToolCallRecord
from taskcost.pricing import Pricer, PricingConfig, PricingSource
from taskcost.store import DuckDBStore, prepare_batch

TRACE = "0af7651916cd43dd8448eb211c80319c"
M = Decimal(1_000_000)


def ns(at: datetime) -> int:
    return int(at.replace(tzinfo=at.tzinfo or UTC).timestamp()) * 1_000_000_000 + at.microsecond * 1000


def call(
    span_id: str,
    at: datetime,
    *,
    provider: str | None = "openai",
    model: str | None = "gpt-4o",
    duration_s: float = 1.0,
    input_tokens: int | None = 1000,
    output_tokens: int | None = 100,
    cache_read: int | None = None,
    cache_write: int | None = None,
    task: str = "task-1",
    deployment: str | None = None,
    cluster: str | None = None,
    attributes: dict[str, Any] | None = None,
    trace: str = TRACE,
) -> tuple[LLMCallRecord, SpanRecord]:
    start = ns(at)
    end = start + int(duration_s * 1e9)
    record = LLMCallRecord(
        trace_id=trace,
        span_id=span_id,
        task_id=task,
        call_id=span_id,
        attempt=1,
        start_ns=start,
        end_ns=end,
        operation="chat",
        provider=provider,
        request_model=model,
        response_model=None,
        response_id=None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=None,
        ttft_s=None,
        status="ok",
        error_type=None,
        server_address=None,
        service_name="agent",
        conversation_id=None,
        agent_name=None,
        agent_version=None,
        harness_version=None,
        engine=None,
        engine_version=None,
        quantization=None,
        gpu_type=None,
        gpu_count=None,
        cluster_id=cluster,
        deployment=deployment,
        container_image_name=None,
        container_image_tags=None,
        k8s_cluster_name=None,
        cloud_region=None,
        pricing_attributes=attributes,
    )
    span = SpanRecord(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=None,
        name=f"chat {model}",
        kind=3,
        start_ns=start,
        end_ns=end,
        status_code=0,
        status_message="",
        service_name="agent",
        scope_name="tests",
        scope_version="",
        attributes=json.dumps(attributes or {}),
        resource_attributes="{}",
        events="[]",
    )
    return record, span


def tool(span_id: str, at: datetime, name: str, cost: Decimal | None = None, task: str = "task-1") -> ToolCallRecord:
    start = ns(at)
    return ToolCallRecord(TRACE, span_id, task, name, start, start + 1_000_000, "ok", None, cost, "agent")


def ingest(
    store: DuckDBStore,
    calls: list[tuple[LLMCallRecord, SpanRecord]],
    pricer: Pricer | None = None,
    tools: list[ToolCallRecord] | None = None,
    received_ns: int | None = None,
) -> None:
    """Price and store ``calls`` as the collector does (prepare_batch, then the single writer), with ``pricer``, else
    the book ``followed_book`` follows, else the bundled prices."""
    pricer = pricer or followed_pricer()
    batch = NormalizedBatch(spans=[s for _, s in calls], llm_calls=[c for c, _ in calls], tool_calls=list(tools or []))
    for t in tools or []:
        batch.spans.append(
            SpanRecord(
                TRACE, t.span_id, None, "tool", 1, t.start_ns, t.end_ns, 0, "", "agent", "", "", "{}", "{}", "[]"
            )
        )
    store.write(prepare_batch(batch, received_ns or time.time_ns(), pricer=pricer))


def costs(store: DuckDBStore) -> dict[str, Decimal | None]:
    """span id -> cost_usd, from the public view."""
    return {r[0]: r[1] for r in store.query("SELECT span_id, cost_usd FROM llm_calls ORDER BY span_id").rows}


_FOLLOWED: list[PricingSource] = []  # the books followed_book follows, innermost last


def followed_pricer() -> Pricer | None:
    """The pricer of the book ``followed_book`` follows now (None outside one: the bundled prices)."""
    return _FOLLOWED[-1].current() if _FOLLOWED else None


@contextlib.contextmanager
def followed_book(path: Path, text: str) -> Iterator[PricingSource]:
    """A price book file and the pricing source that follows it, as a server's intake follows it; ``ingest`` prices
    with it meanwhile."""
    path.write_text(text)
    source = PricingSource(PricingConfig(prices_dir=path.parent / "prices", book_file=path), check_interval_s=0)
    _FOLLOWED.append(source)
    try:
        yield source
    finally:
        _FOLLOWED.remove(source)


def edit_book(path: Path, text: str) -> None:
    """Rewrite the book with a distinct mtime (even on coarse file systems), so its pricer rebuilds."""
    path.write_text(text)
    later = time.time() + 5
    os.utime(path, (later, later))
