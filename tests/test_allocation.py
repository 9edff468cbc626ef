"""Self-hosted allocation as a pure function (taskcost.pricing.allocate_self_hosted): no store, answers by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from taskcost.pricing import Pricer, SelfHostedCall, allocate_self_hosted, allocation_range, epoch_ns, load_clusters

H = 3600 * 10**9
T10 = epoch_ns(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))  # a window boundary (hourly windows)
CLUSTERS = """\
version = "2026-12"

[[clusters]]
id = "gpu-east"
gpu_type = "H100-SXM"
gpu_count = 2
usd_per_gpu_hour = "3.00"
effective_from = 2026-11-01T00:00:00Z
"""


def _pricer(tmp_path: Path) -> Pricer:
    path = tmp_path / "clusters.toml"
    path.write_text(CLUSTERS)
    return Pricer(clusters=load_clusters(path))


def test_a_window_is_split_by_busy_seconds_and_the_rest_is_idle(tmp_path: Path) -> None:
    # the 10:00-11:00 window bills 2 GPUs x $3.00 = $6.00. Call a runs 10:00-10:10, b 10:05-10:15: 10:00-10:05 is
    # a's alone (300 s), 10:05-10:10 shared (150 s each), 10:10-10:15 b's alone (300 s); 45 minutes idle.
    s = 10**9
    calls = [
        SelfHostedCall("a", "gpu-east", T10, T10 + 600 * s),
        SelfHostedCall("b", "gpu-east", T10 + 300 * s, T10 + 900 * s),
    ]
    lo, hi, closed = allocation_range(3600, T10, T10 + H, T10 + 2 * H)
    assert (lo, hi, closed) == (T10, T10 + H, T10 + 2 * H)
    out = allocate_self_hosted(_pricer(tmp_path), calls, lo, hi, closed)
    [window] = out.windows
    assert window.bill_usd == Decimal("6.00")
    # 450 of 3600 s each: $6.00 x 450/3600 = $0.75; idle 2700/3600 of it
    assert out.prices["a"].cost_usd == Decimal("0.75") and out.prices["b"].cost_usd == Decimal("0.75")
    assert window.idle_usd == Decimal("4.50") and window.attributed_usd + window.idle_usd == window.bill_usd
    detail = out.prices["a"].detail
    assert detail is not None and detail["windows"][0]["share_s"] == "450.0"


def test_calls_without_a_price_say_why(tmp_path: Path) -> None:
    pricer = _pricer(tmp_path)
    now = T10 + H + 60 * 10**9  # 11:01: the 11:00 window is still open
    calls = [
        SelfHostedCall("open", "gpu-east", T10 + H, T10 + H + 10**9),
        SelfHostedCall("unknown", "gpu-west", T10, T10 + 10**9),
        SelfHostedCall("before", "gpu-east", epoch_ns(datetime(2026, 10, 1, tzinfo=UTC)), T10 - 40 * 24 * H),
    ]
    lo, hi, closed = allocation_range(3600, None, None, now)
    out = allocate_self_hosted(pricer, calls, lo, hi, closed)
    reasons = {k: p.unpriced_reason or "" for k, p in out.prices.items()}
    assert all(p.cost_usd is None for p in out.prices.values())
    assert "has not closed yet" in reasons["open"]
    assert "gpu-west" in reasons["unknown"]
    assert "no rate" in reasons["before"]
    # no clusters file at all: every call unpriced, no window
    bare = allocate_self_hosted(Pricer(), calls, lo, hi, closed)
    assert bare.windows == [] and all(p.cost_usd is None for p in bare.prices.values())
