"""Auto-instrumentation of the real ``openai`` client, driven against a real local HTTP server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest
from opentelemetry.trace import SpanKind, StatusCode

import taskcost_sdk as tc
from taskcost_sdk.testing import CapturedSpans
from tests.fake_llm import Drop, FakeLLM, Fault, Reply, Stall

pytestmark = pytest.mark.usefixtures("instrumented")

CHAT_USAGE = {
    "prompt_tokens": 12_000,
    "completion_tokens": 600,
    "total_tokens": 12_600,
    "prompt_tokens_details": {"cached_tokens": 8_000},
    "completion_tokens_details": {"reasoning_tokens": 200},
}
MESSAGES = [{"role": "system", "content": "You review code."}, {"role": "user", "content": "Review this diff."}]


def client(llm: FakeLLM, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.openai_url, api_key="test-key", **kwargs)


def test_chat_completion_recorded_exactly(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=CHAT_USAGE, model="gpt-4o-2024-08-06", response_id="chatcmpl-42"))
    with tc.task("code_review", "t-1"):
        answer = client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert answer.choices[0].message.content == "Hello there, agent."  # the application's result, untouched
    [span] = taskcost_spans.spans("chat ")
    assert (span.name, span.kind, span.status.status_code) == ("chat gpt-4o", SpanKind.CLIENT, StatusCode.UNSET)
    attrs = dict(span.attributes or {})
    hashes = attrs.pop("taskcost.prompt.block_hashes")
    assert len(hashes) == 2 and all(len(h) == 16 for h in hashes)
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-42",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 12_000,
        "gen_ai.usage.output_tokens": 600,
        "gen_ai.usage.cache_read.input_tokens": 8_000,
        "gen_ai.usage.reasoning.output_tokens": 200,
        "http.response.status_code": 200,
        "server.address": "127.0.0.1",
        "server.port": llm.port,
        "taskcost.call.id": attrs["taskcost.call.id"],
        "taskcost.call.attempt": 1,
        "taskcost.task.id": "t-1",
        "taskcost.prompt.block_kinds": ("system", "user"),
        "taskcost.prompt.block_chars": tuple(
            len(json.dumps(m, sort_keys=True, separators=(",", ":"))) for m in MESSAGES
        ),
    }
    task_span = taskcost_spans.spans("task ")[0]
    assert span.parent is not None and span.parent.span_id == task_span.context.span_id


def test_client_retries_are_attempts_of_one_call(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Fault(429), Fault(500), Reply(usage=CHAT_USAGE))
    with tc.task("code_review"):
        answer = client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert answer.usage is not None and answer.usage.prompt_tokens == 12_000
    assert [r.headers["x-stainless-retry-count"] for r in llm.requests("/chat/completions")] == ["0", "1", "2"]
    spans = taskcost_spans.spans("chat ")
    calls = [dict(s.attributes or {}) for s in spans]
    assert len({c["taskcost.call.id"] for c in calls}) == 1
    assert [c["taskcost.call.attempt"] for c in calls] == [1, 2, 3]
    assert [c["http.response.status_code"] for c in calls] == [429, 500, 200]
    assert [c.get("error.type") for c in calls] == ["429", "500", None]
    assert [c.get("http.request.resend_count") for c in calls] == [None, 1, 2]
    assert [s.status.status_code for s in spans] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    assert [c.get("gen_ai.usage.input_tokens") for c in calls] == [None, None, 12_000]  # failures are not billed
    assert spans[0].end_time is not None and spans[1].start_time >= spans[0].end_time


def test_exhausted_retries_raise_the_clients_own_error(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Fault(429), Fault(429))
    with pytest.raises(openai.RateLimitError) as caught, tc.task("code_review"):
        client(llm, max_retries=1).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.status_code == 429
    calls = taskcost_spans.attributes("chat ")
    assert [(c["taskcost.call.attempt"], c["error.type"]) for c in calls] == [(1, "429"), (2, "429")]
    [task] = taskcost_spans.attributes("task ")
    assert (task["taskcost.task.outcome"], task["error.type"]) == ("failed", "RateLimitError")


def test_dropped_connection_is_a_failed_attempt(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Drop(), Reply())
    client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    first, second = taskcost_spans.attributes("chat ")
    assert first["error.type"] == "RemoteProtocolError" and "http.response.status_code" not in first
    assert (second["taskcost.call.attempt"], second["http.response.status_code"]) == (2, 200)
    assert first["taskcost.call.id"] == second["taskcost.call.id"]


def test_timed_out_attempt_is_a_failed_attempt(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Stall(0.5), Reply())
    client(llm, timeout=0.15).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    first, second = taskcost_spans.attributes("chat ")
    assert (first["taskcost.call.attempt"], first["error.type"]) == (1, "ReadTimeout")
    assert (second["taskcost.call.attempt"], second["http.response.status_code"]) == (2, 200)


def test_stream_asks_for_usage_and_hides_the_extra_chunk(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    taskcost_spans.use_real_clock()
    llm.script(Reply(usage=CHAT_USAGE, first_token_delay=0.25, chunks=4))
    stream = client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
    chunks = list(stream)
    [request] = llm.requests("/chat/completions")
    assert request.body["stream_options"] == {"include_usage": True}
    assert all(chunk.choices for chunk in chunks)  # the usage-only chunk the SDK asked for is not shown
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello there, agent."
    [attrs] = taskcost_spans.attributes("chat ")
    assert attrs["gen_ai.request.stream"] is True
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.cache_read.input_tokens"]) == (12_000, 8_000)
    assert attrs["gen_ai.usage.output_tokens"] == 600
    # the first token's delay is in it; the upper bound is wide enough for a loaded 2-core machine (not a timing check)
    assert 0.25 <= attrs["gen_ai.response.time_to_first_chunk"] < 0.25 + 2.0


def test_stream_with_usage_asked_by_the_caller_is_unchanged(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=CHAT_USAGE))
    options = {"include_usage": True}
    stream = client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True, stream_options=options)
    chunks = list(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # the caller asked: the caller gets it
    assert taskcost_spans.attributes("chat ")[0]["gen_ai.usage.input_tokens"] == 12_000


def test_stream_helper(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=CHAT_USAGE))
    with client(llm).chat.completions.stream(model="gpt-4o", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "Hello there, agent."
    [attrs] = taskcost_spans.attributes("chat ")
    assert attrs["gen_ai.usage.output_tokens"] == 600
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)


def test_stream_left_early_still_ends_its_span(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    stream = client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
    next(iter(stream))
    assert taskcost_spans.spans("chat ") == []  # still streaming
    stream.close()
    [attrs] = taskcost_spans.attributes("chat ")
    assert "gen_ai.usage.input_tokens" not in attrs  # the usage chunk never came: not invented
    assert "error.type" not in attrs and attrs["gen_ai.response.id"] == "chatcmpl_1"


RESPONSES_USAGE = {
    "input_tokens": 3_000,
    "input_tokens_details": {"cached_tokens": 1_024},
    "output_tokens": 500,
    "output_tokens_details": {"reasoning_tokens": 300},
    "total_tokens": 3_500,
}


def test_responses_api(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    taskcost_spans.use_real_clock()
    llm.script(Reply(usage=RESPONSES_USAGE), Reply(usage=RESPONSES_USAGE, first_token_delay=0.2))
    c = client(llm)
    response = c.responses.create(model="o4-mini", instructions="Be brief.", input="Summarise the incident.")
    assert response.output_text == "Hello there, agent."
    events = [e.type for e in c.responses.create(model="o4-mini", input="again", stream=True)]
    assert events[-1] == "response.completed"
    plain, streamed = taskcost_spans.attributes("chat ")
    for attrs in (plain, streamed):
        assert attrs["gen_ai.usage.input_tokens"] == 3_000
        assert attrs["gen_ai.usage.cache_read.input_tokens"] == 1_024
        assert (attrs["gen_ai.usage.output_tokens"], attrs["gen_ai.usage.reasoning.output_tokens"]) == (500, 300)
        assert attrs["gen_ai.response.finish_reasons"] == ("completed",)
    assert plain["taskcost.prompt.block_kinds"] == ("system", "user")
    assert "gen_ai.response.time_to_first_chunk" not in plain
    assert 0.2 <= streamed["gen_ai.response.time_to_first_chunk"] < 0.4


def test_async_client(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Fault(503), Reply(usage=CHAT_USAGE), Reply(usage=RESPONSES_USAGE))

    async def agent() -> list[str]:
        async with tc.task("report"):
            c = openai.AsyncOpenAI(base_url=llm.openai_url, api_key="k")
            stream = await c.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
            pieces = [chunk.choices[0].delta.content or "" async for chunk in stream]
            await c.responses.create(model="gpt-4o", input="hi")
            return pieces

    assert "".join(asyncio.run(agent())) == "Hello there, agent."
    calls = taskcost_spans.attributes("chat ")
    assert [(c["taskcost.call.attempt"], c["http.response.status_code"]) for c in calls] == [
        (1, 503),
        (2, 200),
        (1, 200),
    ]
    assert [c.get("gen_ai.usage.input_tokens") for c in calls] == [None, 12_000, 3_000]
    assert len({c["taskcost.task.id"] for c in calls}) == 1


def test_raw_response(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=CHAT_USAGE))
    raw = client(llm).chat.completions.with_raw_response.create(model="gpt-4o", messages=MESSAGES)
    assert raw.parse().usage is not None
    assert taskcost_spans.attributes("chat ")[0]["gen_ai.usage.cache_read.input_tokens"] == 8_000


def test_traceparent_names_each_attempt_span(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Fault(500), Reply())
    with tc.task("report"):
        client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    headers = [r.headers["traceparent"] for r in llm.requests("/chat/completions")]
    spans = taskcost_spans.spans("chat ")
    expected = [f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-" for s in spans]
    assert [h[:-2] for h in headers] == expected
    assert len({s.context.trace_id for s in taskcost_spans.spans()}) == 1  # the task's trace


def test_caller_traceparent_wins(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES, extra_headers={"traceparent": mine})
    assert llm.requests()[0].headers["traceparent"] == mine


def test_infra_profiles_by_base_url(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    vllm = {"provider": "vllm", "engine": "vllm", "engine_version": "0.11.0", "quantization": "fp8"}
    vllm |= {"gpu_type": "H100-SXM", "gpu_count": 8, "cluster_id": "c1", "deployment": "self_hosted"}
    taskcost_spans.configure(infra_profiles={llm.openai_url: vllm, "https://api.openai.com/v1": {"deployment": "api"}})
    self_hosted = client(llm)
    other_host = openai.OpenAI(base_url=f"http://localhost:{llm.port}/v1", api_key="k")
    self_hosted.chat.completions.create(model="llama-3.1-70b", messages=MESSAGES)
    other_host.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    tagged, untagged = taskcost_spans.attributes("chat ")
    assert (
        tagged.items()
        >= {
            "gen_ai.provider.name": "vllm",
            "taskcost.engine.name": "vllm",
            "taskcost.engine.version": "0.11.0",
            "taskcost.quantization": "fp8",
            "taskcost.gpu.type": "H100-SXM",
            "taskcost.gpu.count": 8,
            "taskcost.cluster.id": "c1",
            "taskcost.deployment": "self_hosted",
            "server.address": "127.0.0.1",
        }.items()
    )
    assert untagged["gen_ai.provider.name"] == "openai" and untagged["server.address"] == "localhost"
    assert not [k for k in untagged if k.startswith(("taskcost.engine", "taskcost.gpu", "taskcost.deployment"))]


def test_infra_profiles_from_env(taskcost_spans: CapturedSpans, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = {f"http://127.0.0.1:{llm.port}": {"engine": "sglang", "deployment": "self_hosted"}}
    monkeypatch.setenv("TASKCOST_INFRA_PROFILES", json.dumps(profiles))
    taskcost_spans.configure()
    client(llm).chat.completions.create(model="qwen3", messages=MESSAGES)
    [attrs] = taskcost_spans.attributes("chat ")
    assert (attrs["taskcost.engine.name"], attrs["taskcost.deployment"]) == ("sglang", "self_hosted")


@pytest.mark.parametrize(
    ("profiles", "match"),
    [
        ({"http://vllm:8000": {"deployment": "on_prem"}}, "deployment"),
        ({"vllm:8000": {"engine": "vllm"}}, "http"),
        ({"http://vllm:8000": {"gpus": 8}}, "unknown infra tag"),
    ],
)
def test_bad_infra_profile_fails_at_configure(profiles: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tc.configure(infra_profiles=profiles)


def test_unconfigured_sdk_leaves_requests_alone(llm: FakeLLM) -> None:
    list(client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True))
    [request] = llm.requests()
    assert "stream_options" not in request.body and "traceparent" not in request.headers


def test_only_instrumented_clients_are_recorded(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    tc.uninstrument()
    mine, theirs = client(llm), client(llm)
    assert tc.instrument(mine) == ["openai client"]
    mine.chat.completions.create(model="mine", messages=MESSAGES)
    mine.with_options(timeout=5).chat.completions.create(model="mine-copy", messages=MESSAGES)
    theirs.chat.completions.create(model="theirs", messages=MESSAGES)
    assert [a["gen_ai.request.model"] for a in taskcost_spans.attributes("chat ")] == ["mine", "mine-copy"]


def test_instrument_rejects_what_it_cannot_hook() -> None:
    with pytest.raises(ValueError, match="cohere"):
        tc.instrument("cohere")
    with pytest.raises(TypeError, match="not an openai or anthropic client"):
        tc.instrument(object())


def test_uninstrument_restores_the_client(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    from openai._base_client import AsyncAPIClient, SyncAPIClient

    assert hasattr(SyncAPIClient.request, "__taskcost_original__")
    tc.uninstrument()
    for owner in (SyncAPIClient, AsyncAPIClient):
        for name in ("request", "_send_request"):
            assert not hasattr(owner.__dict__[name], "__taskcost_original__")
    client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert taskcost_spans.spans() == []


def test_inside_an_llm_call_block_the_call_is_recorded_once(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Fault(429), Reply(usage=CHAT_USAGE))
    with tc.task("code_review") as t, t.llm_call("openai", "gpt-4o") as c:
        answer = client(llm).chat.completions.create(model="gpt-4o", messages=MESSAGES)
        u = answer.usage
        assert u is not None and u.prompt_tokens_details is not None
        # Pre-existing manual recording of the same numbers stays correct (idempotent).
        c.set_usage(input_tokens=u.prompt_tokens, output_tokens=u.completion_tokens)
        c.set_error("invalid_json")  # the harness judged the answer
    failed, block = taskcost_spans.spans("chat ")
    assert block.context.span_id == c.span.get_span_context().span_id
    assert (failed.attributes or {})["error.type"] == "429"
    assert failed.parent is not None and failed.parent.span_id == block.context.span_id
    attrs = dict(block.attributes or {})
    assert (attrs["taskcost.call.attempt"], c.attempt) == (2, 2)
    assert attrs["gen_ai.usage.input_tokens"] == 12_000 and attrs["gen_ai.usage.cache_read.input_tokens"] == 8_000
    assert attrs["error.type"] == "invalid_json"
    assert attrs["http.request.resend_count"] == 1
    with tc.task("next") as t2, t2.llm_call("openai", "gpt-4o", retry_of=c) as again:
        pass
    assert (again.call_id, again.attempt) == (c.call_id, 3)
