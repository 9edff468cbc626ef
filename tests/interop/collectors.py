"""Real collectors on loopback ports for interop tests: the HTTP app under uvicorn in a thread, the gRPC receiver,
each on its own DuckDB file."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from taskcost.app import create_app
from taskcost.collector._grpc import GrpcReceiver, start_grpc_server
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.conftest import free_port

TABLES = ("spans", "llm_call_rows", "tool_call_rows", "task_rows")


@dataclass
class Collector:
    store: DuckDBStore
    url: str = ""  # http://127.0.0.1:<port> when HTTP is served
    grpc: GrpcReceiver | None = None

    @property
    def grpc_endpoint(self) -> str:
        assert self.grpc is not None
        return f"127.0.0.1:{self.grpc.port}"


@contextlib.contextmanager
def http_collector(db: Path) -> Iterator[Collector]:
    """The real FastAPI app served by uvicorn on a free loopback port, in this process."""
    store = DuckDBStore.open(db)
    port = free_port()
    app = create_app(Settings(db=db, port=port), store, dashboards=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield Collector(store, url=f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


@contextlib.contextmanager
def grpc_collector(db: Path, **settings: object) -> Iterator[Collector]:
    store = DuckDBStore.open(db)
    receiver = start_grpc_server(store, Settings(db=db, grpc_port=free_port(), **settings))  # type: ignore[arg-type]
    assert receiver is not None
    try:
        yield Collector(store, grpc=receiver)
    finally:
        receiver.stop(2)
        store.close()


def dump(store: DuckDBStore, drop: tuple[str, ...] = ("received_ns",)) -> dict[str, list[tuple]]:
    """Every stored row of every table, in a stable order, without the columns named in ``drop``."""
    query = store.admin_query  # the typed row tables are private to user SQL
    out = {}
    for t in TABLES:
        cols = [r[0] for r in query(f"DESCRIBE {t}").rows if r[0] not in drop]
        out[t] = query(f"SELECT {', '.join(cols)} FROM {t} ORDER BY ALL").rows
    return out
