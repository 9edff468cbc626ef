"""One fixed set of spans that every emitter (the JS SDK, the Python SDK) reproduces exactly: same ids, times,
attributes, statuses and events, so whatever encoding carried them, the stored rows must be identical.

The scenario is plain JSON (ids hex, times [seconds, nanos], OTel API enums: kind INTERNAL=0 SERVER=1 CLIENT=2,
status UNSET=0 OK=1 ERROR=2). Numbers: Python ints and JS integral numbers both become OTLP intValue, so every
double here has a fraction.
"""

from __future__ import annotations

from typing import Any

T0_S = 1_796_000_000
TRACE_FOREIGN = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_SDK = "0af7651916cd43dd8448eb211c80319c"


def _t(ms: int, extra_ns: int = 0) -> list[int]:
    ns = ms * 1_000_000 + extra_ns
    return [T0_S + ns // 1_000_000_000, ns % 1_000_000_000]


def _span(sid: str, name: str, parent: str | None, start_ms: int, end_ms: int, **kw: Any) -> dict[str, Any]:
    return {
        "spanId": sid,
        "parent": parent,
        "name": name,
        "kind": kw.get("kind", 0),
        "start": _t(start_ms, 123),  # sub-millisecond precision must survive every encoding
        "end": _t(end_ms, 456),
        "attributes": kw.get("attributes", {}),
        "status": kw.get("status", {"code": 0}),
        "events": kw.get("events", []),
    }


def scenario() -> dict[str, Any]:
    anthropic_usage = {
        "gen_ai.usage.input_tokens": 2500,
        "gen_ai.usage.cache_read.input_tokens": 1800,
        "gen_ai.usage.output_tokens": 120,
    }
    foreign = [
        _span(
            "00f067aa0ba902b7",
            "invoke_agent reviewer",
            None,
            0,
            3000,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "reviewer",
                "session.id": "sess-42",
                "test.big_int": 9007199254740991,  # 2**53 - 1: the JS JSON exporter sends it as a JSON number
                "test.flag": True,
            },
        ),
        _span(
            "00f067aa0ba902b8",
            "openai.chat",
            "00f067aa0ba902b7",
            10,
            900,
            kind=2,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.response.id": "chatcmpl-js-1",
                "gen_ai.response.finish_reasons": ["stop"],
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.cache_read.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 300,
                "gen_ai.response.time_to_first_chunk": 0.25,
            },
        ),
        # one Anthropic call seen twice: the client's own span and an OpenInference span beside it
        _span(
            "00f067aa0ba902b9",
            "anthropic.messages.create",
            "00f067aa0ba902b7",
            1000,
            1900,
            kind=2,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.response.id": "msg_js_1",
                **anthropic_usage,
                "gen_ai.usage.cache_write.input_tokens": 500,
            },
        ),
        _span(
            "00f067aa0ba902ba",
            "messages.create",
            "00f067aa0ba902b7",
            995,
            1910,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.provider": "anthropic",
                "llm.model_name": "claude-sonnet-4-5",
                "llm.token_count.prompt": 2500,
                "llm.token_count.prompt_details.cache_read": 1800,
                "llm.token_count.prompt_details.cache_write": 500,
                "llm.token_count.completion": 120,
                "output.mime_type": "application/json",
                "output.value": '{"id": "msg_js_1", "type": "message"}',
            },
        ),
        _span(
            "00f067aa0ba902bb",
            "execute_tool grep",
            "00f067aa0ba902b7",
            2000,
            2100,
            attributes={"openinference.span.kind": "TOOL", "tool.name": "grep"},
        ),
        _span(
            "00f067aa0ba902bc",
            "ChatCompletion",
            "00f067aa0ba902b7",
            2200,
            2300,
            status={"code": 2, "message": "BadRequestError: context too long"},
            attributes={"openinference.span.kind": "LLM", "llm.system": "openai", "llm.model_name": "gpt-4o"},
            events=[
                {
                    "name": "exception",
                    "time": _t(2299),
                    "attributes": {"exception.type": "openai.BadRequestError", "exception.message": "too long"},
                }
            ],
        ),
    ]
    sdk = [
        _span(
            "b7ad6b7169203331",
            "task code_review",
            None,
            0,
            500,
            attributes={
                "taskcost.task.id": "review-7",
                "taskcost.task.kind": "code_review",
                "taskcost.task.outcome": "completed",
            },
        ),
        _span(
            "b7ad6b7169203332",
            "chat gpt-4o",
            "b7ad6b7169203331",
            10,
            400,
            kind=2,
            attributes={
                "taskcost.task.id": "review-7",
                "taskcost.call.id": "call-1",
                "taskcost.call.attempt": 1,
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 12000,
                "gen_ai.usage.cache_read.input_tokens": 8000,
                "gen_ai.usage.output_tokens": 600,
            },
        ),
        _span(
            "b7ad6b7169203333",
            "execute_tool web_search",
            "b7ad6b7169203331",
            410,
            450,
            attributes={
                "taskcost.task.id": "review-7",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "web_search",
                "taskcost.tool.cost_usd": "0.005",
            },
        ),
    ]
    return {
        "resource": {"service.name": "interop-agent", "k8s.cluster.name": "eu-1", "taskcost.engine.name": "api"},
        "scope": {"name": "interop", "version": "1.0.0"},
        "traces": [{"traceId": TRACE_FOREIGN, "spans": foreign}, {"traceId": TRACE_SDK, "spans": sdk}],
    }


def emit_python(doc: dict[str, Any], exporter: Any) -> Any:
    """Reproduce the scenario with the Python SDK and export it in one request with ``exporter``."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import SpanKind, Status, StatusCode

    class Ids(IdGenerator):
        def __init__(self) -> None:
            self.traces = [int(t["traceId"], 16) for t in doc["traces"]]
            self.spans = [int(s["spanId"], 16) for t in doc["traces"] for s in t["spans"]]

        def generate_trace_id(self) -> int:
            return self.traces.pop(0)

        def generate_span_id(self) -> int:
            return self.spans.pop(0)

    def ns(t: list[int]) -> int:
        return t[0] * 1_000_000_000 + t[1]

    mem = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(doc["resource"]), id_generator=Ids())
    provider.add_span_processor(SimpleSpanProcessor(mem))
    tracer = provider.get_tracer(doc["scope"]["name"], doc["scope"]["version"])
    for t in doc["traces"]:
        made: dict[str, Any] = {}
        for s in t["spans"]:
            ctx = (
                trace.set_span_in_context(made[s["parent"]])
                if s["parent"]
                else trace.set_span_in_context(trace.INVALID_SPAN)
            )
            span = tracer.start_span(
                s["name"], context=ctx, kind=SpanKind(s["kind"]), attributes=s["attributes"], start_time=ns(s["start"])
            )
            if s["status"]["code"]:
                span.set_status(Status(StatusCode(s["status"]["code"]), s["status"].get("message")))
            for e in s["events"]:
                span.add_event(e["name"], e["attributes"], timestamp=ns(e["time"]))
            made[s["spanId"]] = span
        for s in reversed(t["spans"]):
            made[s["spanId"]].end(end_time=ns(s["end"]))
    result = exporter.export(list(mem.get_finished_spans()))
    exporter.shutdown()
    return result
