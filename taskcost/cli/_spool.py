"""`taskcost spool retry`: commit the intake records the server set aside, once what refused them is mended."""

from __future__ import annotations

import typer

from taskcost.cli._common import app, err, fail, out, settings_or_exit
from taskcost.cli._options import DbOption, opened

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
    if not settings.db.exists():
        raise fail(f"no database at {settings.db}")
    committed = kept = 0
    with opened(lambda: open_served(settings, spool=False)) as store:  # a record is removed once committed
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
