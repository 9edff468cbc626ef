"""A small agent run, instrumented with taskcost_sdk: one code-review task of three LLM call
attempts (the second call fails once and is retried), with prompt-cache hits and a tool call.

The token counts stand in for what the provider's API returned; run it against a collector:

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python examples/quickstart_agent.py
"""

from __future__ import annotations

import taskcost_sdk as tc


def main() -> None:
    tc.configure(service_name="review-bot", harness_version="quickstart-1")
    with tc.task("code_review", id="review-42") as t:
        # 1. read the diff: OpenAI gpt-4o, 8,000 of 12,000 prompt tokens served from the prompt cache
        t.record_llm_call(
            "openai", "gpt-4o", input_tokens=12_000, cache_read_tokens=8_000, output_tokens=600, ttft_s=0.41
        )
        with t.tool("web_search", cost_usd="0.005"):
            pass  # look up the library the diff touches
        # 2. write the review: Anthropic claude-sonnet-4-5; the answer is not valid JSON (billed anyway)
        with t.llm_call("anthropic", "claude-sonnet-4-5") as first:
            # input is inclusive of cache: 1,000 uncached + 6,000 read + 2,000 written
            first.set_usage(input_tokens=9_000, cache_read_tokens=6_000, cache_write_tokens=2_000, output_tokens=700)
            first.set_error("invalid_json")
        # 3. the retry: same logical call, attempt 2, now reading the prefix it cached
        with t.llm_call("anthropic", "claude-sonnet-4-5", retry_of=first) as second:
            second.set_usage(input_tokens=9_500, cache_read_tokens=8_000, output_tokens=800)
    tc.shutdown(timeout_millis=10_000)


if __name__ == "__main__":
    main()
