"""What span attributes can tell the pricer, and the attributes read by default: plain data, importable without the
price data library (the settings' defaults need it on every command)."""

from __future__ import annotations

__all__ = ["DEFAULT_PRICING_ATTRIBUTES", "PRICING_TARGETS"]

PRICING_TARGETS = ("service_tier", "processing", "speed", "cache_write_1h_tokens")
"""What a span attribute can tell the pricer: a genai-prices price-variant key, or the 1h cache writes."""

DEFAULT_PRICING_ATTRIBUTES: dict[str, str] = {
    "openai.response.service_tier": "service_tier",
    "openai.request.service_tier": "service_tier",
    "gen_ai.openai.response.service_tier": "service_tier",
    "gen_ai.openai.request.service_tier": "service_tier",
}
"""OpenTelemetry's names (and their deprecated forms), the response's first: first found wins per target."""
