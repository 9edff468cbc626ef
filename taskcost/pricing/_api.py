"""Per-token API prices from genai-prices, at the call's start time.

Money is ``Decimal`` throughout, rounded once to 12 decimal places (the store's DECIMAL(38,12));
the price library's own results are exact decimals, so this rounding changes nothing in practice.
A call that cannot be priced gets ``cost_usd=None`` and a reason: unpriced is never $0.

Every price carries its provenance: the price data it came from (``source``) and, in ``detail``,
the rates per unit and the arithmetic, so a stored cost can be explained later (``taskcost explain-cost``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from importlib.metadata import version
from typing import Any

import genai_prices
from genai_prices import types as gp

from taskcost.pricing._data import PriceData

__all__ = [
    "MTOK",
    "PRICE_SOURCE",
    "PROVIDER_IDS",
    "CallPrice",
    "TokenUsage",
    "Calc",
    "calc_with",
    "check_usage",
    "money",
    "price_lines",
    "price_library_provider",
]

PRICE_SOURCE = f"genai-prices {version('genai-prices')}"
QUANTUM = Decimal("1e-12")
MTOK = Decimal(1_000_000)

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
    """Token counts with the OTel meaning: input includes cache reads and writes.

    ``cache_write_1h_tokens`` is the part of ``cache_write_tokens`` written with a one-hour TTL (Anthropic);
    the rest of the cache writes are priced at the model's default (5-minute) cache-write rate.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_1h_tokens: int = 0


@dataclass(frozen=True, slots=True)
class CallPrice:
    """The price of one call, or why it has none. ``cost_usd = input_cost_usd + output_cost_usd + fee_usd``."""

    cost_usd: Decimal | None
    input_cost_usd: Decimal | None
    output_cost_usd: Decimal | None
    source: str | None
    provider_id: str | None
    model_id: str | None
    unpriced_reason: str | None
    fee_usd: Decimal | None = None
    book_version: str | None = None
    detail: dict[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def unpriced(cls, reason: str, book_version: str | None = None) -> CallPrice:
        return cls(None, None, None, None, None, None, reason, book_version=book_version)


def price_library_provider(provider: str | None) -> str | None:
    if provider is None:
        return None
    p = provider.strip().lower()
    return PROVIDER_IDS.get(p, p)


def money(value: Decimal) -> Decimal:
    """Round to the store's 12 decimal places (half-even)."""
    return value.quantize(QUANTUM, rounding=ROUND_HALF_EVEN)


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def check_usage(usage: TokenUsage) -> str | None:
    """Why these counts cannot be priced, or None when they are consistent."""
    if usage.cache_read_tokens + usage.cache_write_tokens > usage.input_tokens:
        return (
            f"invalid usage: cache read {usage.cache_read_tokens} + write {usage.cache_write_tokens}"
            f" exceed input {usage.input_tokens} (input must include cache)"
        )
    if usage.reasoning_tokens > usage.output_tokens:
        return f"invalid usage: reasoning {usage.reasoning_tokens} exceed output {usage.output_tokens}"
    if usage.cache_write_1h_tokens > usage.cache_write_tokens:
        return (
            f"invalid usage: 1h cache writes {usage.cache_write_1h_tokens} exceed cache writes"
            f" {usage.cache_write_tokens}"
        )
    return None


def library_usage(usage: TokenUsage) -> genai_prices.Usage:
    return genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens or None,
        cache_write_tokens=usage.cache_write_tokens or None,
        cache_write_1h_tokens=usage.cache_write_1h_tokens or None,
        output_reasoning_tokens=usage.reasoning_tokens or None,
    )


# The token units a line of an explanation can show: (name, price key, usage field, descendants), deepest first.
_UNITS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("cache_write_1h", "cache_write_1h_mtok", "cache_write_1h_tokens", ()),
    ("cache_write", "cache_write_mtok", "cache_write_tokens", ("cache_write_1h",)),
    ("cache_read", "cache_read_mtok", "cache_read_tokens", ()),
    ("input", "input_mtok", "input_tokens", ("cache_read", "cache_write", "cache_write_1h")),
    ("output_reasoning", "output_reasoning_mtok", "reasoning_tokens", ()),
    ("output", "output_mtok", "output_tokens", ("output_reasoning",)),
)
_ORDER = ("input", "cache_read", "cache_write", "cache_write_1h", "output", "output_reasoning")
_INPUT_UNITS = {"input", "cache_read", "cache_write", "cache_write_1h"}
_ALWAYS_SHOWN = {"input", "output"}  # their lines are shown even at zero tokens
_FIELDS = {name: fld for name, _, fld, _ in _UNITS}
_DESCENDANTS = {name: descendants for name, _, _, descendants in _UNITS}
_ZERO = Decimal(0)


def _rate(price: Decimal | gp.TieredPrices, total_input: int) -> Decimal:
    """The per-million rate that applies: a tier's rate applies to all tokens once input exceeds its start."""
    if isinstance(price, gp.TieredPrices):
        for tier in reversed(price.tiers):
            if total_input > tier.start:
                return tier.price
        return price.base
    return price


class _Plan:
    """How one set of rates prices usage, worked out once per ModelPrice object: ``units`` (unit, usage field,
    descendants, price, the price's text when it is a plain rate) for each priced unit, deepest first; ``order``,
    their indexes in display order; ``fast``, whether ``calc_with`` may compute it itself, and then ``steps``: each
    priced unit in display order as (unit, usage field, the usage fields to take off it, price, its text, whether it
    is an input unit, whether its line is shown at zero tokens)."""

    __slots__ = ("fast", "model_price", "order", "steps", "units")

    def __init__(self, model_price: gp.ModelPrice) -> None:
        self.model_price = model_price  # kept so that its id is never reused while the plan is cached
        self.units = tuple(
            (name, fld, descendants, price, str(price) if isinstance(price, Decimal) else None)
            for name, key, fld, descendants in _UNITS
            if (price := getattr(model_price, key, None)) is not None
        )
        names = [u[0] for u in self.units]
        self.order = tuple(names.index(name) for name in _ORDER if name in names)
        self.fast = _fast(model_price)
        priced = set(names)
        self.steps = tuple(
            (name, fld, _outermost(descendants, priced), price, text, name in _INPUT_UNITS, name in _ALWAYS_SHOWN)
            for name, fld, descendants, price, text in (self.units[i] for i in self.order)
        )


def _outermost(descendants: tuple[str, ...], priced: set[str]) -> tuple[str, ...]:
    """The usage fields a unit's own tokens exclude: those of its priced descendants that no other priced descendant
    contains (``_leaves``' rule, summed: a descendant's leaf plus its own priced descendants' leaves is its count)."""
    inner = {d for a in descendants if a in priced for d in _DESCENDANTS[a]}
    return tuple(_FIELDS[d] for d in descendants if d in priced and d not in inner)


_PLANS: dict[int, _Plan] = {}
_MAX_PLANS = 4096


def _plan(model_price: gp.ModelPrice) -> _Plan:
    plan = _PLANS.get(id(model_price))
    if plan is not None and plan.model_price is model_price:
        return plan
    plan = _Plan(model_price)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(model_price)] = plan
    return plan


def _leaves(plan: _Plan, usage: TokenUsage) -> list[tuple[str, int, Decimal, str]]:
    """(unit, tokens, rate per million, the rate's text) for each priced token unit, in display order. The
    library's rule: a unit's tokens exclude those of its *priced* descendants (cache reads are not also billed as
    input), and a unit without its own price is billed at its parent's rate."""
    leaf: dict[str, int] = {}
    found: list[tuple[str, int, Decimal, str]] = []
    for name, fld, descendants, price, text in plan.units:
        tokens = getattr(usage, fld)
        for d in descendants:
            tokens -= leaf.get(d, 0)
        leaf[name] = tokens
        if text is None:
            price = _rate(price, usage.input_tokens)
            text = str(price)
        found.append((name, tokens, price, text))
    return [found[i] for i in plan.order]


def _line(name: str, tokens: int, rate_text: str, usd: Decimal) -> dict[str, Any]:
    return {"unit": name, "tokens": tokens, "usd_per_mtok": rate_text, "usd": str(usd)}


def _shown(name: str, tokens: int) -> bool:
    return bool(tokens) or name in _ALWAYS_SHOWN


def price_lines(model_price: gp.ModelPrice, usage: TokenUsage) -> list[dict[str, Any]]:
    """The arithmetic of a token price: one line per priced unit, ``tokens x usd_per_mtok / 1e6 = usd``."""
    return [
        _line(name, tokens, text, rate * tokens / MTOK)
        for name, tokens, rate, text in _leaves(_plan(model_price), usage)
        if _shown(name, tokens)
    ]


def _reconcile(lines: list[dict[str, Any]], input_usd: Decimal, output_usd: Decimal) -> None:
    """Make the lines add up to the library's result: anything the lines do not cover (per-request prices,
    units we do not show) becomes an ``other`` line, so the arithmetic shown is always the arithmetic billed."""
    shown_in = sum((Decimal(x["usd"]) for x in lines if x["unit"] in _INPUT_UNITS), Decimal(0))
    shown_out = sum((Decimal(x["usd"]) for x in lines if x["unit"] not in _INPUT_UNITS), Decimal(0))
    if shown_in != input_usd:
        lines.append({"unit": "other_input", "tokens": None, "usd_per_mtok": None, "usd": str(input_usd - shown_in)})
    if shown_out != output_usd:
        lines.append({"unit": "other_output", "tokens": None, "usd_per_mtok": None, "usd": str(output_usd - shown_out)})


# Price keys the fast path computes itself: the token units above, and tool-call units a span's token usage
# never reports (they price to 0). Anything else (per-request, audio, images, ...) goes through the library.
_FAST_KEYS = frozenset(key for _, key, _, _ in _UNITS) | {"web_searches_kcount", "storage_searches_kcount"}


def _fast(model_price: gp.ModelPrice) -> bool:
    return all(v is None or k in _FAST_KEYS for k, v in model_price.__dict__.items() if not k.startswith("_"))


@dataclass(slots=True)
class Calc:
    """One call priced with one set of rates, unrounded: by direction, plus what has none (a per-request
    price), and the lines of the arithmetic (they add up to the total)."""

    input_usd: Decimal
    output_usd: Decimal
    other_usd: Decimal
    lines: list[dict[str, Any]]


def calc_with(model_price: gp.ModelPrice, usage: TokenUsage, *, validated: bool = True) -> Calc:
    """Price ``usage`` with one set of rates.

    For rates already validated (price data and price-book models are validated when loaded) made only of
    token units, the arithmetic is done here, exactly as the library does it (a test checks every price in
    the bundled data against the library); otherwise the library computes it and the lines are reconciled.
    """
    plan = _plan(model_price)
    if validated and plan.fast:  # _leaves and the lines, in one pass (the same values: a test holds them together)
        input_usd = output_usd = _ZERO
        lines = []
        for name, fld, minus, rate, text, is_input, always in plan.steps:
            tokens = getattr(usage, fld)
            for part in minus:
                tokens -= getattr(usage, part)
            if text is None:
                rate = _rate(rate, usage.input_tokens)
                text = str(rate)
            usd = rate * tokens / MTOK
            if is_input:
                input_usd += usd
            else:
                output_usd += usd
            if tokens or always:
                lines.append({"unit": name, "tokens": tokens, "usd_per_mtok": text, "usd": str(usd)})
        return Calc(input_usd, output_usd, _ZERO, lines)
    leaves = _leaves(plan, usage)
    lines = [
        _line(name, tokens, text, rate * tokens / MTOK) for name, tokens, rate, text in leaves if _shown(name, tokens)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = model_price.calc_price(library_usage(usage))
    _reconcile(lines, res["input_price"], res["output_price"])
    other = res["total_price"] - res["input_price"] - res["output_price"]
    if other:
        unit = "per_request" if getattr(model_price, "requests_kcount", None) is not None else "other"
        lines.append({"unit": unit, "tokens": None, "usd_per_mtok": None, "usd": str(other)})
    return Calc(res["input_price"], res["output_price"], other, lines)


def resolve_model(
    data: PriceData, provider: str | None, model: str, at: datetime, context: Mapping[str, str] | None
) -> tuple[gp.Provider, gp.ModelInfo, gp.ModelPrice]:
    """The price data's provider, model and rates for a call at ``at`` (raises LookupError when unknown)."""
    provider_id = price_library_provider(provider)
    prov, info = data.snapshot.find_provider_model(model, None, provider_id, None)
    if context and not any(info is m for m in prov.models):
        rates = info.get_prices(at)  # a fallback provider's model: its variants are not this provider's
    else:
        rates = info.get_prices(at, dict(context) if context else None)
    return prov, info, rates
