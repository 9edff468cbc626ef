from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import taskcost_sdk as tc
from taskcost_sdk.testing import CapturedSpans


class Boom(Exception):
    pass


def test_task_completed(taskcost_spans: CapturedSpans) -> None:
    with tc.task("bug_fix", "t-1", conversation_id="conv-1", agent_name="fixer", agent_version="v3") as t:
        assert (t.id, t.kind) == ("t-1", "bug_fix")
        assert tc.current_task() is t
    assert tc.current_task() is None
    [span] = taskcost_spans.spans()
    assert span.name == "task bug_fix"
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "taskcost.task.id": "t-1",
        "taskcost.task.kind": "bug_fix",
        "taskcost.task.outcome": "completed",
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.agent.name": "fixer",
        "gen_ai.agent.version": "v3",
    }


def test_task_default_id_is_uuid_hex(taskcost_spans: CapturedSpans) -> None:
    with tc.task("report") as t:
        pass
    assert len(t.id) == 32 and int(t.id, 16) >= 0
    [attrs] = taskcost_spans.attributes()
    assert attrs["taskcost.task.id"] == t.id


def test_exception_propagates_unchanged_and_marks_failed(taskcost_spans: CapturedSpans) -> None:
    error = Boom("no luck")
    with pytest.raises(Boom) as caught, tc.task("bug_fix"):
        raise error
    assert caught.value is error
    [span] = taskcost_spans.spans()
    assert span.attributes is not None
    assert span.attributes["taskcost.task.outcome"] == "failed"
    assert span.attributes["error.type"] == "Boom"
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


def test_exception_wins_over_set_outcome(taskcost_spans: CapturedSpans) -> None:
    with pytest.raises(Boom), tc.task("bug_fix") as t:
        t.set_outcome("abandoned")
        raise Boom
    [attrs] = taskcost_spans.attributes()
    assert attrs["taskcost.task.outcome"] == "failed"


@pytest.mark.parametrize("outcome", ["abandoned", "failed", "completed"])
def test_set_outcome(taskcost_spans: CapturedSpans, outcome: tc.Outcome) -> None:
    with tc.task("bug_fix") as t:
        t.set_outcome(outcome)
    [span] = taskcost_spans.spans()
    assert span.attributes is not None and span.attributes["taskcost.task.outcome"] == outcome
    expected = StatusCode.ERROR if outcome == "failed" else StatusCode.UNSET
    assert span.status.status_code is expected
    assert "error.type" not in span.attributes


def test_invalid_outcome_is_logged_and_ignored(taskcost_spans: CapturedSpans, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"), tc.task("bug_fix") as t:
        t.set_outcome("done")  # type: ignore[arg-type]
    [attrs] = taskcost_spans.attributes()
    assert attrs["taskcost.task.outcome"] == "completed"
    assert "invalid task outcome 'done'" in caplog.text


def test_async_task(taskcost_spans: CapturedSpans) -> None:
    async def agent() -> None:
        async with tc.task("report") as t:
            await asyncio.sleep(0)
            async with t.llm_call("openai", "gpt-4o") as c:
                await asyncio.sleep(0)
                c.set_usage(input_tokens=5, output_tokens=1)
            t.set_outcome("abandoned")

    asyncio.run(agent())
    task_attrs = taskcost_spans.attributes("task ")
    call_attrs = taskcost_spans.attributes("chat ")
    assert task_attrs[0]["taskcost.task.outcome"] == "abandoned"
    assert call_attrs[0]["taskcost.task.id"] == task_attrs[0]["taskcost.task.id"]


def test_async_task_failed(taskcost_spans: CapturedSpans) -> None:
    async def agent() -> None:
        async with tc.task("report"):
            await asyncio.sleep(0)
            raise Boom

    with pytest.raises(Boom):
        asyncio.run(agent())
    [attrs] = taskcost_spans.attributes()
    assert attrs["taskcost.task.outcome"] == "failed"
    assert attrs["error.type"] == "Boom"


def test_concurrent_async_tasks_keep_their_own_ids(taskcost_spans: CapturedSpans) -> None:
    async def one(kind: str) -> None:
        async with tc.task(kind) as t:
            await asyncio.sleep(0.01)
            async with tc.llm_call("openai", kind):
                assert tc.current_task() is t

    async def main() -> None:
        await asyncio.gather(one("a"), one("b"))

    asyncio.run(main())
    ids = {a["taskcost.task.kind"]: a["taskcost.task.id"] for a in taskcost_spans.attributes("task ")}
    for attrs in taskcost_spans.attributes("chat "):
        assert attrs["taskcost.task.id"] == ids[attrs["gen_ai.request.model"]]


def test_children_carry_task_id_and_parent(taskcost_spans: CapturedSpans) -> None:
    with tc.task("bug_fix", agent_name="fixer") as t:
        with t.llm_call("openai", "gpt-4o"):
            pass
        with tc.llm_call("openai", "gpt-4o-mini"):
            pass
        t.record_llm_call("openai", "gpt-4o", input_tokens=1, output_tokens=1)
        with t.tool("search"):
            pass
        with tc.tool("grep"):
            pass
    task_span = taskcost_spans.spans("task ")[0]
    children = [s for s in taskcost_spans.spans() if s is not task_span]
    assert len(children) == 5
    for child in children:
        assert child.attributes is not None and child.attributes["taskcost.task.id"] == t.id
        assert child.parent is not None and child.parent.span_id == task_span.context.span_id
    for call in taskcost_spans.spans("chat "):
        assert call.kind is SpanKind.CLIENT
        assert call.attributes is not None and call.attributes["gen_ai.agent.name"] == "fixer"


def test_task_used_from_another_thread_parents_to_task(taskcost_spans: CapturedSpans) -> None:
    def work(t: tc.Task) -> None:
        with t.llm_call("openai", "m"):
            pass

    with tc.task("bug_fix") as t:
        worker = threading.Thread(target=work, args=(t,))
        worker.start()
        worker.join()
    task_span = taskcost_spans.spans("task ")[0]
    [call] = taskcost_spans.spans("chat ")
    assert call.parent is not None and call.parent.span_id == task_span.context.span_id


def test_llm_call_without_task(taskcost_spans: CapturedSpans) -> None:
    with tc.llm_call("openai", "gpt-4o") as c:
        c.set_usage(input_tokens=1, output_tokens=2)
    [attrs] = taskcost_spans.attributes()
    assert "taskcost.task.id" not in attrs
    assert attrs["taskcost.call.id"] == c.call_id


def test_tool_span(taskcost_spans: CapturedSpans) -> None:
    with tc.task("bug_fix") as t:
        with t.tool("web_search", cost_usd=0.005):
            pass
        with t.tool("ocr") as tool:
            tool.set_cost("0.10")
        with pytest.raises(Boom), t.tool("flaky"):
            raise Boom
    spans = {s.name: s for s in taskcost_spans.spans("execute_tool ")}
    assert dict(spans["execute_tool web_search"].attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "web_search",
        "taskcost.task.id": t.id,
        "taskcost.tool.cost_usd": "0.005",
    }
    assert (spans["execute_tool ocr"].attributes or {})["taskcost.tool.cost_usd"] == "0.10"
    flaky = spans["execute_tool flaky"]
    assert (flaky.attributes or {})["error.type"] == "Boom"
    assert flaky.status.status_code is StatusCode.ERROR
