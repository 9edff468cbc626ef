"""One call's or tool call's stored cost, by its span id: what ``taskcost explain-cost`` explains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taskcost.store import ReadStore

__all__ = ["CallCost", "call_costs"]


@dataclass(frozen=True)
class CallCost:
    """The stored rows of a span id: LLM calls (``llm_calls`` columns) or, when it names none, tool calls."""

    calls: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def call_costs(store: ReadStore, span_id: str, trace_id: str | None = None) -> CallCost:
    """The calls with ``span_id`` (hex, any case), in ``trace_id`` when given (span ids may repeat across traces)."""
    where = "span_id = ?" + (" AND trace_id = ?" if trace_id else "")
    params: list[Any] = [span_id.lower()] + ([trace_id.lower()] if trace_id else [])
    calls = store.query(f"SELECT * FROM llm_calls WHERE {where}", params).dicts()
    tools = [] if calls else store.query(f"SELECT * FROM tool_calls WHERE {where}", params).dicts()
    return CallCost(calls, tools)
