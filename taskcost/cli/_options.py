"""What the commands share besides the app: the options that say where to look and over which times, and the one
way a command turns the store's and the server's errors into an ``error:`` line and exit code 1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Protocol, TypeVar

import typer

from taskcost.cli._common import fail
from taskcost.store import QueryError, StoreUnavailableError

__all__ = [
    "AdminOption",
    "DbOption",
    "KeyOption",
    "SinceOption",
    "StoreOption",
    "UntilOption",
    "UrlOption",
    "opened",
    "parse_time",
    "reporting_failures",
]

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="DuckDB file [env TASKCOST_DB; default taskcost.duckdb]", show_default=False),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="The data on ClickHouse instead of the DuckDB file: clickhouse://user:password@host:8123/db or "
        "chdb:///abs/dir; --db then only names the local spool and server info file [env TASKCOST_STORE]",
        show_default=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Ask this running server instead [env TASKCOST_URL]", show_default=False),
]
KeyOption = Annotated[
    str | None,
    typer.Option("--key", help="API key for --url when the server requires one [env TASKCOST_KEY]", show_default=False),
]
AdminOption = Annotated[
    str | None,
    typer.Option(
        "--admin-token", help="Admin token of the server at --url [env TASKCOST_ADMIN_TOKEN]", show_default=False
    ),
]
SinceOption = Annotated[
    str | None, typer.Option("--since", help="From this UTC time on (ISO date or date-time)", show_default=False)
]
UntilOption = Annotated[
    str | None, typer.Option("--until", help="Before this UTC time (ISO date or date-time)", show_default=False)
]


def parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO date or date-time; without a zone it is UTC. A bad one is a usage error (exit 2), as the questions'."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise fail(
            f"{option}: {value!r} is not an ISO date or date-time (e.g. 2026-12-01 or 2026-12-01T10:00Z)", code=2
        ) from None
    from taskcost.analytics import UsageError, utc  # the questions' own range check, one rule for every surface

    try:
        return utc(at, option)
    except UsageError as exc:
        raise fail(str(exc), code=2) from None


@contextmanager
def reporting_failures(*also: type[Exception]) -> Iterator[None]:
    """A refused or failed query, an unreachable server or a closed store (and ``also``) end the command with its
    message and exit code 1, never a traceback."""
    caught: tuple[type[Exception], ...] = (QueryError, StoreUnavailableError, *also)
    try:
        yield
    except caught as exc:
        raise fail(str(exc)) from None


class _Closable(Protocol):
    def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)


@contextmanager
def opened(open_: Callable[[], T], *also: type[Exception]) -> Iterator[T]:
    """``open_()``'s store, server or admin, closed after the block; its failures and the block's as above."""
    with reporting_failures(*also):
        target = open_()
        try:
            yield target
        finally:
            target.close()
