"""Agent-level retries: the harness calls again after a bad answer (``t.retry(...)``, ``retry_of=``)."""

from __future__ import annotations

import asyncio

import openai
import pytest

import taskcost_sdk as tc
from taskcost_sdk.testing import CapturedSpans
from tests.fake_llm import FakeLLM, Fault

MESSAGES = [{"role": "user", "content": "Answer in JSON."}]


@pytest.mark.usefixtures("instrumented")
def test_retry_block_continues_the_last_call(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    c = openai.OpenAI(base_url=llm.openai_url, api_key="k")
    llm.script(Fault(429))  # the first answer needs a client retry: attempts 1 and 2
    with tc.task("extract") as t:
        c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        first = t.last_call
        assert first is not None and first.attempt == 2
        with t.retry(reason="invalid_json"):  # the answer was not JSON: ask again
            c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        with tc.retry(reason="invalid_json"):  # and once more, through the module-level helper
            c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        c.chat.completions.create(model="gpt-4o", messages=MESSAGES)  # outside: a new call
    calls = taskcost_spans.attributes("chat ")
    assert [(a["taskcost.call.id"] == first.call_id, a["taskcost.call.attempt"]) for a in calls] == [
        (True, 1),
        (True, 2),
        (True, 3),
        (True, 4),
        (False, 1),
    ]
    assert [a.get("taskcost.call.retry_reason") for a in calls] == [None, None, "invalid_json", "invalid_json", None]


def test_retry_of_a_manual_call_and_a_ref(taskcost_spans: CapturedSpans) -> None:
    with tc.task("extract") as t:
        with t.llm_call("anthropic", "claude-sonnet-4-5") as first:
            first.set_error("invalid_json")
        with t.retry(first, reason="invalid_json"), t.llm_call("anthropic", "claude-sonnet-4-5") as second:
            pass
        ref = tc.last_call()
        assert ref == tc.CallRef(first.call_id, 2)
        third = t.record_llm_call("anthropic", "claude-sonnet-4-5", retry_of=ref, input_tokens=1, output_tokens=1)
        with t.llm_call("anthropic", "claude-sonnet-4-5", retry_of=first) as fourth:  # stale handle: still unique
            pass
    assert (second.call_id, second.attempt) == (first.call_id, 2)
    assert (third.call_id, third.attempt) == (first.call_id, 3)
    assert (fourth.call_id, fourth.attempt) == (first.call_id, 4)
    reasons = [a.get("taskcost.call.retry_reason") for a in taskcost_spans.attributes("chat ")]
    assert reasons == [None, "invalid_json", None, None]


def test_retry_without_an_earlier_call_starts_a_new_one(taskcost_spans: CapturedSpans) -> None:
    with tc.retry(reason="why not"), tc.llm_call("openai", "gpt-4o") as c:
        pass
    assert c.attempt == 1
    with tc.task("t") as t, t.retry(), t.llm_call("openai", "gpt-4o") as d:
        pass
    assert d.attempt == 1 and d.call_id != c.call_id


def test_retry_of_nonsense_is_ignored(taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "0")
    with tc.task("t") as t, t.retry("not a call"), t.llm_call("openai", "gpt-4o") as c:  # type: ignore[arg-type]
        pass
    assert c.attempt == 1


def test_async_retry_scope(taskcost_spans: CapturedSpans) -> None:
    async def agent() -> tuple[tc.LLMCall, tc.LLMCall]:
        async with tc.task("t") as t:
            async with t.llm_call("openai", "gpt-4o") as first:
                pass
            async with t.retry(), t.llm_call("openai", "gpt-4o") as second:
                pass
        return first, second

    first, second = asyncio.run(agent())
    assert (second.call_id, second.attempt) == (first.call_id, 2)
