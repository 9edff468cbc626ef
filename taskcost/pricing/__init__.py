"""Pricing: pure, time-aware functions over price data. Prices come from genai-prices."""

from taskcost.pricing._api import (
    PRICE_SOURCE,
    PROVIDER_IDS,
    CallPrice,
    TokenUsage,
    price_call,
    price_library_provider,
)

__all__ = [
    "PRICE_SOURCE",
    "PROVIDER_IDS",
    "CallPrice",
    "TokenUsage",
    "price_call",
    "price_library_provider",
]
