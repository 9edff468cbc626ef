"""What every command shares: the Typer app, consoles, errors, settings (options: _options.py)."""

from __future__ import annotations

from typing import Any

import typer

from taskcost.cli._render import consoles
from taskcost.settings import Settings, load_settings

__all__ = ["app", "err", "fail", "out", "settings_or_exit"]

app = typer.Typer(
    name="taskcost",
    help="Task-cost accounting for LLM agents: serve the collector, query the data.",
    no_args_is_help=True,
    add_completion=False,
    # plain help: flags without a `<bool>` value, and help's literal `[env TASKCOST_...]` kept (Rich markup ate it)
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)
out, err = consoles()


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def settings_or_exit(**given: Any) -> Settings:
    """The settings of a command; exit code 1 when they are bad, 2 when a key the command would send to a server
    (``key``, ``admin_token``: an option of the command) is not something an HTTP header can carry."""
    try:
        settings = load_settings(**given)
    except ValueError as exc:
        raise fail(f"bad configuration: {exc}") from None
    for name in ("key", "admin_token"):
        value = getattr(settings, name) if name in given else None
        if value is not None and not (value.isascii() and value.isprintable()):
            option = "--" + name.replace("_", "-")
            raise fail(
                f"{option} (or TASKCOST_{name.upper()}): an API key or token is printable ASCII (letters, digits, "
                "punctuation); this one is not, so no server could have issued it",
                code=2,
            )
    return settings
