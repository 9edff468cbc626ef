"""The pricer: price data + price book + clusters, applied to one call. Pure given its inputs.

``Pricer.price`` is what ingest and ``taskcost reprice`` both call, so a re-priced history is priced
exactly as new calls are. ``PricingSource`` builds pricers from the settings and rebuilds when a file
they name changes (a running server picks up ``taskcost prices update`` and book edits by itself).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from taskcost.pricing._api import (
    Calc,
    CallPrice,
    TokenUsage,
    calc_with,
    check_usage,
    money,
    price_library_provider,
    resolve_model,
)
from taskcost.pricing._book import PriceBook, load_price_book, price_book_from_table, rule_label
from taskcost.pricing._clusters import ClustersFile, load_clusters
from taskcost.pricing._data import PriceData, bundled_data, current_data
from taskcost.pricing._targets import DEFAULT_PRICING_ATTRIBUTES
from taskcost.pricing._toml import ConfigFileError

__all__ = [
    "Pricer",
    "price_call",
    "PricingConfig",
    "PricingSource",
    "default_pricer",
    "file_book_table",
    "pricing_inputs",
]

log = logging.getLogger("taskcost.pricing")

_NOT_A_TIER = {"auto"}  # a request for "auto" says nothing about the tier that served it
_MAX_DIGITS = 26  # DECIMAL(38, 12): 26 digits before the point


def pricing_inputs(attributes: Sequence[tuple[str, str]], lookup: Callable[[str], Any]) -> tuple[dict[str, str], int]:
    """The price context (variant keys) and 1h cache writes a call's attributes give, via ``lookup(name)``.

    Ingest looks names up in the span's attributes, then its resource's; ``reprice`` does the same in SQL.
    """
    context: dict[str, str] = {}
    cache_write_1h = 0
    for name, target in attributes:
        value = lookup(name)
        if value is None:
            continue
        if target == "cache_write_1h_tokens":
            if not cache_write_1h:
                with contextlib.suppress(TypeError, ValueError):
                    cache_write_1h = max(0, int(value))
            continue
        if target in context:
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value).strip()
        if target == "processing" and text.lower() in ("true", "1", "yes"):
            text = "batch"
        if not text or (target == "service_tier" and text.lower() in _NOT_A_TIER) or text.lower() == "false":
            continue
        context[target] = text
    return context, cache_write_1h


def _unpriced(reason: str, book_version: str | None) -> tuple[Any, ...]:
    """``CallPrice.unpriced``'s fields, in order."""
    return (None, None, None, None, None, None, reason, None, book_version, None)


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


@dataclass(frozen=True)
class Pricer:
    """Everything a price depends on, fixed: price data, the price book, the clusters, attribute mapping."""

    data: PriceData = field(default_factory=bundled_data)
    book: PriceBook | None = None
    clusters: ClustersFile | None = None
    attributes: tuple[tuple[str, str], ...] = tuple(DEFAULT_PRICING_ATTRIBUTES.items())
    window_s: int = 3600

    @property
    def book_version(self) -> str | None:
        return None if self.book is None else self.book.label

    def self_hosted_reason(self, cluster_id: str | None) -> str:
        """Why a self-hosted call has no cost (yet)."""
        if self.clusters is None:
            return "self_hosted: priced per GPU-hour; no clusters file is configured (clusters_file)"
        if not cluster_id:
            return "self_hosted: the call names no cluster (taskcost.cluster.id)"
        if not self.clusters.periods(cluster_id):
            return f"self_hosted: cluster {cluster_id!r} is not in the clusters file"
        return f"self_hosted: cluster {cluster_id!r} is billed per window; `taskcost reprice` allocates closed windows"

    def price(
        self,
        provider: str | None,
        model: str | None,
        usage: TokenUsage | None,
        at: datetime,
        *,
        deployment: str | None = None,
        context: Mapping[str, str] | None = None,
        cluster_id: str | None = None,
    ) -> CallPrice:
        """The cost of one call at ``at``: list price (data, or the book's custom model), the book's override,
        discount and fee, with the arithmetic in ``detail``. Unpriced (never $0) with a reason otherwise."""
        return CallPrice(*self.price_fields(provider, model, usage, at, deployment, context, cluster_id))

    def price_fields(
        self,
        provider: str | None,
        model: str | None,
        usage: TokenUsage | None,
        at: datetime,
        deployment: str | None = None,
        context: Mapping[str, str] | None = None,
        cluster_id: str | None = None,
    ) -> tuple[Any, ...]:
        """``price``'s CallPrice as the tuple of its fields, in their order (ingest prices calls in bulk and keeps
        the values, not the object)."""
        book, version = self.book, self.book_version
        if deployment == "self_hosted":
            return _unpriced(self.self_hosted_reason(cluster_id), version)
        if not model:
            return _unpriced("no model on the span", version)
        if usage is None:
            return _unpriced("no token usage on the span", version)
        if (bad := check_usage(usage)) is not None:
            return _unpriced(bad, version)
        at = _utc(at)
        # the names the book's rules match (no book: nothing reads them)
        providers: set[str] = set()
        models: set[str] = set()
        custom = None
        if book:
            providers = {p for p in (provider and provider.strip().lower(), price_library_provider(provider)) if p}
            models = {model.strip().lower()}
            custom = book.custom_model(at, providers, models)
        try:
            if custom is not None:
                i, rule = custom
                source = f"price book {version}"
                calc = calc_with(rule.model_price(), usage)
                provider_id = rule.provider.lower() if rule.provider else price_library_provider(provider)
                model_id = model
                detail: dict[str, Any] = {"rates": source, "rule": rule_label("models", i, rule)}
            else:
                try:
                    prov, info, rates = resolve_model(self.data, provider, model, at, context)
                except LookupError as exc:
                    return _unpriced(f"unknown to the price data: {exc}", version)
                source, provider_id, model_id = self.data.label, prov.id, info.id
                detail = {"rates": source}
                override = None
                if book:
                    providers.add(prov.id)
                    models.add(info.id.lower())
                    override = book.override(at, providers, models)
                if override is not None:
                    rates = override[1].apply(rates)
                    detail["override"] = rule_label("overrides", *override)
                calc = calc_with(rates, usage, validated=override is None)
        except ValueError as exc:
            return _unpriced(f"invalid usage: {exc}", version)
        try:
            return self._finish(calc, detail, at, providers, models, context, source, provider_id, model_id)
        except ArithmeticError:  # absurd counts: more dollars than DECIMAL(38,12) holds
            return _unpriced("invalid usage: the amount is out of range", version)

    def _finish(
        self,
        calc: Calc,
        detail: dict[str, Any],
        at: datetime,
        providers: set[str],
        models: set[str],
        context: Mapping[str, str] | None,
        source: str,
        provider_id: str | None,
        model_id: str | None,
    ) -> tuple[Any, ...]:
        """Discount and fee on top of the list price; rounding to the store's 1e-12 USD (CallPrice's fields)."""
        book, version = self.book, self.book_version
        detail["lines"] = calc.lines
        input_usd, output_usd = calc.input_usd, calc.output_usd
        if context:
            detail["context"] = dict(context)
        in_r, out_r = money(input_usd), money(output_usd)
        fee_usd = money(calc.other_usd) if calc.other_usd else None  # the price data's per-request price
        if book:
            discount = book.discount(at, providers, models)
            if discount is not None:
                factor = (100 - discount[1].percent) / 100
                list_usd = in_r + out_r
                in_r, out_r = money(input_usd * factor), money(output_usd * factor)
                detail["discount"] = {
                    "rule": rule_label("discounts", *discount),
                    "percent": str(discount[1].percent),
                    "list_usd": str(list_usd),
                    "usd": str(in_r + out_r - list_usd),
                }
            fee = book.fee(at, providers, models)
            if fee is not None:
                fee_usd = (fee_usd or Decimal(0)) + money(fee[1].usd_per_call)
                detail["fee"] = {"rule": rule_label("fees", *fee), "usd": str(money(fee[1].usd_per_call))}
        if version is not None:
            detail["book"] = version
        cost = in_r + out_r if fee_usd is None else in_r + out_r + fee_usd
        if cost.adjusted() >= _MAX_DIGITS:
            raise ArithmeticError("out of range")
        # CallPrice's fields, in order
        return (cost, in_r, out_r, source, provider_id, model_id, None, fee_usd, version, detail)

    def price_tool(
        self, tool_name: str | None, at: datetime, given: Decimal | None
    ) -> tuple[Decimal | None, str | None]:
        """A tool call's cost and where it came from: the span's own ``taskcost.tool.cost_usd`` wins (it is
        what was spent); else the book's price for the tool; else unknown (NULL)."""
        if given is not None:
            return given, "span"
        found = self.book.tool_price(_utc(at), tool_name) if self.book else None
        if found is None:
            return None, None
        return money(found[1].usd_per_call), f"price book {self.book_version}: {rule_label('tools', *found)}"


def _stamp(path: Path | None) -> tuple[str, int, int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_mtime_ns, st.st_size)


def file_book_table(config_file: Path) -> Any:
    """The ``[price_book]`` table of a TOML configuration file as it is now (None when absent or unreadable)."""
    try:
        return tomllib.loads(config_file.read_text()).get("price_book")
    except (OSError, tomllib.TOMLDecodeError):
        return None


@dataclass(frozen=True)
class PricingConfig:
    """Where a pricer's parts come from (``Settings.pricing_config()`` makes one from the settings)."""

    prices_dir: Path | None = None
    book_file: Path | None = None
    book_table: Mapping[str, Any] | None = None
    book_table_fixed: bool = True  # False: re-read [price_book] from config_file on every build
    config_file: Path | None = None
    clusters_file: Path | None = None
    attributes: tuple[tuple[str, str], ...] = tuple(DEFAULT_PRICING_ATTRIBUTES.items())
    window_s: int = 3600

    def _book(self) -> PriceBook | None:
        if self.book_file is not None:
            return load_price_book(self.book_file)
        table = self.book_table
        if not self.book_table_fixed and self.config_file is not None:
            table = file_book_table(self.config_file)  # None when the file broke: the book is gone, say so
            if table is None:
                raise ConfigFileError(str(self.config_file), ["[price_book] is missing or the file is not valid TOML"])
        return None if table is None else price_book_from_table(table, self.config_file)

    def build(self) -> Pricer:
        """A pricer from the files as they are now (raises ConfigFileError or DataFileError, saying where)."""
        return Pricer(
            data=current_data(self.prices_dir),
            book=self._book(),
            clusters=None if self.clusters_file is None else load_clusters(self.clusters_file),
            attributes=self.attributes,
            window_s=self.window_s,
        )

    def stamp(self) -> tuple[Any, ...]:
        current = None if self.prices_dir is None else self.prices_dir / "current.json"
        inline = None if self.book_table_fixed else self.config_file
        return tuple(_stamp(p) for p in (current, self.book_file, inline, self.clusters_file))


class PricingSource:
    """The pricer a long-running process uses, rebuilt when a file it depends on changes.

    A broken edit does not stop ingest: the previous pricer stays in use and ``error`` says why
    (``taskcost reprice`` and ``taskcost prices check`` report it).
    """

    def __init__(self, config: PricingConfig, check_interval_s: float = 1.0) -> None:
        self.config = config
        self.check_interval_s = check_interval_s
        self.error: str | None = None
        self._lock = threading.Lock()
        self._stamp = config.stamp()
        self._pricer = config.build()
        self._checked = time.monotonic()

    def current(self) -> Pricer:
        if time.monotonic() - self._checked >= self.check_interval_s:
            with self._lock:
                self._checked = time.monotonic()
                stamp = self.config.stamp()
                if stamp != self._stamp:
                    self._stamp = stamp
                    try:
                        self._pricer = self.config.build()
                        self.error = None
                        log.info("prices reloaded: %s; book %s", self._pricer.data.label, self._pricer.book_version)
                    except ValueError as exc:
                        self.error = str(exc)
                        log.error("keeping the previous prices; the new ones do not load: %s", exc)
        return self._pricer

    def reload(self) -> Pricer:
        """Rebuild now; raises (and keeps the previous pricer) when a file does not load."""
        with self._lock:
            stamp = self.config.stamp()
            pricer = self.config.build()
            self._pricer, self._stamp, self.error = pricer, stamp, None
            self._checked = time.monotonic()
        return pricer


@functools.cache
def default_pricer() -> Pricer:
    """The bundled genai-prices data, no price book, no clusters: what prices a call when no configuration says
    otherwise (tests, the SDK's own checks). A server prices with its ``PricingSource``."""
    return Pricer()


def price_call(
    provider: str | None,
    model: str | None,
    usage: TokenUsage | None,
    at: datetime,
    *,
    deployment: str | None = None,
    context: Mapping[str, str] | None = None,
    data: PriceData | None = None,
) -> CallPrice:
    """The list price of one call at time ``at`` (UTC), or an unpriced result with its reason: ``Pricer.price``
    with no price book. ``usage=None`` means the span reported no token counts at all (not even zeros).
    ``context`` selects price variants (``{"processing": "batch"}``, ``{"service_tier": "priority"}``);
    ``data`` is the price data (default: the data bundled with genai-prices)."""
    pricer = default_pricer() if data is None else Pricer(data=data)
    return pricer.price(provider, model, usage, at, deployment=deployment, context=context)
