"""Synthetic GenAI agent traffic, seeded: a task root span, 5-15 LLM-call spans with gen_ai.* usage
and infra tags, and tool spans, encoded as real OTLP requests of 100-512 spans."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from taskcost.normalize import encode_json
from taskcost.normalize import key_value as _kv

__all__ = ["MODELS", "requests", "to_json"]

MODELS = [
    ("openai", "gpt-4o"),
    ("openai", "gpt-4o-mini"),
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-haiku-4-5"),
    ("openai", "gpt-5"),
]
T0 = 1_796_000_000_000_000_000


def _resource(rs: ResourceSpans, rng: random.Random) -> None:
    attrs = {
        "service.name": "review-bot",
        "service.instance.id": f"inst-{rng.randrange(1000)}",
        "taskcost.harness.version": "bench-1",
        "taskcost.engine.name": "api",
        "taskcost.deployment": "api",
        "k8s.cluster.name": "prod-eu",
        "cloud.region": "eu-west-1",
    }
    rs.resource.attributes.extend(_kv(k, v) for k, v in attrs.items())


def _task_spans(rng: random.Random, n_task: int) -> list[Span]:
    trace_id = rng.randbytes(16)
    root_id = rng.randbytes(8)
    start = T0 + n_task * 10_000_000_000
    task_id = f"task-{n_task}"
    spans = []
    t = start
    for i in range(rng.randint(5, 15)):
        provider, model = rng.choice(MODELS)
        inp = rng.randint(500, 30_000)
        cached = rng.randint(0, inp // 2) if rng.random() < 0.6 else 0
        out = rng.randint(50, 2_000)
        dur = rng.randint(200_000_000, 8_000_000_000)
        s = Span(
            trace_id=trace_id,
            span_id=rng.randbytes(8),
            parent_span_id=root_id,
            name=f"chat {model}",
            kind=Span.SPAN_KIND_CLIENT,
            start_time_unix_nano=t,
            end_time_unix_nano=t + dur,
        )
        attempt = 2 if rng.random() < 0.1 else 1
        s.attributes.extend(
            [
                _kv("taskcost.task.id", task_id),
                _kv("gen_ai.operation.name", "chat"),
                _kv("gen_ai.provider.name", provider),
                _kv("gen_ai.request.model", model),
                _kv("gen_ai.response.model", model),
                _kv("gen_ai.response.id", f"resp-{rng.getrandbits(64):x}"),
                _kv("gen_ai.usage.input_tokens", inp),
                _kv("gen_ai.usage.output_tokens", out),
                _kv("gen_ai.usage.cache_read.input_tokens", cached),
                _kv("gen_ai.response.time_to_first_chunk", rng.uniform(0.1, 2.0)),
                _kv("taskcost.call.id", f"{task_id}-c{i}"),
                _kv("taskcost.call.attempt", attempt),
                _kv("server.address", "api.openai.com" if provider == "openai" else "api.anthropic.com"),
            ]
        )
        if rng.random() < 0.05:
            s.status.code = Status.STATUS_CODE_ERROR
            s.attributes.append(_kv("error.type", "rate_limited"))
        spans.append(s)
        t += dur
        if rng.random() < 0.3:
            tool = Span(
                trace_id=trace_id,
                span_id=rng.randbytes(8),
                parent_span_id=root_id,
                name="execute_tool web_search",
                start_time_unix_nano=t,
                end_time_unix_nano=t + 300_000_000,
            )
            tool.attributes.extend(
                [
                    _kv("taskcost.task.id", task_id),
                    _kv("gen_ai.operation.name", "execute_tool"),
                    _kv("gen_ai.tool.name", "web_search"),
                    _kv("taskcost.tool.cost_usd", "0.005"),
                ]
            )
            spans.append(tool)
            t += 300_000_000
    root = Span(
        trace_id=trace_id, span_id=root_id, name="task code_review", start_time_unix_nano=start, end_time_unix_nano=t
    )
    root.attributes.extend(
        [
            _kv("taskcost.task.id", task_id),
            _kv("taskcost.task.kind", "code_review"),
            _kv("taskcost.task.outcome", "completed" if rng.random() < 0.85 else "failed"),
        ]
    )
    return [root, *spans]


def requests(total_spans: int, seed: int = 7) -> Iterator[ExportTraceServiceRequest]:
    """Requests of 100-512 spans (whole tasks), about ``total_spans`` in all."""
    rng = random.Random(seed)
    n_task, sent = 0, 0
    while sent < total_spans:
        size = rng.randint(100, 512)
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        _resource(rs, rng)
        ss = rs.scope_spans.add()
        ss.scope.name = "taskcost_sdk"
        while len(ss.spans) < size:
            ss.spans.extend(_task_spans(rng, n_task))
            n_task += 1
        sent += len(ss.spans)
        yield req


def to_json(req: ExportTraceServiceRequest) -> bytes:
    """The OTLP/JSON mapping (hex ids, integer enums)."""
    return json.dumps(encode_json(req)).encode()
