"""Heavy libraries imported on first use, so that a command that never touches them never pays for them.

``taskcost`` (the CLI) builds its commands from the analytics questions; importing polars, numpy and pyarrow for
that took most of a second before any question was asked. Modules name them as usual for the type checker::

    from taskcost._internal.lazy import pl  # polars, imported when first used
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["LazyModule", "httpx", "lazy_exports", "np", "pa", "pl"]


class LazyModule:
    """A module imported on first attribute access (then every access goes straight to it)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{' (imported)' if self._module else ''}>"


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each name it re-exports on first use. The names are
    the ones its ``if TYPE_CHECKING:`` block imports (one list, which the type checker reads too)::

        if TYPE_CHECKING:
            from taskcost.pricing._api import CallPrice
        __getattr__, __dir__ = lazy_exports(__name__)
    """
    module = sys.modules[package]
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    where: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    for alias in stmt.names:
                        where[alias.asname or alias.name] = stmt.module

    def __getattr__(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(module, name, value)  # the next access is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *where})

    return __getattr__, __dir__


if TYPE_CHECKING:
    import httpx
    import numpy as np
    import polars as pl
    import pyarrow as pa
else:
    httpx = LazyModule("httpx")
    np = LazyModule("numpy")
    pl = LazyModule("polars")
    pa = LazyModule("pyarrow")
