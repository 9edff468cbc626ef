"""A small agent run, instrumented with taskcost_sdk: one code-review task of three LLM call
attempts (the second call fails once and is retried), with prompt-cache hits and a tool call.

The token counts stand in for what the provider's API returned. With `make run` going (it serves on
127.0.0.1:4318, where this sends by default):

    .venv/bin/python examples/quickstart_agent.py

It sends where the standard OpenTelemetry variables say: OTEL_EXPORTER_OTLP_ENDPOINT (the collector's
base URL) or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the whole URL), with OTEL_EXPORTER_OTLP_HEADERS for a
server that requires keys:

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4319 \\
    OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20<ingest key>" \\
    .venv/bin/python examples/quickstart_agent.py

Each run is a task of its own (id review-<random>; --task-id ID names it). It prints where it sent and
exits 0 once the collector accepted every span, 1 when it did not.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys
from urllib.parse import urlsplit

import taskcost_sdk as tc

SDK_DEFAULT_ENDPOINT = "http://localhost:4318"


def traces_url() -> str:
    """Where the SDK sends, by the standard variables (the SDK resolves them the same way)."""
    whole = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if whole:
        return whole
    base = (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or SDK_DEFAULT_ENDPOINT).rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def listening(url: str) -> bool:
    """Whether something accepts a connection at the URL's host and port (asked once, within a second)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "localhost", port), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


def run_task(task_id: str) -> None:
    with tc.task("code_review", id=task_id) as t:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Send one instrumented code-review task to a taskcost collector.")
    parser.add_argument("--task-id", help="the task's id (default: review-<random>, a new task each run)")
    args = parser.parse_args(argv)
    task_id = args.task_id or f"review-{secrets.token_hex(4)}"
    url = traces_url()

    up = listening(url)  # nothing there: the agent still runs (the SDK never fails it), and says so at once
    tc.configure(service_name="review-bot", harness_version="quickstart-1")
    run_task(task_id)
    tc.shutdown(timeout_millis=10_000 if up else 500)  # flush: returns once the collector answered (or gave up)

    stats = tc.export_stats()
    if stats.exported and not stats.failed and not stats.dropped:
        print(f"task {task_id}: {stats.exported} spans sent to {url}; the collector accepted them all")
        return 0
    print(
        f"task {task_id}: the collector at {url} accepted {stats.exported} spans, {stats.failed} failed"
        f"{f', {stats.dropped} dropped' if stats.dropped else ''}"
        f"{'' if stats.exported or stats.failed else (' (no answer in time)' if up else ' (nothing listens there)')}"
        ". Is the server running there "
        "(make run; another port: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT)? Does it require keys "
        '(401: OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20<ingest key>")?',
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
