from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sdk_exporting import stop_exporting

import taskcost_sdk as tc
from taskcost_sdk._internal import config, spans
from taskcost_sdk._internal.config import build_resource, resolve_traces_endpoint
from taskcost_sdk.testing import CapturedSpans

FULL_INFRA: dict[str, Any] = {
    "engine": "vllm",
    "engine_version": "0.11.0",
    "quantization": "fp8",
    "gpu_type": "H100-SXM",
    "gpu_count": 8,
    "cluster_id": "c1",
    "deployment": "self_hosted",
    "container_image_name": "vllm/vllm-openai",
    "container_image_tags": ["v0.11.0", "latest"],
    "k8s_cluster_name": "prod-eu",
    "cloud_region": "eu-west-1",
}


def test_noop_without_configure() -> None:
    assert isinstance(config.get_tracer(), trace.NoOpTracer)
    with tc.task("bug_fix") as t:
        with t.llm_call("openai", "gpt-4o") as c:
            c.set_usage(input_tokens=1, output_tokens=1)
            c.set_ttft(0.1)
        retry = tc.record_llm_call("openai", "gpt-4o", input_tokens=1, output_tokens=1, retry_of=c)
        with t.tool("search", cost_usd="0.01"):
            pass
    assert not t.span.is_recording()
    assert (retry.call_id, retry.attempt) == (c.call_id, 2)
    assert tc.force_flush() is True
    tc.shutdown()


def test_resource_from_infra(taskcost_spans: CapturedSpans) -> None:
    taskcost_spans.configure(infra=FULL_INFRA, harness_version="abc123", service_name="my-agent")
    with tc.task("bug_fix"):
        pass
    resource = taskcost_spans.resource()
    assert resource is not None
    expected = {
        "service.name": "my-agent",
        "taskcost.engine.name": "vllm",
        "taskcost.engine.version": "0.11.0",
        "taskcost.quantization": "fp8",
        "taskcost.gpu.type": "H100-SXM",
        "taskcost.gpu.count": 8,
        "taskcost.cluster.id": "c1",
        "taskcost.deployment": "self_hosted",
        "taskcost.harness.version": "abc123",
        "container.image.name": "vllm/vllm-openai",
        "container.image.tags": ("v0.11.0", "latest"),
        "k8s.cluster.name": "prod-eu",
        "cloud.region": "eu-west-1",
    }
    assert resource.attributes.items() >= expected.items()


def test_resource_from_env_and_argument_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "TASKCOST_ENGINE": "sglang",
        "TASKCOST_ENGINE_VERSION": "0.4",
        "TASKCOST_QUANTIZATION": "awq-int4",
        "TASKCOST_GPU_TYPE": "A100-80GB",
        "TASKCOST_GPU_COUNT": "4",
        "TASKCOST_CLUSTER_ID": "env-cluster",
        "TASKCOST_DEPLOYMENT": "api",
        "TASKCOST_HARNESS_VERSION": "env-sha",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from_env = build_resource().attributes
    expected = {
        "taskcost.engine.name": "sglang",
        "taskcost.engine.version": "0.4",
        "taskcost.quantization": "awq-int4",
        "taskcost.gpu.type": "A100-80GB",
        "taskcost.gpu.count": 4,
        "taskcost.cluster.id": "env-cluster",
        "taskcost.deployment": "api",
        "taskcost.harness.version": "env-sha",
    }
    assert from_env.items() >= expected.items()
    both = build_resource(infra={"engine": "vllm", "gpu_count": 8}, harness_version="arg-sha").attributes
    assert both["taskcost.engine.name"] == "vllm"
    assert both["taskcost.gpu.count"] == 8
    assert both["taskcost.harness.version"] == "arg-sha"
    assert both["taskcost.quantization"] == "awq-int4"  # not overridden: env still applies


def test_otel_env_resource_and_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "env-service")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,taskcost.cluster.id=otel-c")
    attributes = build_resource().attributes
    assert attributes["service.name"] == "env-service"
    assert attributes["deployment.environment"] == "staging"
    assert attributes["taskcost.cluster.id"] == "otel-c"
    attributes = build_resource(service_name="arg-service", infra={"cluster_id": "arg-c"}).attributes
    assert (attributes["service.name"], attributes["taskcost.cluster.id"]) == ("arg-service", "arg-c")


def test_otel_service_name_reaches_spans(taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "env-service")
    taskcost_spans.configure()
    with tc.task("bug_fix"):
        pass
    resource = taskcost_spans.resource()
    assert resource is not None and resource.attributes["service.name"] == "env-service"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"infra": {"deployment": "on_prem"}},
        {"infra": {"gpu_count": "eight"}},
        {"infra": {"gpus": 8}},
        {"resource_attributes": {"taskcost.deployment": "cloud"}},
        {"endpoint": "localhost:4318"},
        {"exporter": InMemorySpanExporter(), "span_processor": SimpleSpanProcessor(InMemorySpanExporter())},
        {"exporter": InMemorySpanExporter(), "endpoint": "http://collector:4318"},
    ],
)
def test_configure_rejects_bad_setup(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        tc.configure(**kwargs)
    assert not config.is_configured()


def test_configure_rejects_bad_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKCOST_DEPLOYMENT", "cloud")
    with pytest.raises(ValueError, match="TASKCOST_DEPLOYMENT"):
        tc.configure(span_processor=SimpleSpanProcessor(InMemorySpanExporter()))


def test_resolve_traces_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_traces_endpoint() == "http://localhost:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318/")
    assert resolve_traces_endpoint() == "http://base:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces:4318/custom/path")
    assert resolve_traces_endpoint() == "https://traces:4318/custom/path"  # as-is
    assert resolve_traces_endpoint("http://arg:4318") == "http://arg:4318/v1/traces"
    assert resolve_traces_endpoint("http://arg:4318/prefix/") == "http://arg:4318/prefix/v1/traces"
    assert resolve_traces_endpoint("http://arg:4318/v1/traces") == "http://arg:4318/v1/traces"
    assert resolve_traces_endpoint(env={}) == "http://localhost:4318/v1/traces"
    assert resolve_traces_endpoint(env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""}) == "http://localhost:4318/v1/traces"
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        resolve_traces_endpoint(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})


def test_default_exporter_uses_resolved_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env-base:4318")
    tc.configure(headers={"Authorization": "Bearer x"})
    provider = config._state.provider
    assert provider is not None
    [guard] = provider._active_span_processor._span_processors
    exporter = guard._inner.span_exporter._inner  # type: ignore[attr-defined]  # guard > batch > counting > OTLP
    assert exporter._endpoint == "http://env-base:4318/v1/traces"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_collector_does_not_block_the_agent() -> None:
    tc.configure(endpoint=f"http://127.0.0.1:{_closed_port()}", service_name="blocked?")
    provider = config._state.provider
    started = time.perf_counter()
    with tc.task("bug_fix") as t:
        for attempt in range(20):
            with t.llm_call("openai", "gpt-4o", attempt=attempt + 1) as c:
                c.set_usage(input_tokens=100, output_tokens=10)
        t.record_llm_call("openai", "gpt-4o", input_tokens=1, output_tokens=1)
    assert time.perf_counter() - started < 0.5
    started = time.perf_counter()
    tc.shutdown(timeout_millis=1000)
    assert time.perf_counter() - started < 3
    stop_exporting(provider)
    assert not config.is_configured()


def test_force_flush_with_configured_exporter() -> None:
    exporter = InMemorySpanExporter()
    tc.configure(exporter=exporter)  # wrapped in a BatchSpanProcessor
    with tc.task("bug_fix"):
        pass
    assert exporter.get_finished_spans() == ()
    assert tc.force_flush(timeout_millis=2000) is True
    assert [s.name for s in exporter.get_finished_spans()] == ["task bug_fix"]


def test_reconfigure_replaces_previous_setup() -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    tc.configure(span_processor=SimpleSpanProcessor(first))
    tc.configure(span_processor=SimpleSpanProcessor(second))
    with tc.task("bug_fix"):
        pass
    assert len(first.get_finished_spans()) == 0
    assert len(second.get_finished_spans()) == 1


def test_does_not_touch_global_provider_unless_asked() -> None:
    before = trace.get_tracer_provider()
    tc.configure(span_processor=SimpleSpanProcessor(InMemorySpanExporter()))
    assert trace.get_tracer_provider() is before


def _explode(*args: object, **kwargs: object) -> Any:
    raise RuntimeError("sdk bug")


def test_internal_errors_raise_under_pytest(taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spans.LLMCall, "_start_span", _explode)
    with pytest.raises(RuntimeError, match="sdk bug"), tc.llm_call("openai", "gpt-4o"):
        pass


def test_internal_errors_become_noops(
    taskcost_spans: CapturedSpans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TASKCOST_SDK_RAISE_INTERNAL", "0")
    monkeypatch.setattr(spans.LLMCall, "_start_span", _explode)
    ran = []
    with tc.task("bug_fix") as t:
        for _ in range(3):
            with t.llm_call("openai", "gpt-4o") as c:
                c.set_usage(input_tokens=1)
                ran.append(c.call_id)
    assert len(ran) == 3
    assert caplog.text.count("internal error in llm_call start") == 1  # logged once
    assert [a["taskcost.task.outcome"] for a in taskcost_spans.attributes("task ")] == ["completed"]
    # User exceptions still propagate while the SDK is broken.
    with pytest.raises(KeyError), tc.llm_call("openai", "gpt-4o"):
        raise KeyError("user")
