"""OTLP requests for tests, made by the real OpenTelemetry SDK and its real protobuf encoder."""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from taskcost.normalize import encode_json

T0 = 1_796_000_000_000_000_000  # 2026-11-30T..Z, in ns


def sample_request() -> ExportTraceServiceRequest:
    """One task with two LLM calls (the first failed, then a retry) and a tool call."""
    mem = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "review-bot", "taskcost.engine.name": "api", "k8s.cluster.name": "prod-eu"}
        )
    )
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer("tests")
    task_attrs = {"taskcost.task.id": "task-1"}
    with tracer.start_as_current_span(
        "task code_review",
        start_time=T0,
        end_on_exit=False,
        attributes={**task_attrs, "taskcost.task.kind": "code_review"},
    ) as task:
        common = {
            **task_attrs,
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "taskcost.call.id": "call-1",
        }
        s1 = tracer.start_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            start_time=T0 + 1_000_000,
            attributes={
                **common,
                "taskcost.call.attempt": 1,
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 10,
                "error.type": "invalid_json",
            },
        )
        s1.set_status(Status(StatusCode.ERROR, "bad answer"))
        s1.end(end_time=T0 + 2_000_000_000)
        s2 = tracer.start_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            start_time=T0 + 2_100_000_000,
            attributes={
                **common,
                "taskcost.call.attempt": 2,
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.cache_read.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 300,
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.response.time_to_first_chunk": 0.25,
            },
        )
        s2.end(end_time=T0 + 4_000_000_000)
        tool = tracer.start_span(
            "execute_tool web_search",
            start_time=T0 + 4_100_000_000,
            attributes={
                **task_attrs,
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "web_search",
                "taskcost.tool.cost_usd": "0.005",
            },
        )
        tool.add_event("query", {"q": "x"}, timestamp=T0 + 4_200_000_000)
        tool.end(end_time=T0 + 4_500_000_000)
        task.set_attribute("taskcost.task.outcome", "completed")
        task.end(end_time=T0 + 5_000_000_000)
    return encode_spans(mem.get_finished_spans())


def to_otlp_json(req: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP/JSON mapping of a request: lowerCamelCase keys, hex ids, integer enums."""
    return encode_json(req)
