"""What every page is given when it registers: its own module, so that pages import it without importing the app."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskcost.analytics import ReadStore

__all__ = ["PageContext"]


@dataclass(frozen=True)
class PageContext:
    """What a page reads: the store (already limited to the caller's project), and the server's own figures
    (``health()``: ingest counters, queue, price data; None when the app runs without a server)."""

    store: ReadStore
    health: Callable[[], dict[str, Any]] | None = None
