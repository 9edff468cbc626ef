"""The interop tests' model API: the project's one fake model server (``taskcost.demo.fake_llm``), answering every
request with fixed token usage, prompt-cache hits included, and a fresh response id; Anthropic answers report
``input_tokens`` *exclusive* of cache, as the real API does.

In a test: ``with interop_llm() as llm: ...`` (``llm.url`` is the base URL: ``/v1`` for OpenAI clients, as is for
Anthropic ones). As a script, for the JavaScript side: ``python -m tests.interop.fake_llm PORT`` prints the URL and
serves until killed.
"""

from __future__ import annotations

import itertools
import sys
import threading
from dataclasses import dataclass

from taskcost.demo.fake_llm import FakeLLM, Received, Reply

__all__ = ["ANTHROPIC_MODEL", "OPENAI_MODEL", "TEXT", "AnthropicUsage", "OpenAIUsage", "interop_llm"]

OPENAI_MODEL = "gpt-4o-2024-08-06"
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"
TEXT = "The diff looks fine."


@dataclass(frozen=True)
class OpenAIUsage:
    prompt_tokens: int = 1_200  # inclusive of cached_tokens, as OpenAI reports it
    cached_tokens: int = 1_000
    completion_tokens: int = 300
    reasoning_tokens: int = 0

    def wire(self) -> dict[str, object]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens, "audio_tokens": 0},
        }


@dataclass(frozen=True)
class AnthropicUsage:
    input_tokens: int = 200  # EXCLUSIVE of the cache fields, as Anthropic reports it
    cache_read_input_tokens: int = 1_800
    cache_creation_input_tokens: int = 500
    output_tokens: int = 120

    @property
    def inclusive_input(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def wire(self) -> dict[str, object]:
        return {
            "input_tokens": self.input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "output_tokens": self.output_tokens,
        }


def interop_llm(
    port: int = 0, openai_usage: OpenAIUsage | None = None, anthropic_usage: AnthropicUsage | None = None
) -> FakeLLM:
    """The fake (not started: use it as a context manager or call ``start()``) with the interop default replies."""
    openai_wire = (openai_usage or OpenAIUsage()).wire()
    anthropic_wire = (anthropic_usage or AnthropicUsage()).wire()
    ids = itertools.count(1)

    def answer(request: Received) -> Reply:
        n = next(ids)
        if request.api == "messages":
            return Reply(text=TEXT, model=ANTHROPIC_MODEL, usage=anthropic_wire, response_id=f"msg_fake{n:06d}")
        return Reply(text=TEXT, model=OPENAI_MODEL, usage=openai_wire, response_id=f"chatcmpl-fake{n:06d}")

    return FakeLLM(port=port, responder=answer)


if __name__ == "__main__":
    server = interop_llm(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0).start()
    print(server.url, flush=True)
    threading.Event().wait()
