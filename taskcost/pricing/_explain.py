"""``taskcost explain-cost``: a stored cost, its rates and its arithmetic, as plain text lines.

Reads only what was stored with the call (``price_detail`` and the cost columns), so it shows what was
applied when the call was priced, not what today's prices would say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from taskcost.pricing._format import format_usd

__all__ = ["explain"]


def _usd(value: Any, sign: bool = False) -> str:
    return format_usd(value, places=12, sign=sign)


def _n(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def _rate(value: str) -> str:
    return f"${Decimal(value).normalize():f}/M"


def _token_line(line: Mapping[str, Any]) -> str:
    if line.get("tokens") is None:  # a per-request price, or units the price data has beyond tokens
        return f"    {'':>12} {line['unit']:<16} {'(price data)':<24} = {_usd(line['usd'])}"
    return (
        f"    {int(line['tokens']):>12,} {line['unit']:<16} x {_rate(line['usd_per_mtok']):<22} = {_usd(line['usd'])}"
    )


def _self_hosted(detail: Mapping[str, Any], out: list[str]) -> None:
    out.append(
        f"  cluster {detail.get('cluster')}: {detail.get('gpu_count')} x {detail.get('gpu_type') or 'GPU'} at "
        f"${detail.get('usd_per_gpu_hour')}/GPU-hour ({detail.get('rate_source')})"
    )
    out.append(
        "  method: each moment of a window is charged to the calls in flight, split equally; "
        "moments with none are idle cost"
    )
    for w in detail.get("windows", []):
        out.append(
            f"    window {w['start']} .. {w['end']}: bill {_usd(w['bill_usd'])}, busy {w['busy_s']} s; "
            f"this call {w['share_s']} s -> {_usd(w['usd'])}"
        )
    if detail.get("windows_omitted"):
        out.append(f"    ... and {detail['windows_omitted']} more window(s)")


def explain(row: Mapping[str, Any]) -> list[str]:
    """Lines that explain one ``llm_calls`` row's cost (or why it has none)."""
    raw = row.get("price_detail")
    detail: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    out = [
        f"call {row.get('span_id')} (trace {row.get('trace_id')}), task {row.get('task_id')}, "
        f"attempt {row.get('attempt')}, {row.get('status')}",
        f"  {row.get('provider')} {row.get('model')} at {row.get('start_time')} UTC"
        + (f", {row.get('deployment')}" if row.get("deployment") else ""),
        f"  tokens: input {_n(row.get('input_tokens'))} (cache read {_n(row.get('cache_read_tokens'))}, "
        f"cache write {_n(row.get('cache_write_tokens'))}), output {_n(row.get('output_tokens'))} "
        f"(reasoning {_n(row.get('reasoning_tokens'))})",
    ]
    if row.get("cost_usd") is None:
        out.append(f"  unpriced: {row.get('unpriced_reason')}")
        out.append("  (excluded from cost totals, counted in their coverage; see `taskcost prices missing`)")
        if row.get("price_book_version"):
            out.append(f"  price book consulted: {row.get('price_book_version')}")
        return out
    out.append(
        f"  priced {row.get('priced_at')} UTC from {row.get('price_source')}"
        + (f" (matched {row.get('priced_provider')}/{row.get('priced_model')})" if row.get("priced_model") else "")
    )
    if row.get("price_book_version"):
        out.append(f"  price book: {row.get('price_book_version')}")
    if detail.get("method") == "busy_seconds":
        _self_hosted(detail, out)
        out.append(f"  total (cost_usd) {_usd(row['cost_usd'])}")
        return out
    if detail.get("rule"):
        out.append(f"  rates from the price book's {detail['rule']}")
    if detail.get("override"):
        out.append(f"  rates overridden by the price book's {detail['override']}")
    if detail.get("context"):
        out.append("  price variant: " + ", ".join(f"{k}={v}" for k, v in detail["context"].items()))
    lines = detail.get("lines") or []
    for line in lines:
        out.append(_token_line(line))
    if not lines:
        out.append("  (no breakdown was stored for this cost)")
    discount = detail.get("discount")
    if discount:
        out.append(f"  list price {_usd(discount['list_usd'])}")
        out.append(f"  discount {discount['rule']}: {discount['percent']}% off {_usd(discount['usd'], sign=True)}")
    fee = detail.get("fee")
    if fee:
        out.append(f"  fee {fee['rule']} {_usd(fee['usd'], sign=True)}")
    out.append(
        f"  input {_usd(row.get('input_cost_usd') or 0)} + output {_usd(row.get('output_cost_usd') or 0)}"
        + (f" + fee {_usd(row['fee_usd'])}" if row.get("fee_usd") is not None else "")
        + f" = total (cost_usd) {_usd(row['cost_usd'])}"
    )
    return out
