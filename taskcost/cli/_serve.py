"""`taskcost serve`: the one process that owns the DuckDB file."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import secrets
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

import typer

from taskcost.cli._common import app, err, fail, settings_or_exit
from taskcost.cli._options import DbOption
from taskcost.store import StoreUnavailableError

__all__ = ["serve"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    db: DbOption = None,
    port: Annotated[int | None, typer.Option(help="Port [env TASKCOST_PORT; default 4318]")] = None,
    grpc_port: Annotated[
        int | None, typer.Option(help="OTLP/gRPC port, 0 = off [env TASKCOST_GRPC_PORT; default 4317]")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Bind address [env TASKCOST_HOST; default 127.0.0.1]")] = None,
    dashboards: Annotated[bool, typer.Option(help="Serve the dashboards under /dash/")] = True,
    allow_unauthenticated: Annotated[
        bool | None,
        typer.Option(
            "--allow-unauthenticated",
            help="Bind a non-loopback address although no API key exists [env TASKCOST_ALLOW_UNAUTHENTICATED]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the collector: OTLP/HTTP on /v1/traces, the SQL API on /api/sql, dashboards on /dash/."""
    import uvicorn

    from taskcost._internal.arrow_memory import use_system_allocator
    from taskcost.app import create_app
    from taskcost.cli._target import open_served, write_server_info
    from taskcost.collector import start_grpc_server

    settings = settings_or_exit(
        db=db, port=port, grpc_port=grpc_port, host=host, allow_unauthenticated=allow_unauthenticated
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    use_system_allocator()  # before any Arrow buffer exists (with decode_workers 0, this process builds them)
    try:
        store = open_served(settings, spool=settings.spool)
    except StoreUnavailableError as exc:
        raise fail(str(exc)) from None
    if not _is_loopback(settings.host) and not store.auth_enabled and not settings.allow_unauthenticated:
        store.close()
        raise fail(
            f"refusing to serve {settings.host} without authentication: no API key exists. Create keys first "
            f"(taskcost keys create PROJECT --kind ingest --db {settings.db}), or pass --allow-unauthenticated"
        )
    shown_host = settings.host if _is_loopback(settings.host) else "127.0.0.1"
    url = f"http://{shown_host}:{settings.port}"
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
        receiver = start_grpc_server(store, settings, intake=application.state.intake, decoders=decoders)
    except (ValueError, OSError) as exc:
        release()
        what = "OTLP/gRPC" if isinstance(exc, OSError) else "the pricing configuration"
        raise fail(f"cannot start: {what}: {exc}") from None
    try:
        auth = "API keys required" if store.auth_enabled else "no auth (no API key exists)"
        err.print(
            f"taskcost serving {settings.db} on {url}  (OTLP/HTTP {url}/v1/traces, SQL {url}/api/sql"
            + (f", dashboards {url}/dash/" if dashboards else "")
            + (f", OTLP/gRPC {shown_host}:{receiver.port}" if receiver is not None else "")
            + f"; {auth})",
            highlight=False,
        )
        uvicorn.run(application, host=settings.host, port=settings.port, log_level="warning")
    finally:
        release()
