"""Rent vs API breakeven: the price of a GPU-hour, from the options, the catalogue or the self-hosted calls' bill."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from taskcost.analytics._filters import Filters
from taskcost.analytics._question import UsageError

__all__ = ["billed_rate", "gpu_price"]


def billed_rate(detail: Any) -> tuple[Decimal, str | None, str] | None:
    """The $/GPU-hour a self-hosted call was billed at (its price detail: the clusters file's rate)."""
    try:
        doc = json.loads(detail) if isinstance(detail, str) else detail
        rate = Decimal(str(doc["usd_per_gpu_hour"]))
        return rate, doc.get("gpu_type"), f"cluster {doc.get('cluster')} ({doc.get('rate_source')})"
    except (ValueError, TypeError, KeyError, AttributeError, InvalidOperation):
        return None


def _catalogue(name: str) -> tuple[Decimal, str, str] | None:
    """An offer id, or a GPU type's cheapest offer (case-insensitive)."""
    from taskcost.pricing import gpu_catalogue  # the catalogue's module loads the price data

    offers = gpu_catalogue()
    if name in offers:
        o = offers[name]
        return o.usd_per_gpu_hour, o.gpu_type, f"catalogue {o.id}: {o.offer} ({o.source}, checked {o.checked})"
    same = sorted((o for o in offers.values() if o.gpu_type.lower() == name.lower()), key=lambda o: o.usd_per_gpu_hour)
    if not same:
        return None
    o = same[0]
    more = f"; {len(same) - 1} dearer offer(s) listed" if len(same) > 1 else ""
    return o.usd_per_gpu_hour, o.gpu_type, f"catalogue {o.id}, the cheapest {o.gpu_type} offer ({o.offer}){more}"


def gpu_price(
    filters: Filters,
    gpu: str | None,
    usd_per_gpu_hour: Decimal | None,
    billed: tuple[Decimal, str | None, str] | None,
    observed: tuple[str, ...] = (),
) -> tuple[Decimal, str, str]:
    """$/GPU-hour, the GPU it is for, and where the price comes from: ``usd_per_gpu_hour`` when given, else the
    catalogue's offer ``gpu`` (an id or a GPU type), else the rate the self-hosted calls were billed at (``billed``:
    rate, GPU type(s), source), else the cheapest catalogue offer of the ``gpu_type`` filter."""
    named = None
    if gpu is not None:
        named = _catalogue(gpu)
        if named is None and usd_per_gpu_hour is None:
            raise UsageError(f"--gpu {gpu}: no such offer id or GPU type in the catalogue (taskcost prices gpus)")
    if usd_per_gpu_hour is not None:
        return usd_per_gpu_hour, gpu or filters.gpu_type or "GPU", "given (--usd-per-gpu-hour)"
    if named is not None:
        return named
    if billed is not None:
        return billed[0], billed[1] or filters.gpu_type or "GPU", f"billed self-hosted calls: {billed[2]}"
    if filters.gpu_type is not None and (by_filter := _catalogue(filters.gpu_type)) is not None:
        return by_filter
    if len(observed) == 1 and (seen := _catalogue(observed[0])) is not None:
        return seen[0], seen[1], f"{seen[2]}: the GPU type the self-hosted calls ran on, not billed"
    raise UsageError(
        "no GPU price: give --gpu (a catalogue offer or GPU type, see `taskcost prices gpus`) or --usd-per-gpu-hour"
    )
