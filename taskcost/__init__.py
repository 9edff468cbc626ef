"""taskcost: task-cost accounting and observability for LLM agents.

The public surface is small: settings, the app factory and the store interface. Everything else
lives in sub-packages whose internals are private.
"""

from taskcost.settings import Settings, load_settings

__all__ = ["Settings", "load_settings", "__version__"]

__version__ = "0.1.0"
