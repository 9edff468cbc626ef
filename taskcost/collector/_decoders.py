"""Decoding in worker processes.

Decoding, normalising and pricing a request is pure Python: in the serving process it holds the GIL, and the store's
writer thread, which needs the GIL between its DuckDB calls (and while DuckDB scans the Arrow tables it is given),
waits behind it, so every acknowledgement waits too. With ``decode_workers`` > 0 that work runs in child processes
instead: a worker turns the body into the same Arrow tables the writer would build, sends them back as Arrow IPC
streams (one copy, no per-value pickling), and the serving process only answers HTTP and commits; the intake
spool writes those streams as they came.

A worker that dies (killed, out of memory) fails only the requests it held; they are answered 503 with nothing
kept, and the next request starts a new pool.

Each worker's private memory is bounded by the operating system (``RLIMIT_DATA``): what it uses once loaded, plus
twice ``max_decoded_bytes`` and twice ``max_body_bytes`` (the body as it arrives and as read). The intake limits keep
a request well within its ``max_decoded_bytes`` (taskcost/normalize/_limits.py); if one still needs more, the
allocation fails in that worker alone: the request is refused (413, as one over ``max_decoded_bytes``) and the worker
goes on with the next.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pyarrow as pa

from taskcost._internal.arrow_memory import use_system_allocator
from taskcost._internal.limits import data_in_use, data_limit, set_data_limit
from taskcost.collector._ingest import Ingested, Intake, intake_from_settings
from taskcost.normalize import DecodedTooLarge
from taskcost.settings import Settings
from taskcost.store import PreparedBatch, ipc_stream

__all__ = ["GC_THRESHOLD", "DecodePool", "DecodersUnavailable"]

log = logging.getLogger("taskcost.collector")


class DecodersUnavailable(RuntimeError):
    """The worker that held this request died; nothing of the request was kept."""


# -- in the worker process -----------------------------------------------------------------------------------------
_worker: tuple[Intake, dict[str, pa.Schema]] | None = None
# A request allocates hundreds of thousands of short-lived, acyclic objects (freed by reference counting); at Python's
# default thresholds the cyclic collector would rescan them every 700 allocations. A worker keeps what is loaded out of
# its sight (gc.freeze) and runs it this much less often (the bench measures the normaliser the same way).
GC_THRESHOLD = (20_000, 20, 20)


def _exit_with(server: int) -> None:
    """A worker outlives a server killed with SIGKILL (nothing tells it): it checks, and leaves with it. Its own
    parent is the process it was forked from (which leaves with the server: the worker is then re-parented)."""
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:  # a process of another user took its number: the server is gone
            os._exit(0)


def _init(settings: Settings, schemas: dict[str, pa.Schema], parent: int) -> None:
    global _worker
    # Ctrl-C in a terminal signals the whole process group: the serving process stops the workers itself (and they
    # exit with it); a worker's own KeyboardInterrupt would only print a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), name="taskcost-parent-watch", daemon=True).start()
    use_system_allocator()
    # the same rules and prices as the serving process: built from the same settings, rebuilt when their files change
    _worker = (intake_from_settings(settings), schemas)
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    # what a first request loads and reserves (Arrow's IPC writer reserves its pool's arena, about 1 GiB of address
    # space it barely touches) is part of the worker, not of a request: decode one span before measuring
    if schemas:
        _decode(_warm_up_body(), True, None)
    _limit_memory(settings)


def _warm_up_body() -> bytes:
    """One LLM call span, as a request body."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from taskcost.normalize import key_value

    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 8, name="chat")
    span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    for key, value in (("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "gpt-4o")):
        span.attributes.append(key_value(key, value))
    span.attributes.append(key_value("gen_ai.usage.input_tokens", 1))
    return req.SerializeToString()


def _limit_memory(settings: Settings) -> int | None:
    """Bound this worker's private memory (RLIMIT_DATA) to what it uses now plus twice ``max_decoded_bytes`` and twice
    ``max_body_bytes`` (never above a limit it inherited); None where the system has no such limit."""
    in_use = data_in_use()
    if not in_use:
        return None
    ceiling = in_use + 2 * settings.max_decoded_bytes + 2 * settings.max_body_bytes
    inherited = data_limit()
    try:
        return set_data_limit(ceiling if inherited is None else min(ceiling, inherited))
    except (ImportError, OSError, ValueError) as exc:  # no resource module; a limit already below what is used
        log.warning("decode worker: memory not limited (%s)", exc)
        return None


def _ipc(columns: dict[str, list[object]], schema: pa.Schema) -> bytes:
    """One table's columns as the Arrow IPC stream a worker answers with (what ``_work`` sends, for tests that build
    a worker's answer by hand)."""
    return ipc_stream(pa.RecordBatch.from_pydict(columns, schema=schema)).to_pybytes()


def _table(stream: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(stream)).read_all()


_Result = tuple[dict[str, bytes], int, int, list[str], int, tuple[int, int, int]]
_OUT_OF_MEMORY = (
    "decoding this request needed more memory than a decode worker may use (twice max_decoded_bytes); send it in "
    "smaller batches"
)


def _work(body: bytes, protobuf: bool, project: str | None) -> _Result:
    """The request's rows typed by the store's schemas (a span with a value they cannot hold is rejected alone), each
    table as an Arrow IPC stream (``_table`` reads it back; the spool keeps it as it is). Out of memory (the worker's
    limit): DecodedTooLarge, once what the request held is freed."""
    try:
        return _decode(body, protobuf, project)
    except MemoryError:
        pass
    gc.collect()
    raise DecodedTooLarge(_OUT_OF_MEMORY)


def _decode(body: bytes, protobuf: bool, project: str | None) -> _Result:
    assert _worker is not None, "decode worker not initialised"
    intake, schemas = _worker
    ingested = intake.prepare(body, protobuf=protobuf, project=project, schemas=schemas)
    prepared = ingested.prepared
    tables = {name: ipc_stream(table).to_pybytes() for name, table in (prepared.tables or {}).items()}
    spans, rejected = prepared.span_count, ingested.rejected_spans
    return tables, spans, rejected, ingested.messages, ingested.ignored_values, ingested.cut


def _ready() -> bool:
    return _worker is not None


# -- in the serving process ----------------------------------------------------------------------------------------
def _ingested(result: _Result) -> Ingested:
    tables_ipc, spans, rejected, messages, ignored, cut = result
    tables = {name: _table(stream) for name, stream in tables_ipc.items()}
    batch = PreparedBatch(columns={}, span_count=spans, tables=tables, streams=tables_ipc)
    return Ingested(batch, rejected, messages, ignored, *cut)


def _context() -> multiprocessing.context.BaseContext:
    """Workers are forked from one clean process started for them (a fresh interpreter: no thread, no database of
    the server's), which has loaded what every worker needs (``_worker_preload``): the workers share those pages
    until they write them, instead of each loading its own copy. Where there is no fork server (not POSIX), each
    worker is a fresh interpreter."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["taskcost.collector._worker_preload"])
    return ctx


class DecodePool:
    """``workers`` child processes (forked from a fork server, never from the serving process: it has threads and an
    open database, which a fork would copy mid-flight; see ``_context``). Started on first use, or by ``start()``."""

    def __init__(self, settings: Settings, schemas: Mapping[str, pa.Schema], workers: int) -> None:
        self._schemas = dict(schemas)
        self._initargs = (settings, self._schemas, os.getpid())
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise DecodersUnavailable("the server is stopping")
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=_context(),
                    initializer=_init,
                    initargs=self._initargs,
                )
            return self._pool

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def start(self, timeout_s: float = 120.0) -> None:
        """Start every worker now and wait until each has loaded its prices (so no request pays for it).
        Requests that come meanwhile wait in the pool's queue."""
        pool = self._executor()
        futures: list[Future[bool]] = [pool.submit(_ready) for _ in range(self.workers)]
        for f in futures:
            f.result(timeout_s)

    async def decode(self, body: bytes, *, protobuf: bool, project: str | None) -> Ingested:
        """Decode one body in a worker. Raises what ``decode_and_prepare`` raises (DecodeError, ...) and
        DecodersUnavailable when the worker died."""
        pool = self._executor()
        try:
            result = await asyncio.wrap_future(pool.submit(_work, body, protobuf, project))
        except BrokenProcessPool:
            raise self._died(pool) from None
        return _ingested(result)

    def decode_blocking(self, body: bytes, *, protobuf: bool, project: str | None) -> Ingested:
        """``decode`` for a thread that may wait (the gRPC receiver's); the same errors."""
        pool = self._executor()
        try:
            result = pool.submit(_work, body, protobuf, project).result()
        except BrokenProcessPool:
            raise self._died(pool) from None
        return _ingested(result)

    def _died(self, pool: ProcessPoolExecutor) -> DecodersUnavailable:
        log.error("a decode worker died; starting new ones for the next requests")
        self._discard(pool)
        return DecodersUnavailable("the decode worker holding this request died; nothing of it was kept")

    def stop(self) -> None:
        """Stop the workers (the end of an app's lifespan); the next request starts them again."""
        self._shut(final=False)

    def close(self) -> None:
        """Stop the workers for good: a request after this is DecodersUnavailable (the server is stopping)."""
        self._shut(final=True)

    def _shut(self, final: bool) -> None:
        with self._lock:
            self._closed = self._closed or final
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
