"""Task identity and outcome for spans that no taskcost SDK wrote (docs/conventions.md, "Tasks")."""

from __future__ import annotations

import time
from typing import Any

import pytest

from taskcost.normalize import NormalizeRules, normalize_request
from taskcost.store import DuckDBStore, prepare_batch
from tests.interop.otlp import S, request, trace_hex

LLM = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.usage.input_tokens": 1000,
    "gen_ai.usage.output_tokens": 100,
}


@pytest.mark.parametrize(
    ("attrs", "task_id"),
    [
        (
            {
                "taskcost.task.id": "t-1",
                "gen_ai.conversation.id": "c-1",
                "session.id": "s-1",
                "traceloop.association.properties.session_id": "tl-1",
            },
            "t-1",
        ),
        (
            {"gen_ai.conversation.id": "c-1", "session.id": "s-1", "traceloop.association.properties.session_id": "tl"},
            "c-1",
        ),
        ({"session.id": "s-1", "traceloop.association.properties.session_id": "tl-1"}, "s-1"),
        ({"traceloop.association.properties.session_id": "tl-1"}, "tl-1"),
        ({}, f"trace:{trace_hex(1)}"),
    ],
)
def test_task_id_precedence(attrs: dict[str, Any], task_id: str) -> None:
    batch = normalize_request(request(S("call", 1, attrs={**LLM, **attrs})))
    assert [c.task_id for c in batch.llm_calls] == [task_id]
    assert [t.task_id for t in batch.tasks] == [task_id]  # the root call is its task's record too


def test_task_id_attributes_are_configurable() -> None:
    rules = NormalizeRules(task_id_attributes=("user.id", "session.id"))
    batch = normalize_request(request(S("call", 1, attrs={**LLM, "session.id": "s", "user.id": "u-3"})), rules)
    assert batch.llm_calls[0].task_id == "u-3"
    rules = NormalizeRules(task_id_attributes=())
    batch = normalize_request(request(S("call", 1, attrs={**LLM, "taskcost.task.id": "t"})), rules)
    assert batch.llm_calls[0].task_id == f"trace:{trace_hex(1)}"


def test_a_span_inherits_the_task_id_of_its_nearest_ancestor_in_the_request() -> None:
    """OpenInference puts session.id on its spans; the anthropic client's own span beneath it has none."""
    spans = [
        S("agent", 1, attrs={"openinference.span.kind": "AGENT", "session.id": "s-9"}),
        S("tool", 2, parent=1, attrs={"openinference.span.kind": "TOOL", "tool.name": "grep"}),
        S("anthropic.messages.create", 3, parent=2, attrs=LLM, scope="com.anthropic.sdk.python"),
        S("other trace", 4, trace=2, attrs=LLM),
    ]
    batch = normalize_request(request(*spans))
    assert sorted((c.span_id[-1], c.task_id) for c in batch.llm_calls) == [("3", "s-9"), ("4", f"trace:{trace_hex(2)}")]
    assert [t.task_id for t in batch.tool_calls] == ["s-9"]


def test_a_foreign_trace_root_is_the_task_and_its_status_the_outcome() -> None:
    ok = [
        S("invoke_agent reviewer", 1, attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reviewer"}),
        S("chat", 2, parent=1, attrs=LLM),
    ]
    [task] = normalize_request(request(*ok)).tasks
    assert (task.task_id, task.kind, task.agent_name, task.outcome) == (
        f"trace:{trace_hex(1)}",
        "reviewer",
        "reviewer",
        "completed",
    )
    failed = [S("run", 1, error="boom"), S("chat", 2, parent=1, attrs=LLM)]
    [task] = normalize_request(request(*failed)).tasks
    assert (task.kind, task.status, task.outcome) == ("run", "error", "failed")


def test_traceloop_workflow_names_the_task_kind() -> None:
    root = S("review_pr.workflow", 1, attrs={"traceloop.span.kind": "workflow", "traceloop.workflow.name": "review_pr"})
    [task] = normalize_request(request(root)).tasks
    assert task.kind == "review_pr"
    root = S(
        "x", 1, attrs={"traceloop.span.kind": "agent", "traceloop.entity.name": "writer", "gen_ai.workflow.name": "w"}
    )
    [task] = normalize_request(request(root)).tasks
    assert (task.kind, task.agent_name) == ("w", "writer")


def test_a_root_without_genai_work_is_not_a_task() -> None:
    """A health check's HTTP span must not dilute cost per completed task."""
    assert normalize_request(request(S("GET /healthz", 1, attrs={"http.method": "GET"}))).tasks == []
    # the same kind of root with a call beneath it in the request is a task
    batch = normalize_request(
        request(S("POST /review", 1, attrs={"http.method": "POST"}), S("chat", 2, parent=1, attrs=LLM))
    )
    assert [t.kind for t in batch.tasks] == ["POST /review"]


def test_no_implicit_task_where_the_sdk_wrote_one() -> None:
    spans = [
        S("POST /review", 1),
        S("task review", 2, parent=1, attrs={"taskcost.task.id": "t-1", "taskcost.task.kind": "review"}),
        S("chat", 3, parent=2, attrs={**LLM, "taskcost.task.id": "t-1"}),
    ]
    batch = normalize_request(request(*spans))
    assert [(t.task_id, t.kind) for t in batch.tasks] == [("t-1", "review")]


def test_an_sdk_call_outside_any_task_is_not_made_a_task() -> None:
    batch = normalize_request(request(S("chat gpt-4o", 1, attrs={**LLM, "taskcost.call.id": "c-1"})))
    assert batch.tasks == [] and [c.task_id for c in batch.llm_calls] == [f"trace:{trace_hex(1)}"]


def test_implicit_tasks_can_be_turned_off() -> None:
    batch = normalize_request(request(S("chat", 1, attrs=LLM)), NormalizeRules(implicit_tasks=False))
    assert batch.tasks == [] and len(batch.llm_calls) == 1


@pytest.mark.parametrize(
    ("attrs", "status_error", "outcome"),
    [
        ({"taskcost.task.outcome": "abandoned"}, False, "abandoned"),
        ({"taskcost.task.outcome": "abandoned", "agent.result": "success"}, True, "abandoned"),  # explicit wins
        ({"agent.result": "success"}, True, "completed"),  # the configured attribute beats the status
        ({"agent.result": "GAVE_UP"}, False, "abandoned"),  # values compared lower-case
        ({"agent.result": "error"}, False, "failed"),
        ({"agent.result": "something else"}, True, "failed"),  # unmapped: the status decides
        ({"agent.result": "something else"}, False, "completed"),
        ({"taskcost.task.outcome": "not-an-outcome"}, False, "completed"),
    ],
)
def test_outcome_rule(attrs: dict[str, Any], status_error: bool, outcome: str) -> None:
    rules = NormalizeRules(
        outcome_attribute="agent.result",
        outcome_values={"success": "completed", "gave_up": "abandoned", "error": "failed"},
    )
    root = S("agent", 1, attrs={"openinference.span.kind": "AGENT", **attrs}, error="x" if status_error else None)
    [task] = normalize_request(request(root), rules).tasks
    assert task.outcome == outcome


def test_boolean_outcome_attribute() -> None:
    rules = NormalizeRules(outcome_attribute="task.succeeded", outcome_values={"true": "completed", "false": "failed"})
    root = S("agent", 1, attrs={"gen_ai.operation.name": "invoke_agent", "task.succeeded": False})
    assert normalize_request(request(root), rules).tasks[0].outcome == "failed"


def test_the_outcome_rule_applies_to_sdk_task_spans_too() -> None:
    rules = NormalizeRules(outcome_attribute="agent.result", outcome_values={"gave_up": "abandoned"})
    root = S("task k", 1, attrs={"taskcost.task.kind": "k", "agent.result": "gave_up"})
    assert normalize_request(request(root), rules).tasks[0].outcome == "abandoned"


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="must be one of"):
        NormalizeRules(outcome_attribute="a", outcome_values={"x": "done"})
    with pytest.raises(ValueError, match="outcome_attribute is not"):
        NormalizeRules(outcome_values={"x": "completed"})
    assert NormalizeRules.build() == NormalizeRules()
    built = NormalizeRules.build(
        task_id_attributes=["user.id"], outcome_attribute="r", outcome_values={"ok": "completed"}
    )
    assert built.task_id_attributes == ("user.id",) and built.outcome_from("OK") == "completed"


def test_foreign_traces_give_cost_per_completed_task_in_the_store(store: DuckDBStore) -> None:
    """Two OpenInference agent runs in one session-less service: one completed, one failed; each a task."""
    spans = []
    for trace, error in ((1, None), (2, "agent crashed")):
        spans += [
            S(
                "agent",
                10 * trace,
                trace=trace,
                attrs={"openinference.span.kind": "AGENT", "agent.name": "reviewer"},
                error=error,
            ),
            S(
                "ChatCompletion",
                10 * trace + 1,
                trace=trace,
                parent=10 * trace,
                scope="openinference.instrumentation.openai",
                attrs={
                    "openinference.span.kind": "LLM",
                    "llm.provider": "openai",
                    "llm.model_name": "gpt-4o",
                    "llm.token_count.prompt": 1000,
                    "llm.token_count.completion": 100,
                },
            ),
        ]
    store.write(prepare_batch(normalize_request(request(*spans)), time.time_ns()))
    rows = store.query("SELECT task_id, kind, outcome, llm_calls, cost_usd FROM tasks ORDER BY task_id").dicts()
    assert [(r["kind"], r["outcome"], r["llm_calls"]) for r in rows] == [
        ("reviewer", "completed", 1),
        ("reviewer", "failed", 1),
    ]
    assert all(r["cost_usd"] is not None and r["cost_usd"] > 0 for r in rows)
