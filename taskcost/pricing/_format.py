"""Money as people read it: one formatter for the CLI, the dashboards and explain-cost."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

__all__ = ["format_usd"]


def format_usd(value: Any, *, places: int = 6, none: str = "-", sign: bool = False) -> str:
    """``$1,234.500000``: a Decimal (or an int or a decimal string; never a float sum) to ``places`` places,
    ``-$0.25`` when negative (``+$0.25`` too with ``sign``), ``none`` when there is no value (unpriced)."""
    if value is None:
        return none
    d = value if isinstance(value, Decimal) else Decimal(str(value))
    text = f"${abs(d):,.{places}f}"
    return ("-" if d < 0 else "+" if sign else "") + text
