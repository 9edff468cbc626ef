"""Tool calls as spans: ``with t.tool("web_search", cost_usd="0.005"):`` -- tool spend joins the task."""

from __future__ import annotations

from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from . import names as n
from .config import get_tracer
from .guard import guarded, warn_once
from .scope import CURRENT_TASK, SpanScope, TaskScope
from .values import coerce_cost

__all__ = ["ToolCall"]


class ToolCall(SpanScope):
    """One tool execution (span ``execute_tool {name}``)."""

    _where = "tool"

    def __init__(
        self, name: str, *, cost_usd: object = None, tool_call_id: str | None = None, task: TaskScope | None = None
    ) -> None:
        super().__init__()
        self._name = str(name).strip() if name is not None else ""
        if not self._name:
            warn_once("tool name", "taskcost_sdk: tool without a name; recorded as 'unknown'")
            self._name = "unknown"
        self._task = task if isinstance(task, TaskScope) else None
        self._cost_usd = cost_usd
        self._tool_call_id = tool_call_id

    @property
    def name(self) -> str:
        return self._name

    def set_cost(self, cost_usd: object) -> None:
        """Money the tool call cost in USD: Decimal, str, int or float (stored as a decimal string)."""
        with guarded("tool.set_cost"):
            cost = coerce_cost(cost_usd)
            if cost is None:
                warn_once("cost", "taskcost_sdk: dropped cost_usd=%r: it must be a decimal amount >= 0", cost_usd)
                return
            self._span.set_attribute(n.TOOL_COST_USD, cost)

    def set_error(self, error_type: str | BaseException) -> None:
        """Mark the tool call failed with a low-cardinality error type."""
        self._set_error(error_type)

    def _start_span(self, start_time: int | None = None) -> None:
        task = self._task if self._task is not None else CURRENT_TASK.get()
        self._task = task
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: self._name,
        }
        if task is not None:
            attributes[n.TASK_ID] = task.id
        if self._tool_call_id is not None:
            attributes[n.GEN_AI_TOOL_CALL_ID] = str(self._tool_call_id)
        self._span = get_tracer().start_span(
            f"execute_tool {self._name}",
            context=task._parent_context() if task is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start_time,
        )
        if self._cost_usd is not None:
            self.set_cost(self._cost_usd)
