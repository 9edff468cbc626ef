"""Rent vs API, the arithmetic alone: no store, no SQL, so that every figure can be checked by hand.

The model is canary-and-breakeven.md §2.4. An observed hourly traffic profile (tokens ``V_h`` and what the API
charges for that hour's token mix, ``api_h``, over the ``H`` hours of the window, idle hours included) is scaled by
a volume multiplier ``k`` (same shape, same mix). With ``cap`` = tokens per replica per hour at the planning
utilisation (throughput x 3600 x u) and ``c`` = one replica's month (GPUs x $/GPU-hour x hours per month):

- API          = k x (hours per month / H) x sum(api_h)
- always-on    = max(min_replicas, ceil(k x S / cap)) x c, S = the peak hour (or the p95 hour)
- autoscaled   = mean_h(max(min_replicas, ceil(k x V_h / cap))) x c x (1 + buffer)
- hybrid(N)    = N x c + (hours per month / H) x sum_h max(0, k x V_h - N x cap) x api_h / V_h; the best N >= 0

Money is ``Decimal`` throughout (replica counts are integers; only the hourly replica counts of the autoscaled mode
are found with a float ``ceil``, to 1e-12). A breakeven is the smallest ``k`` where renting costs no more than the
API: exact closed forms for always-on and hybrid, an exact monotone search for autoscaled.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any, Literal

from taskcost._internal.lazy import np, pl

__all__ = [
    "SENSITIVITY",
    "Breakevens",
    "Costs",
    "Profile",
    "Rental",
    "breakevens",
    "cheapest",
    "costs",
    "curve_frame",
    "curve_multipliers",
    "per_mtok",
    "sensitivity_frame",
    "verdict",
]

_PREC = 60  # digits: money times token counts stays exact far beyond any real bill
_USD = Decimal("1e-12")  # the store's money precision
_M = Decimal(1_000_000)
_MAX_STEPS = 5000  # the autoscaled search: steps before it says "not found" (it converges in a few in practice)

SENSITIVITY: tuple[tuple[str, Decimal, Decimal], ...] = (
    ("base", Decimal(1), Decimal(1)),
    ("throughput -30%", Decimal("0.7"), Decimal(1)),
    ("throughput +30%", Decimal("1.3"), Decimal(1)),
    ("$/GPU-hour -30%", Decimal(1), Decimal("0.7")),
    ("$/GPU-hour +30%", Decimal(1), Decimal("1.3")),
)
"""The sensitivity cases: (name, throughput factor, $/GPU-hour factor)."""


def _usd(x: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = _PREC
        return x.quantize(_USD)


def _ceil(x: Decimal) -> int:
    return int(x.to_integral_value(rounding=ROUND_CEILING))


@dataclass(frozen=True)
class Rental:
    """A rented replica and how it is run. ``tokens_per_s``: tokens (input, cache included, + output) one replica
    serves per second at full load; ``utilisation``: the share of that planned for (headroom for latency)."""

    tokens_per_s: Decimal
    usd_per_gpu_hour: Decimal
    gpus_per_replica: int = 1
    utilisation: Decimal = Decimal("0.9")
    min_replicas: int = 1
    sizing: Literal["peak", "p95"] = "peak"
    hours_per_month: int = 730
    autoscale_buffer: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        if self.tokens_per_s <= 0 or self.usd_per_gpu_hour <= 0 or not 0 < self.utilisation <= 1:
            raise ValueError("throughput and $/GPU-hour must be positive, utilisation in (0, 1]")
        if self.gpus_per_replica < 1 or self.min_replicas < 0 or self.hours_per_month < 1 or self.autoscale_buffer < 0:
            raise ValueError("gpus per replica >= 1, min replicas >= 0, hours per month >= 1, buffer >= 0")

    @property
    def capacity(self) -> Decimal:
        """Tokens one replica is planned to serve in an hour: throughput x 3600 x utilisation."""
        return self.tokens_per_s * 3600 * self.utilisation

    @property
    def replica_month_usd(self) -> Decimal:
        """One replica running all month: GPUs x $/GPU-hour x hours per month."""
        return self.gpus_per_replica * self.usd_per_gpu_hour * self.hours_per_month

    def scaled(self, throughput: Decimal, price: Decimal) -> Rental:
        return replace(
            self, tokens_per_s=self.tokens_per_s * throughput, usd_per_gpu_hour=self.usd_per_gpu_hour * price
        )


@dataclass(frozen=True, eq=False)
class Profile:
    """The observed hours of the window, idle ones included: tokens and the API's charge for each."""

    tokens: Sequence[int]
    api_usd: Sequence[Decimal]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.api_usd) or not self.tokens:
            raise ValueError("a profile needs one API charge per hour and at least one hour")
        if min(self.tokens) < 0:
            raise ValueError("negative tokens")

    @property
    def hours(self) -> int:
        return len(self.tokens)

    @functools.cached_property
    def _v(self) -> np.ndarray:
        return np.asarray(self.tokens, dtype=np.float64)

    @functools.cached_property
    def _sorted(self) -> tuple[np.ndarray, list[Decimal], list[Decimal]]:
        """Hours by tokens, largest first, with prefix sums (exact) of api_h and of api_h / V_h (the hour's price
        per token): what the hybrid's overflow and its breakeven need in O(log H) per question."""
        order = np.argsort(-self._v, kind="stable")
        a_pre, p_pre = [Decimal(0)], [Decimal(0)]
        with localcontext() as ctx:
            ctx.prec = _PREC
            for i in order.tolist():
                v, a = self.tokens[i], self.api_usd[i]
                a_pre.append(a_pre[-1] + a)
                p_pre.append(p_pre[-1] + (a / v if v else Decimal(0)))
        return self._v[order], a_pre, p_pre

    @functools.cached_property
    def total_api_usd(self) -> Decimal:
        return sum(self.api_usd, Decimal(0))

    @property
    def mean_tokens(self) -> Decimal:
        """Mean tokens per hour over the window (idle hours count)."""
        with localcontext() as ctx:
            ctx.prec = _PREC
            return Decimal(sum(self.tokens)) / self.hours

    @property
    def peak_tokens(self) -> int:
        return max(self.tokens)

    @property
    def p95_tokens(self) -> int:
        """The 95th percentile hour (an observed hour's tokens: the 'higher' rule)."""
        return int(np.quantile(self._v, 0.95, method="higher"))

    def api_month(self, rental: Rental, k: Decimal = Decimal(1)) -> Decimal:
        with localcontext() as ctx:
            ctx.prec = _PREC
            return k * self.total_api_usd * rental.hours_per_month / self.hours


@dataclass(frozen=True)
class Costs:
    """A month at ``multiplier`` x the observed volume, each way."""

    multiplier: Decimal
    tokens_per_hour: Decimal
    api_usd: Decimal
    always_on_usd: Decimal
    always_on_replicas: int
    autoscaled_usd: Decimal
    autoscaled_replicas: float  # mean over the hours
    hybrid_usd: Decimal
    hybrid_replicas: int  # the best fixed N (0: the API alone)
    hours_over_capacity: int  # hours whose tokens exceed the always-on replicas' planned capacity (p95 sizing)
    utilisation_always_on: float  # mean share of the replicas' full throughput used
    utilisation_autoscaled: float


def _always_on(profile: Profile, rental: Rental, k: Decimal) -> int:
    size = profile.peak_tokens if rental.sizing == "peak" else profile.p95_tokens
    with localcontext() as ctx:
        ctx.prec = _PREC
        return max(rental.min_replicas, _ceil(k * size / rental.capacity))


def _autoscaled_replicas(profile: Profile, rental: Rental, k: Decimal) -> np.ndarray:
    x = float(k) * profile._v / float(rental.capacity)
    need = np.ceil(x * (1 - 1e-12)).astype(np.int64)
    return np.maximum(need, rental.min_replicas)


def _autoscaled_usd(profile: Profile, rental: Rental, replica_hours: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = _PREC
        return rental.replica_month_usd * (1 + rental.autoscale_buffer) * replica_hours / profile.hours


def _hybrid_usd(profile: Profile, rental: Rental, k: Decimal, n: int) -> Decimal:
    """N fixed replicas all month, the tokens above their capacity in each hour at that hour's API price."""
    vs, a_pre, p_pre = profile._sorted
    cap = rental.capacity
    with localcontext() as ctx:
        ctx.prec = _PREC
        threshold = float(n * cap / k) if k else math.inf
        m = int(np.searchsorted(-vs, -threshold, side="left"))  # hours with k V_h > N cap (a tie adds 0)
        overflow = k * a_pre[m] - n * cap * p_pre[m]
        return n * rental.replica_month_usd + overflow * rental.hours_per_month / profile.hours


def _best_hybrid(profile: Profile, rental: Rental, k: Decimal) -> tuple[int, Decimal]:
    """The cheapest N: hybrid(N) is convex in N (a sum of max(0, a - N cap)), so the first N whose next replica
    does not pay is the best; found by bisection between 0 and the replicas the peak hour needs."""
    with localcontext() as ctx:
        ctx.prec = _PREC
        top = _ceil(k * profile.peak_tokens / rental.capacity)
    lo, hi = 0, top  # the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if _hybrid_usd(profile, rental, k, mid + 1) < _hybrid_usd(profile, rental, k, mid):
            lo = mid + 1
        else:
            hi = mid
    return lo, _hybrid_usd(profile, rental, k, lo)


def costs(profile: Profile, rental: Rental, k: Decimal = Decimal(1)) -> Costs:
    """The month at ``k`` x the observed volume: API, always-on, autoscaled and the best hybrid."""
    with localcontext() as ctx:
        ctx.prec = _PREC
        n_on = _always_on(profile, rental, k)
        reps = _autoscaled_replicas(profile, rental, k)
        replica_hours = int(reps.sum())
        n_hybrid, hybrid = _best_hybrid(profile, rental, k)
        tokens = k * profile.mean_tokens
        full = float(rental.tokens_per_s) * 3600  # a replica's tokens per hour at full load
        over = int(np.count_nonzero(float(k) * profile._v > n_on * float(rental.capacity) * (1 + 1e-12)))
        return Costs(
            multiplier=k,
            tokens_per_hour=tokens,
            api_usd=_usd(profile.api_month(rental, k)),
            always_on_usd=_usd(n_on * rental.replica_month_usd),
            always_on_replicas=n_on,
            autoscaled_usd=_usd(_autoscaled_usd(profile, rental, replica_hours)),
            autoscaled_replicas=replica_hours / profile.hours,
            hybrid_usd=_usd(hybrid),
            hybrid_replicas=n_hybrid,
            hours_over_capacity=over,
            utilisation_always_on=float(tokens) / (n_on * full) if n_on else math.nan,
            utilisation_autoscaled=float(tokens) * profile.hours / (replica_hours * full)
            if replica_hours
            else math.nan,
        )


@dataclass(frozen=True)
class Breakevens:
    """The smallest volume multipliers at which each way of renting costs no more than the API (None: never at
    these prices), and whether the search could tell (``autoscaled_searched`` False: gave up, see _MAX_STEPS)."""

    always_on: Decimal | None
    autoscaled: Decimal | None
    hybrid: Decimal | None
    autoscaled_searched: bool = True

    @property
    def any(self) -> bool:
        return any(x is not None for x in (self.always_on, self.autoscaled, self.hybrid))


def _always_on_breakeven(profile: Profile, rental: Rental) -> Decimal | None:
    """The volume at which the API's month costs as much as the always-on replicas the observed volume needs (n):
    k = n c / A. Renting is a step function: a first replica may pay at a lower volume while the observed one needs
    more, so the point is taken on the step the observed volume is on. Below it (with n replicas) the API is cheaper,
    above it renting, up to the volume that needs replica n + 1: so k <= 1 exactly when always-on costs no more than
    the API now. Valid when the n replicas still serve k x the volume (c S <= A cap, S the sizing hour); otherwise
    every replica added costs more than the API it replaces, at every volume: never."""
    size = profile.peak_tokens if rental.sizing == "peak" else profile.p95_tokens
    a, c = profile.api_month(rental), rental.replica_month_usd
    with localcontext() as ctx:
        ctx.prec = _PREC
        if a <= 0 or c * size > a * rental.capacity:
            return None
        n = _always_on(profile, rental, Decimal(1))
        return n * c / a if n else None


def _autoscaled_breakeven(profile: Profile, rental: Rental) -> tuple[Decimal | None, bool]:
    """Rent(k) is a non-decreasing step function: from a lower bound k, no k' in [k, Rent(k) / A) can cross (Rent
    there is >= Rent(k) > k' A), so step k <- Rent(k) / A until Rent(k) <= k A. Never when the rent's slope (c (1 +
    buffer) V / cap per unit of k) is above the API's: renting then costs more at every volume. When renting costs
    more than the API at the observed volume, the search starts there (a crossing below it, on a lower step, is not
    where renting starts to pay: the observed volume is past it), so the answer is above 1 exactly when autoscaled
    renting costs more now."""
    a = profile.api_month(rental)
    with localcontext() as ctx:
        ctx.prec = _PREC
        c = rental.replica_month_usd * (1 + rental.autoscale_buffer)
        if a <= 0 or c * profile.mean_tokens > a * rental.capacity:
            return None, True
        # any k > 0 rents at least min_replicas in every hour and one in every busy hour: the first lower bound
        floor = int(np.maximum(rental.min_replicas, (profile._v > 0).astype(np.int64)).sum())
        k = _autoscaled_usd(profile, rental, floor) / a
        one = Decimal(1)
        if _autoscaled_usd(profile, rental, int(_autoscaled_replicas(profile, rental, one).sum())) > a:
            k = max(k, one)
        for _ in range(_MAX_STEPS):
            rent = _autoscaled_usd(profile, rental, int(_autoscaled_replicas(profile, rental, k).sum()))
            step = rent / a  # Rent(k) <= k A, compared as k's own quotient (no rounding between the two sides)
            if step <= k:
                return k, True
            k = step
    return None, False


def _hybrid_breakeven(profile: Profile, rental: Rental) -> Decimal | None:
    """The first k at which one fixed replica pays (by convexity, if none does for N = 1 none does for any N): its
    saving S(k) = (hours per month / H) sum_h min(k V_h, cap) api_h / V_h reaches c. S is continuous and increasing;
    with the j busiest hours saturated (k in [cap / V_(j), cap / V_(j+1)]) it is (cap P_j + k (A - A_j)) x
    hours / H, with P_j, A_j prefix sums: bisect j, then solve the linear piece exactly."""
    vs, a_pre, p_pre = profile._sorted
    cap, c = rental.capacity, rental.replica_month_usd
    nz = int(np.count_nonzero(vs))
    with localcontext() as ctx:
        ctx.prec = _PREC
        need = c * profile.hours / rental.hours_per_month  # S(k) x H / hours per month must reach this
        total = a_pre[-1]

        def saving_at_break(j: int) -> Decimal:  # at k = cap / V_(j) (0-based: the (j+1)-th busiest just saturates)
            return cap * p_pre[j] + cap / Decimal(int(vs[j])) * (total - a_pre[j])

        if nz == 0 or cap * p_pre[nz] < need:
            return None
        lo, hi = 0, nz  # the first j in [0, nz) with saving_at_break(j) >= need; nz if none
        while lo < hi:
            mid = (lo + hi) // 2
            if saving_at_break(mid) >= need:
                hi = mid
            else:
                lo = mid + 1
        if lo == nz:  # every busy hour saturated: the saving is flat at cap P_nz; reached at the last break
            return cap / Decimal(int(vs[nz - 1]))
        return (need - cap * p_pre[lo]) / (total - a_pre[lo])


def breakevens(profile: Profile, rental: Rental) -> Breakevens:
    autoscaled, searched = _autoscaled_breakeven(profile, rental)
    return Breakevens(
        always_on=_always_on_breakeven(profile, rental),
        autoscaled=autoscaled,
        hybrid=_hybrid_breakeven(profile, rental),
        autoscaled_searched=searched,
    )


def curve_multipliers(marks: Sequence[Decimal | None], points: int = 25) -> list[Decimal]:
    """Volume multipliers for the curve: a geometric grid from a tenth of the smallest mark (1 = observed, and the
    breakevens) to ten times the largest, with the marks themselves."""
    known = [m for m in marks if m is not None and m > 0] + [Decimal(1)]
    with localcontext() as ctx:  # in Decimal: a mark may be far outside a float's range (10^-323, 10^400)
        ctx.prec = 28
        lo, hi = min(known).log10() - 1, max(known).log10() + 1
        grid = {Decimal(f"{Decimal(10) ** (lo + (hi - lo) * i / (points - 1)):.3g}") for i in range(points)}
    return sorted(grid | set(known))


def per_mtok(usd: Decimal, tokens: Decimal) -> Decimal | None:
    """$ per million tokens, to 12 places (in a context wide enough for any bounded input: quantize raises when the
    digits it keeps are more than the context's precision)."""
    if not tokens:
        return None
    with localcontext() as ctx:
        ctx.prec = 60
        return (usd * _M / tokens).quantize(Decimal("1e-12"))


# -- what the answer shows ------------------------------------------------------------------------------------------
def _fmt_usd(x: Decimal) -> str:
    return f"${x:,.2f}"


def _fmt_tokens(x: Decimal | float) -> str:
    return f"{float(x):,.0f}"


_WAYS = ("the API", "renting always-on", "renting autoscaled", "a hybrid")


def cheapest(o: Costs) -> tuple[str, Decimal]:
    """The cheapest way at the volume ``o`` is of, and its month (on a tie, the first of ``_WAYS``: the API before
    renting): what the verdict names, computed from the figures it prints."""
    ways = {"the API": o.api_usd, "renting always-on": o.always_on_usd, "renting autoscaled": o.autoscaled_usd}
    if o.hybrid_replicas:
        ways["a hybrid"] = o.hybrid_usd
    best = min(ways, key=lambda w: (ways[w], _WAYS.index(w)))
    return best, ways[best]


def verdict(profile: Profile, rental: Rental, o: Costs, b: Breakevens, direction: str) -> str:
    """Plain sentences: what each way costs a month at the observed volume, which is cheapest (from those figures),
    and where always-on renting breaks even (on the step of replicas the observed volume needs), or that renting
    never does at these prices."""
    now = (
        f"At the observed {_fmt_tokens(profile.mean_tokens)} tokens/hour the API costs {_fmt_usd(o.api_usd)} a month; "
        f"renting {_fmt_usd(o.always_on_usd)} always-on ({o.always_on_replicas} replica(s)), "
        f"{_fmt_usd(o.autoscaled_usd)} autoscaled, "
        + (
            f"{_fmt_usd(o.hybrid_usd)} hybrid ({o.hybrid_replicas} fixed replica(s) + API overflow)."
            if o.hybrid_replicas
            else "and no fixed replica pays its way in a hybrid."
        )
    )
    if direction == "self_hosted":
        now = "Priced at the API model: " + now[0].lower() + now[1:]
    if not b.any:
        floor = rental.gpus_per_replica * rental.usd_per_gpu_hour / rental.capacity * _M
        price = o.api_usd / (profile.mean_tokens * rental.hours_per_month) * _M if profile.mean_tokens else Decimal(0)
        searched = "" if b.autoscaled_searched else " (the autoscaled search gave up: see notes)"
        return (
            f"{now} Renting never wins at these prices{searched}: the API charges ${price:.4f}/M tokens; a replica "
            f"kept at {float(rental.utilisation):.0%} utilisation costs ${floor:.4f}/M, before idle hours and peaks."
        )
    best, usd = cheapest(o)
    if best == "the API":
        head = f"{now} The API is the cheapest way at this volume."
    else:
        head = f"{now} {best[0].upper()}{best[1:]} is the cheapest way at this volume ({_fmt_usd(usd)} a month)."
    if b.always_on is None:
        other = [
            f"{name} renting breaks even at {_fmt_tokens(k * profile.mean_tokens)} tokens/hour"
            for name, k in (("autoscaled", b.autoscaled), ("hybrid", b.hybrid))
            if k is not None
        ]
        never = f"{head} Always-on renting never wins at these prices ({rental.sizing} sizing); "
        return never + "; ".join(other) + "."
    v = _fmt_tokens(b.always_on * profile.mean_tokens)
    n = o.always_on_replicas
    if o.always_on_usd <= o.api_usd:
        return f"{head} Always-on ({n} replica(s)) costs no more than the API from {v} tokens/hour."
    return (
        f"{head} Always-on ({n} replica(s)) would break even at {v} tokens/hour ({float(b.always_on):.3g}x the "
        "observed volume)."
    )


def curve_frame(profile: Profile, rental: Rental, b: Breakevens) -> pl.DataFrame:
    marks = {Decimal(1): "observed"}
    for name, k in (("hybrid", b.hybrid), ("autoscaled", b.autoscaled), ("always-on", b.always_on)):
        if k is not None and k > 0:
            marks[k] = f"{marks[k]}, breakeven {name}" if k in marks else f"breakeven {name}"
    rows = []
    for k in curve_multipliers(list(marks)):
        c = costs(profile, rental, k)
        month_mtok = c.tokens_per_hour * rental.hours_per_month / _M
        rows.append(
            {
                "volume_multiplier": float(k),
                "tokens_per_hour": float(c.tokens_per_hour),
                "api_usd": c.api_usd,
                "always_on_usd": c.always_on_usd,
                "always_on_replicas": c.always_on_replicas,
                "autoscaled_usd": c.autoscaled_usd,
                "hybrid_usd": c.hybrid_usd,
                "hybrid_replicas": c.hybrid_replicas,
                "always_on_usd_per_mtok": per_mtok(c.always_on_usd, c.tokens_per_hour * rental.hours_per_month)
                if month_mtok
                else None,
                "mark": marks.get(k),
            }
        )
    schema: dict[str, Any] = {
        "volume_multiplier": pl.Float64,
        "tokens_per_hour": pl.Float64,
        "api_usd": pl.Decimal(38, 12),
        "always_on_usd": pl.Decimal(38, 12),
        "always_on_replicas": pl.Int64,
        "autoscaled_usd": pl.Decimal(38, 12),
        "hybrid_usd": pl.Decimal(38, 12),
        "hybrid_replicas": pl.Int64,
        "always_on_usd_per_mtok": pl.Decimal(38, 12),
        "mark": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def sensitivity_frame(profile: Profile, rental: Rental, base: Breakevens) -> pl.DataFrame:
    rows = []
    for name, throughput, price in SENSITIVITY:
        r = rental.scaled(throughput, price)
        b = base if name == "base" else breakevens(profile, r)
        o = costs(profile, r)

        def tph(k: Decimal | None) -> float | None:
            return None if k is None else float(k * profile.mean_tokens)

        rows.append(
            {
                "case": name,
                "tokens_per_s": float(r.tokens_per_s),
                "usd_per_gpu_hour": r.usd_per_gpu_hour.quantize(Decimal("1e-12")),
                "rent_always_on_usd": o.always_on_usd,
                "rent_autoscaled_usd": o.autoscaled_usd,
                "best_hybrid_usd": o.hybrid_usd,
                "breakeven_tokens_per_hour": tph(b.always_on),
                "breakeven_autoscaled_tokens_per_hour": tph(b.autoscaled),
                "breakeven_hybrid_tokens_per_hour": tph(b.hybrid),
            }
        )
    schema: dict[str, Any] = {"case": pl.String, "tokens_per_s": pl.Float64, "usd_per_gpu_hour": pl.Decimal(38, 12)}
    schema |= dict.fromkeys(("rent_always_on_usd", "rent_autoscaled_usd", "best_hybrid_usd"), pl.Decimal(38, 12))
    schema |= dict.fromkeys(("breakeven_tokens_per_hour", "breakeven_autoscaled_tokens_per_hour"), pl.Float64)
    schema |= {"breakeven_hybrid_tokens_per_hour": pl.Float64}
    return pl.DataFrame(rows, schema=schema)
