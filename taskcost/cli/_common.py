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
    try:
        return load_settings(**given)
    except ValueError as exc:
        raise fail(f"bad configuration: {exc}") from None
