"""Engine timings from responses (llama.cpp's ``timings``) and the topology / decoding tags.

The captures in ``data/`` are a real llama.cpp server's answers, served byte for byte by a local HTTP server to the
real ``openai`` client, through the SDK's client instrumentation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

import taskcost_sdk as tc
from taskcost_sdk._internal import usage
from taskcost_sdk._internal.config import build_resource
from taskcost_sdk.testing import CapturedSpans

DATA = Path(__file__).resolve().parent / "data"
CHAT = (DATA / "llama-server-chat.json").read_bytes()
STREAM = (DATA / "llama-server-chat-stream.sse").read_bytes()
SPECULATIVE = (DATA / "llama-server-chat-speculative.json").read_bytes()
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Name the colours of the rainbow."}]
ENGINE_PREFIXES = ("taskcost.engine.prefill", "taskcost.engine.decode", "taskcost.engine.cached", "taskcost.spec.")


@dataclass
class LlamaServer:
    """Serves fixed bodies by path prefix: ``/<name>/v1/chat/completions`` answers ``bodies[name]`` (JSON, or the
    SSE capture when the request streams)."""

    port: int = 0
    bodies: dict[str, bytes] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}/v1"


def _handler(server: LlamaServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            server.requests.append(body)
            name = self.path.strip("/").split("/", 1)[0]
            streamed = bool(body.get("stream"))
            payload = STREAM if streamed else server.bodies[name]
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if streamed else "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    state = LlamaServer(bodies={"chat": CHAT, "spec": SPECULATIVE})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def engine(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k.startswith(ENGINE_PREFIXES)}


def client(llama: LlamaServer, name: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=llama.url(name), api_key="k", max_retries=0)


CHAT_ENGINE = {
    "taskcost.engine.prefill_s": 118.733 / 1000,
    "taskcost.engine.decode_s": 148.868 / 1000,
    "taskcost.engine.prefill_tokens": 18,
    "taskcost.engine.cached_tokens": 5,
    "taskcost.engine.decode_tokens": 16,
}
SPECULATIVE_ENGINE = {
    "taskcost.engine.prefill_s": 62.715 / 1000,
    "taskcost.engine.decode_s": 735.093 / 1000,
    "taskcost.engine.prefill_tokens": 8,
    "taskcost.engine.cached_tokens": 35,
    "taskcost.engine.decode_tokens": 48,
    "taskcost.spec.draft_tokens": 41,
    "taskcost.spec.accepted_tokens": 41,
}
STREAM_ENGINE = {
    "taskcost.engine.prefill_s": 7.075 / 1000,
    "taskcost.engine.decode_s": 46.805 / 1000,
    "taskcost.engine.prefill_tokens": 1,
    "taskcost.engine.cached_tokens": 22,
    "taskcost.engine.decode_tokens": 8,
}


@pytest.mark.usefixtures("instrumented")
def test_sync_chat_and_stream_record_the_engines_timings(taskcost_spans: CapturedSpans, llama: LlamaServer) -> None:
    with tc.task("colours"):
        answer = client(llama, "chat").chat.completions.create(model="smollm2", messages=MESSAGES)
        stream = client(llama, "chat").chat.completions.create(model="smollm2", messages=MESSAGES, stream=True)
        chunks = list(stream)
        raw = client(llama, "spec").chat.completions.with_raw_response.create(model="smollm2", messages=MESSAGES)
    assert answer.choices[0].message.content == json.loads(CHAT)["choices"][0]["message"]["content"]
    assert chunks and all(chunk.choices for chunk in chunks)  # the usage chunk the SDK asked for stays hidden
    assert llama.requests[-2]["stream_options"] == {"include_usage": True}
    assert raw.parse().usage is not None
    plain, streamed, speculative = taskcost_spans.attributes("chat ")
    assert engine(plain) == CHAT_ENGINE
    assert engine(streamed) == STREAM_ENGINE
    assert engine(speculative) == SPECULATIVE_ENGINE
    # the call is recorded as before: OpenAI usage (cache included in the input), the answering model
    assert (plain["gen_ai.usage.input_tokens"], plain["gen_ai.usage.cache_read.input_tokens"]) == (23, 5)
    assert (streamed["gen_ai.usage.output_tokens"], streamed["gen_ai.usage.cache_read.input_tokens"]) == (8, 22)
    assert speculative["gen_ai.response.model"] == "smollm2"


@pytest.mark.usefixtures("instrumented")
def test_async_chat_and_stream_record_the_engines_timings(taskcost_spans: CapturedSpans, llama: LlamaServer) -> None:
    async def agent() -> str:
        c = openai.AsyncOpenAI(base_url=llama.url("spec"), api_key="k", max_retries=0)
        await c.chat.completions.create(model="smollm2", messages=MESSAGES)
        stream = await c.chat.completions.create(model="smollm2", messages=MESSAGES, stream=True)
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])

    assert asyncio.run(agent()).startswith("One colour is:")
    plain, streamed = taskcost_spans.attributes("chat ")
    assert engine(plain) == SPECULATIVE_ENGINE
    assert engine(streamed) == STREAM_ENGINE


@pytest.mark.usefixtures("instrumented")
def test_inside_an_llm_call_block_the_timings_land_on_the_block(
    taskcost_spans: CapturedSpans, llama: LlamaServer
) -> None:
    with tc.task("colours") as t, t.llm_call("llama.cpp", "smollm2") as block:
        client(llama, "spec").chat.completions.create(model="smollm2", messages=MESSAGES)
    [span] = taskcost_spans.spans("chat ")
    assert span.context.span_id == block.span.get_span_context().span_id
    assert engine(dict(span.attributes or {})) == SPECULATIVE_ENGINE


ODD_TIMINGS = {
    "cache_n": float("nan"),
    "prompt_n": "8",
    "prompt_ms": "62.715",
    "predicted_n": True,
    "predicted_ms": -735.093,
    "draft_n": 41,
    "draft_n_accepted": 41.0,
}


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(
    ("timings", "expected"),
    [
        (ODD_TIMINGS, {"taskcost.spec.draft_tokens": 41}),
        (
            {"prompt_ms": float("inf"), "predicted_ms": 0, "draft_n": 4, "draft_n_accepted": 9},
            {
                "taskcost.engine.decode_s": 0.0,
                "taskcost.spec.draft_tokens": 4,
            },
        ),
        ({"prompt_n": -1, "cache_n": 2**64, "predicted_n": 48.5}, {}),
        ("fast", {}),
        ([1, 2], {}),
    ],
)
def test_odd_timings_values_are_skipped(
    taskcost_spans: CapturedSpans, llama: LlamaServer, timings: Any, expected: dict[str, Any]
) -> None:
    body = json.loads(SPECULATIVE)
    body["timings"] = timings
    llama.bodies["odd"] = json.dumps(body).encode()  # NaN and Infinity as JSON parsers read them
    answer = client(llama, "odd").chat.completions.create(model="smollm2", messages=MESSAGES)
    assert answer.usage is not None and answer.usage.completion_tokens == 48
    [attrs] = taskcost_spans.attributes("chat ")
    assert engine(attrs) == expected
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (43, 48)


@pytest.mark.usefixtures("instrumented")
def test_a_bug_reading_timings_costs_only_the_timings(
    taskcost_spans: CapturedSpans,
    llama: LlamaServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(timings: object) -> None:
        raise RuntimeError("sdk bug")

    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "0")
    monkeypatch.setattr(usage, "engine_timings", explode)
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"):
        client(llama, "spec").chat.completions.create(model="smollm2", messages=MESSAGES)
        list(client(llama, "spec").chat.completions.create(model="smollm2", messages=MESSAGES, stream=True))
    plain, streamed = taskcost_spans.attributes("chat ")
    assert engine(plain) == engine(streamed) == {}
    assert (plain["gen_ai.usage.output_tokens"], streamed["gen_ai.usage.output_tokens"]) == (48, 8)
    assert caplog.text.count("internal error in engine timings") == 1


def test_engine_timings_recorded_by_hand(taskcost_spans: CapturedSpans, caplog: pytest.LogCaptureFixture) -> None:
    nonsense: Any = "slow"
    with caplog.at_level(logging.WARNING, logger="taskcost_sdk"), tc.llm_call("llama.cpp", "smollm2") as c:
        c.set_engine_timings(prefill_s=0.25, decode_s=nonsense, decode_tokens=48, draft_tokens=10, accepted_tokens=7)
    [attrs] = taskcost_spans.attributes("chat ")
    assert engine(attrs) == {
        "taskcost.engine.prefill_s": 0.25,
        "taskcost.engine.decode_tokens": 48,
        "taskcost.spec.draft_tokens": 10,
        "taskcost.spec.accepted_tokens": 7,
    }
    assert "dropped engine timing decode_s='slow'" in caplog.text


TOPOLOGY = {
    "parallel_tensor": 4,
    "parallel_pipeline": 2,
    "parallel_data": 1,
    "pd_disaggregated": True,
    "pd_prefill_gpu_type": "H100-SXM",
    "pd_decode_gpu_type": "L40S",
    "spec_method": "eagle3",
    "spec_draft_model": "smollm2-135m-draft",
}
TOPOLOGY_ATTRIBUTES = {
    "taskcost.parallel.tensor": 4,
    "taskcost.parallel.pipeline": 2,
    "taskcost.parallel.data": 1,
    "taskcost.pd.disaggregated": True,
    "taskcost.pd.prefill_gpu_type": "H100-SXM",
    "taskcost.pd.decode_gpu_type": "L40S",
    "taskcost.spec.method": "eagle3",
    "taskcost.spec.draft_model": "smollm2-135m-draft",
}
TAG_PREFIXES = ("taskcost.parallel.", "taskcost.pd.", "taskcost.spec.method", "taskcost.spec.draft_model")


def tags(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k.startswith(TAG_PREFIXES)}


@pytest.mark.usefixtures("instrumented")
def test_profiles_put_topology_tags_on_the_call_spans(
    taskcost_spans: CapturedSpans, llama: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_env = {llama.url("spec"): {"engine": "llama.cpp", "spec_method": "draft_model", "pd_disaggregated": False}}
    monkeypatch.setenv("TASKCOST_INFRA_PROFILES", json.dumps(from_env))
    taskcost_spans.configure(
        infra_profiles={llama.url("chat"): {"provider": "vllm", "gpu_type": "H100-SXM", **TOPOLOGY}}
    )
    client(llama, "chat").chat.completions.create(model="smollm2", messages=MESSAGES)
    client(llama, "spec").chat.completions.create(model="smollm2", messages=MESSAGES)
    profiled, from_env_profile = taskcost_spans.attributes("chat ")
    assert tags(profiled) == TOPOLOGY_ATTRIBUTES
    assert (profiled["gen_ai.provider.name"], profiled["taskcost.gpu.type"]) == ("vllm", "H100-SXM")
    assert tags(from_env_profile) == {"taskcost.spec.method": "draft_model", "taskcost.pd.disaggregated": False}


def test_topology_tags_from_configure_env_and_per_call(
    taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    taskcost_spans.configure(infra=TOPOLOGY)
    with tc.task("colours") as t:
        with t.llm_call("vllm", "llama", parallel_tensor=8, spec_method="ngram", pd_disaggregated=False):
            pass
        bad: Any = "EAGLE"
        with caplog.at_level(logging.WARNING, logger="taskcost_sdk"), t.llm_call("vllm", "llama", spec_method=bad):
            pass
        t.record_llm_call("vllm", "llama", input_tokens=1, output_tokens=1, spec_draft_model="tiny")
    found = taskcost_spans.resource()
    assert found is not None and tags(dict(found.attributes)) == TOPOLOGY_ATTRIBUTES
    per_call, dropped, recorded = taskcost_spans.attributes("chat ")
    assert tags(per_call) == {
        "taskcost.parallel.tensor": 8,
        "taskcost.spec.method": "ngram",
        "taskcost.pd.disaggregated": False,
    }
    assert tags(dropped) == {} and "spec_method" in caplog.text
    assert tags(recorded) == {"taskcost.spec.draft_model": "tiny"}
    env = {"TASKCOST_PARALLEL_TENSOR": "2", "TASKCOST_PD_DISAGGREGATED": "true", "TASKCOST_SPEC_METHOD": "mtp"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert tags(dict(build_resource().attributes)) == {
        "taskcost.parallel.tensor": 2,
        "taskcost.pd.disaggregated": True,
        "taskcost.spec.method": "mtp",
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("parallel_tensor", 0),
        ("parallel_pipeline", -2),
        ("parallel_data", "two"),
        ("parallel_tensor", True),
        ("parallel_tensor", 1.5),
        ("pd_disaggregated", "yes"),
        ("pd_disaggregated", 1),
        ("spec_method", "EAGLE"),
        ("spec_method", "draft-model"),
        ("spec_method", " "),
        ("spec_draft_model", ""),
    ],
)
def test_invalid_topology_tags_fail_at_configure(key: str, value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=f"infra_profiles=.*{key}"):
        tc.configure(infra_profiles={"http://vllm:8000/v1": {key: value}})
    with pytest.raises(ValueError, match=key):
        tc.configure(infra={key: value})
    monkeypatch.setenv("TASKCOST_INFRA_PROFILES", json.dumps({"http://vllm:8000/v1": {key: value}}))
    with pytest.raises(ValueError, match=f"TASKCOST_INFRA_PROFILES.*{key}"):
        tc.configure()


def test_invalid_topology_env_var_fails_at_configure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKCOST_PD_DISAGGREGATED", "maybe")
    with pytest.raises(ValueError, match="TASKCOST_PD_DISAGGREGATED"):
        tc.configure()
