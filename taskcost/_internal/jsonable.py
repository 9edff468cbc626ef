"""JSON-safe values for query results (HTTP API and CLI share one rendering)."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

__all__ = ["json_value"]


def json_value(v: Any) -> Any:
    """JSON-safe value; money (DECIMAL) travels as a string so no float ever touches it."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, Decimal):
        return format(v, "f")  # positional always: 0 at 12 places is "0.000000000000", never "0E-12"
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    return str(v)
