"""Self-hosted cost: the clusters file, the shipped GPU-rate catalogue, and the allocation of a cluster's
bill to the calls it served (pure functions; the store runs them over its rows in ``taskcost reprice``).

Method (docs/pricing.md): a cluster's bill for a window is GPUs x $/GPU-hour x hours. Each moment of the
window is charged to the calls in flight at that moment, split equally between them ("busy seconds",
the OpenCost allocation idea down to calls); moments with no call in flight are **idle cost**. The exact
shares are rational numbers; they are rounded to the store's 1e-12 USD by largest remainder, so the calls'
shares plus the idle cost equal the bill exactly.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from taskcost.pricing._book import _Rule
from taskcost.pricing._toml import load_toml_model, validate_table

__all__ = [
    "NS_PER_HOUR",
    "Cluster",
    "ClustersFile",
    "GpuRate",
    "ServedCall",
    "WindowAllocation",
    "allocate_window",
    "bill_units",
    "describe_cluster",
    "epoch_ns",
    "gpu_catalogue",
    "largest_remainder",
    "cluster_windows",
    "load_clusters",
]

NS_PER_HOUR = 3_600_000_000_000
_UNITS_PER_USD = 10**12  # the store keeps money to 1e-12 USD


class GpuRate(BaseModel):
    """One row of the shipped catalogue of public GPU rental prices."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    gpu_type: str
    offer: str
    instance_usd_per_hour: Decimal = Field(gt=0)
    gpus_per_instance: int = Field(ge=1)
    usd_per_gpu_hour: Decimal = Field(gt=0)
    source: str = Field(min_length=1)
    checked: date
    caveat: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> GpuRate:
        if self.usd_per_gpu_hour * self.gpus_per_instance != self.instance_usd_per_hour:
            raise ValueError(f"{self.id}: usd_per_gpu_hour x gpus_per_instance != instance_usd_per_hour")
        return self


class _Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rates: list[GpuRate]


@functools.cache
def gpu_catalogue() -> dict[str, GpuRate]:
    """The shipped catalogue (``taskcost/pricing/gpu_rates.toml``), by offer id."""
    text = resources.files("taskcost.pricing").joinpath("gpu_rates.toml").read_text()
    rows = validate_table(_Catalogue, tomllib.loads(text), "gpu_rates.toml", text).rates
    return {r.id: r for r in rows}


class Cluster(_Rule):
    """One period of one cluster: its GPUs and their price from ``effective_from`` (required) on."""

    id: str = Field(min_length=1, description="The cluster id spans carry (`taskcost.cluster.id`).")
    gpu_type: str | None = None
    gpu_count: int = Field(ge=1, le=100_000)
    usd_per_gpu_hour: Decimal | None = Field(None, gt=0, allow_inf_nan=False, description="Rented or amortised.")
    catalogue: str | None = Field(None, description="Else: an offer id of the shipped GPU catalogue.")
    effective_from: datetime

    @model_validator(mode="after")
    def _one_rate(self) -> Cluster:
        if (self.usd_per_gpu_hour is None) == (self.catalogue is None):
            raise ValueError("give exactly one of usd_per_gpu_hour and catalogue")
        if self.catalogue is not None and self.catalogue not in gpu_catalogue():
            raise ValueError(f"no offer {self.catalogue!r} in the GPU catalogue (see `taskcost prices gpus`)")
        return self

    @property
    def rate(self) -> Decimal:
        if self.usd_per_gpu_hour is not None:
            return self.usd_per_gpu_hour
        return gpu_catalogue()[str(self.catalogue)].usd_per_gpu_hour

    @property
    def rate_source(self) -> str:
        if self.catalogue is None:
            return "clusters file"
        row = gpu_catalogue()[self.catalogue]
        return f"catalogue {row.id}: {row.source}, checked {row.checked.isoformat()}"

    @property
    def start_ns(self) -> int:
        return epoch_ns(self.effective_from)

    @property
    def end_ns(self) -> int | None:
        return None if self.effective_to is None else epoch_ns(self.effective_to)


def epoch_ns(at: datetime) -> int:
    """Nanoseconds since the epoch of ``at`` (naive means UTC), exactly."""
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    delta = at - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


class ClustersFile(BaseModel):
    """The clusters file: ``[[clusters]]`` periods (several per id for rate or size changes, not overlapping)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str | None = Field(None, max_length=100)
    clusters: list[Cluster] = Field(default_factory=list)

    @model_validator(mode="after")
    def _no_overlap(self) -> ClustersFile:
        by_id: dict[str, list[Cluster]] = {}
        for c in self.clusters:
            by_id.setdefault(c.id, []).append(c)
        for cid, periods in by_id.items():
            periods = sorted(periods, key=lambda c: c.start_ns)
            for a, b in zip(periods, periods[1:], strict=False):
                if a.end_ns is None or a.end_ns > b.start_ns:
                    raise ValueError(
                        f"cluster {cid!r}: the period from {b.effective_from.isoformat()} overlaps the one from "
                        f"{a.effective_from.isoformat()} (give the earlier one an effective_to)"
                    )
        return self

    @property
    def label(self) -> str:
        digest = hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]
        return f"clusters {self.version or 'unversioned'} ({digest})"

    def periods(self, cluster_id: str) -> list[Cluster]:
        return sorted((c for c in self.clusters if c.id == cluster_id), key=lambda c: c.start_ns)


def load_clusters(path: Path) -> ClustersFile:
    """Read and validate a clusters file (raises ConfigFileError with lines and fields)."""
    return load_toml_model(ClustersFile, path)


@dataclass(frozen=True, slots=True)
class ServedCall:
    key: Hashable
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class WindowAllocation:
    """One cluster period's bill over one window and where it went: ``attributed + idle == bill``."""

    cluster: Cluster
    start_ns: int
    end_ns: int
    bill_usd: Decimal
    attributed_usd: Decimal
    idle_usd: Decimal
    busy_ns: int
    shares: dict[Hashable, Decimal] = field(default_factory=dict)  # call key -> USD
    busy_share_ns: dict[Hashable, Fraction] = field(default_factory=dict)  # call key -> its busy nanoseconds


def largest_remainder(total_units: int, weights: Sequence[Fraction]) -> list[int]:
    """Split ``total_units`` (an integer) in proportion to exact ``weights`` (which sum to it) into integers
    that sum to it exactly: floors first, then one more unit to the largest remainders (ties: first wins)."""
    floors = [w.numerator // w.denominator for w in weights]
    left = total_units - sum(floors)
    if left < 0 or left > len(weights):
        raise ValueError("weights do not sum to the total")
    order = sorted(range(len(weights)), key=lambda i: (-(weights[i] - floors[i]), i))
    for i in order[:left]:
        floors[i] += 1
    return floors


def bill_units(cluster: Cluster, start_ns: int, end_ns: int) -> int:
    """The bill of ``cluster`` for [start, end) in 1e-12 USD, half-even rounded (exact for whole hours)."""
    exact = Fraction(cluster.gpu_count) * Fraction(cluster.rate) * Fraction(end_ns - start_ns, NS_PER_HOUR)
    return round(exact * _UNITS_PER_USD)


def _usd(units: int) -> Decimal:
    return Decimal(units).scaleb(-12)


def allocate_window(cluster: Cluster, start_ns: int, end_ns: int, calls: Sequence[ServedCall]) -> WindowAllocation:
    """Allocate the bill of ``cluster`` for the window [start_ns, end_ns) to ``calls`` by busy seconds.

    Each call is clipped to the window. Between two consecutive call boundaries, the time is shared
    equally by the calls in flight; time with none in flight is idle. A call of zero duration is charged
    nothing. The shares and the idle cost are then rounded together (largest remainder) so they sum to
    the bill exactly.
    """
    if end_ns <= start_ns:
        raise ValueError("empty window")
    clipped = [(c.key, max(c.start_ns, start_ns), min(c.end_ns, end_ns)) for c in calls]
    clipped = [x for x in clipped if x[2] >= x[1]]
    points = sorted({p for _, s, e in clipped for p in (s, e)})
    # count of calls in flight on each elementary interval [points[i], points[i+1])
    delta: dict[int, int] = {}
    for _, s, e in clipped:
        if e > s:
            delta[s] = delta.get(s, 0) + 1
            delta[e] = delta.get(e, 0) - 1
    # cum[p] = integral of 1/k over busy time up to p: a call's busy share is cum[end] - cum[start]
    cum: dict[int, Fraction] = {}
    running, active, busy_ns = Fraction(0), 0, 0
    for i, p in enumerate(points):
        cum[p] = running
        active += delta.get(p, 0)
        if i + 1 < len(points) and active > 0:
            span = points[i + 1] - p
            running += Fraction(span, active)
            busy_ns += span
    share_ns = {key: cum[e] - cum[s] for key, s, e in clipped}
    total = bill_units(cluster, start_ns, end_ns)
    window_ns = end_ns - start_ns
    keys = list(share_ns)
    weights = [Fraction(total) * share_ns[k] / window_ns for k in keys]
    weights.append(Fraction(total) * Fraction(window_ns - busy_ns, window_ns))  # idle, last
    units = largest_remainder(total, weights)
    shares = {k: _usd(u) for k, u in zip(keys, units, strict=False)}
    idle = _usd(units[-1])
    return WindowAllocation(
        cluster=cluster,
        start_ns=start_ns,
        end_ns=end_ns,
        bill_usd=_usd(total),
        attributed_usd=_usd(total - units[-1]),
        idle_usd=idle,
        busy_ns=busy_ns,
        shares=shares,
        busy_share_ns=share_ns,
    )


def cluster_windows(cluster: Cluster, lo_ns: int, hi_ns: int, window_ns: int) -> list[tuple[int, int]]:
    """The windows of ``cluster`` within [lo, hi): clock-aligned (UTC) windows cut to its effective period."""
    lo = max(lo_ns, cluster.start_ns)
    hi = hi_ns if cluster.end_ns is None else min(hi_ns, cluster.end_ns)
    out = []
    t = lo - lo % window_ns
    while t < hi:
        a, b = max(t, lo), min(t + window_ns, hi)
        if b > a:
            out.append((a, b))
        t += window_ns
    return out


def describe_cluster(cluster: Cluster) -> dict[str, Any]:
    return {
        "cluster": cluster.id,
        "gpu_type": cluster.gpu_type,
        "gpu_count": cluster.gpu_count,
        "usd_per_gpu_hour": str(cluster.rate),
        "rate_source": cluster.rate_source,
    }
