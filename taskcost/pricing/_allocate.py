"""Self-hosted costs, as a pure function: each cluster's bill over clock-aligned windows, split between the calls it
served by busy seconds (``allocate_window``), and each call's price (its shares, with their arithmetic) or the reason
it has none. No database here: the store reads the calls and writes what comes back."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

from taskcost.pricing._api import CallPrice
from taskcost.pricing._clusters import (
    Cluster,
    ServedCall,
    WindowAllocation,
    allocate_window,
    cluster_windows,
    describe_cluster,
)
from taskcost.pricing._pricer import Pricer

__all__ = ["SelfHostedAllocation", "SelfHostedCall", "allocate_self_hosted", "allocation_range"]

_MAX_WINDOWS_SHOWN = 24


@dataclass(frozen=True)
class SelfHostedCall:
    """A self-hosted call to allocate: ``key`` is the caller's (it comes back as the key of its price)."""

    key: Hashable
    cluster_id: str | None
    start_ns: int
    end_ns: int


@dataclass
class SelfHostedAllocation:
    """The windows allocated (oldest first, cluster by cluster) and every call's price."""

    windows: list[WindowAllocation] = field(default_factory=list)
    prices: dict[Hashable, CallPrice] = field(default_factory=dict)


def _iso(ns: int) -> str:
    at = datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).replace(microsecond=(ns % 1_000_000_000) // 1000)
    return at.isoformat().replace("+00:00", "Z")


def allocation_range(
    window_s: int, since_ns: int | None, until_ns: int | None, now_ns: int
) -> tuple[int | None, int | None, int]:
    """The whole windows [lo, hi) that cover [since, until) (None: unbounded), and ``closed``: the end of the last
    window that has ended at ``now_ns`` (only ended windows are allocated: a window's shares depend on every call
    in it)."""
    w = window_s * 1_000_000_000
    lo = None if since_ns is None else since_ns - since_ns % w
    hi = None if until_ns is None else -(-until_ns // w) * w
    return lo, hi, now_ns - now_ns % w


class _Served:
    """One call being allocated: its shares, window by window."""

    __slots__ = ("call", "open", "usd", "windows")

    def __init__(self, call: SelfHostedCall, closed: int) -> None:
        self.call = call
        self.open = call.end_ns > closed
        self.usd = Decimal(0)
        self.windows: list[dict[str, Any]] = []

    def credit(self, alloc: WindowAllocation) -> None:
        share = alloc.shares.get(self, Decimal(0))
        self.usd += share
        self.windows.append(
            {
                "start": _iso(alloc.start_ns),
                "end": _iso(alloc.end_ns),
                "usd_per_gpu_hour": str(alloc.cluster.rate),
                "bill_usd": str(alloc.bill_usd),
                "busy_s": str(Decimal(alloc.busy_ns) / 1_000_000_000),
                "share_s": str(round(float(alloc.busy_share_ns.get(self, Fraction(0))) / 1e9, 6)),
                "usd": str(share),
            }
        )


def _period_at(periods: list[Cluster], at_ns: int) -> Cluster:
    found = periods[0]
    for p in periods:
        if p.start_ns <= at_ns:
            found = p
    return found


def _price(pricer: Pricer, served: _Served) -> CallPrice:
    call, clusters = served.call, pricer.clusters
    if clusters is None or not call.cluster_id or not clusters.periods(call.cluster_id):
        return CallPrice.unpriced(pricer.self_hosted_reason(call.cluster_id), pricer.book_version)
    if served.open:
        return CallPrice.unpriced(
            f"self_hosted: cluster {call.cluster_id!r}: the call's last window has not closed yet "
            f"(run `taskcost reprice` after {_iso(call.end_ns)})",
            pricer.book_version,
        )
    if not served.windows:
        return CallPrice.unpriced(
            f"self_hosted: cluster {call.cluster_id!r} has no rate at {_iso(call.start_ns)} (clusters file)",
            pricer.book_version,
        )
    period = _period_at(clusters.periods(call.cluster_id), call.start_ns)
    shown = served.windows[:_MAX_WINDOWS_SHOWN]
    detail: dict[str, Any] = {
        "rates": clusters.label,
        "method": "busy_seconds",
        **describe_cluster(period),
        "windows": shown,
    }
    if len(served.windows) > len(shown):
        detail["windows_omitted"] = len(served.windows) - len(shown)
    return CallPrice(
        cost_usd=served.usd,
        input_cost_usd=None,
        output_cost_usd=None,
        source=clusters.label,
        provider_id=None,
        model_id=None,
        unpriced_reason=None,
        book_version=pricer.book_version,
        detail=detail,
    )


def allocate_self_hosted(
    pricer: Pricer, calls: Sequence[SelfHostedCall], lo: int | None, hi: int | None, closed: int
) -> SelfHostedAllocation:
    """Allocate every configured cluster's windows in [lo, hi) that ended by ``closed`` (None: from each cluster's
    start, up to ``closed``) to ``calls`` (all the self-hosted calls that touch those windows), and price each call:
    the sum of its shares, or unpriced with the reason (no clusters file, unknown cluster, a window still open, no
    rate at its time)."""
    w = pricer.window_s * 1_000_000_000
    served = [_Served(c, closed) for c in calls]
    out = SelfHostedAllocation()
    clusters = pricer.clusters
    if clusters is not None:
        by_window: dict[tuple[str | None, int], list[_Served]] = {}
        for s in served:
            t = s.call.start_ns - s.call.start_ns % w
            while t < closed:
                by_window.setdefault((s.call.cluster_id, t), []).append(s)
                t += w
                if t >= s.call.end_ns:
                    break
        for cid in sorted({c.id for c in clusters.clusters}):
            for period in clusters.periods(cid):
                first = lo if lo is not None else period.start_ns
                last = min(hi if hi is not None else closed, closed)
                for a, b in cluster_windows(period, first, last, w):
                    in_window = by_window.get((cid, a - a % w), [])
                    alloc = allocate_window(
                        period, a, b, [ServedCall(s, s.call.start_ns, s.call.end_ns) for s in in_window]
                    )
                    out.windows.append(alloc)
                    for s in in_window:
                        s.credit(alloc)
    out.prices = {s.call.key: _price(pricer, s) for s in served}
    return out
