"""Prompt-prefix fingerprints and the cache-breaker lint, through the real anthropic and openai clients."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

import taskcost_sdk as tc
from taskcost_sdk._internal.fingerprint import PromptBlocks
from taskcost_sdk.testing import CapturedSpans
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.usefixtures("instrumented")

SYSTEM = "You are a meticulous code reviewer. Point out bugs, then style."
TIMES = ["2025-03-01T09:00:00Z", "2025-03-01T09:00:07Z", "2025-03-01T09:00:19Z"]


def _agent_loop(llm: FakeLLM, *, timestamp_first: bool) -> None:
    """Three turns of one task; the conversation grows by one exchange per turn."""
    c = anthropic.Anthropic(base_url=llm.anthropic_url, api_key="k")
    messages: list[dict[str, Any]] = []
    with tc.task("code_review"):
        for turn, now in enumerate(TIMES):
            if timestamp_first:
                system, question = f"Now: {now}. {SYSTEM}", f"Review part {turn}."
            else:
                system, question = SYSTEM, f"Review part {turn}. (asked at {now})"
            messages.append({"role": "user", "content": question})
            reply = c.messages.create(model="claude-sonnet-4-5", max_tokens=256, system=system, messages=messages)
            messages.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]


def test_timestamp_at_the_front_is_flagged_and_breaks_the_prefix(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    _agent_loop(llm, timestamp_first=True)
    calls = taskcost_spans.attributes("chat ")
    assert [a["taskcost.prompt.cache_breakers"] for a in calls] == [("timestamp@0:5",)] * 3  # block 0, char 5
    assert [a["taskcost.prompt.block_kinds"][0] for a in calls] == ["system"] * 3
    assert "taskcost.prompt.stable_prefix_blocks" not in calls[0]  # nothing to compare the first call with
    assert [a["taskcost.prompt.prefix_break_block"] for a in calls[1:]] == [0, 0]  # broke at the system prompt
    assert [a["taskcost.prompt.stable_prefix_blocks"] for a in calls[1:]] == [0, 0]
    assert [a["taskcost.prompt.stable_prefix_chars"] for a in calls[1:]] == [0, 0]


def test_timestamp_at_the_end_keeps_the_prefix(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    _agent_loop(llm, timestamp_first=False)
    calls = taskcost_spans.attributes("chat ")
    assert not [a for a in calls if "taskcost.prompt.cache_breakers" in a]
    assert not [a for a in calls if "taskcost.prompt.prefix_break_block" in a]
    # Each call extends the previous prompt: all of the previous call's blocks are a stable prefix.
    assert [len(a["taskcost.prompt.block_hashes"]) for a in calls] == [2, 4, 6]
    assert [a["taskcost.prompt.stable_prefix_blocks"] for a in calls[1:]] == [2, 4]
    assert [a["taskcost.prompt.stable_prefix_chars"] for a in calls[1:]] == [
        sum(calls[0]["taskcost.prompt.block_chars"]),
        sum(calls[1]["taskcost.prompt.block_chars"]),
    ]
    assert calls[1]["taskcost.prompt.block_hashes"][:2] == calls[0]["taskcost.prompt.block_hashes"]


def test_prompt_content_never_leaves_the_process(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    _agent_loop(llm, timestamp_first=True)
    for span in taskcost_spans.spans():
        for value in (span.attributes or {}).values():
            texts = value if isinstance(value, tuple) else (value,)
            assert not [t for t in texts if isinstance(t, str) and ("meticulous" in t or "part" in t or "2025" in t)]


def test_moving_cache_control_markers_is_not_a_change(taskcost_spans: CapturedSpans) -> None:
    def prompt(marked: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for i in range(3):
            block: dict[str, Any] = {"type": "text", "text": f"message {i}"}
            if i == marked:
                block["cache_control"] = {"type": "ephemeral"}
            messages.append({"role": "user", "content": [block]})
        return messages

    with tc.task("t") as t:
        for marked in (0, 2):
            with t.llm_call("anthropic", "claude-sonnet-4-5") as c:
                c.set_prompt(prompt(marked), system=[{"type": "text", "text": SYSTEM, "cache_control": {}}])
    first, second = taskcost_spans.attributes("chat ")
    assert first["taskcost.prompt.block_hashes"] == second["taskcost.prompt.block_hashes"]
    assert second["taskcost.prompt.stable_prefix_blocks"] == 4


@pytest.mark.parametrize(
    ("kind", "token"),
    [
        ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
        ("random_id", "req_8fJ3kLm2Qz9xT4vB7nW1"),
        ("random_id", "9f86d081884c7d659a2feaa0c55ad015"),
        ("epoch", "1740819600"),
        ("date", "2025-03-01"),
        ("clock", "09:00:07"),
    ],
)
def test_lint_finds_volatile_content_in_tools_and_system(kind: str, token: str) -> None:
    text = f"Context for this session: {token}. Be brief."
    tools = [{"name": "search", "description": text, "input_schema": {"type": "object"}}]
    _, in_tools = PromptBlocks.from_parts(tools=tools, messages=[{"role": "user", "content": "hi"}]).fingerprint()
    _, in_system = PromptBlocks.from_parts(tools=tools[:0], system=text).fingerprint()
    _, in_user = PromptBlocks.from_parts(messages=[{"role": "user", "content": text}]).fingerprint()
    assert [f.split("@")[0] for f in in_tools] == [kind]
    assert in_system == [f"{kind}@0:{text.index(token)}"]
    assert in_user == []  # volatile content at the end of the prompt is fine


def test_lint_stays_quiet_on_a_stable_prompt() -> None:
    system = "You are a reviewer for release v2.3.1 of project 42. Use at most 300 words. Version 1.2.3-rc1."
    tools = [{"name": "grep_files", "description": "grep"}]
    _, findings = PromptBlocks.from_parts(system=system, tools=tools).fingerprint()
    assert findings == []


def test_fingerprints_can_be_turned_off(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    tc.instrument(fingerprint=False)
    openai.OpenAI(base_url=llm.openai_url, api_key="k").chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    )
    [attrs] = taskcost_spans.attributes("chat ")
    assert not [k for k in attrs if k.startswith("taskcost.prompt.")]
