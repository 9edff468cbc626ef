"""taskcost_sdk: record what an LLM agent's tasks cost, as OpenTelemetry spans.

    import taskcost_sdk as tc

    tc.configure(endpoint="http://collector:4318")
    tc.instrument()  # the official openai / anthropic clients, if installed
    with tc.task("bug_fix") as t:
        client.chat.completions.create(...)  # recorded: tokens, attempts, TTFT
        with t.tool("web_search", cost_usd="0.005"):
            ...

Without configure() every call is a no-op. Nothing here raises into your code at record time.
"""

from __future__ import annotations

from ._internal.api import llm_call, record_llm_call, task, tool
from ._internal.config import configure, export_stats, force_flush, shutdown
from ._internal.hooks import instrument, uninstrument
from ._internal.pipeline import ExportStats
from ._internal.retry import CallRef, RetryScope
from ._internal.spans import (
    InfraOverrides,
    LLMCall,
    Outcome,
    RecordOptions,
    Task,
    current_task,
    last_call,
    retry,
)
from ._internal.tools import ToolCall

__all__ = [
    "CallRef",
    "ExportStats",
    "InfraOverrides",
    "LLMCall",
    "Outcome",
    "RecordOptions",
    "RetryScope",
    "Task",
    "ToolCall",
    "configure",
    "current_task",
    "export_stats",
    "force_flush",
    "instrument",
    "last_call",
    "llm_call",
    "record_llm_call",
    "retry",
    "shutdown",
    "task",
    "tool",
    "uninstrument",
]
