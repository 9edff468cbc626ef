"""Make real LLM calls with the real `openai` / `anthropic` client against a local fake API, instrumented one way,
and export the spans with the real OTLP/HTTP exporter (run as a subprocess: instrumentations patch globally).

    FAKE_LLM_URL=http://127.0.0.1:PORT OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \
        python -m tests.interop.emit_llm MODE

Every mode makes the same two calls (one plain, one streamed) inside one task:

    openai-sdk, anthropic-sdk             the taskcost SDK records each call from the response (the README's way)
    openai-openllmetry, anthropic-openllmetry      opentelemetry-instrumentation-{openai,anthropic} (Traceloop)
    openai-openinference, anthropic-openinference  openinference-instrumentation-{openai,anthropic} (Arize)
    anthropic-client                      no instrumentation: only the anthropic client's own spans
    anthropic-both                        OpenLLMetry and OpenInference at once, plus the client's own spans

The service name is the mode. With a global TracerProvider the `anthropic` client adds its own span per call.
"""

from __future__ import annotations

import os
import sys
from typing import Any

PROMPT = [{"role": "user", "content": "Review this diff: -a +b"}]


def _global_provider(mode: str) -> Any:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": mode}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=10)))
    trace.set_tracer_provider(provider)
    return provider


def _openai_client() -> Any:
    import openai

    return openai.OpenAI(base_url=os.environ["FAKE_LLM_URL"] + "/v1", api_key="test-key", max_retries=0)


def _anthropic_client() -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=os.environ["FAKE_LLM_URL"], api_key="test-key", max_retries=0)


def openai_calls(client: Any) -> list[Any]:
    """Both calls; returns the usage objects and response ids the API gave."""
    r = client.chat.completions.create(model="gpt-4o", messages=PROMPT)
    seen = [(r.usage, r.model, r.id)]
    stream = client.chat.completions.create(
        model="gpt-4o", messages=PROMPT, stream=True, stream_options={"include_usage": True}
    )
    last = None
    for chunk in stream:
        last = chunk
    assert last is not None and last.usage is not None
    seen.append((last.usage, last.model, last.id))
    return seen


def anthropic_calls(client: Any) -> list[Any]:
    r = client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=PROMPT)
    seen = [(r.usage, r.model, r.id)]
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=256, messages=PROMPT) as s:
        for _ in s.text_stream:
            pass
        final = s.get_final_message()
    seen.append((final.usage, final.model, final.id))
    return seen


def sdk(mode: str) -> None:
    import taskcost_sdk as tc

    tc.configure(service_name=mode)
    with tc.task("interop") as t:
        if mode.startswith("openai"):
            client = _openai_client()
            for usage, model, rid in openai_calls(client):
                with t.llm_call("openai", "gpt-4o") as c:
                    c.set_usage(
                        input_tokens=usage.prompt_tokens,
                        output_tokens=usage.completion_tokens,
                        cache_read_tokens=usage.prompt_tokens_details.cached_tokens,
                    )
                    c.set_response(model=model, response_id=rid)
        else:
            client = _anthropic_client()
            for u, model, rid in anthropic_calls(client):
                with t.llm_call("anthropic", "claude-sonnet-4-5") as c:
                    c.set_usage(  # Anthropic reports input exclusive of cache: add it back (the README's rule)
                        input_tokens=u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens,
                        cache_read_tokens=u.cache_read_input_tokens,
                        cache_write_tokens=u.cache_creation_input_tokens,
                        output_tokens=u.output_tokens,
                    )
                    c.set_response(model=model, response_id=rid)
    tc.shutdown(timeout_millis=60_000)  # a loaded test machine: the task span goes last, and must not be cut


def instrumented(mode: str) -> None:
    provider = _global_provider(mode)
    if mode == "openai-openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
    elif mode == "openai-openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIOpenAI

        OIOpenAI().instrument()
    if mode in ("anthropic-openllmetry", "anthropic-both"):
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument()
    if mode in ("anthropic-openinference", "anthropic-both"):
        from openinference.instrumentation.anthropic import AnthropicInstrumentor as OIAnthropic

        OIAnthropic().instrument()
    tracer = provider.get_tracer("interop-agent")
    with tracer.start_as_current_span("review pull request"):
        if mode.startswith("openai"):
            openai_calls(_openai_client())
        else:
            anthropic_calls(_anthropic_client())
    provider.shutdown()  # flushes: returns after the collector answered, i.e. after the commit


MODES = (
    "openai-sdk",
    "openai-openllmetry",
    "openai-openinference",
    "anthropic-sdk",
    "anthropic-client",
    "anthropic-openllmetry",
    "anthropic-openinference",
    "anthropic-both",
)

if __name__ == "__main__":
    mode = sys.argv[1]
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    sdk(mode) if mode.endswith("-sdk") else instrumented(mode)
