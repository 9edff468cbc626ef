"""Which attribute names the normaliser reads for each canonical field, in precedence order.

One table for every convention in the wild: OpenTelemetry GenAI (v1.41.0 names, the semconv-genai renames in
flight, and the deprecated names), OpenInference (Arize), OpenLLMetry/Traceloop (current and legacy), and vLLM's own
server spans. For each field the first name present with a usable value wins, left to right, so a span that carries
two conventions at once (an OTel name *and* an OpenInference name for the same count) is read once, never summed.
docs/conventions.md is the human page for this table; a test keeps the two in step.
"""

from __future__ import annotations

from types import MappingProxyType

from taskcost.normalize import _names as N

# -- token counts (all input counts are inclusive of cache reads and writes, in every family) -----------------------
INPUT_TOKENS = (
    N.INPUT_TOKENS,  # OTel
    "gen_ai.usage.prompt_tokens",  # OTel deprecated; OpenLLMetry legacy; vLLM server spans
    "llm.token_count.prompt",  # OpenInference
)
OUTPUT_TOKENS = (
    N.OUTPUT_TOKENS,
    "gen_ai.usage.completion_tokens",  # OTel deprecated; OpenLLMetry legacy; vLLM server spans
    "llm.token_count.completion",  # OpenInference
)
CACHE_READ_TOKENS = (
    N.CACHE_READ_TOKENS,
    "llm.token_count.prompt_details.cache_read",  # OpenInference
    "gen_ai.usage.cache_read_input_tokens",  # OpenLLMetry before semconv-ai 0.5.0
    "gen_ai.usage.cached_tokens",  # vLLM server spans
)
CACHE_WRITE_TOKENS = (
    N.CACHE_WRITE_TOKENS,  # semconv-genai rename (preferred)
    N.CACHE_CREATION_TOKENS,  # OTel v1.40-v1.41 name
    "llm.token_count.prompt_details.cache_write",  # OpenInference
    "gen_ai.usage.cache_creation_input_tokens",  # OpenLLMetry before semconv-ai 0.5.0
)
REASONING_TOKENS = (
    N.REASONING_TOKENS,
    "llm.token_count.completion_details.reasoning",  # OpenInference
    "gen_ai.usage.reasoning_tokens",  # OpenLLMetry
    "llm.usage.reasoning_tokens",  # OpenLLMetry legacy
)
TOTAL_TOKENS = (
    "llm.token_count.total",  # OpenInference
    "gen_ai.usage.total_tokens",  # OpenLLMetry
    "llm.usage.total_tokens",  # OpenLLMetry legacy
)

# -- what was called -------------------------------------------------------------------------------------------------
PROVIDER = (N.PROVIDER, N.PROVIDER_LEGACY, "llm.provider", "llm.system")
REQUEST_MODEL = (N.REQUEST_MODEL, "llm.request.model_name", "llm.model_name", "embedding.model_name")
RESPONSE_MODEL = (N.RESPONSE_MODEL, "llm.response.model_name", "llm.model_name")
RESPONSE_ID = (N.RESPONSE_ID,)
# OpenInference puts no response id attribute on its spans, but its `output.value` is the provider's JSON answer:
# its top-level "id" is the response id (read only when `output.mime_type` says JSON).
OI_OUTPUT_VALUE = "output.value"
OI_OUTPUT_MIME = "output.mime_type"
SERVER_ADDRESS = (N.SERVER_ADDRESS,)
OPENAI_API_BASE = "gen_ai.openai.api_base"  # OpenLLMetry: a URL; its host is the server address

# -- time to first token (seconds) -------------------------------------------------------------------------------
TTFT = (
    N.TTFT,  # OTel v1.41.0
    "gen_ai.latency.time_to_first_token",  # vLLM server spans
)
OPENLIT_TTFT = "gen_ai.server.time_to_first_token"  # openlit: read only on streamed calls (else it is the latency)
STREAM_FLAGS = ("gen_ai.request.stream", "gen_ai.is_streaming", "llm.is_streaming")
# Events that mark the first streamed chunk, when no TTFT attribute is present: offset from the span start.
FIRST_CHUNK_EVENTS = ("First Token Stream Event", "gen_ai.content.completion.chunk")

# -- context ---------------------------------------------------------------------------------------------------------
CONVERSATION_ID = (N.CONVERSATION_ID, "session.id", "traceloop.association.properties.session_id")
AGENT_NAME = (N.AGENT_NAME, "agent.name")
TOOL_NAME = (N.TOOL_NAME, "tool.name")
WORKFLOW_NAME = ("traceloop.workflow.name", "gen_ai.workflow.name")
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"  # the agent's or tool's name when traceloop.span.kind says so
ERROR_TYPE = (N.ERROR_TYPE,)
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"

# -- the operation, and so the span's role ----------------------------------------------------------------------------
OPERATION = N.OPERATION
OI_SPAN_KIND = "openinference.span.kind"
LLM_REQUEST_TYPE = "llm.request.type"  # OpenLLMetry legacy
TRACELOOP_SPAN_KIND = "traceloop.span.kind"

OI_SPAN_KIND_OPERATIONS = MappingProxyType(
    {
        "LLM": "chat",
        "EMBEDDING": "embeddings",
        "TOOL": "execute_tool",
        "AGENT": "invoke_agent",
        "CHAIN": "invoke_workflow",
        "RETRIEVER": "retrieval",
        "RERANKER": "rerank",
    }
)
LLM_REQUEST_TYPE_OPERATIONS = MappingProxyType(
    {"chat": "chat", "completion": "text_completion", "embedding": "embeddings", "rerank": "rerank"}
)
TRACELOOP_SPAN_KIND_OPERATIONS = MappingProxyType(
    {"tool": "execute_tool", "agent": "invoke_agent", "workflow": "invoke_workflow"}
)
# Spans of these operations aggregate the work beneath them (semconv lets invoke_agent carry the usage of all the
# agent's calls): their token counts are never counted as an LLM call of their own.
AGGREGATE_OPERATIONS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})

# -- provider names -> OpenTelemetry `gen_ai.provider.name` ids --------------------------------------------------------
# The stored `provider` is the OTel id: deprecated `gen_ai.system` values and OpenInference/OpenLLMetry vendor names
# are translated here (keys lower-case). Unknown names are kept as sent. Price-library ids are the pricing module's
# business (taskcost.pricing.PROVIDER_IDS maps OTel ids to them); this table only makes the names uniform.
PROVIDER_OTEL_IDS = MappingProxyType(
    {
        # current OTel ids map to themselves (this also lower-cases "OpenAI", "Anthropic" from older emitters)
        "openai": "openai",
        "anthropic": "anthropic",
        "cohere": "cohere",
        "deepseek": "deepseek",
        "groq": "groq",
        "perplexity": "perplexity",
        "x_ai": "x_ai",
        "mistral_ai": "mistral_ai",
        "moonshot_ai": "moonshot_ai",
        "aws.bedrock": "aws.bedrock",
        "azure.ai.openai": "azure.ai.openai",
        "azure.ai.inference": "azure.ai.inference",
        "gcp.gen_ai": "gcp.gen_ai",
        "gcp.vertex_ai": "gcp.vertex_ai",
        "gcp.gemini": "gcp.gemini",
        "ibm.watsonx.ai": "ibm.watsonx.ai",
        # deprecated gen_ai.system values (before v1.37) and OpenLLMetry legacy vendor names
        "xai": "x_ai",
        "vertex_ai": "gcp.vertex_ai",
        "gemini": "gcp.gemini",
        "az.ai.openai": "azure.ai.openai",
        "az.ai.inference": "azure.ai.inference",
        "bedrock": "aws.bedrock",
        "mistral": "mistral_ai",
        "watsonx": "ibm.watsonx.ai",
        # OpenInference llm.provider / llm.system values
        "mistralai": "mistral_ai",
        "google": "gcp.gen_ai",
        "vertexai": "gcp.vertex_ai",
        "azure": "azure.ai.openai",
        "aws": "aws.bedrock",
        "moonshot": "moonshot_ai",
    }
)

# -- vLLM's own server spans -----------------------------------------------------------------------------------------
VLLM_SCOPE_PREFIX = "vllm"
VLLM_RESOURCE_MARK = "vllm.instrumenting_module_name"
VLLM_ENGINE = "vllm"  # the engine of a span of vLLM's shape that names none
# an engine's server span is never an LLM call (its client's span is): it is an engine-span record (_engine)
ENGINE_REQUEST_ID = "gen_ai.request.id"
ENGINE_PROMPT_TOKENS = ("gen_ai.usage.prompt_tokens", N.INPUT_TOKENS)
ENGINE_COMPLETION_TOKENS = ("gen_ai.usage.completion_tokens", N.OUTPUT_TOKENS)
ENGINE_CACHED_TOKENS = ("gen_ai.usage.cached_tokens", N.CACHE_READ_TOKENS)
LATENCY_QUEUE = "gen_ai.latency.time_in_queue"
LATENCY_TTFT = "gen_ai.latency.time_to_first_token"
LATENCY_E2E = "gen_ai.latency.e2e"
LATENCY_PREFILL = "gen_ai.latency.time_in_model_prefill"
LATENCY_DECODE = "gen_ai.latency.time_in_model_decode"
LATENCY_INFERENCE = "gen_ai.latency.time_in_model_inference"
# vLLM sets these two on every request span: either one marks an engine's server span whatever its scope
ENGINE_SPAN_MARKS = (LATENCY_E2E, LATENCY_QUEUE)

# -- task identity (the default; NormalizeRules makes it configurable) ------------------------------------------------
DEFAULT_TASK_ID_ATTRIBUTES = (N.TASK_ID, *CONVERSATION_ID)
# Root spans with one of these markers are agent runs or workflows: a task even before any call arrives.
TASK_MARKER_OPERATIONS = AGGREGATE_OPERATIONS

READ_NAMES: tuple[str, ...] = (
    *INPUT_TOKENS,
    *OUTPUT_TOKENS,
    *CACHE_READ_TOKENS,
    *CACHE_WRITE_TOKENS,
    *REASONING_TOKENS,
    *TOTAL_TOKENS,
    *PROVIDER,
    *REQUEST_MODEL,
    *RESPONSE_MODEL,
    *RESPONSE_ID,
    OI_OUTPUT_VALUE,
    OI_OUTPUT_MIME,
    *SERVER_ADDRESS,
    OPENAI_API_BASE,
    *TTFT,
    OPENLIT_TTFT,
    *STREAM_FLAGS,
    *CONVERSATION_ID,
    *AGENT_NAME,
    *TOOL_NAME,
    *WORKFLOW_NAME,
    TRACELOOP_ENTITY_NAME,
    *ERROR_TYPE,
    OPERATION,
    OI_SPAN_KIND,
    LLM_REQUEST_TYPE,
    TRACELOOP_SPAN_KIND,
)
"""Every foreign or OTel attribute name the normaliser reads for a call (the `taskcost.*` names are in _names)."""

ENGINE_READ_NAMES: tuple[str, ...] = (
    ENGINE_REQUEST_ID,
    LATENCY_QUEUE,
    LATENCY_TTFT,
    LATENCY_E2E,
    LATENCY_PREFILL,
    LATENCY_DECODE,
    LATENCY_INFERENCE,
)
"""The names an engine's server span is read by (besides the token counts above)."""
