"""taskcost: task-cost accounting and observability for LLM agents.

The public surface is small: settings, the app factory and the store interface. Everything else
lives in sub-packages whose internals are private. Importing the package does no work: the settings
registry (pydantic) loads on first use, so that the CLI's quick path starts in milliseconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskcost.settings import Settings, load_settings

__all__ = ["Settings", "load_settings", "__version__"]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("Settings", "load_settings"):
        from taskcost import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'taskcost' has no attribute {name!r}")
