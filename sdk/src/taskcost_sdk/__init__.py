"""taskcost_sdk: record what an LLM agent's tasks cost, as OpenTelemetry spans.

    import taskcost_sdk as tc

    tc.configure(endpoint="http://collector:4318", infra={"engine": "vllm", "deployment": "self_hosted"})
    with tc.task("bug_fix") as t:
        with t.llm_call("openai", "gpt-4o") as c:
            ...
            c.set_usage(input_tokens=1200, output_tokens=300)

Without configure() every call is a no-op. Nothing here raises into your code at record time.
"""

from __future__ import annotations

from ._internal.api import llm_call, record_llm_call, task, tool
from ._internal.config import configure, force_flush, shutdown
from ._internal.spans import InfraOverrides, LLMCall, Outcome, RecordOptions, Task, ToolCall, current_task

__all__ = [
    "InfraOverrides",
    "LLMCall",
    "Outcome",
    "RecordOptions",
    "Task",
    "ToolCall",
    "configure",
    "current_task",
    "force_flush",
    "llm_call",
    "record_llm_call",
    "shutdown",
    "task",
    "tool",
]
