"""Attribute names the collector reads. The contract is docs/attributes.md."""

# OpenTelemetry GenAI (v1.41.0) and general names
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
PROVIDER_LEGACY = "gen_ai.system"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_write.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TTFT = "gen_ai.response.time_to_first_chunk"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_VERSION = "gen_ai.agent.version"
TOOL_NAME = "gen_ai.tool.name"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVICE_NAME = "service.name"
IMAGE_NAME = "container.image.name"
IMAGE_TAGS = "container.image.tags"
K8S_CLUSTER = "k8s.cluster.name"
CLOUD_REGION = "cloud.region"

# taskcost's own names, for what OpenTelemetry lacks
TASK_ID = "taskcost.task.id"
TASK_KIND = "taskcost.task.kind"
TASK_OUTCOME = "taskcost.task.outcome"
TASK_GOLDEN = "taskcost.task.golden"
HARNESS_VERSION = "taskcost.harness.version"
CALL_ID = "taskcost.call.id"
CALL_ATTEMPT = "taskcost.call.attempt"
PROMPT_BLOCK_CHARS = "taskcost.prompt.block_chars"
PROMPT_BLOCK_KINDS = "taskcost.prompt.block_kinds"
PROMPT_STABLE_PREFIX_CHARS = "taskcost.prompt.stable_prefix_chars"
PROMPT_PREFIX_BREAK_BLOCK = "taskcost.prompt.prefix_break_block"
ENGINE = "taskcost.engine.name"
ENGINE_VERSION = "taskcost.engine.version"
QUANTIZATION = "taskcost.quantization"
GPU_TYPE = "taskcost.gpu.type"
GPU_COUNT = "taskcost.gpu.count"
CLUSTER_ID = "taskcost.cluster.id"
DEPLOYMENT = "taskcost.deployment"
TOOL_COST = "taskcost.tool.cost_usd"
DUPLICATE_OF = "taskcost.call.duplicate_of"
# the engine view (docs/attributes.md): timings the response itself reported (llama.cpp's ``timings``), on the call span
ENGINE_PREFILL_S = "taskcost.engine.prefill_s"
ENGINE_DECODE_S = "taskcost.engine.decode_s"
ENGINE_PREFILL_TOKENS = "taskcost.engine.prefill_tokens"
ENGINE_CACHED_TOKENS = "taskcost.engine.cached_tokens"
ENGINE_DECODE_TOKENS = "taskcost.engine.decode_tokens"
SPEC_DRAFT_TOKENS = "taskcost.spec.draft_tokens"
SPEC_ACCEPTED_TOKENS = "taskcost.spec.accepted_tokens"
# ... and the topology and decoding tags (resource or call span, like the GPU type)
PARALLEL_TENSOR = "taskcost.parallel.tensor"
PARALLEL_PIPELINE = "taskcost.parallel.pipeline"
PARALLEL_DATA = "taskcost.parallel.data"
PD_DISAGGREGATED = "taskcost.pd.disaggregated"
PD_PREFILL_GPU_TYPE = "taskcost.pd.prefill_gpu_type"
PD_DECODE_GPU_TYPE = "taskcost.pd.decode_gpu_type"
SPEC_METHOD = "taskcost.spec.method"
SPEC_DRAFT_MODEL = "taskcost.spec.draft_model"

# OpenTelemetry's attributes that choose a price variant (the service tier), the response's first; the pricing
# settings' default (taskcost.pricing.DEFAULT_PRICING_ATTRIBUTES maps them to what they choose; a test pins both)
PRICING_ATTRIBUTES = (
    "openai.response.service_tier",
    "openai.request.service_tier",
    "gen_ai.openai.response.service_tier",
    "gen_ai.openai.request.service_tier",
)

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
TOOL_OPERATION = "execute_tool"
OUTCOMES = frozenset({"completed", "failed", "abandoned"})
DEPLOYMENTS = frozenset({"api", "self_hosted"})
