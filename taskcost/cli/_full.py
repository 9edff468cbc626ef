"""The full Typer app: every command module registers its commands on import."""

from __future__ import annotations

from taskcost.cli import (  # noqa: F401  (each registers its commands)
    _analytics,
    _demo,
    _keys,
    _prices,
    _query,
    _reprice,
    _serve,
    _spool,
)
from taskcost.cli._common import app

__all__ = ["app"]
