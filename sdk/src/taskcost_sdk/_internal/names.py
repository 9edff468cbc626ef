"""Attribute names, exactly as listed in docs/attributes.md (the attribute contract).

Every ``taskcost.*`` name the SDK emits is defined here and nowhere else; a test checks them against the doc.
"""

from __future__ import annotations

from typing import Final

# OpenTelemetry names.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_VERSION: Final = "gen_ai.agent.version"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVICE_NAME: Final = "service.name"
CONTAINER_IMAGE_NAME: Final = "container.image.name"
CONTAINER_IMAGE_TAGS: Final = "container.image.tags"
K8S_CLUSTER_NAME: Final = "k8s.cluster.name"
CLOUD_REGION: Final = "cloud.region"
SERVER_PORT: Final = "server.port"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
HTTP_REQUEST_RESEND_COUNT: Final = "http.request.resend_count"

# taskcost names (what OpenTelemetry lacks).
TASK_ID: Final = "taskcost.task.id"
TASK_KIND: Final = "taskcost.task.kind"
TASK_GOLDEN: Final = "taskcost.task.golden"
TASK_OUTCOME: Final = "taskcost.task.outcome"
HARNESS_VERSION: Final = "taskcost.harness.version"
CALL_ID: Final = "taskcost.call.id"
CALL_ATTEMPT: Final = "taskcost.call.attempt"
ENGINE_NAME: Final = "taskcost.engine.name"
ENGINE_VERSION: Final = "taskcost.engine.version"
QUANTIZATION: Final = "taskcost.quantization"
GPU_TYPE: Final = "taskcost.gpu.type"
GPU_COUNT: Final = "taskcost.gpu.count"
CLUSTER_ID: Final = "taskcost.cluster.id"
DEPLOYMENT: Final = "taskcost.deployment"
TOOL_COST_USD: Final = "taskcost.tool.cost_usd"
# Engine view: timings the response itself reported (llama.cpp's ``timings``), on the call span.
ENGINE_PREFILL_S: Final = "taskcost.engine.prefill_s"
ENGINE_DECODE_S: Final = "taskcost.engine.decode_s"
ENGINE_PREFILL_TOKENS: Final = "taskcost.engine.prefill_tokens"
ENGINE_CACHED_TOKENS: Final = "taskcost.engine.cached_tokens"
ENGINE_DECODE_TOKENS: Final = "taskcost.engine.decode_tokens"
SPEC_DRAFT_TOKENS: Final = "taskcost.spec.draft_tokens"
SPEC_ACCEPTED_TOKENS: Final = "taskcost.spec.accepted_tokens"
# Engine view: topology and decoding tags (resource, call span or infra profile, like the GPU type).
PARALLEL_TENSOR: Final = "taskcost.parallel.tensor"
PARALLEL_PIPELINE: Final = "taskcost.parallel.pipeline"
PARALLEL_DATA: Final = "taskcost.parallel.data"
PD_DISAGGREGATED: Final = "taskcost.pd.disaggregated"
PD_PREFILL_GPU_TYPE: Final = "taskcost.pd.prefill_gpu_type"
PD_DECODE_GPU_TYPE: Final = "taskcost.pd.decode_gpu_type"
SPEC_METHOD: Final = "taskcost.spec.method"
SPEC_DRAFT_MODEL: Final = "taskcost.spec.draft_model"
# Proposed for the contract (issue 7): agent-level retries, duplicate spans, prompt-prefix fingerprints.
CALL_RETRY_REASON: Final = "taskcost.call.retry_reason"
CALL_DUPLICATE_OF: Final = "taskcost.call.duplicate_of"
PROMPT_BLOCK_HASHES: Final = "taskcost.prompt.block_hashes"
PROMPT_BLOCK_CHARS: Final = "taskcost.prompt.block_chars"
PROMPT_BLOCK_KINDS: Final = "taskcost.prompt.block_kinds"
PROMPT_STABLE_PREFIX_BLOCKS: Final = "taskcost.prompt.stable_prefix_blocks"
PROMPT_STABLE_PREFIX_CHARS: Final = "taskcost.prompt.stable_prefix_chars"
PROMPT_PREFIX_BREAK_BLOCK: Final = "taskcost.prompt.prefix_break_block"
PROMPT_CACHE_BREAKERS: Final = "taskcost.prompt.cache_breakers"

OPERATION_CHAT: Final = "chat"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"

OUTCOMES: Final = frozenset({"completed", "failed", "abandoned"})
DEPLOYMENTS: Final = frozenset({"api", "self_hosted"})
# Known speculative decoding methods; any other lower-case identifier is accepted too.
SPEC_METHODS: Final = ("none", "eagle", "eagle3", "ngram", "draft_model", "mtp", "medusa")
# Infra tags whose value is a parallel size (an int >= 1), or a yes/no.
PARALLEL_SIZES: Final = frozenset({"parallel_tensor", "parallel_pipeline", "parallel_data"})
FLAGS: Final = frozenset({"pd_disaggregated"})

# Engine timings: LLMCall.set_engine_timings() keyword -> attribute name (seconds first, then counts).
ENGINE_TIMING_SECONDS: Final[dict[str, str]] = {"prefill_s": ENGINE_PREFILL_S, "decode_s": ENGINE_DECODE_S}
ENGINE_TIMING_COUNTS: Final[dict[str, str]] = {
    "prefill_tokens": ENGINE_PREFILL_TOKENS,
    "cached_tokens": ENGINE_CACHED_TOKENS,
    "decode_tokens": ENGINE_DECODE_TOKENS,
    "draft_tokens": SPEC_DRAFT_TOKENS,
    "accepted_tokens": SPEC_ACCEPTED_TOKENS,
}

# Infra tags: keyword (in configure(infra=...) and per-call overrides) -> attribute name.
INFRA_ATTRIBUTES: Final[dict[str, str]] = {
    "engine": ENGINE_NAME,
    "engine_version": ENGINE_VERSION,
    "quantization": QUANTIZATION,
    "gpu_type": GPU_TYPE,
    "gpu_count": GPU_COUNT,
    "cluster_id": CLUSTER_ID,
    "deployment": DEPLOYMENT,
    "parallel_tensor": PARALLEL_TENSOR,
    "parallel_pipeline": PARALLEL_PIPELINE,
    "parallel_data": PARALLEL_DATA,
    "pd_disaggregated": PD_DISAGGREGATED,
    "pd_prefill_gpu_type": PD_PREFILL_GPU_TYPE,
    "pd_decode_gpu_type": PD_DECODE_GPU_TYPE,
    "spec_method": SPEC_METHOD,
    "spec_draft_model": SPEC_DRAFT_MODEL,
    "container_image_name": CONTAINER_IMAGE_NAME,
    "container_image_tags": CONTAINER_IMAGE_TAGS,
    "k8s_cluster_name": K8S_CLUSTER_NAME,
    "cloud_region": CLOUD_REGION,
    "harness_version": HARNESS_VERSION,
}

# Per-call overrides accept the infra tags plus the host of the inference endpoint.
CALL_OVERRIDE_ATTRIBUTES: Final[dict[str, str]] = {**INFRA_ATTRIBUTES, "server_address": SERVER_ADDRESS}

# Environment variable -> infra keyword.
INFRA_ENV_VARS: Final[dict[str, str]] = {
    "TASKCOST_ENGINE": "engine",
    "TASKCOST_ENGINE_VERSION": "engine_version",
    "TASKCOST_QUANTIZATION": "quantization",
    "TASKCOST_GPU_TYPE": "gpu_type",
    "TASKCOST_GPU_COUNT": "gpu_count",
    "TASKCOST_CLUSTER_ID": "cluster_id",
    "TASKCOST_DEPLOYMENT": "deployment",
    "TASKCOST_PARALLEL_TENSOR": "parallel_tensor",
    "TASKCOST_PARALLEL_PIPELINE": "parallel_pipeline",
    "TASKCOST_PARALLEL_DATA": "parallel_data",
    "TASKCOST_PD_DISAGGREGATED": "pd_disaggregated",
    "TASKCOST_PD_PREFILL_GPU_TYPE": "pd_prefill_gpu_type",
    "TASKCOST_PD_DECODE_GPU_TYPE": "pd_decode_gpu_type",
    "TASKCOST_SPEC_METHOD": "spec_method",
    "TASKCOST_SPEC_DRAFT_MODEL": "spec_draft_model",
    "TASKCOST_HARNESS_VERSION": "harness_version",
}
