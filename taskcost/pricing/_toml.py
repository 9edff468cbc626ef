"""TOML files validated with pydantic, with errors that say the file, the line and the field."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["ConfigFileError", "field_path", "find_line", "load_toml_model", "validate_table"]

M = TypeVar("M", bound=BaseModel)

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*=""")


class ConfigFileError(ValueError):
    """A configuration file (price book, clusters file) that does not validate; one line per problem."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        super().__init__(
            f"{source}: "
            + ("; ".join(self.problems) if len(self.problems) == 1 else "\n  " + "\n  ".join(self.problems))
        )


def _header_path(text: str) -> str:
    return ".".join(part.strip().strip('"').strip("'") for part in text.split("."))


def find_line(text: str, loc: Sequence[str | int], prefix: str = "") -> int | None:
    """The line (1-based) of the value at ``loc`` (a pydantic error location) in TOML ``text``.

    Understands ``[table]`` and ``[[array.of.tables]]`` headers and ``key = value`` lines, which is how
    price books and clusters files are written (``prefix``: the table they sit in, e.g. ``price_book``
    inside taskcost.toml). Where the field itself is absent it answers its table's header line, or the
    line of the key that holds an inline array; else None.
    """
    if not loc or not isinstance(loc[0], str):
        return None
    first = loc[0]
    index = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    rest = [x for x in loc[(2 if index is not None else 1) :] if isinstance(x, str)]
    table = ".".join(p for p in (prefix, first) if p)
    current, count, in_block = "", -1, False
    header_line: int | None = None
    fallback: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            current = _header_path(header.group(2))
            is_array = header.group(1) == "[["
            if index is not None and is_array and current == table:
                count += 1
                in_block = count == index
            else:
                in_block = index is None and not is_array and current == table
            if in_block:
                header_line = number
            continue
        key = _KEY.match(line)
        if key is None:
            continue
        name = key.group(1) or key.group(2) or key.group(3)
        if in_block and rest and name == rest[0]:
            return number
        if current == prefix and name == first:
            if index is None and not rest:
                return number
            fallback = fallback or number
    return header_line or fallback


def field_path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validate_table(model: type[M], table: Any, source: str, text: str | None = None, prefix: str = "") -> M:
    """Validate ``table`` (parsed TOML) as ``model``; raise ConfigFileError naming each bad field and its line."""
    try:
        return model.model_validate(table)
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            loc = [x for x in e["loc"] if isinstance(x, str | int)]
            line = find_line(text, loc, prefix) if text is not None else None
            where = f"line {line}, " if line else ""
            msg = str(e["msg"]).removeprefix("Value error, ")
            problems.append(f"{where}{field_path(loc)}: {msg}")
        raise ConfigFileError(source, problems) from None


def load_toml_model(model: type[M], path: Path) -> M:
    """Read and validate a TOML file as ``model``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigFileError(str(path), [f"cannot read: {exc.strerror or exc}"]) from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(str(path), [f"not valid TOML: {exc}"]) from None
    return validate_table(model, table, str(path), text)
