"""Synthetic GenAI agent traffic, seeded: a task root span, 5-15 LLM-call spans with gen_ai.* usage and infra tags,
and tool spans, encoded as real OTLP requests.

``requests(total)`` is today's traffic (the ``api`` mix: API calls, one resource per request, whole tasks of 100-512
spans). The other mixes (``MIXES``) vary it as fleets do: self-hosted vLLM / SGLang calls tagged with their engine,
GPUs and cluster; failed calls with their exception event and the retry; requests cut at a fixed span count as an
SDK's batch processor cuts them (a task's spans may span requests); several agents' resources in one request; all
OTLP/JSON; gzip bodies. ``bodies(total, mix)`` gives what the senders post."""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from taskcost.normalize import encode_json
from taskcost.normalize import key_value as _kv

__all__ = ["DEFAULT_MIX", "MIXES", "MODELS", "Body", "Mix", "bodies", "requests", "to_json"]

MODELS = [
    ("openai", "gpt-4o"),
    ("openai", "gpt-4o-mini"),
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-haiku-4-5"),
    ("openai", "gpt-5"),
]
# Self-hosted deployments: engine, version, model, quantization, GPU type, GPUs, cluster (called through the engine's
# OpenAI-compatible API)
SELF_HOSTED = [
    ("vllm", "0.6.3", "meta-llama/Llama-3.3-70B-Instruct", "fp8", "H100-SXM", 2, "gpu-a"),
    ("vllm", "0.7.0", "meta-llama/Llama-3.3-70B-Instruct", "fp8", "H100-SXM", 2, "gpu-a"),
    ("vllm", "0.7.0", "Qwen/Qwen2.5-72B-Instruct", "awq-int4", "A100-80GB", 4, "gpu-b"),
    ("sglang", "0.4.1", "Qwen/Qwen2.5-32B-Instruct", "bf16", "H100-SXM", 1, "gpu-a"),
    ("sglang", "0.4.1", "deepseek-ai/DeepSeek-V3", "fp8", "H100-SXM", 8, "gpu-c"),
]
SERVICES = ["review-bot", "triage-bot", "docs-agent", "sre-agent"]
INSTANCES = 16  # agent processes per service (the fixed-size mixes)
ERRORS = [
    ("openai.RateLimitError", "Error code: 429 - rate limit reached for requests"),
    ("openai.APITimeoutError", "Request timed out."),
    ("openai.InternalServerError", "Error code: 503 - the engine is overloaded"),
]
T0 = 1_796_000_000_000_000_000


@dataclass(frozen=True)
class Mix:
    """A traffic mix. ``spans``: each request holds exactly this many (None: whole tasks, 100-512 spans);
    ``resources``: ResourceSpans per request (other agents, other services); ``self_hosted``, ``failed``: shares of
    LLM calls (a failed call is sent again as attempt 2)."""

    name: str
    label: str
    json_share: float = 0.3
    gzip: bool = False
    spans: int | None = None
    resources: int = 1
    self_hosted: float = 0.0
    failed: float = 0.0
    seed: int = 7


API = Mix("api", "today's traffic: API calls, one resource per request, whole tasks in 100-512 spans, 30% OTLP/JSON")
FLEET = Mix(
    "fleet",
    "30% self-hosted vLLM / SGLang calls (engine, version, quantization, GPU and cluster tags on the call), 3% failed"
    " with an exception event and retried, 500 spans per request, 30% OTLP/JSON",
    spans=500,
    self_hosted=0.3,
    failed=0.03,
)
MIXES = {
    m.name: m
    for m in (
        API,
        FLEET,
        replace(FLEET, name="json", label="the fleet's traffic, OTLP/JSON only", json_share=1.0),
        replace(FLEET, name="gzip", label="the fleet's traffic, gzip bodies (Content-Encoding: gzip)", gzip=True),
        replace(
            FLEET,
            name="resources",
            label="the fleet's traffic, 4 resources per request (4 services' agents)",
            resources=4,
        ),
    )
}
DEFAULT_MIX = FLEET  # the bench's traffic: the median runs, the settings rows and the sustained runs


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


def _call_span(rng: random.Random, trace_id: bytes, root_id: bytes, model: str, t: int, dur: int) -> Span:
    """An LLM call's client span under the task's root, from ``t`` for ``dur`` ns (draws its span id from ``rng``)."""
    return Span(
        trace_id=trace_id,
        span_id=rng.randbytes(8),
        parent_span_id=root_id,
        name=f"chat {model}",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=t,
        end_time_unix_nano=t + dur,
    )


def _tool_span(rng: random.Random, trace_id: bytes, root_id: bytes, task_id: str, t: int) -> Span:
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
    return tool


def _root_span(rng: random.Random, trace_id: bytes, root_id: bytes, task_id: str, start: int, end: int) -> Span:
    root = Span(trace_id=trace_id, span_id=root_id, name="task code_review", start_time_unix_nano=start)
    root.end_time_unix_nano = end
    root.attributes.extend(
        [
            _kv("taskcost.task.id", task_id),
            _kv("taskcost.task.kind", "code_review"),
            _kv("taskcost.task.outcome", "completed" if rng.random() < 0.85 else "failed"),
        ]
    )
    return root


def _task_spans(rng: random.Random, n_task: int) -> list[Span]:
    """Today's traffic: API calls, 10% of them marked as a second attempt, 5% failed with error.type."""
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
        s = _call_span(rng, trace_id, root_id, model, t, dur)
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
            spans.append(_tool_span(rng, trace_id, root_id, task_id, t))
            t += 300_000_000
    return [_root_span(rng, trace_id, root_id, task_id, start, t), *spans]


def _fleet_task_spans(rng: random.Random, n_task: int, mix: Mix) -> list[Span]:
    """A task of the fleet: API and self-hosted calls (the latter tagged on the call span: the agent's resource
    names the API default), failed calls with an ``exception`` event followed by their retry (the same call id,
    attempt 2), and tool calls."""
    trace_id = rng.randbytes(16)
    root_id = rng.randbytes(8)
    start = T0 + n_task * 10_000_000_000
    task_id = f"task-{n_task}"
    spans = []
    t = start
    for i in range(rng.randint(5, 15)):
        hosted = SELF_HOSTED[rng.randrange(len(SELF_HOSTED))] if rng.random() < mix.self_hosted else None
        if hosted is None:
            provider, model = rng.choice(MODELS)
            address = "api.openai.com" if provider == "openai" else "api.anthropic.com"
            tags = []
        else:
            engine, version, model, quant, gpu, gpus, cluster = hosted
            provider, address = "openai", f"{engine}-{cluster}.internal"  # the engine's OpenAI-compatible API
            tags = [
                _kv("taskcost.deployment", "self_hosted"),
                _kv("taskcost.engine.name", engine),
                _kv("taskcost.engine.version", version),
                _kv("taskcost.quantization", quant),
                _kv("taskcost.gpu.type", gpu),
                _kv("taskcost.gpu.count", gpus),
                _kv("taskcost.cluster.id", cluster),
            ]
        common = [
            _kv("taskcost.task.id", task_id),
            _kv("gen_ai.operation.name", "chat"),
            _kv("gen_ai.provider.name", provider),
            _kv("gen_ai.request.model", model),
            _kv("taskcost.call.id", f"{task_id}-c{i}"),
            _kv("server.address", address),
            *tags,
        ]
        attempt = 1
        if rng.random() < mix.failed:
            dur = rng.randint(100_000_000, 30_000_000_000)
            s = _call_span(rng, trace_id, root_id, model, t, dur)
            s.attributes.extend([*common, _kv("taskcost.call.attempt", 1)])
            etype, message = ERRORS[rng.randrange(len(ERRORS))]
            s.status.code = Status.STATUS_CODE_ERROR
            s.status.message = message
            event = s.events.add(name="exception", time_unix_nano=t + dur)
            event.attributes.extend([_kv("exception.type", etype), _kv("exception.message", message)])
            spans.append(s)
            t += dur + 1_000_000_000  # the client's back-off
            attempt = 2
        inp = rng.randint(500, 30_000)
        cached = rng.randint(0, inp // 2) if rng.random() < 0.6 else 0
        out = rng.randint(50, 2_000)
        dur = rng.randint(200_000_000, 8_000_000_000)
        s = _call_span(rng, trace_id, root_id, model, t, dur)
        s.attributes.extend(
            [
                *common,
                _kv("taskcost.call.attempt", attempt),
                _kv("gen_ai.response.model", model),
                _kv("gen_ai.response.id", f"resp-{rng.getrandbits(64):x}"),
                _kv("gen_ai.usage.input_tokens", inp),
                _kv("gen_ai.usage.output_tokens", out),
                _kv("gen_ai.usage.cache_read.input_tokens", cached),
                _kv("gen_ai.response.time_to_first_chunk", rng.uniform(0.1, 2.0)),
            ]
        )
        spans.append(s)
        t += dur
        if rng.random() < 0.3:
            spans.append(_tool_span(rng, trace_id, root_id, task_id, t))
            t += 300_000_000
    return [_root_span(rng, trace_id, root_id, task_id, start, t), *spans]


def _agent_resource(rs: ResourceSpans, service: str, instance: int) -> None:
    attrs = {
        "service.name": service,
        "service.instance.id": f"{service}-{instance}",
        "taskcost.harness.version": "bench-1",
        "taskcost.engine.name": "api",
        "taskcost.deployment": "api",
        "k8s.cluster.name": "prod-eu",
        "cloud.region": "eu-west-1",
    }
    rs.resource.attributes.extend(_kv(k, v) for k, v in attrs.items())


def _fixed_requests(total_spans: int, mix: Mix) -> Iterator[ExportTraceServiceRequest]:
    """Requests of exactly ``mix.spans`` spans over ``mix.resources`` agents each, as batch processors send: each
    agent's tasks in order, a task's spans cut wherever a batch fills (the rest goes in that agent's next one)."""
    assert mix.spans is not None
    rng = random.Random(mix.seed)
    agents = [(service, i) for service in SERVICES for i in range(INSTANCES)]
    pending: dict[int, list[Span]] = {}
    share = [mix.spans // mix.resources + (r < mix.spans % mix.resources) for r in range(mix.resources)]
    n_task, sent = 0, 0
    while sent < total_spans:
        req = ExportTraceServiceRequest()
        for agent, k in zip(rng.sample(range(len(agents)), mix.resources), share, strict=True):
            rs = req.resource_spans.add()
            _agent_resource(rs, *agents[agent])
            ss = rs.scope_spans.add()
            ss.scope.name = "taskcost_sdk"
            queue = pending.setdefault(agent, [])
            while len(queue) < k:
                queue.extend(_fleet_task_spans(rng, n_task, mix))
                n_task += 1
            ss.spans.extend(queue[:k])
            del queue[:k]
        sent += mix.spans
        yield req


def requests(total_spans: int, seed: int = 7, mix: Mix | None = None) -> Iterator[ExportTraceServiceRequest]:
    """About ``total_spans`` spans of ``mix`` (None: today's traffic, whole tasks in requests of 100-512 spans,
    seeded with ``seed``)."""
    if mix is not None and mix.spans is not None:
        yield from _fixed_requests(total_spans, mix)
        return
    rng = random.Random(seed if mix is None else mix.seed)
    fleet = mix is not None and mix != API
    n_task, sent = 0, 0
    while sent < total_spans:
        size = rng.randint(100, 512)
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        _resource(rs, rng)
        ss = rs.scope_spans.add()
        ss.scope.name = "taskcost_sdk"
        while len(ss.spans) < size:
            ss.spans.extend(_fleet_task_spans(rng, n_task, mix) if fleet and mix else _task_spans(rng, n_task))
            n_task += 1
        sent += len(ss.spans)
        yield req


def to_json(req: ExportTraceServiceRequest) -> bytes:
    """The OTLP/JSON mapping (hex ids, integer enums)."""
    return json.dumps(encode_json(req)).encode()


class Body(NamedTuple):
    """One request as a sender posts it."""

    data: bytes
    content_type: str
    encoding: str  # Content-Encoding: "" or "gzip"
    spans: int


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip at zlib's default level, as exporters send
    return c.compress(data) + c.flush()


def bodies(total_spans: int, mix: Mix = DEFAULT_MIX, protobuf_only: bool = False) -> list[Body]:
    """The requests of ``mix``, encoded: of every ten requests the first ``json_share`` tenths as OTLP/JSON, the
    rest protobuf; gzip if the mix says so. ``protobuf_only`` (OTLP/gRPC): all protobuf, uncompressed."""
    out = []
    for i, req in enumerate(requests(total_spans, mix=mix)):
        n = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
        if not protobuf_only and (i % 10) < mix.json_share * 10:
            data, ctype = to_json(req), "application/json"
        else:
            data, ctype = req.SerializeToString(), "application/x-protobuf"
        if mix.gzip and not protobuf_only:
            out.append(Body(_gzip(data), ctype, "gzip", n))
        else:
            out.append(Body(data, ctype, "", n))
    return out
