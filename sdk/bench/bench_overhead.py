"""SDK overhead: time per recorded LLM call on the calling thread, against a bare OpenTelemetry span.

    python sdk/bench/bench_overhead.py [--calls 2000] [--rounds 25]

Both sides run in the same process and the same rounds (interleaved), each with its own TracerProvider
and a BatchSpanProcessor feeding an exporter that discards, so the figure is what the calling thread
pays. The bare span carries the same attributes as the SDK's call span (operation, provider, model,
call id and attempt, task id, three token counts, response model and id). Prints medians and the ratio;
the target is a ratio of at most 1.5. Exit status 1 if it is exceeded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

import taskcost_sdk as tc

TARGET = 1.5


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def bare_span(calls: int) -> Callable[[], None]:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    tracer = provider.get_tracer("bench")
    task_id = os.urandom(16).hex()

    def run() -> None:
        for _ in range(calls):
            with tracer.start_as_current_span(
                "chat gpt-4o",
                kind=SpanKind.CLIENT,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "taskcost.call.id": os.urandom(16).hex(),
                    "taskcost.call.attempt": 1,
                    "taskcost.task.id": task_id,
                },
            ) as span:
                span.set_attribute("gen_ai.usage.input_tokens", 1200)
                span.set_attribute("gen_ai.usage.output_tokens", 300)
                span.set_attribute("gen_ai.usage.cache_read.input_tokens", 800)
                span.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
                span.set_attribute("gen_ai.response.id", "chatcmpl-1")

    return run


def sdk_call(calls: int) -> Callable[[], None]:
    def run() -> None:
        with tc.task("bench") as t:
            for _ in range(calls):
                with t.llm_call("openai", "gpt-4o") as c:
                    c.set_usage(input_tokens=1200, output_tokens=300, cache_read_tokens=800)
                    c.set_response(model="gpt-4o-2024-08-06", response_id="chatcmpl-1")

    return run


def sdk_record(calls: int) -> Callable[[], None]:
    def run() -> None:
        with tc.task("bench") as t:
            for _ in range(calls):
                t.record_llm_call(
                    "openai",
                    "gpt-4o",
                    input_tokens=1200,
                    output_tokens=300,
                    cache_read_tokens=800,
                    response_model="gpt-4o-2024-08-06",
                    response_id="chatcmpl-1",
                )

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500, help="calls per round")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    os.environ.setdefault("OTEL_BSP_MAX_QUEUE_SIZE", "65536")  # never drop: a dropped span costs less

    tc.configure(exporter=Discard())  # the SDK's own pipeline: guard > batch processor > counting exporter
    sides = {"bare OTel span": bare_span(args.calls), "tc llm_call": sdk_call(args.calls)}
    sides["tc record_llm_call"] = sdk_record(args.calls)
    per_call: dict[str, list[float]] = {name: [] for name in sides}
    for run in sides.values():  # warm-up
        run()
    for _ in range(args.rounds):
        for name, run in sides.items():
            started = time.perf_counter()
            run()
            per_call[name].append((time.perf_counter() - started) / args.calls * 1e6)
    tc.shutdown()

    bare = statistics.median(per_call["bare OTel span"])
    print(f"median us per call over {args.rounds} rounds of {args.calls} calls (calling thread):")
    worst = 0.0
    for name, samples in per_call.items():
        median = statistics.median(samples)
        ratio = median / bare
        if name != "bare OTel span":
            worst = max(worst, ratio)
        print(f"  {name:<20} {median:7.2f} us   {ratio:4.2f}x")
    verdict = "ok" if worst <= TARGET else "OVER TARGET"
    print(f"worst ratio {worst:.2f}x (target <= {TARGET}x): {verdict}")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
