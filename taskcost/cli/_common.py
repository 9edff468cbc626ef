"""What every command shares: the Typer app, consoles, errors, settings (options: _options.py)."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.console import Console

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
# Piped output is not cut to 80 columns: ids and numbers stay whole for scripts.
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 400)
err = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def settings_or_exit(**given: Any) -> Settings:
    try:
        return load_settings(**given)
    except ValueError as exc:
        raise fail(f"bad configuration: {exc}") from None
