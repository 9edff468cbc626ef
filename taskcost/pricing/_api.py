"""Per-token API prices from genai-prices, at the call's start time.

Money is ``Decimal`` throughout, rounded once to 12 decimal places (the store's DECIMAL(38,12));
the price library's own results are exact decimals, so this rounding changes nothing in practice.
A call that cannot be priced gets ``cost_usd=None`` and a reason: unpriced is never $0.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from importlib.metadata import version

import genai_prices

__all__ = ["PRICE_SOURCE", "PROVIDER_IDS", "CallPrice", "TokenUsage", "price_call", "price_library_provider"]

PRICE_SOURCE = f"genai-prices {version('genai-prices')}"
_QUANTUM = Decimal("1e-12")

# OTel `gen_ai.provider.name` (and legacy `gen_ai.system`) values -> genai-prices provider ids, where the
# library's own lookup does not find them, or finds the wrong one. Anything not listed is passed as-is.
PROVIDER_IDS: dict[str, str] = {
    "azure.ai.openai": "openai",
    "azure.ai.inference": "azure",
    "az.ai.inference": "azure",
    "az.ai.openai": "openai",
    "x_ai": "x-ai",
    "xai": "x-ai",
    "gcp.gen_ai": "google",
    "gcp.vertex_ai": "google",
    "gcp.gemini": "google",
    "vertex_ai": "google",
    "gemini": "google",
    "aws.bedrock": "aws",
    "mistral_ai": "mistral",
    "moonshot_ai": "moonshotai",
}


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts with the OTel meaning: input includes cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class CallPrice:
    cost_usd: Decimal | None
    input_cost_usd: Decimal | None
    output_cost_usd: Decimal | None
    source: str | None
    provider_id: str | None
    model_id: str | None
    unpriced_reason: str | None

    @classmethod
    def unpriced(cls, reason: str) -> CallPrice:
        return cls(None, None, None, None, None, None, reason)


def price_library_provider(provider: str | None) -> str | None:
    if provider is None:
        return None
    p = provider.strip().lower()
    return PROVIDER_IDS.get(p, p)


def _money(value: Decimal) -> Decimal:
    return value.quantize(_QUANTUM, rounding=ROUND_HALF_EVEN)


def price_call(
    provider: str | None,
    model: str | None,
    usage: TokenUsage | None,
    at: datetime,
    *,
    deployment: str | None = None,
) -> CallPrice:
    """The cost of one call at time ``at`` (UTC), or an unpriced result with its reason.

    ``usage=None`` means the span reported no token counts at all (not even zeros): unpriced.
    """
    if deployment == "self_hosted":
        return CallPrice.unpriced("self_hosted: priced per GPU-hour, not per token")
    if not model:
        return CallPrice.unpriced("no model on the span")
    if usage is None:
        return CallPrice.unpriced("no token usage on the span")
    if usage.cache_read_tokens + usage.cache_write_tokens > usage.input_tokens:
        return CallPrice.unpriced(
            f"invalid usage: cache read {usage.cache_read_tokens} + write {usage.cache_write_tokens}"
            f" exceed input {usage.input_tokens} (input must include cache)"
        )
    if usage.reasoning_tokens > usage.output_tokens:
        return CallPrice.unpriced(
            f"invalid usage: reasoning {usage.reasoning_tokens} exceed output {usage.output_tokens}"
        )
    provider_id = price_library_provider(provider)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    lib_usage = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens or None,
        cache_write_tokens=usage.cache_write_tokens or None,
        output_reasoning_tokens=usage.reasoning_tokens or None,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calc = genai_prices.calc_price(lib_usage, model, provider_id=provider_id, genai_request_timestamp=at)
    except LookupError as exc:
        return CallPrice.unpriced(f"unknown to the price data: {exc}")
    except ValueError as exc:
        return CallPrice.unpriced(f"invalid usage: {exc}")
    return CallPrice(
        cost_usd=_money(calc.total_price),
        input_cost_usd=_money(calc.input_price),
        output_cost_usd=_money(calc.output_price),
        source=PRICE_SOURCE,
        provider_id=calc.provider.id,
        model_id=calc.model.id,
        unpriced_reason=None,
    )
