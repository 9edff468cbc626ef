"""The ``taskcost_spans`` fixture users get: in memory, deterministic ids and clock."""

from __future__ import annotations

import taskcost_sdk as tc
from taskcost_sdk.testing import CapturedSpans

JAN_1_2025_NS = 1_735_689_600_000_000_000


def _agent() -> None:
    with tc.task("report") as t:
        with t.llm_call("openai", "gpt-4o") as c:
            c.set_usage(input_tokens=10, output_tokens=2)
        with t.tool("search", cost_usd="0.01"):
            pass


def test_ids_and_times_are_deterministic(taskcost_spans: CapturedSpans) -> None:
    _agent()
    call, tool, task = taskcost_spans.spans()
    assert task.attributes is not None and task.attributes["taskcost.task.id"] == f"{1:032x}"
    assert call.attributes is not None and call.attributes["taskcost.call.id"] == f"{2:032x}"
    assert (task.context.trace_id, task.context.span_id) == (1, 1)
    assert [s.context.span_id for s in (call, tool)] == [2, 3]
    assert task.start_time == JAN_1_2025_NS
    assert [call.start_time, call.end_time] == [JAN_1_2025_NS + 1_000_000, JAN_1_2025_NS + 2_000_000]


def test_the_clock_can_jump(taskcost_spans: CapturedSpans) -> None:
    assert taskcost_spans.clock is not None
    with tc.llm_call("openai", "gpt-4o"):
        taskcost_spans.clock.advance(2.5)
    [span] = taskcost_spans.spans()
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == 2_501_000_000


def test_each_test_starts_from_the_same_ids(taskcost_spans: CapturedSpans) -> None:
    _agent()  # same as in the first test: nothing carried over
    assert taskcost_spans.attributes("task ")[0]["taskcost.task.id"] == f"{1:032x}"


def test_real_ids_and_clock_outside_the_fixture() -> None:
    with tc.task("report") as t:
        pass
    assert t.id != f"{1:032x}" and len(t.id) == 32
