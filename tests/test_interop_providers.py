"""Provider names of every convention reach a price: the normaliser makes them OpenTelemetry ids, the pricing
module maps those to the price data's providers. A name that prices nowhere would silently make calls unpriced."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from taskcost.normalize import normalize_request
from taskcost.pricing import TokenUsage, price_call
from tests.interop.otlp import S, request

# -- provider ids: every name the normaliser produces is one the price library knows ------------------------------

PRICED = [
    ({"llm.provider": "openai"}, "gpt-4o", "openai"),
    ({"llm.provider": "azure"}, "gpt-4o", "openai"),
    ({"gen_ai.provider.name": "azure.ai.openai"}, "gpt-4o", "openai"),
    ({"llm.provider": "anthropic"}, "claude-sonnet-4-5", "anthropic"),
    ({"llm.provider": "google"}, "gemini-2.5-flash", "google"),
    ({"gen_ai.provider.name": "gcp.gen_ai"}, "gemini-2.5-flash", "google"),
    ({"llm.system": "vertexai"}, "gemini-2.5-pro", "google"),
    ({"gen_ai.system": "vertex_ai"}, "gemini-2.5-pro", "google"),
    ({"gen_ai.system": "gemini"}, "gemini-2.5-pro", "google"),
    ({"llm.provider": "xai"}, "grok-3", "x-ai"),
    ({"gen_ai.provider.name": "x_ai"}, "grok-3", "x-ai"),
    ({"llm.provider": "mistralai"}, "mistral-large-latest", "mistral"),
    ({"gen_ai.provider.name": "mistral_ai"}, "mistral-large-latest", "mistral"),
    ({"llm.provider": "aws"}, "anthropic.claude-3-5-sonnet-20240620-v1:0", "aws"),
    ({"llm.provider": "moonshot"}, "kimi-k2-0905-preview", "moonshotai"),
    ({"llm.provider": "deepseek"}, "deepseek-chat", "deepseek"),
    ({"llm.provider": "groq"}, "llama-3.3-70b-versatile", "groq"),
    ({"llm.provider": "cohere"}, "command-r-plus", "cohere"),
    ({"llm.provider": "perplexity"}, "sonar", "perplexity"),
    ({"llm.provider": "fireworks"}, "accounts/fireworks/models/llama-v3p1-8b-instruct", "fireworks"),
    ({"llm.provider": "together"}, "meta-llama/Llama-3.3-70B-Instruct-Turbo", "together"),
    ({"llm.provider": "cerebras"}, "llama3.1-8b", "cerebras"),
    ({"gen_ai.provider.name": "azure.ai.inference"}, "gpt-4o", "azure"),
]


@pytest.mark.parametrize(("attrs", "model", "price_provider"), PRICED)
def test_provider_names_of_every_convention_reach_a_price(
    attrs: dict[str, Any], model: str, price_provider: str
) -> None:
    span = S("call", 1, attrs={**attrs, "gen_ai.request.model": model, "gen_ai.usage.input_tokens": 1000})
    [call] = normalize_request(request(span)).llm_calls
    price = price_call(
        call.provider,
        call.request_model,
        TokenUsage(input_tokens=1000, output_tokens=100),
        datetime(2026, 6, 1, tzinfo=UTC),
    )
    assert price.unpriced_reason is None, price.unpriced_reason
    assert price.provider_id == price_provider and price.cost_usd is not None and price.cost_usd > 0
