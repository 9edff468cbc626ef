"""`taskcost serve`: the one process that owns the DuckDB file (or, with ``--store``, one of the collectors writing
to a ClickHouse database: then ``--db``'s path only names its spool and server info file)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskcost.cli._common import app, err, fail, settings_or_exit
from taskcost.cli._options import DbOption, StoreOption
from taskcost.cli._serve_auth import auth_notes, auth_refusal, auth_summary
from taskcost.store import StoreUnavailableError

if TYPE_CHECKING:
    from taskcost.settings import Settings
    from taskcost.store import Store

__all__ = ["serve"]

# How to choose another port, in the error that says a port is taken
_HTTP_PORT_HINT = "serve on another port with --port N (TASKCOST_PORT=N; with make: make run PORT=N)"
_GRPC_PORT_HINT = (
    "serve OTLP/gRPC on another port with --grpc-port N (TASKCOST_GRPC_PORT=N; with make: make run GRPC_PORT=N), "
    "or turn it off with --grpc-port 0"
)


def _bind_error(host: str, port: int) -> OSError | None:
    """Why ``host:port`` cannot be bound for listening right now (another process listens there...), else None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc
    return None


def _first_keys(store: Store, project: str) -> list[tuple[str, str, str]]:
    """An ingest and a read key of ``project`` (``first_keys_project``, at a start that found no active key), created
    now: (kind, key id, secret) each."""
    made = [store.create_key(project, kind) for kind in ("ingest", "read")]
    return [(key.kind, key.id, secret) for key, secret in made]


def _first_keys_message(keys: list[tuple[str, str, str]], project: str, url: str, db: Path) -> str:
    """What the log says once about the keys made at the first start: their secrets and how to get in."""
    secret = {kind: s for kind, _, s in keys}
    lines = [
        f"no API key existed: created the first keys of project {project!r} (first_keys_project); "
        "their secrets are shown this once:",
    ]
    lines += [f"  {kind} key {key_id}: {s}" for kind, key_id, s in keys]
    lines += [
        "  send spans with the ingest key, e.g. "
        f'OTEL_EXPORTER_OTLP_ENDPOINT={url} OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20{secret["ingest"]}"',
        f"  read with the read key: dashboards {url}/dash/ (Basic auth, the key as password); "
        f'taskcost sql --url {url} --key {secret["read"]} "SELECT * FROM tasks"',
        f"  more keys, list, revoke: taskcost keys create|list|revoke --db {db} (where the server runs)",
    ]
    return "\n".join(lines)


def _clickhouse_settings(settings: Settings) -> Settings:
    """The settings a server on the ClickHouse store runs with; the log says once what does not apply to it."""
    logging.getLogger(__name__).info(
        "on the ClickHouse store: `taskcost spool retry` is not available yet; DuckDB's own settings "
        "(memory_limit, duckdb_threads, dedupe_window_spans) are not applied to ClickHouse (memory_limit still sets "
        "the defaults of sql_memory_limit and process_memory_limit, which bound this process, chDB included)"
    )
    return settings


def _spool_note(store: Any) -> None:
    """Set-aside records: the DuckDB store replays them in the background; the ClickHouse store keeps them."""
    replay = getattr(store, "replay_set_aside_in_background", None)
    if replay is not None:
        replay()  # acknowledged batches an earlier run could not commit: tried again
        return
    aside = sorted(store.spool_directory.glob("*.rejected")) if getattr(store, "spool_directory", None) else []
    if aside:
        logging.getLogger(__name__).warning(
            "%d set-aside spool record(s) in %s are not replayed on the ClickHouse store yet",
            len(aside),
            store.spool_directory,
        )


@app.command()
def serve(
    db: DbOption = None,
    store_url: StoreOption = None,
    port: Annotated[int | None, typer.Option(help="Port [env TASKCOST_PORT; default 4318]")] = None,
    grpc_port: Annotated[
        int | None, typer.Option(help="OTLP/gRPC port, 0 = off [env TASKCOST_GRPC_PORT; default 4317]")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Bind address [env TASKCOST_HOST; default 127.0.0.1]")] = None,
    dashboards: Annotated[bool, typer.Option(help="Serve the dashboards under /dash/")] = True,
    auth: Annotated[
        str | None,
        typer.Option(
            "--auth",
            help="Require API keys: auto (once any key was ever created, or beyond loopback), on, or off (loopback "
            "only) [env TASKCOST_AUTH; default auto]",
            show_default=False,
        ),
    ] = None,
    allow_unauthenticated: Annotated[
        bool | None,
        typer.Option(
            "--allow-unauthenticated",
            help="Bind a non-loopback address without keys while no API key was ever created "
            "[env TASKCOST_ALLOW_UNAUTHENTICATED]",
            show_default=False,
        ),
    ] = None,
    first_keys_project: Annotated[
        str | None,
        typer.Option(
            "--first-keys-project",
            help="When no API key exists, create an ingest and a read key of this project and print their secrets "
            "once [env TASKCOST_FIRST_KEYS_PROJECT]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the collector: OTLP/HTTP on /v1/traces, the SQL API on /api/sql, dashboards on /dash/."""
    # Before DuckDB is loaded: its allocator (jemalloc) then returns the address space it frees instead of keeping it,
    # so the process's data memory follows what it uses and process_memory_limit bounds queries, not their history
    # (one 1 GB value left 1.3 GB reserved for good otherwise).
    os.environ.setdefault("DUCKDB_JE_MALLOC_CONF", "retain:false")
    import uvicorn

    from taskcost._internal.arrow_memory import use_system_allocator
    from taskcost._internal.limits import set_data_limit
    from taskcost.app import create_app
    from taskcost.cli._target import open_served, shown_store, write_server_info

    settings = settings_or_exit(
        db=db,
        store=store_url,
        port=port,
        grpc_port=grpc_port,
        host=host,
        auth=auth,
        allow_unauthenticated=allow_unauthenticated,
        first_keys_project=first_keys_project,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.store:
        settings = _clickhouse_settings(settings)
    use_system_allocator()  # before any Arrow buffer exists (with decode_workers 0, this process builds them)
    # a port another process holds fails here, before anything starts (the database is not even made), saying how to
    # choose another one
    for what, bind_port, hint in (
        ("OTLP/HTTP", settings.port, _HTTP_PORT_HINT),
        ("OTLP/gRPC", settings.grpc_port, _GRPC_PORT_HINT),
    ):
        taken = _bind_error(settings.host, bind_port) if bind_port else None
        if taken is not None:
            how = f"; {hint}" if taken.errno == errno.EADDRINUSE else ""
            raise fail(f"cannot serve {what} on {settings.host}:{bind_port}: {taken.strerror}{how}")
    try:
        store = open_served(settings, spool=settings.spool)
    except StoreUnavailableError as exc:
        raise fail(str(exc)) from None
    ceiling = settings.server_process_memory_limit()
    if ceiling is not None:  # the bound no query can get around (taskcost/_internal/limits.py)
        try:
            set_data_limit(ceiling)
        except (ValueError, OSError) as exc:
            store.close()
            raise fail(f"cannot set process_memory_limit: {exc}") from None
    _spool_note(store)
    # the first keys: of a database that never had one (revoked keys count: they keep authentication on)
    first_project = None if store.keys_ever_created else settings.first_keys_project  # its keys are made below
    refusal = auth_refusal(settings, store.keys_ever_created, first_project is not None)
    if refusal is not None:
        store.close()
        raise fail(refusal)
    shown_host = "127.0.0.1" if settings.listens_beyond_loopback() else settings.host
    url = f"http://{shown_host}:{settings.port}"
    if first_project is not None:
        # printed as soon as they exist: whatever happens next, the secrets are in the log once
        first_keys = _first_keys(store, first_project)
        err.print(_first_keys_message(first_keys, first_project, url, settings.db), highlight=False)
    admin_token = settings.admin_token or secrets.token_urlsafe(32)
    info = write_server_info(settings.db, url, admin_token)
    receiver: Any = None
    decoders: Any = None
    application: Any = None

    def release() -> None:
        if receiver is not None:
            receiver.stop(5)
        if decoders is not None:
            decoders.close()
        if application is not None:
            application.state.sql_gate.close()  # queued queries are dropped; running ones end by their time limit
        store.close()  # drains the writer; a no-op the second time
        info.unlink(missing_ok=True)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        # runs on SIGTERM/SIGINT too, after in-flight requests finished: drain the writer, release the file
        release()
        err.print(
            f"taskcost stopped; {store.committed_spans} spans committed this run "
            f"({store.deduplicated_spans} re-sent spans skipped)",
            highlight=False,
        )

    try:
        # the app installs the configured prices (book, price data) before any receiver takes spans
        application = create_app(settings, store, dashboards=dashboards, lifespan=lifespan, admin_token=admin_token)
        decoders = application.state.decoders
        if decoders is not None:  # warm up beside the server: /healthz answers at once, intake waits for a worker
            threading.Thread(target=decoders.start, name="taskcost-decoders-start", daemon=True).start()
        receiver = None
        if settings.grpc_port:  # (gRPC's library only when it serves: 8 MB of the server's memory)
            from taskcost.collector import start_grpc_server

            receiver = start_grpc_server(
                store, settings, intake=application.state.intake, decoders=decoders, metrics=application.state.metrics
            )
    except (ValueError, OSError) as exc:
        release()
        if isinstance(exc, OSError):
            raise fail(f"cannot start: OTLP/gRPC: {exc}; {_GRPC_PORT_HINT}") from None
        raise fail(f"cannot start: the pricing configuration: {exc}") from None
    try:
        # Says the rule, not a state read once: a key created while the server runs (`taskcost keys create` asks
        # the running server) turns authentication on at once, and this line stays in the log.
        required = application.state.auth.required
        for note in auth_notes(settings, store.keys_ever_created, store.has_active_keys, required):
            err.print(note, highlight=False)
        auth_said = auth_summary(settings, required)
        served = (
            f"{shown_store(settings.store)} (spool and info file: {settings.db})" if settings.store else settings.db
        )
        err.print(
            f"taskcost serving {served} on {url}  (OTLP/HTTP {url}/v1/traces, SQL {url}/api/sql"
            + (f", dashboards {url}/dash/" if dashboards else "")
            + (f", OTLP/gRPC {shown_host}:{receiver.port}" if receiver is not None else "")
            + f"; {auth_said})",
            highlight=False,
        )
        uvicorn.run(application, host=settings.host, port=settings.port, log_level="warning")
    finally:
        release()
