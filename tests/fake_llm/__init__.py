"""The fake model server (``taskcost.demo.fake_llm``, the project's one: a real local HTTP server that speaks the
OpenAI chat completions / responses and Anthropic messages wire formats), for driving the real ``openai`` and
``anthropic`` client libraries in tests.

    with FakeLLM() as llm:
        llm.script(Fault(429, retry_after_ms=5), Reply(usage={...}))
        client = openai.OpenAI(base_url=llm.openai_url, api_key="k")

Also a fake OTLP collector that misbehaves on purpose (slow, 503, hanging), to test that an agent is
never blocked by its telemetry. Both listen on 127.0.0.1 only.
"""

from __future__ import annotations

from taskcost.demo.fake_llm import Drop, FakeLLM, Fault, Received, Reply, Stall

from .collector import FakeCollector

__all__ = ["Drop", "FakeCollector", "FakeLLM", "Fault", "Received", "Reply", "Stall"]
