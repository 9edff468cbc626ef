"""`taskcost spool retry`: commit the intake records the server set aside, once what refused them is mended."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import typer

from taskcost.cli._common import app, err, fail, out, settings_or_exit
from taskcost.cli._options import DbOption, opened

if TYPE_CHECKING:
    from taskcost.store import DuckDBStore

__all__ = ["spool_app"]

spool_app = typer.Typer(help="The intake spool beside the database (<db>.spool/).")
app.add_typer(spool_app, name="spool")


@spool_app.command("retry")
def retry(db: DbOption = None) -> None:
    """Commit the records the server set aside (<db>.spool/*.rejected: acknowledged batches it could not commit
    after three tries). Run it with the server stopped, once what refused them is mended. A record committed is
    removed; one that fails again is kept, with its error shown, and the exit code is 1."""
    from taskcost.cli._target import open_served

    settings = settings_or_exit(db=db)
    if settings.store:  # (TASKCOST_STORE or taskcost.toml): its spool's set-aside records are not retried here
        raise fail(
            "taskcost spool retry is not available on the ClickHouse store yet (the `store` setting is set); its "
            "set-aside records stay in <db>.clickhouse-spool/*.rejected"
        )
    if not settings.db.exists():
        raise fail(f"no database at {settings.db}")
    committed = kept = 0
    # a record is removed once committed; the DuckDB file's (the ClickHouse store was refused above)
    with opened(lambda: cast("DuckDBStore", open_served(settings, spool=False))) as store:
        for path, result in store.retry_set_aside():
            if isinstance(result, Exception):
                kept += 1
                err.print(f"{path.name}: kept; {result}", highlight=False, markup=False)
            else:
                committed += 1
                err.print(
                    f"{path.name}: committed, {result.spans} spans ({result.deduplicated} were stored already)",
                    highlight=False,
                )
    out.print(f"{committed} set-aside records committed, {kept} kept", highlight=False)
    if kept:
        raise typer.Exit(1)
