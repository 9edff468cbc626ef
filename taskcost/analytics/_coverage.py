"""Unpriced is not $0: which calls have no price, how much they used, and the coverage of every cost total."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from taskcost.analytics._filters import utc_text
from taskcost.store import ReadStore

__all__ = ["Coverage", "MissingPrice", "MissingPrices", "cost_coverage", "missing_prices"]


@dataclass(frozen=True)
class Coverage:
    """How much of a cost total is known: priced attempts count in ``cost_usd``, unpriced ones do not."""

    calls: int
    priced_calls: int
    cost_usd: Decimal | None  # the sum over priced calls; None when none is priced
    unpriced_input_tokens: int
    unpriced_output_tokens: int

    @property
    def unpriced_calls(self) -> int:
        return self.calls - self.priced_calls

    @property
    def priced_share(self) -> float | None:
        return None if not self.calls else self.priced_calls / self.calls

    def sentence(self) -> str:
        """E.g. ``coverage: 98 of 100 call attempts priced (98.0%); 2 unpriced (excluded from the total) ...``."""
        if not self.calls:
            return "coverage: no LLM calls"
        text = f"coverage: {self.priced_calls} of {self.calls} call attempts priced ({self.priced_share:.1%})"
        if self.unpriced_calls:
            text += (
                f"; {self.unpriced_calls} unpriced, excluded from the total "
                f"({self.unpriced_input_tokens:,} input / {self.unpriced_output_tokens:,} output tokens)"
            )
        return text


@dataclass(frozen=True)
class MissingPrice:
    provider: str | None
    model: str | None
    reason: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    first_seen: datetime | None
    last_seen: datetime | None


@dataclass(frozen=True)
class MissingPrices:
    rows: list[MissingPrice]
    coverage: Coverage


def _where(since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    parts, params = [], []
    if since is not None:
        parts.append("start_time >= CAST(? AS TIMESTAMP)")
        params.append(utc_text(since))
    if until is not None:
        parts.append("start_time < CAST(? AS TIMESTAMP)")
        params.append(utc_text(until))
    return (" WHERE " + " AND ".join(parts)) if parts else "", params


_COVERAGE = """
SELECT count(*) AS calls,
       count(cost_usd) AS priced_calls,
       sum(cost_usd) AS cost_usd,
       coalesce(sum(input_tokens) FILTER (WHERE cost_usd IS NULL), 0)::BIGINT AS unpriced_input_tokens,
       coalesce(sum(output_tokens) FILTER (WHERE cost_usd IS NULL), 0)::BIGINT AS unpriced_output_tokens
FROM llm_calls
"""

_MISSING = """
SELECT provider, model, unpriced_reason AS reason, count(*) AS calls,
       coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens,
       coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens,
       min(start_time) AS first_seen, max(start_time) AS last_seen
FROM llm_calls
{where}
GROUP BY ALL ORDER BY calls DESC, provider, model
"""


def cost_coverage(store: ReadStore, since: datetime | None = None, until: datetime | None = None) -> Coverage:
    """The LLM cost total over [since, until) (call start times) and how much of it is priced."""
    where, params = _where(since, until)
    r = store.query(_COVERAGE + where, params).dicts()[0]
    return Coverage(
        calls=int(r["calls"]),
        priced_calls=int(r["priced_calls"]),
        cost_usd=None if r["cost_usd"] is None else Decimal(r["cost_usd"]),
        unpriced_input_tokens=int(r["unpriced_input_tokens"]),
        unpriced_output_tokens=int(r["unpriced_output_tokens"]),
    )


def missing_prices(
    store: ReadStore, since: datetime | None = None, until: datetime | None = None, max_rows: int = 1000
) -> MissingPrices:
    """Models (and reasons) without a price, with their call counts and token volumes, and the coverage."""
    where, params = _where(since, until)
    clause = (where + " AND " if where else " WHERE ") + "cost_usd IS NULL"
    rows = store.query(_MISSING.format(where=clause), params, max_rows=max_rows).dicts()
    return MissingPrices(
        rows=[
            MissingPrice(
                provider=r["provider"],
                model=r["model"],
                reason=r["reason"],
                calls=int(r["calls"]),
                input_tokens=int(r["input_tokens"]),
                output_tokens=int(r["output_tokens"]),
                first_seen=r["first_seen"],
                last_seen=r["last_seen"],
            )
            for r in rows
        ],
        coverage=cost_coverage(store, since, until),
    )
