"""Compact JSON text on hot paths: ``json.dumps(o, separators=(",", ":"))`` costs an encoder built per call; these
build CPython's C encoder once (and skip the circular-reference check: what they encode are fresh trees)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["compact", "compact_sorted"]


def _not_json(o: Any) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _encoder(sort_keys: bool) -> Callable[[Any], str]:
    try:
        import _json  # CPython's accelerator module
    except ImportError:  # another interpreter: the standard call, same text
        return lambda o: json.dumps(o, separators=(",", ":"), sort_keys=sort_keys)
    make = _json.make_encoder(None, _not_json, _json.encode_basestring_ascii, None, ":", ",", sort_keys, False, True)
    return lambda o: "".join(make(o, 0))


compact: Callable[[Any], str] = _encoder(sort_keys=False)
"""``json.dumps(o, separators=(",", ":"))``"""
compact_sorted: Callable[[Any], str] = _encoder(sort_keys=True)
"""``json.dumps(o, separators=(",", ":"), sort_keys=True)``"""
