"""The `taskcost` command: thin commands over the collector, store and analytics.

``main`` first offers the command line to the quick path (``_quick.py``: a question asked of a running server, in
the standard library), then builds the full Typer app (``_full.py``) for everything else.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typer import Typer

__all__ = ["app", "main"]


def main() -> None:
    from taskcost.cli._quick import answer_quickly

    code = answer_quickly(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    _app()()


def _app() -> Typer:
    from taskcost.cli._full import app

    return app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module 'taskcost.cli' has no attribute {name!r}")
