"""The demo's summary and the Data health page name the clusters file the stored self-hosted calls were priced with
(their ``price_source``: ``clusters <version> (<hash>)``), and say when the file configured now is another one."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from taskcost.cli import _demo
from taskcost.pricing import ClusterWindowCost


@dataclass
class _Allocation:
    windows_: list[ClusterWindowCost]

    def windows(self) -> list[ClusterWindowCost]:
        return self.windows_

    def state(self) -> dict[str, object]:
        return {}


def _window(version: str) -> ClusterWindowCost:
    fields = dict.fromkeys(ClusterWindowCost.__dataclass_fields__)
    fields |= {"bill_usd": Decimal(1), "attributed_usd": Decimal("0.5"), "idle_usd": Decimal("0.5")}
    return ClusterWindowCost(**{**fields, "clusters_version": version})  # type: ignore[arg-type]


def test_the_demo_summary_names_the_clusters_file_the_calls_were_priced_with() -> None:
    # the calls were priced with the file as rented (hash aaa); the demo then handed the clusters back (hash bbb)
    windows = [_window("clusters demo-1 (aaa)"), _window("clusters demo-1 (bbb)")]
    line = _demo._clusters_line((("clusters demo-1 (aaa)", 40),), windows)
    assert line == (
        "self-hosted calls priced with clusters demo-1 (aaa) (40 calls); the clusters file configured now is "
        "clusters demo-1 (bbb) (no call was priced with it)"
    )
    assert _demo._clusters_line((("clusters demo-1 (bbb)", 3),), windows) == (
        "self-hosted calls priced with clusters demo-1 (bbb) (3 calls)"
    )


def test_the_demo_summary_no_longer_names_the_last_windows_file_as_the_pricing() -> None:
    from rich.console import Console

    console = Console(record=True, width=200)
    saved = _demo.out
    _demo.out = console
    try:

        class _Stats:
            started = completed = failed = abandoned = golden = calls = agent_retries = 1

        class _Fleet:
            stats = _Stats()

        totals = _demo._Totals(calls=1, spend=Decimal(1), clusters_priced=(("clusters demo-1 (aaa)", 40),))
        windows = [_window("clusters demo-1 (bbb)")]
        _demo._summary(_Fleet(), totals, _Allocation(windows), 1)  # type: ignore[arg-type]
    finally:
        _demo.out = saved
    text = console.export_text()
    assert "GPU-hours (clusters demo-1 (bbb))" not in text
    assert "self-hosted calls priced with clusters demo-1 (aaa) (40 calls)" in text
    assert "configured now is clusters demo-1 (bbb) (no call was priced with it)" in text


def test_the_health_page_says_which_clusters_file_priced_the_stored_calls() -> None:
    from dashboards.pages import health

    assert health._clusters_sub("clusters demo-1 (bbb)", ["clusters demo-1 (aaa)"]) == (
        "configured now (no stored call priced with it); stored self-hosted calls priced with clusters demo-1 (aaa)"
    )
    assert health._clusters_sub("clusters demo-1 (aaa)", ["clusters demo-1 (aaa)"]) == (
        "stored self-hosted calls priced with clusters demo-1 (aaa)"
    )
    assert "no stored call" in health._clusters_sub(None, [])
