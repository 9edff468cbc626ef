"""Auto-instrumentation of the real ``anthropic`` client, and its own OpenTelemetry span (one call, one cost)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import anthropic
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import taskcost_sdk as tc
from taskcost_sdk.testing import CapturedSpans
from tests.fake_llm import FakeLLM, Fault, Reply

pytestmark = pytest.mark.usefixtures("instrumented")

# Anthropic's wire usage: input_tokens EXCLUDES cache reads and writes.
USAGE = {"input_tokens": 1_000, "cache_read_input_tokens": 6_000, "cache_creation_input_tokens": 2_000}
USAGE |= {"output_tokens": 700}
MESSAGES = [{"role": "user", "content": "Fix the failing test."}]


def client(llm: FakeLLM, **kwargs: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=llm.anthropic_url, api_key="test-key", **kwargs)  # type: ignore[arg-type]


def _ask(c: anthropic.Anthropic) -> anthropic.types.Message:
    return c.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system="You fix bugs.", messages=MESSAGES)


@pytest.fixture
def global_provider() -> Iterator[None]:
    """Let a test install a global TracerProvider, and take it away again afterwards."""
    yield
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


def test_message_usage_is_inclusive_of_cache(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=USAGE, model="claude-sonnet-4-5-20250929", response_id="msg_01"))
    with tc.task("bug_fix", "t-9"):
        message = _ask(client(llm))
    assert message.usage.input_tokens == 1_000  # what the application sees is untouched
    [attrs] = taskcost_spans.attributes("chat ")
    attrs.pop("taskcost.prompt.block_hashes")
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.response.id": "msg_01",
        "gen_ai.response.finish_reasons": ("end_turn",),
        "gen_ai.usage.input_tokens": 9_000,  # 1,000 + 6,000 read + 2,000 written
        "gen_ai.usage.cache_read.input_tokens": 6_000,
        "gen_ai.usage.cache_creation.input_tokens": 2_000,
        "gen_ai.usage.output_tokens": 700,
        "http.response.status_code": 200,
        "server.address": "127.0.0.1",
        "server.port": llm.port,
        "taskcost.call.id": attrs["taskcost.call.id"],
        "taskcost.call.attempt": 1,
        "taskcost.task.id": "t-9",
        "taskcost.prompt.block_kinds": ("system", "user"),
        "taskcost.prompt.block_chars": (len("You fix bugs."), len('{"content":"Fix the failing test.","role":"user"}')),
    }


def test_stream_and_time_to_first_token(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    taskcost_spans.use_real_clock()
    llm.script(Reply(usage=USAGE, first_token_delay=0.3), Reply(usage=USAGE, first_token_delay=0.0))
    c = client(llm)
    raw = c.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES, stream=True)
    kinds = [event.type for event in raw]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
    assert text == "Hello there, agent."
    slow, fast = taskcost_spans.attributes("chat ")
    for attrs in (slow, fast):
        assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (9_000, 700)
        assert attrs["gen_ai.request.stream"] is True
    # the first token's delay is in it, and it is not the whole stream; bounds wide enough for a loaded 2-core machine
    # (a thread can wait half a second there), not a timing check
    assert 0.3 <= slow["gen_ai.response.time_to_first_chunk"] < 0.3 + 2.0
    assert fast["gen_ai.response.time_to_first_chunk"] < slow["gen_ai.response.time_to_first_chunk"]


def test_stream_cut_before_message_delta_has_no_output_count(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=USAGE))
    raw = client(llm).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES, stream=True)
    for event in raw:
        if event.type == "content_block_delta":
            break
    raw.close()
    [attrs] = taskcost_spans.attributes("chat ")
    assert attrs["gen_ai.usage.input_tokens"] == 9_000  # billed, and known from message_start
    assert "gen_ai.usage.output_tokens" not in attrs  # message_start's placeholder is not a count


def test_stream_broken_mid_way_keeps_what_was_billed(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Reply(usage=USAGE, cut_after=4))  # message_start, block start, ping, one delta -- then gone
    texts: list[str] = []
    streaming = client(llm).messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES)
    with pytest.raises(Exception) as caught, streaming as stream:  # noqa: B017 - whatever the client raises
        texts.extend(stream.text_stream)
    assert type(caught.value).__name__ == "RemoteProtocolError" and type(caught.value).__module__ == "httpx2"
    assert texts == ["Hello t"]
    [span] = taskcost_spans.spans("chat ")
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "RemoteProtocolError"
    assert attrs["gen_ai.usage.input_tokens"] == 9_000  # the input was processed (and billed): kept
    assert "gen_ai.usage.output_tokens" not in attrs


def test_async_client_and_overload_retry(taskcost_spans: CapturedSpans, llm: FakeLLM) -> None:
    llm.script(Fault(529), Reply(usage=USAGE), Reply(usage=USAGE))

    async def agent() -> str:
        async with tc.task("bug_fix"):
            c = anthropic.AsyncAnthropic(base_url=llm.anthropic_url, api_key="k")
            await c.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES)
            async with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES) as stream:
                return "".join([piece async for piece in stream.text_stream])

    assert asyncio.run(agent()) == "Hello there, agent."
    calls = taskcost_spans.attributes("chat ")
    assert [(c["taskcost.call.attempt"], c["http.response.status_code"]) for c in calls] == [
        (1, 529),
        (2, 200),
        (1, 200),
    ]
    assert calls[0]["taskcost.call.id"] == calls[1]["taskcost.call.id"] != calls[2]["taskcost.call.id"]
    assert [c.get("gen_ai.usage.input_tokens") for c in calls] == [None, 9_000, 9_000]


def test_clients_own_span_is_not_a_second_call_when_the_sdk_is_global(
    taskcost_spans: CapturedSpans, llm: FakeLLM, global_provider: None
) -> None:
    taskcost_spans.configure(set_global=True)  # now the anthropic client emits its own span, into our pipeline
    llm.script(Fault(429), Reply(usage=USAGE), Reply(usage=USAGE))
    with tc.task("bug_fix"):
        c = client(llm)
        _ask(c)
        with c.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=MESSAGES) as stream:
            stream.until_done()
    spans = taskcost_spans.spans()
    assert {s.instrumentation_scope.name for s in spans if s.instrumentation_scope} == {"taskcost_sdk"}
    assert [s.attributes["taskcost.call.attempt"] for s in spans if s.name.startswith("chat")] == [1, 2, 1]
    costed = [s for s in spans if (s.attributes or {}).get("gen_ai.usage.input_tokens")]
    assert len(costed) == 2  # two provider answers, two costed attempts
    assert tc.export_stats().duplicates_suppressed == 2  # the client's own span of each call


def test_clients_own_span_in_the_users_pipeline_is_marked(
    taskcost_spans: CapturedSpans, llm: FakeLLM, global_provider: None
) -> None:
    theirs = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    trace.set_tracer_provider(provider)  # the application's own OpenTelemetry set-up, beside ours
    llm.script(Reply(usage=USAGE))
    with trace.get_tracer("app").start_as_current_span("handle request") as outer, tc.task("bug_fix"):
        _ask(client(llm))
    [native] = [s for s in theirs.get_finished_spans() if s.name == "anthropic.messages.create"]
    [ours] = taskcost_spans.spans("chat ")
    attrs = dict(native.attributes or {})
    assert attrs["gen_ai.usage.input_tokens"] == 9_000  # the client's span carries the same usage ...
    assert attrs["taskcost.call.duplicate_of"] == (ours.attributes or {})["taskcost.call.id"]  # ... and says so
    assert ours.context.trace_id == outer.get_span_context().trace_id  # one trace, two pipelines
    assert [s.name for s in theirs.get_finished_spans()] == ["anthropic.messages.create", "handle request"]


def test_native_spans_stay_when_anthropic_is_not_instrumented(
    taskcost_spans: CapturedSpans, llm: FakeLLM, global_provider: None
) -> None:
    tc.uninstrument()
    taskcost_spans.configure(set_global=True)
    llm.script(Reply(usage=USAGE))
    _ask(client(llm))
    [native] = taskcost_spans.spans()
    assert native.name == "anthropic.messages.create"  # without our hooks it is the only record: kept
    assert "taskcost.call.duplicate_of" not in (native.attributes or {})
