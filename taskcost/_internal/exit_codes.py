"""Exit codes a question's answer sets for the CLI, in the standard library only (the CLI's quick path reads them
without importing the analytics)."""

from __future__ import annotations

from typing import Any

__all__ = ["canary_exit_code"]


def canary_exit_code(doc: dict[str, Any]) -> int:
    """0 pass, 1 fail, 3 not enough data (also for an answer without a verdict: never a silent pass)."""
    return {"pass": 0, "fail": 1}.get(doc.get("summary", {}).get("verdict"), 3)
