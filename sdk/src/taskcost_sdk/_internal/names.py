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

# Infra tags: keyword (in configure(infra=...) and per-call overrides) -> attribute name.
INFRA_ATTRIBUTES: Final[dict[str, str]] = {
    "engine": ENGINE_NAME,
    "engine_version": ENGINE_VERSION,
    "quantization": QUANTIZATION,
    "gpu_type": GPU_TYPE,
    "gpu_count": GPU_COUNT,
    "cluster_id": CLUSTER_ID,
    "deployment": DEPLOYMENT,
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
    "TASKCOST_HARNESS_VERSION": "harness_version",
}
