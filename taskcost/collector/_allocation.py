"""The server's own allocation of the self-hosted clusters' GPU-hours, so that self-hosted costs appear without a
``taskcost reprice`` from cron.

Once a cluster window has ended, and ``cluster_allocation_delay_s`` more have passed (the spans of the calls that
ended near its end are still on their way), a thread of the server allocates it to the calls the cluster served:
``Store.allocate_clusters``, the code ``taskcost reprice`` runs for self-hosted calls, in the process that owns the
database file, on a cursor of its own beside the single writer (DuckDB's MVCC: ingest goes on meanwhile). It
allocates what is due oldest first, at most ``CHUNK_WINDOWS`` windows a transaction: the windows after the last one
stored for each configured cluster (from its first period when none is), and the windows of self-hosted calls that
came after their window had been allocated (looked for at least every ``RECHECK_S``). A window allocated again is
computed again from all its calls: the same calls cost the same. While a re-price runs, it waits (a re-price
allocates too). What it did, what is due next and its last error are in ``status()``: ``/readyz`` shows it, and
the composition root can hand it to the dashboards' Data health page (``app.state.cluster_allocation``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from taskcost.store import StoreUnavailableError

if TYPE_CHECKING:
    from taskcost.pricing import Pricer, PricingSource
    from taskcost.store import AllocationDue, Store

__all__ = ["CHUNK_WINDOWS", "RECHECK_S", "ClusterAllocator"]

log = logging.getLogger(__name__)

CHUNK_WINDOWS = 24  # windows allocated in one transaction at most (a day of hour windows)
RECHECK_S = 300.0  # look for late calls at least this often, and for a clusters file that appeared
RETRY_S = 30.0  # after an error, or while a re-price runs
_LATE_MARGIN_NS = 120 * 1_000_000_000  # calls received this long before the last run began are looked at again
_NS = 1_000_000_000
_MAX_ERROR = 500  # characters of an error kept in the state


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    at = datetime.fromtimestamp(ns // _NS, tz=UTC)
    return at.isoformat().replace("+00:00", "Z")


class ClusterAllocator:
    """Allocates the clusters' ended windows in the background (``start``/``stop``), or once (``run_once``)."""

    def __init__(
        self,
        store: Store,
        source: PricingSource,
        *,
        enabled: bool = True,
        delay_s: float = 60.0,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.store = store
        self.source = source
        self.enabled = enabled
        self.delay_s = delay_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_lock = threading.Lock()  # one run at a time
        self._lock = threading.Lock()  # the state below
        self._received_since_ns: int | None = None  # late calls: those received from then on
        self._state: dict[str, Any] = {
            "running": False,
            "clusters": None,
            "window_s": None,
            "allocated_through_ns": None,
            "last_window_end_ns": None,
            "next_due_ns": None,
            "last_run_ns": None,
            "last_run_s": None,
            "last_run": None,
            "waiting": None,
            "error": None,
            "error_ns": None,
            "runs": 0,
            "windows": 0,
        }

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread (nothing when turned off, or when it runs already)."""
        if not self.enabled or (self._thread is not None and self._thread.is_alive()):
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="taskcost-cluster-allocation", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop after the transaction in hand (before the store closes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self.run_once())

    # -- one run ------------------------------------------------------------------------------------------------
    def run_once(self) -> float:
        """Allocate every window that is due now; returns the seconds until it should look again. Never raises: an
        error is kept in the state (and logged), and retried."""
        with self._run_lock:
            try:
                return self._run()
            except StoreUnavailableError as exc:  # a re-price runs (it allocates too), or the store is closing
                self._set(running=False, waiting=str(exc))
                return RETRY_S
            except Exception as exc:  # kept and shown (/readyz); the next run tries again
                log.exception("allocating the clusters' windows failed; retrying in %.0f s", RETRY_S)
                self._set(running=False, waiting=None, error=str(exc)[:_MAX_ERROR], error_ns=self.clock())
                return RETRY_S

    def _run(self) -> float:
        pricer = self.source.current()
        clusters = pricer.clusters
        w = pricer.window_s * _NS
        self._set(clusters=None if clusters is None else clusters.label, window_s=pricer.window_s)
        if clusters is None:
            self._set(next_due_ns=None, error=None, error_ns=None)
            return RECHECK_S
        began = self.clock()
        cutoff = began - int(self.delay_s * _NS)
        closed = cutoff - cutoff % w
        next_due = closed + w + int(self.delay_s * _NS)
        self._set(next_due_ns=next_due)
        due = self._due(pricer, closed)
        windows = calls = changed = 0
        bill = attributed = idle = Decimal(0)
        if due.since_ns is not None:
            self._set(running=True)
            log.info("allocating the clusters' windows from %s to %s", _iso(due.since_ns), _iso(closed))
            start = due.since_ns
            while start < closed and not self._stop.is_set():
                end = min(start + CHUNK_WINDOWS * w, closed)
                report = self.store.allocate_clusters(
                    pricer, since_ns=start, until_ns=end, now_ns=self.clock(), closed_ns=closed
                )
                windows += report.windows
                calls += report.self_hosted_calls
                changed += report.self_hosted_changed
                bill += report.bill_usd
                attributed += report.attributed_usd
                idle += report.idle_usd
                with self._lock:
                    self._state["windows"] += report.windows
                start = end
            if start < closed:  # stopped: the rest is due at the next start
                self._set(running=False)
                return RETRY_S
        self._received_since_ns = began - _LATE_MARGIN_NS
        after = self.store.cluster_allocation_due(pricer, closed_ns=closed, received_since_ns=None)
        finished = self.clock()
        with self._lock:
            self._state["runs"] += 1
            self._state.update(
                running=False,
                allocated_through_ns=closed,
                last_window_end_ns=after.allocated_through_ns,
                last_run_ns=began,
                last_run_s=round((finished - began) / _NS, 3),
                waiting=None,
                error=None,
                error_ns=None,
            )
            if due.since_ns is not None:
                self._state["last_run"] = {
                    "from": _iso(due.since_ns),
                    "to": _iso(closed),
                    "windows": windows,
                    "calls": calls,
                    "calls_changed": changed,
                    "bill_usd": str(bill),
                    "attributed_usd": str(attributed),
                    "idle_usd": str(idle),
                    "late_calls_from": _iso(due.late_calls_from_ns),
                }
        if windows:
            log.info("allocated %d window(s): bill %s = attributed %s + idle %s", windows, bill, attributed, idle)
        return max(1.0, min((next_due - self.clock()) / _NS, RECHECK_S))

    def _due(self, pricer: Pricer, closed: int) -> AllocationDue:
        since = self._received_since_ns
        if since is None:  # the first run: late calls are those received since the last allocation stored
            first = self.store.cluster_allocation_due(pricer, closed_ns=closed, received_since_ns=None)
            if first.last_allocated_at_ns is None:
                return first  # nothing stored yet: every window is due from each cluster's first period
            since = first.last_allocated_at_ns - _LATE_MARGIN_NS
        return self.store.cluster_allocation_due(pricer, closed_ns=closed, received_since_ns=since)

    # -- state ------------------------------------------------------------------------------------------------
    def _set(self, **values: Any) -> None:
        with self._lock:
            self._state.update(values)

    def status(self, *, detail: bool = False) -> dict[str, Any]:
        """The allocation's state, JSON-safe: whether it is on and running, the clusters file, the windows allocated,
        when the next one is due, the last run and the last error (/readyz; the dashboards' Data health). Figures
        about the calls (the last run's calls and dollars, every project's together) only with ``detail``: /readyz
        is open to anyone."""
        with self._lock:
            s = dict(self._state)
        started = self._thread is not None and self._thread.is_alive()
        if not self.enabled:
            state = "off"
        elif s["error"] is not None:
            state = "error"
        elif s["running"]:
            state = "allocating"
        elif s["waiting"] is not None:
            state = "waiting"
        elif not started and s["runs"] == 0:
            state = "not started"
        elif s["clusters"] is None and s["window_s"] is not None:
            state = "no clusters file"
        else:
            state = "idle"
        return {
            "enabled": self.enabled,
            "state": state,
            "clusters": s["clusters"],
            "window_s": s["window_s"],
            "delay_s": self.delay_s,
            "allocated_through": _iso(s["allocated_through_ns"]),
            "last_window_end": _iso(s["last_window_end_ns"]),
            "next_due_at": _iso(s["next_due_ns"]),
            "last_run_at": _iso(s["last_run_ns"]),
            "last_run_s": s["last_run_s"],
            **({"last_run": s["last_run"]} if detail else {}),
            "runs": s["runs"],
            "windows_allocated": s["windows"],
            "waiting_for": s["waiting"],
            "error": s["error"],
            "error_at": _iso(s["error_ns"]),
        }
