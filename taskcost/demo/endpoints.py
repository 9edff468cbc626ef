"""The demo's endpoints: two paid APIs, and one open model (``llama-3.1-70b-instruct``) served by seven vLLM
deployments, each a path prefix on the one fake model server (``/openai/v1``, ``/anthropic``,
``/vllm-h100-v060/v1``, ...).

The seven deployments differ in the five variables that make the same weights run several times apart:

| deployment | vLLM | GPUs | weights | topology | decoding |
|---|---|---|---|---|---|
| vllm-h100-v060 | 0.6.0 | 2x H100-SXM | fp8 | TP2 | plain |
| vllm-h100-v070 | 0.7.0 | 2x H100-SXM | fp8 | TP2 | plain |
| vllm-h100-v060-eagle | 0.6.0 | 2x H100-SXM | fp8 | TP2 | EAGLE, 3 draft tokens |
| vllm-h100-v060-bf16 | 0.6.0 | 4x H100-SXM | bf16 | TP4 | plain |
| vllm-h100-v070-pd | 0.7.0 | 2+2x H100-SXM | fp8 | prefill/decode split, TP2 each | plain |
| vllm-a100-v060 | 0.6.0 | 4x A100-80GB | bf16 | TP4 | plain |
| vllm-a100-v070 | 0.7.0 | 4x A100-80GB | bf16 | TP4 | plain |

Their speed (per request, at speed 1, with lognormal jitter): decode is memory-bound, so fp8 weights decode faster
than bf16 (half the bytes a token reads) and an H100 (3.35 TB/s) faster than an A100 (2.0 TB/s); prefill is
compute-bound, and an A100 prefills at about a third of an H100's rate. Speculation (EAGLE) emits 1 + the accepted
draft tokens per step at the cost of the draft passes: about 1.8x the decode speed at its acceptance (half the draft
tokens, mean acceptance length about 2.5), less for text it predicts badly. Colocated deployments slow down with
load (a prefill stalls the decodes that share its batch, and requests queue behind it); the prefill/decode split
keeps queueing and time to first token low under load and pays a KV-cache transfer per request. vLLM 0.7.0 decodes a
little faster than 0.6.0 but preempts long generations far more often and recomputes them: the p95 and p99 of its
calls and of its time to first token get worse (the regression a canary should catch).

Each deployment's infra tags reach the calls through the SDK's infra profiles (``infra_profiles``); its metrics page
is ``<base>/metrics`` on the fake server (``scrape_targets``: the server's engine scrape setting).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from taskcost.demo._vllm import Speculation

__all__ = [
    "ENDPOINTS",
    "POOLS",
    "SELF_HOSTED_MODEL",
    "SCRAPE_INTERVAL_S",
    "Endpoint",
    "Engine",
    "infra_profiles",
    "scrape_targets",
]

SELF_HOSTED_MODEL = "llama-3.1-70b-instruct"
SCRAPE_INTERVAL_S = 5


@dataclass(frozen=True)
class Engine:
    """How fast an endpoint answers (seconds and tokens per second at speed 1)."""

    queue_s: float  # median wait before prefill starts
    prefill_tps: float  # uncached input tokens per second
    decode_tps: float  # output tokens per second (median)
    jitter: float = 0.25  # lognormal sigma of each request's speed
    # chance of a stall (preemption, recompute) for a 250-token answer, more for longer ones (at most 0.6): the
    # request decodes stall_factor times slower
    stall_p: float = 0.0
    stall_factor: float = 1.0
    stall_s: float = 0.0  # and waits this long more before its first token
    # load: for each request already in flight, this much more queueing, and prefill and decode this much slower
    queue_per_request_s: float = 0.0
    prefill_per_request: float = 0.0
    decode_per_request: float = 0.0
    kv_transfer_s: float = 0.0  # prefill/decode split: moving the prompt's KV cache to the decode pool


@dataclass(frozen=True)
class Endpoint:
    name: str  # the path prefix on the fake server
    client: Literal["openai", "anthropic"]  # the client library that talks to it
    cache: Literal["openai", "anthropic", "vllm"]
    engine: Engine
    response_models: Mapping[str, str] = field(default_factory=dict)  # requested -> answered (dated snapshot)
    # self-hosted: the SDK infra profile (taskcost.* tags) and the clusters file entry
    engine_version: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    quantization: str | None = None
    catalogue: str | None = None  # GPU rate: an offer of taskcost's shipped catalogue (`taskcost prices gpus`)
    tensor_parallel: int = 1  # per pool, when prefill and decode are split
    pd_split: bool = False  # prefill and decode on pools of their own (each gpu_count / 2 GPUs of gpu_type)
    speculation: Speculation | None = None
    kv_cache_tokens: int = 200_000  # tokens the (decode) pool's KV cache holds

    @property
    def self_hosted(self) -> bool:
        return self.engine_version is not None

    @property
    def cluster_id(self) -> str:
        return f"demo-{self.name.removeprefix('vllm-')}"

    def base_url(self, fake_url: str) -> str:
        return f"{fake_url}/{self.name}" + ("/v1" if self.client == "openai" else "")

    def metrics_url(self, fake_url: str) -> str:
        return f"{fake_url}/{self.name}/metrics"

    def profile(self) -> dict[str, Any]:
        """The SDK's infra profile for this endpoint's base URL."""
        if not self.self_hosted:
            return {"deployment": "api"}
        spec = self.speculation
        profile = {
            "provider": "vllm",
            "engine": "vllm",
            "engine_version": self.engine_version,
            "quantization": self.quantization,
            "gpu_type": self.gpu_type,
            "gpu_count": self.gpu_count,
            "cluster_id": self.cluster_id,
            "deployment": "self_hosted",
            "parallel_tensor": self.tensor_parallel,
            "parallel_pipeline": 1,
            "parallel_data": 1,
            "pd_disaggregated": self.pd_split,
            "spec_method": spec.method if spec is not None else "none",
            "container_image_name": "vllm/vllm-openai",
            "container_image_tags": [f"v{self.engine_version}"],
            "k8s_cluster_name": "demo-gpu",
            "cloud_region": "demo-region-1",
        }
        if spec is not None and spec.draft_model:
            profile["spec_draft_model"] = spec.draft_model
        if self.pd_split:
            profile["pd_prefill_gpu_type"] = profile["pd_decode_gpu_type"] = self.gpu_type
        return profile


_OPENAI = Engine(queue_s=0.25, prefill_tps=25_000, decode_tps=85, jitter=0.3, stall_p=0.02, stall_factor=2.0)
_ANTHROPIC = Engine(queue_s=0.45, prefill_tps=20_000, decode_tps=65, jitter=0.3, stall_p=0.02, stall_factor=2.0)
# colocated vLLM: every request in flight queues the next one a little and shares its batches
_LOAD = {"queue_per_request_s": 0.15, "prefill_per_request": 0.1, "decode_per_request": 0.06}
_STEADY = {"stall_p": 0.01, "stall_factor": 1.3}  # vLLM 0.6.0: rare preemptions
_PREEMPTS = {"stall_p": 0.12, "stall_factor": 2.5}  # vLLM 0.7.0: long generations preempted and recomputed
_H100_FP8_060 = Engine(queue_s=0.05, prefill_tps=9_000, decode_tps=52, jitter=0.15, **_STEADY, **_LOAD)
_H100_FP8_070 = Engine(queue_s=0.05, prefill_tps=10_000, decode_tps=58, jitter=0.15, stall_s=2.0, **_PREEMPTS, **_LOAD)
_H100_BF16_060 = Engine(queue_s=0.05, prefill_tps=8_000, decode_tps=40, jitter=0.15, **_STEADY, **_LOAD)
_H100_EAGLE_060 = Engine(queue_s=0.05, prefill_tps=8_500, decode_tps=52, jitter=0.15, **_STEADY, **_LOAD)
_H100_PD_070 = Engine(
    queue_s=0.02,
    prefill_tps=10_000,
    decode_tps=60,
    jitter=0.12,
    stall_p=0.03,
    stall_factor=1.5,
    stall_s=0.5,
    queue_per_request_s=0.02,
    decode_per_request=0.02,
    kv_transfer_s=0.04,
)
_A100_060 = Engine(queue_s=0.08, prefill_tps=3_000, decode_tps=26, jitter=0.15, **_STEADY, **_LOAD)
_A100_070 = Engine(queue_s=0.08, prefill_tps=3_300, decode_tps=29, jitter=0.15, stall_s=2.5, **_PREEMPTS, **_LOAD)
# EAGLE for Llama 3 70B: 3 draft tokens a step, each accepted (when the ones before were) with these chances;
# a draft pass costs about a tenth of a step of the 70B model
_EAGLE = Speculation(
    method="eagle",
    draft_model="yuhuili/EAGLE-LLaMA3-Instruct-70B",
    tokens=3,
    accept=(0.75, 0.65, 0.55),
    draft_cost=0.12,
)
_H100 = {"gpu_type": "H100-SXM", "catalogue": "lambda-8x-h100-sxm"}
_A100 = {"gpu_type": "A100-80GB", "catalogue": "lambda-8x-a100-80gb-sxm"}


def _vllm(name: str, engine: Engine, version: str, quant: str, count: int, **more: Any) -> Endpoint:
    return Endpoint(name, "openai", "vllm", engine, engine_version=version, quantization=quant, gpu_count=count, **more)


ENDPOINTS: dict[str, Endpoint] = {
    e.name: e
    for e in (
        Endpoint(
            "openai",
            "openai",
            "openai",
            _OPENAI,
            {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini-2024-07-18"},
        ),
        Endpoint(
            "anthropic",
            "anthropic",
            "anthropic",
            _ANTHROPIC,
            {"claude-sonnet-4-5": "claude-sonnet-4-5-20250929", "claude-haiku-4-5": "claude-haiku-4-5-20251001"},
        ),
        _vllm("vllm-h100-v060", _H100_FP8_060, "0.6.0", "fp8", 2, tensor_parallel=2, kv_cache_tokens=220_000, **_H100),
        _vllm("vllm-h100-v070", _H100_FP8_070, "0.7.0", "fp8", 2, tensor_parallel=2, kv_cache_tokens=220_000, **_H100),
        _vllm("vllm-a100-v060", _A100_060, "0.6.0", "bf16", 4, tensor_parallel=4, kv_cache_tokens=450_000, **_A100),
        _vllm("vllm-a100-v070", _A100_070, "0.7.0", "bf16", 4, tensor_parallel=4, kv_cache_tokens=450_000, **_A100),
        _vllm(
            "vllm-h100-v060-eagle",
            _H100_EAGLE_060,
            "0.6.0",
            "fp8",
            2,
            tensor_parallel=2,
            speculation=_EAGLE,
            kv_cache_tokens=200_000,
            **_H100,
        ),
        _vllm(
            "vllm-h100-v060-bf16",
            _H100_BF16_060,
            "0.6.0",
            "bf16",
            4,
            tensor_parallel=4,
            kv_cache_tokens=450_000,
            **_H100,
        ),
        _vllm(
            "vllm-h100-v070-pd",
            _H100_PD_070,
            "0.7.0",
            "fp8",
            4,
            tensor_parallel=2,
            pd_split=True,
            kv_cache_tokens=220_000,
            **_H100,
        ),
    )
}

POOLS: dict[str, tuple[str, ...]] = {
    # a self-hosted agent's tasks go round these deployments, one task each (0.6.0 takes most of the traffic)
    "h100": ("vllm-h100-v060", "vllm-h100-v070", "vllm-h100-v060-eagle", "vllm-h100-v060-bf16", "vllm-h100-v070-pd"),
    "a100": ("vllm-a100-v060", "vllm-a100-v070", "vllm-a100-v060"),
}


def infra_profiles(fake_url: str) -> dict[str, dict[str, Any]]:
    """``tc.configure(infra_profiles=...)``: every endpoint's base URL on the fake server and its infra tags."""
    return {e.base_url(fake_url): e.profile() for e in ENDPOINTS.values()}


def scrape_targets(fake_url: str) -> list[dict[str, Any]]:
    """The self-hosted deployments' metrics pages, as the server's engine scrape setting lists them."""
    return [
        {
            "url": e.metrics_url(fake_url),
            "cluster_id": e.cluster_id,
            "engine": "vllm",
            "model": SELF_HOSTED_MODEL,
            "interval_s": SCRAPE_INTERVAL_S,
        }
        for e in ENDPOINTS.values()
        if e.self_hosted
    ]
