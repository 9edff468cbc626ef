"""`taskcost keys`: create, list and revoke API keys (through the running server, or in the file)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from taskcost.cli._common import app, err, fail, out, settings_or_exit
from taskcost.cli._options import AdminOption, DbOption, StoreOption, UrlOption, opened
from taskcost.store import KEY_KINDS

__all__ = ["keys_app"]

keys_app = typer.Typer(help="API keys: ingest keys send spans, read keys query; each belongs to one project.")
app.add_typer(keys_app, name="keys")


CreateOption = Annotated[
    bool, typer.Option("--create", help="Make the database when --db names none (else refused: a typo would)")
]


def _where(target: Any, settings: Any) -> str:
    """Which server or database a key command changed, in words."""
    from taskcost.cli._target import shown_store

    url = getattr(target, "url", None)
    db = shown_store(settings.store) if settings.store else settings.db
    return f"on the server at {url} (database {db})" if url else f"in {db} (no server runs on it)"


def _admin(db: Any, url: str | None, admin_token: str | None, create: bool = False, store: str | None = None) -> Any:
    """Key management (the running server's, or the file's, or with ``store`` that ClickHouse database's), for
    ``with opened(...)``."""
    from taskcost.cli._target import open_admin, running_server

    settings = settings_or_exit(db=db, url=url, admin_token=admin_token, store=store)
    served = settings.url or settings.store or running_server(settings.db)  # (a server on ClickHouse has no file)
    if not served and not settings.db.exists() and not create:
        # a typo in --db must not make a new database (a key in it would turn nothing on): the file must exist
        raise fail(
            f"no database at {settings.db}: give --db the file the server runs on (or --url and --admin-token), or "
            "--create to make it",
            code=2,
        )
    return opened(lambda: open_admin(settings.db, settings.url, settings.admin_token, settings.store), ValueError)


@keys_app.command("create")
def create(
    project: Annotated[str, typer.Argument(help="Project the key belongs to")],
    kind: Annotated[str, typer.Option(help=f"One of {', '.join(KEY_KINDS)}")] = "ingest",
    db: DbOption = None,
    url: UrlOption = None,
    admin_token: AdminOption = None,
    create_db: CreateOption = False,
    store: StoreOption = None,
) -> None:
    """Create a key and print its secret (shown this once). The first key turns authentication on, for good."""
    settings = settings_or_exit(db=db, url=url, admin_token=admin_token, store=store)
    with _admin(db, url, admin_token, create_db, store) as target:
        key, secret = target.create_key(project, kind)
        where = _where(target, settings)
    err.print(
        f"created {key.kind} key {key.id} for project {key.project!r} {where}; its secret (shown once):",
        highlight=False,
    )
    out.print(secret, highlight=False)


@keys_app.command("list")
def list_(
    db: DbOption = None, url: UrlOption = None, admin_token: AdminOption = None, store: StoreOption = None
) -> None:
    """Every key: id, project, kind, prefix, created, revoked (never the secret)."""
    with _admin(db, url, admin_token, store=store) as target:
        keys = target.list_keys()
    table = Table("id", "project", "kind", "prefix", "created", "revoked")
    for k in keys:
        table.add_row(k.id, k.project, k.kind, k.prefix + "...", str(k.created_at or ""), str(k.revoked_at or ""))
    out.print(table)


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (see `taskcost keys list`)")],
    db: DbOption = None,
    url: UrlOption = None,
    admin_token: AdminOption = None,
    store: StoreOption = None,
) -> None:
    """Revoke a key; requests with it are refused from now on. Revoking the last active key leaves authentication
    on: every request is refused but the admin token's, until a key is created."""
    with _admin(db, url, admin_token, store=store) as target:
        done = target.revoke_key(key_id)
        left = sum(k.revoked_at is None for k in target.list_keys()) if done else None
        where = _where(target, settings_or_exit(db=db, url=url, admin_token=admin_token, store=store))
    if not done:
        raise fail(f"no active key {key_id!r} {where}")
    err.print(f"revoked {key_id} {where}", highlight=False)
    if left == 0:
        settings = settings_or_exit(db=db, url=url, admin_token=admin_token, store=store)
        where = f"--url {settings.url} --admin-token TOKEN" if settings.url else f"--db {settings.db}"
        if not settings.url and settings.store:
            from taskcost.cli._target import shown_store

            where += f" --store {shown_store(settings.store)}"
        err.print(
            "warning: that was the last active key. Authentication stays on (revoked keys count): the server now "
            "refuses every request but /healthz and /readyz (401), except with its admin token. To get back in, "
            "create a key: "
            f"taskcost keys create PROJECT --kind ingest|read {where}",
            highlight=False,
        )
