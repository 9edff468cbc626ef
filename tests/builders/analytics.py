"""A fleet of hand-built tasks for the analytics tests (no tests here): tasks, their call attempts and tool calls,
written through the real prepare_batch and the store's writer, priced by a price book of round rates so that every
expected figure can be worked out by hand in the test.

Rates (USD per million tokens), input / cache read / cache write / output:

- ``cheap-1`` (openai):  1 / 0.1 / 1.25 / 2      -> 1,000 uncached input tokens = $0.001
- ``pricey-1`` (openai): 10 / 1 / 12.5 / 20
- ``claude-x`` (anthropic): 3 / 0.3 / 3.75 / 15

A call's cost = (input - cache read - cache write) x input + cache read x read + cache write x write + output x out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from taskcost.normalize import LLMCallRecord, NormalizedBatch, SpanRecord, TaskRecord, ToolCallRecord
from taskcost.pricing import Pricer, PricingConfig
from taskcost.store import DuckDBStore, prepare_batch
from tests.builders.pricing import call as pricing_call

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # a Monday
M = Decimal(1_000_000)

RATES: dict[str, tuple[Decimal, Decimal, Decimal, Decimal]] = {
    "cheap-1": (Decimal(1), Decimal("0.1"), Decimal("1.25"), Decimal(2)),
    "pricey-1": (Decimal(10), Decimal(1), Decimal("12.5"), Decimal(20)),
    "claude-x": (Decimal(3), Decimal("0.3"), Decimal("3.75"), Decimal(15)),
}
PROVIDERS = {"cheap-1": "openai", "pricey-1": "openai", "claude-x": "anthropic"}

BOOK: dict[str, Any] = {
    "version": "analytics-tests",
    "models": [
        {
            "provider": PROVIDERS[m],
            "model": m,
            "input_mtok": str(r[0]),
            "cache_read_mtok": str(r[1]),
            "cache_write_mtok": str(r[2]),
            "output_mtok": str(r[3]),
        }
        for m, r in RATES.items()
    ],
}


def pricer() -> Pricer:
    return PricingConfig(book_table=BOOK).build()


def cost(model: str, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> Decimal:
    """What the book charges for one call: the hand calculation the tests compare with."""
    i, r, w, o = RATES[model]
    uncached = input_tokens - cache_read - cache_write
    return (uncached * i + cache_read * r + cache_write * w + output_tokens * o) / M


def ns(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000


_ids = itertools.count(1)


def _span_id() -> str:
    return f"{next(_ids):016x}"


def _span(trace: str, span_id: str, start: int, end: int, attributes: dict[str, Any] | None = None) -> SpanRecord:
    return SpanRecord(
        trace, span_id, None, "s", 1, start, end, 0, "", "agent", "tests", "", json.dumps(attributes or {}), "{}", "[]"
    )


@dataclass
class TaskBuilder:
    """One task: its task span (unless ``outcome`` is None: still running) and its calls and tools."""

    fleet: Fleet
    task_id: str
    kind: str
    outcome: str | None
    start: datetime
    project: str
    golden: bool
    agent_version: str | None
    harness_version: str | None
    agent_name: str | None = None
    calls: list[LLMCallRecord] = field(default_factory=list)
    tools: list[ToolCallRecord] = field(default_factory=list)
    _offset_s: float = 0.0

    @property
    def trace(self) -> str:
        return hashlib.md5(f"{self.project}/{self.task_id}".encode()).hexdigest()

    def call(
        self,
        model: str = "cheap-1",
        *,
        input_tokens: int = 1000,
        output_tokens: int = 100,
        cache_read: int | None = None,
        cache_write: int | None = None,
        call_id: str | None = None,
        attempt: int = 1,
        status: str = "ok",
        duration_s: float = 1.0,
        ttft_s: float | None = None,
        at_s: float | None = None,
        provider: str | None = None,
        **columns: Any,
    ) -> TaskBuilder:
        """Add a call attempt ``at_s`` seconds after the task's start (default: after the previous one). ``columns``:
        any other ``llm_calls`` column of the record (``engine``, ``engine_version``, ``gpu_type``, ``quantization``,
        ``cluster_id``, ``deployment``, ``prompt_chars``, ``stable_prefix_chars``, ``prefix_break_block``, ...)."""
        offset = self._offset_s if at_s is None else at_s
        start = ns(self.start + timedelta(seconds=offset))
        end = start + int(duration_s * 1e9)
        self._offset_s = offset + duration_s
        span_id = _span_id()
        record, _ = pricing_call(
            span_id,
            self.start + timedelta(seconds=offset),
            provider=provider or PROVIDERS.get(model, "openai"),
            model=model,
            duration_s=duration_s,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read=cache_read,
            cache_write=cache_write,
            task=self.task_id,
            trace=self.trace,
        )
        record = dataclasses.replace(
            record,
            start_ns=start,
            end_ns=end,
            call_id=call_id or span_id,
            attempt=attempt,
            ttft_s=ttft_s,
            status=status,
            error_type="timeout" if status == "error" else None,
            agent_name=self.agent_name,
            agent_version=self.agent_version,
            harness_version=self.harness_version,
        )
        self.calls.append(dataclasses.replace(record, **columns))
        return self

    def tool(self, cost: Decimal | None = None, name: str = "search") -> TaskBuilder:
        start = ns(self.start + timedelta(seconds=self._offset_s))
        self.tools.append(
            ToolCallRecord(
                self.trace, _span_id(), self.task_id, name, start, start + 1_000_000, "ok", None, cost, "agent"
            )
        )
        return self

    def records(self) -> NormalizedBatch:
        b = NormalizedBatch()
        for c in self.calls:
            b.llm_calls.append(c)
            b.spans.append(_span(c.trace_id, c.span_id, c.start_ns, c.end_ns))
            if c.engine_detail is not None:  # the call span's engine timings and topology tags (``engine_calls``)
                b.call_engines.append(dataclasses.replace(c.engine_detail, trace_id=c.trace_id, span_id=c.span_id))
        for t in self.tools:
            b.tool_calls.append(t)
            b.spans.append(_span(t.trace_id, t.span_id, t.start_ns, t.end_ns))
        if self.outcome is not None:
            start = ns(self.start)
            end = max([start + 1_000_000_000, *(c.end_ns for c in self.calls)])
            span_id = _span_id()
            status = "error" if self.outcome == "failed" else "ok"
            b.tasks.append(
                TaskRecord(
                    self.trace, span_id, self.task_id, self.kind, self.outcome, start, end, status, None,
                    self.harness_version, self.agent_name, self.agent_version, None, "agent", golden=self.golden,
                )
            )  # fmt: skip
            b.spans.append(_span(self.trace, span_id, start, end))
        return b


@dataclass
class Fleet:
    """Tasks to write into a store in one go: ``Fleet().task("t1").call(...).call(...)``, then ``write(store)``."""

    tasks: list[TaskBuilder] = field(default_factory=list)
    samples: list[Any] = field(default_factory=list)  # engine metric samples (``engine_metrics``), by ``metrics``

    def task(
        self,
        task_id: str,
        *,
        kind: str = "review",
        outcome: str | None = "completed",
        start: datetime | None = None,
        minute: float = 0,
        project: str = "default",
        golden: bool = False,
        agent_version: str | None = None,
        harness_version: str | None = None,
        agent_name: str | None = None,
    ) -> TaskBuilder:
        t = TaskBuilder(
            self,
            task_id,
            kind,
            outcome,
            (start or T0) + timedelta(minutes=minute),
            project,
            golden,
            agent_version,
            harness_version,
            agent_name,
        )
        self.tasks.append(t)
        return t

    def write(self, store: DuckDBStore, received_ns: int = 1) -> None:
        p = pricer()
        for project in sorted({t.project for t in self.tasks}):
            merged = NormalizedBatch()
            for t in self.tasks:
                if t.project == project:
                    r = t.records()
                    merged.spans += r.spans
                    merged.llm_calls += r.llm_calls
                    merged.tool_calls += r.tool_calls
                    merged.tasks += r.tasks
                    merged.call_engines += r.call_engines
            store.write(prepare_batch(merged, received_ns, project=project, pricer=p))
        if self.samples:
            from taskcost.collector._engine_metrics import engine_rows
            from taskcost.store import PreparedBatch

            cols = engine_rows(self.samples, project="default", source="scrape", received_ns=received_ns)
            store.write(
                PreparedBatch(columns={"engine_metric_rows": cols}, span_count=0, sample_count=len(cols["ts_ns"]))
            )

    def metrics(
        self, text: str, *, cluster_id: str, at_s: float, engine: str = "vllm", model: str | None = None
    ) -> Fleet:
        """An engine's Prometheus page (``text``) as scraped ``at_s`` seconds after ``T0`` from ``cluster_id``,
        parsed by the collector's own parser."""
        from taskcost.collector._engine_metrics import samples_from_text

        at = ns(T0) + int(at_s * 1e9)
        parsed = samples_from_text(text, cluster_id=cluster_id, engine=engine, model=model, scraped_ns=at)
        self.samples += parsed.samples
        return self
