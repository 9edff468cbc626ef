"""Cost's arithmetic on one row of figures: money rounding, ratios, coverage, the measured parts (``_cost``)."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any

from taskcost.analytics._waste import COUNTS

_PLACES = Decimal("0.000000000001")  # the views' money scale, DECIMAL(38, 12)
_MICRO = Decimal("0.000001")
_CALL_SUMS = (*COUNTS, "failed_attempts_usd", "retried_attempts_usd", "missed_usd", "missed_unpriced_tokens")
_CALL_MONEY = ("failed_attempts_usd", "retried_attempts_usd", "missed_usd")

__all__ = [
    "_CALL_MONEY",
    "_CALL_SUMS",
    "_MICRO",
    "_PLACES",
    "_coverage",
    "_d",
    "_div",
    "_measure",
    "_money",
    "_per_completed",
    "_priced_share",
    "_share",
    "_tool_spend",
]


def _money(value: Decimal) -> Decimal:
    with localcontext(prec=60):
        return value.quantize(_PLACES, rounding=ROUND_HALF_EVEN)


def _div(a: Decimal | None, b: int | Decimal) -> Decimal | None:
    """A ratio of money (cost per completed task), exact and then rounded to micro-dollars, as the other questions."""
    if a is None or not b:
        return None
    with localcontext(prec=60):
        return (a / b).quantize(_MICRO, rounding=ROUND_HALF_EVEN)


def _share(a: Decimal | int | None, b: Decimal | int | None) -> float | None:
    return None if a is None or not b else float(Decimal(a) / Decimal(b))


def _d(value: Any) -> Decimal:
    return Decimal(0) if value is None else Decimal(value)


def _per_completed(r: dict[str, Any]) -> Decimal | None:
    """Cost per completed task: the spend of the fully priced finished tasks over their completed ones
    (``_cost_priced``); None without a fully priced completed task."""
    return _div(_d(r["priced_finished_usd"]), int(r["priced_completed"]))


def _tool_spend(r: dict[str, Any]) -> Decimal | None:
    """The priced tool calls' spend; None when there are tool calls and none of them is priced (not $0)."""
    tools = int(r["tool_calls"])
    return None if tools and int(r["unpriced_tool_calls"]) >= tools else _d(r["tool_usd"])


def _priced_share(r: dict[str, Any]) -> float | None:
    """Of the call attempts and tool calls of finished tasks, the share priced."""
    n = int(r["attempts"]) + int(r["tool_calls"])
    return None if not n else (n - int(r["unpriced_calls"]) - int(r["unpriced_tool_calls"])) / n


def _coverage(r: dict[str, Any]) -> dict[str, int]:
    """What the per-task dollar figures leave out, counted beside them."""
    return {
        "unpriced_tasks": int(r["unpriced_tasks"]),
        "unpriced_completed_tasks": int(r["unpriced_completed"]),
        "tool_calls": int(r["tool_calls"]),
        "unpriced_tool_calls": int(r["unpriced_tool_calls"]),
    }


def _measure(row: dict[str, Any], sampled: bool) -> dict[str, Any]:
    """One group's figures from its additive sums: ratios exact, the call-level waste scaled from the sample (by
    the completed tasks' LLM spend over the sample's for money, by completed tasks for counts). Waste is None when the
    group has completed tasks and none of them was sampled."""
    r = dict(row)
    for c in _CALL_SUMS:
        r[c] = (Decimal(0) if c in _CALL_MONEY else 0) if r.get(c) is None else r[c]
    completed, got = int(r["completed"]), int(r["sampled_completed"])
    measured = completed == 0 or got > 0
    if sampled and measured and completed:
        money = (
            _d(r["completed_llm_usd"]) / _d(r["sampled_llm_usd"]) if r["sampled_llm_usd"] else Decimal(completed) / got
        )
        count = completed / got
        for c in _CALL_SUMS:
            r[c] = _money(r[c] * money) if c in _CALL_MONEY else round(r[c] * count)
    spend = None if not r["priced_tasks"] else _d(r["spend_usd"])
    failed_tasks_usd = _d(r["failed_usd"]) + _d(r["abandoned_usd"])
    superseded = r["failed_attempts_usd"] + r["retried_attempts_usd"]
    waste = failed_tasks_usd + superseded + r["missed_usd"] if measured else None
    superseded_n = r["failed_attempts"] + r["retried_attempts"]
    resent = r["failed_attempts_tokens"] + r["retried_attempts_tokens"]
    return r | {
        "measured": measured,
        "spend": spend,
        "failed_tasks_usd": failed_tasks_usd,
        "superseded_usd": superseded if measured else None,
        "cache_miss_usd": r["missed_usd"] if measured else None,
        "waste_usd": waste,
        "superseded_attempts": superseded_n,
        "resent_uncached_tokens": resent,
    }
