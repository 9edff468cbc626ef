"""Compact JSON text on hot paths (every span's attributes at intake, every call's price detail).

orjson writes it about 7x faster than ``json.dumps(o, separators=(",", ":"))`` (2.7 -> 0.4 us for a span's ~10
attributes, sorted). Its text differs from ``json.dumps``'s only where that is not JSON anyway or not required:
non-ASCII characters stay UTF-8 instead of ``\\uXXXX`` escapes, and NaN and infinities become ``null`` (``json.dumps``
writes ``NaN``, which no JSON reader, DuckDB's included, accepts). What orjson refuses (a string with a lone
surrogate, an integer beyond 64 bits) goes through ``json.dumps``, so nothing is lost.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["compact", "compact_sorted"]

_SORTED = orjson.OPT_SORT_KEYS


def compact(o: Any) -> str:
    """``o`` as compact JSON text."""
    try:
        return orjson.dumps(o).decode()
    except TypeError:  # (orjson.JSONEncodeError is one)
        return json.dumps(o, separators=(",", ":"))


def compact_sorted(o: Any) -> str:
    """``o`` as compact JSON text, object keys sorted."""
    try:
        return orjson.dumps(o, option=_SORTED).decode()
    except TypeError:
        return json.dumps(o, separators=(",", ":"), sort_keys=True)
