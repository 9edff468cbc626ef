"""`taskcost demo`, while it runs and waits: the progress lines it shows, and the server's allocation of the GPU-hour
windows it waits for at the end (``wait_for_allocation``)."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from taskcost._internal.lazy import httpx
from taskcost.cli._target import PricingServer
from taskcost.pricing import format_usd
from taskcost.store import StoreUnavailableError

if TYPE_CHECKING:
    from taskcost.cli._demo import _Server, _Signals, _Totals
    from taskcost.demo.fleet import Fleet
    from taskcost.pricing import ClusterWindowCost

__all__ = ["Allocation", "Shown", "clock", "progress", "wait_for_allocation"]


def clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 60}:{s % 60:02d}"


def progress(fleet: Fleet, totals: _Totals | None, elapsed: float, total_s: float, note: str = "") -> Text:
    """Two short lines (they fit 80 columns): the fleet's tasks, then what the collector has and priced."""
    st = fleet.stats
    running = st.started - st.finished
    text = Text(
        f"{clock(elapsed)} / {clock(total_s)}  tasks: {st.completed} completed, {st.failed} failed, "
        f"{st.abandoned} abandoned, {running} running"
    )
    second = note
    if not second and totals is not None:
        second = f"collector: {totals.calls} call attempts, spend {format_usd(totals.spend, places=4, none='$0')}"
        if totals.awaiting:
            second += f", {totals.awaiting} self-hosted awaiting GPU-hours"
    if second:
        text.append("\n" + second, style="dim")
    return text


class Shown:
    """The progress line: redrawn in place on a terminal; elsewhere (a log, a pipe) printed when the demo enters a
    new phase (``phase``: running, finishing the tasks, waiting for the window, ...) and then every ``every`` s."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, auto_refresh=False, transient=False) if console.is_terminal else None
        self._last = 0.0
        self._phase: str | None = None

    def __enter__(self) -> Shown:
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def __call__(self, line: Text, every: float, phase: str = "") -> None:
        if self.live is not None:
            self.live.update(line, refresh=True)
        elif phase != self._phase or time.monotonic() - self._last >= every:
            self.console.print(line, highlight=False)
            self._last, self._phase = time.monotonic(), phase


class Allocation:
    """The server's allocation of the clusters' GPU-hour windows: how far it has gone (/readyz), what it stored."""

    def __init__(self, server: _Server, since: datetime) -> None:
        self.server = server
        self.since = since  # this run's rental

    def state(self) -> dict[str, Any] | None:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            doc: dict[str, Any] = httpx.get(f"{self.server.url}/readyz", timeout=5).json()["cluster_allocation"]
            return doc
        return None

    def through(self, until: datetime) -> bool:
        """Every window that ended by ``until`` is allocated."""
        state = self.state()
        done = None if state is None else state.get("allocated_through")
        return done is not None and datetime.fromisoformat(done) >= until

    def windows(self) -> list[ClusterWindowCost] | str:
        """This run's allocated windows, or why they cannot be read."""
        from taskcost.pricing import ClusterWindowCost

        asked = PricingServer(self.server.url, self.server.token, timeout_s=60.0)
        try:
            docs = asked.get("/api/admin/clusters", since=self.since.isoformat())
            return [ClusterWindowCost.from_json(d) for d in docs]
        except (StoreUnavailableError, httpx.HTTPError, KeyError, ValueError) as exc:
            return str(exc)
        finally:
            asked.close()


def wait_for_allocation(allocation: Allocation, until: datetime, signals: _Signals, show: Shown, most_s: float) -> None:
    """Until the server has allocated every window that ended by ``until`` (the clusters were handed back then), a
    press of Ctrl-C, or ``most_s`` after ``until``. Says so at once (then every 15 s), with the seconds left."""
    presses = signals.count
    give_up = time.monotonic() + (until - datetime.now(UTC)).total_seconds() + most_s
    while signals.count == presses and not allocation.through(until) and time.monotonic() < give_up:
        left = (until - datetime.now(UTC)).total_seconds()
        if left > 0:
            phase, note = "window", f"waiting {left:.0f} s for the GPU-hour window to end, to share it out"
        else:
            phase, note = "sharing", "the server is sharing out the GPU-hours ..."
        show(Text(note + " (Ctrl-C: skip)"), 15.0, phase)
        signals.changed.clear()
        signals.changed.wait(min(1.0, left) if left > 0 else 0.5)
