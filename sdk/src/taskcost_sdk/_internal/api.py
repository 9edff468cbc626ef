"""Module-level entry points: task(), llm_call(), tool(), record_llm_call()."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Unpack

from opentelemetry.util.types import AttributeValue

from .retry import CallRef
from .spans import InfraOverrides, LLMCall, Task
from .tools import ToolCall


def task(
    kind: str,
    id: str | None = None,
    *,
    conversation_id: str | None = None,
    agent_name: str | None = None,
    agent_version: str | None = None,
    golden: bool = False,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Task:
    """A task: ``with task("bug_fix") as t:`` or ``async with``. ``id`` defaults to a random hex id.

    Leaving the block normally marks the task "completed" (or what ``t.set_outcome()`` said); an exception
    marks it "failed" (span status ERROR, ``error.type`` = exception class) and propagates unchanged.
    ``golden=True`` tags it as one of a fixed task set (``taskcost canary --golden`` compares on those only).
    """
    return Task(
        kind,
        id,
        conversation_id=conversation_id,
        agent_name=agent_name,
        agent_version=agent_version,
        golden=golden,
        attributes=attributes,
    )


def llm_call(
    provider: str,
    model: str,
    *,
    call_id: str | None = None,
    attempt: int | None = None,
    retry_of: LLMCall | CallRef | None = None,
    **infra_overrides: Unpack[InfraOverrides],
) -> LLMCall:
    """One LLM call attempt as a context manager, in the current task if any.

    ``retry_of=<previous LLMCall>`` reuses its call id with attempt + 1. An exception in the block marks
    the call failed and propagates unchanged.
    """
    return LLMCall(provider, model, call_id=call_id, attempt=attempt, retry_of=retry_of, overrides=infra_overrides)


def tool(name: str, *, cost_usd: object = None, tool_call_id: str | None = None) -> ToolCall:
    """One tool call as a context manager, in the current task if any. ``cost_usd`` (Decimal, str, int or
    float) is what the call cost; ``tool_call_id`` links it to the model's tool call (``gen_ai.tool.call.id``)."""
    return ToolCall(name, cost_usd=cost_usd, tool_call_id=tool_call_id)


def record_llm_call(
    provider: str,
    model: str,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    reasoning_tokens: int = 0,
    ttft_s: float | None = None,
    call_id: str | None = None,
    attempt: int | None = None,
    retry_of: LLMCall | CallRef | None = None,
    error_type: str | None = None,
    response_model: str | None = None,
    response_id: str | None = None,
    start_time: datetime | int | None = None,
    end_time: datetime | int | None = None,
    duration_s: float | None = None,
    task: Task | None = None,
    **infra_overrides: Unpack[InfraOverrides],
) -> LLMCall:
    """Record an LLM call that already happened, as one finished span; returns it (for ``retry_of``).

    Times are datetimes (naive = local time) or epoch nanoseconds; by default the call ends now and
    lasts ``duration_s`` (or 0). ``attempt`` defaults to 1, or to ``retry_of.attempt + 1``. Token counts
    as in :meth:`LLMCall.set_usage`. ``task`` defaults to the current task.
    """
    return LLMCall.record(
        provider,
        model,
        task=task,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        reasoning_tokens=reasoning_tokens,
        ttft_s=ttft_s,
        call_id=call_id,
        attempt=attempt,
        retry_of=retry_of,
        error_type=error_type,
        response_model=response_model,
        response_id=response_id,
        start_time=start_time,
        end_time=end_time,
        duration_s=duration_s,
        **infra_overrides,
    )
