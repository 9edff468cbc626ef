"""What the dashboards draw beside a canary: a capped sample of each arm's per-call latency and TTFT (to overlay the
two distributions), and the GPU catalogue's offers (the breakeven page's menu).

The sample is the canary's own (``_canary``: the same arms under the same filters, the same deterministic hash of the
start time), only smaller: about ``size`` successful calls per arm, whatever the store's size. Two statements: the
arms' exact counts and the sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from taskcost._internal.lazy import pl
from taskcost.analytics._canary import ARMS, CanaryOptions, _checked, _counts, _sample
from taskcost.analytics._filters import Filters
from taskcost.analytics._question import UsageError
from taskcost.pricing import gpu_catalogue
from taskcost.store import ReadStore

__all__ = ["MAX_SAMPLE", "GpuOffer", "canary_samples", "gpu_offers"]

MAX_SAMPLE = 10_000
"""The most calls per arm a sample may ask for (a chart needs far fewer; the canary's own default)."""


def canary_samples(
    store: ReadStore, filters: Filters, dimension: str, baseline: str, candidate: str, *, size: int = 2_000
) -> pl.DataFrame:
    """About ``size`` successful call attempts of each canary arm (all of them when the arm has fewer): ``arm``
    (``baseline`` or ``candidate``), ``duration_s``, ``ttft_s`` (null when the call did not stream). The calls the
    canary's latency and TTFT metrics read, chosen the same deterministic way. A bad dimension or arm raises
    ``UsageError`` as ``canary`` does."""
    if not 1 <= size <= MAX_SAMPLE:
        raise UsageError(f"sample size {size}: from 1 to {MAX_SAMPLE:,} calls per arm")
    try:
        options = CanaryOptions.model_validate({"dimension": dimension, "baseline": baseline, "candidate": candidate})
    except ValueError:
        raise UsageError(f"{dimension!r} is not a canary dimension") from None
    dim, values = _checked(filters, options)
    counts = _counts(store, filters, dim, values, {})
    sample = _sample(store, filters, dim, values, {}, counts, size)
    arm_of = pl.DataFrame({"value": [values[a] for a in ARMS], "arm": list(ARMS)})
    return (
        sample.join(arm_of, on="value", how="inner")
        .select(
            "arm",
            pl.col("duration_s").cast(pl.Float64),
            pl.col("ttft_s").cast(pl.Float64),
        )
        .sort("arm", "duration_s")
    )


@dataclass(frozen=True)
class GpuOffer:
    """One offer of the shipped GPU catalogue (``taskcost prices gpus``): what ``breakeven``'s ``gpu`` option names."""

    id: str
    gpu_type: str
    usd_per_gpu_hour: Decimal
    offer: str
    source: str


def gpu_offers() -> list[GpuOffer]:
    """The GPU catalogue's offers, in its own order."""
    return [
        GpuOffer(r.id, r.gpu_type, r.usd_per_gpu_hour, r.offer, f"{r.source}, checked {r.checked.isoformat()}")
        for r in gpu_catalogue().values()
    ]
