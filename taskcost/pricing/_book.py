"""The user's price book: negotiated discounts, custom models, price overrides, per-call fees, tool prices.

Written in TOML, as a ``[price_book]`` table in taskcost.toml or a file that ``price_book_file`` names;
validated with pydantic, errors give the line and the field (docs/pricing.md has the format).

Every rule may carry ``effective_from`` (inclusive) and ``effective_to`` (exclusive), compared with the
call's start time (UTC): a rule added today with ``effective_from`` today changes later calls only. When
several rules of one kind match a call, the last one in the book wins (as in genai-prices' own data).
"""

from __future__ import annotations

import fnmatch
import hashlib
import tomllib
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, TypeVar

from genai_prices import Usage
from genai_prices import types as gp
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from taskcost.pricing._toml import load_toml_model, validate_table

__all__ = [
    "RATE_KEYS",
    "CustomModel",
    "Discount",
    "Fee",
    "Override",
    "PriceBook",
    "ToolPrice",
    "load_price_book",
    "price_book_from_table",
    "rule_label",
]

NonNegative = Annotated[Decimal, Field(ge=0, allow_inf_nan=False)]
RATE_KEYS = (
    "input_mtok",
    "output_mtok",
    "cache_read_mtok",
    "cache_write_mtok",
    "cache_write_1h_mtok",
    "output_reasoning_mtok",
)
R = TypeVar("R", bound="_Rule")


def _utc(value: Any) -> Any:
    """TOML dates are midnight UTC; local (naive) date-times are UTC."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(0), tzinfo=UTC)
    return value


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(None, description="A label shown in explanations.")
    effective_from: datetime | None = Field(None, description="First call start time it applies to (inclusive).")
    effective_to: datetime | None = Field(None, description="First call start time it no longer applies to.")

    @field_validator("effective_from", "effective_to", mode="before")
    @classmethod
    def _to_utc(cls, value: Any) -> Any:
        return _utc(value)

    @field_validator("effective_from", "effective_to")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _utc(value)

    @model_validator(mode="after")
    def _ordered(self: R) -> R:
        if self.effective_from and self.effective_to and self.effective_to <= self.effective_from:
            raise ValueError("effective_to must be after effective_from")
        return self

    def active(self, at: datetime) -> bool:
        return (self.effective_from is None or at >= self.effective_from) and (
            self.effective_to is None or at < self.effective_to
        )


class _Match(_Rule):
    provider: str | None = Field(None, description="Provider id (OTel or genai-prices), case-insensitive.")
    model: str | None = Field(None, description="Model name or glob (`gpt-4o*`), case-insensitive.")

    def matches(self, providers: set[str], models: set[str]) -> bool:
        if self.provider is not None and self.provider.lower() not in providers:
            return False
        glob = None if self.model is None else self.model.lower()
        return glob is None or any(fnmatch.fnmatchcase(m, glob) for m in models)


class Discount(_Match):
    """A negotiated discount: ``percent`` off the input and output price (fees are not discounted)."""

    percent: Decimal = Field(gt=0, le=100, allow_inf_nan=False)

    @model_validator(mode="after")
    def _scoped(self) -> Discount:
        if self.provider is None and self.model is None:
            raise ValueError("a discount needs a provider or a model (or both)")
        return self


class _Rates(_Match):
    input_mtok: NonNegative | None = None
    output_mtok: NonNegative | None = None
    cache_read_mtok: NonNegative | None = None
    cache_write_mtok: NonNegative | None = None
    cache_write_1h_mtok: NonNegative | None = None
    output_reasoning_mtok: NonNegative | None = None

    def rates(self) -> dict[str, Decimal]:
        return {k: v for k in RATE_KEYS if (v := getattr(self, k)) is not None}


class CustomModel(_Rates):
    """A model the price data does not know (a fine-tune, a private endpoint), with its own rates (USD/M)."""

    model: str = Field(description="Model name or glob.")
    input_mtok: NonNegative
    output_mtok: NonNegative

    @model_validator(mode="after")
    def _usable(self) -> CustomModel:
        probe = Usage(input_tokens=1000, output_tokens=1000)
        try:
            self.model_price().calc_price(probe)
        except ValueError as exc:
            raise ValueError(f"these rates cannot price a call: {exc}") from None
        return self

    def model_price(self) -> gp.ModelPrice:
        return gp.ModelPrice(**self.rates())


class Override(_Rates):
    """New rates for some units of a model the price data knows; the other units keep the data's rates."""

    model: str = Field(description="Model name or glob.")

    @model_validator(mode="after")
    def _some_rate(self) -> Override:
        if not self.rates():
            raise ValueError(f"an override needs at least one of {', '.join(RATE_KEYS)}")
        return self

    def apply(self, rates: gp.ModelPrice) -> gp.ModelPrice:
        out = gp.ModelPrice(**{k: v for k, v in rates.__dict__.items() if not k.startswith("_")})
        for key, value in self.rates().items():
            object.__setattr__(out, key, value)
        return out


class Fee(_Match):
    """A fixed fee per call (a gateway, a private endpoint's request charge), added after discounts."""

    usd_per_call: NonNegative


class ToolPrice(_Rule):
    """The price of a tool call whose span does not say what it cost."""

    tool: str = Field(description="Tool name or glob (`gen_ai.tool.name`), case-insensitive.")
    usd_per_call: NonNegative

    def matches_tool(self, tool_name: str | None) -> bool:
        return tool_name is not None and fnmatch.fnmatchcase(tool_name.lower(), self.tool.lower())


class PriceBook(BaseModel):
    """A user's price book. ``version`` is stored with every cost priced under it, with the book's hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str | None = Field(None, max_length=100, description="Your name for this edition of the book.")
    discounts: list[Discount] = Field(default_factory=list)
    models: list[CustomModel] = Field(default_factory=list)
    overrides: list[Override] = Field(default_factory=list)
    fees: list[Fee] = Field(default_factory=list)
    tools: list[ToolPrice] = Field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        """A hash of the book's content (not of its formatting): any change of a rule changes it."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        return f"{self.version or 'unversioned'} ({self.fingerprint})"

    @staticmethod
    def _last(rules: list[R], at: datetime, providers: set[str], models: set[str]) -> tuple[int, R] | None:
        for i in range(len(rules) - 1, -1, -1):
            rule = rules[i]
            if rule.active(at) and rule.matches(providers, models):  # type: ignore[attr-defined]
                return i, rule
        return None

    def custom_model(self, at: datetime, providers: set[str], models: set[str]) -> tuple[int, CustomModel] | None:
        return self._last(self.models, at, providers, models)

    def override(self, at: datetime, providers: set[str], models: set[str]) -> tuple[int, Override] | None:
        return self._last(self.overrides, at, providers, models)

    def discount(self, at: datetime, providers: set[str], models: set[str]) -> tuple[int, Discount] | None:
        return self._last(self.discounts, at, providers, models)

    def fee(self, at: datetime, providers: set[str], models: set[str]) -> tuple[int, Fee] | None:
        return self._last(self.fees, at, providers, models)

    def tool_price(self, at: datetime, tool_name: str | None) -> tuple[int, ToolPrice] | None:
        for i in range(len(self.tools) - 1, -1, -1):
            if self.tools[i].active(at) and self.tools[i].matches_tool(tool_name):
                return i, self.tools[i]
        return None


def rule_label(kind: str, index: int, rule: _Rule) -> str:
    return f"{kind}[{index}]" + (f" {rule.name!r}" if rule.name else "")


def load_price_book(path: Path) -> PriceBook:
    """Read and validate a price book file (raises ConfigFileError with lines and fields)."""
    return load_toml_model(PriceBook, path)


def price_book_from_table(table: Any, config_file: Path | None = None) -> PriceBook:
    """Validate the ``[price_book]`` table of taskcost.toml; errors point into ``config_file`` when given."""
    text = None
    if config_file is not None and config_file.is_file():
        try:
            text = config_file.read_text()
            if "price_book" not in tomllib.loads(text):
                text = None  # the table came from the environment, not this file
        except (OSError, tomllib.TOMLDecodeError):
            text = None
    source = f"[price_book] in {config_file}" if text is not None else "price_book setting"
    return validate_table(PriceBook, table, source, text, prefix="price_book")
