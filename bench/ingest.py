"""Ingest: the real collector in its durable mode (a 200 only once the batch is fsynced, to the spool by default,
else by the DuckDB commit) under several concurrent senders posting protobuf and JSON batches (or exporting protobuf
over OTLP/gRPC, as one of the other settings), of one traffic mix (bench/traffic.py); spans/s until every span is
queryable, against the same run's ceiling (one process decoding the bodies with the intake's own reader and reading
the keys the normaliser needs: ids, times, status, attributes); the collector's memory; and how long a query waits,
under that load, for every span acknowledged before it (reads see their writes). Beside the ceiling: the same through
protobuf's Python messages (the ceiling as measured before the compiled reader), decode + normalise (the whole
normaliser), and the normaliser's own CPU time per span over the requests' wire form (JSON bodies turned into it
beforehand)."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.traffic import DEFAULT_MIX, Body, Mix, bodies
from taskcost.settings import Settings

__all__ = ["Ceilings", "IngestResult", "ceilings", "run_ingest"]

CEILING_SPANS = 30_000  # the ceilings' sample: the run's first requests up to this many spans


@dataclass
class IngestResult:
    spans: int
    spans_per_s: float
    ceiling_spans_per_s: float
    peak_rss_mb: float
    refused: int
    senders: int = 0
    decode_workers: int | None = None
    server_cpu_us_per_span: float = float("nan")  # the collector and its workers, all threads (decode, writer, DuckDB)
    collector_processes: int = 1
    sender_cpu_us_per_span: float = float("nan")  # the load generator's processes, on the same 2 cores
    ceiling_cpu_us_per_span: float = float("nan")  # decode + reading the keys alone, from the ceiling measurement
    commits: int = 0
    writer_busy_share: float = float("nan")  # time inside commits / elapsed: near 1.0 means the writer limits
    spool: bool = True
    memory_limit: str | None = None
    peak_rss_together_mb: float = float("nan")  # the largest sum of the processes' RSS at one moment (sampled)
    peak_pss_mb: float = float("nan")  # the same for PSS: shared library pages counted once across processes
    rss_by_process_mb: tuple[float, ...] = ()  # each process's own peak (VmHWM): the server first
    idle_rss_by_process_mb: tuple[float, ...] = ()  # each process's RSS once started, before the load (same order)
    pss_by_process_mb: tuple[float, ...] = ()  # each process's PSS at the moment their sum peaked (same order)
    idle_pss_by_process_mb: tuple[float, ...] = ()  # each process's PSS once started, before the load (same order)
    process_names: tuple[str, ...] = ()  # server, decode worker, fork server, resource tracker (same order)
    read_wait_s: tuple[float, ...] = ()  # under load, a count(*) query's latency: it waits for what was acknowledged
    grpc: bool = False  # sent over OTLP/gRPC (protobuf only) instead of OTLP/HTTP
    clickhouse: bool = False  # the collector served the ClickHouse store (chDB in its process), not the DuckDB file
    duckdb_threads: int | None = None
    mix: str = DEFAULT_MIX.name
    normalise_spans_per_s: float = float("nan")  # decode + the whole normaliser, one process (the former ceiling)
    normalise_cpu_us_per_span: float = float("nan")  # the normaliser alone over the requests' wire form, CPU time
    protobuf_ceiling_spans_per_s: float = float("nan")  # the ceiling through protobuf's messages (as measured before)
    steps: dict[str, float] = field(default_factory=dict)  # a decode worker's steps alone, CPU us per span
    bytes_per_span: float = float("nan")  # the bodies as sent (compressed where the mix is)
    cpu_us_by_process: tuple[float, ...] = ()  # CPU us per span of each collector process (process_names' order)

    @property
    def ratio(self) -> float:
        return self.spans_per_s / self.ceiling_spans_per_s


@dataclass
class Ceilings:
    """One process, no store, medians of the repeats (spans per second of wall time, the normaliser's CPU time)."""

    keys_spans_per_s: float  # decode (gunzip first) + read each span's ids, times, status and attributes: the ceiling
    normalise_spans_per_s: float  # decode + normalise_request (the whole normaliser)
    normalise_cpu_us_per_span: float  # normalize_wire alone over the requests' wire form, process CPU time
    # each step of a decode worker alone, CPU us per span (medians): decode, normalise, price and lay out, Arrow
    steps: dict[str, float] = field(default_factory=dict)
    # the same ceiling through protobuf's Python messages (the definition before the compiled reader), for reference
    protobuf_keys_spans_per_s: float = float("nan")


def _decoder(content_type: str) -> Any:
    """The intake's decoder of a body of ``content_type`` into the wire form the normaliser reads."""
    from taskcost.normalize import json_wire

    return bytes if content_type == "application/x-protobuf" else json_wire


def _protobuf_decoder(content_type: str) -> Any:
    from taskcost.normalize import decode_json, decode_protobuf

    return decode_protobuf if content_type == "application/x-protobuf" else decode_json


def _plain(body: Body) -> bytes:
    return zlib.decompress(body.data, 16 + zlib.MAX_WBITS) if body.encoding == "gzip" else body.data


def _read_keys(wire: bytes) -> None:
    """What the normaliser reads of every span before its own work, through the intake's wire reader: the resource's
    and the span's attributes as dicts, the ids, the times, the status and the events."""
    from taskcost.normalize import Cuts, IntakeLimits
    from taskcost.normalize._read import read_wire

    read_wire(wire, Cuts(IntakeLimits()))


def _read_protobuf_keys(req: Any) -> None:
    """The same through protobuf's Python messages (the ceiling's definition before the compiled reader)."""
    from taskcost.normalize._attrs import attributes_dict

    for rs in req.resource_spans:
        attributes_dict(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                _ = (span.trace_id, span.span_id, span.parent_span_id)
                _ = (span.start_time_unix_nano, span.end_time_unix_nano, span.status.code)
                attributes_dict(span.attributes)


@contextlib.contextmanager
def _collecting_as_a_worker() -> Iterator[None]:
    """Python's cyclic garbage collector set as a decode worker sets it (what was loaded frozen, its thresholds), and
    set back after. Objects someone else froze before stay frozen (``unfreeze`` cannot tell them apart): then what
    this froze stays frozen with them."""
    from taskcost.collector._decoders import GC_THRESHOLD

    threshold, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if not frozen_before:
            gc.unfreeze()


def ceilings(sample: list[Body], repeats: int = 5) -> Ceilings:
    """The same-run ceiling (decode + read the keys), decode + normalise, and the normaliser's CPU time per span
    over ``sample``, each pass once per repeat (interleaved, so that the machine's load weighs on them alike); the
    ceiling through protobuf's messages too (``protobuf_keys_spans_per_s``);
    and each step a decode worker takes, alone (``steps``). All as a decode worker collects garbage, and nothing of
    one pass kept into the next: at Python's defaults the collector rescans every object alive, this process's
    included, and the figures were about half again as high as a worker's."""
    from taskcost.normalize import normalize_wire
    from taskcost.store import DuckDBStore
    from taskcost.store._rows import prepare_batch, typed_tables

    n = sum(b.spans for b in sample)
    decoded = [_decoder(b.content_type)(_plain(b)) for b in sample]
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore.open(Path(tmp) / "s.duckdb") as store:
        schemas = store.arrow_schemas
    keys, full, cpu, protobuf_keys = [], [], [], []
    steps: dict[str, list[float]] = {"decode": [], "normalise": [], "price and lay out": [], "Arrow tables": []}
    with _collecting_as_a_worker():
        for _ in range(repeats):
            t = time.perf_counter()
            for body in sample:
                _read_keys(_decoder(body.content_type)(_plain(body)))
            keys.append(n / (time.perf_counter() - t))
            t = time.perf_counter()
            for body in sample:
                _read_protobuf_keys(_protobuf_decoder(body.content_type)(_plain(body)))
            protobuf_keys.append(n / (time.perf_counter() - t))
            t = time.perf_counter()
            for body in sample:
                normalize_wire(_decoder(body.content_type)(_plain(body)))
            full.append(n / (time.perf_counter() - t))
            c = time.process_time()
            for req in decoded:
                normalize_wire(req)
            cpu.append((time.process_time() - c) / n * 1e6)
            c = time.process_time()
            for body in sample:
                _decoder(body.content_type)(_plain(body))
            steps["decode"].append((time.process_time() - c) / n * 1e6)
            c = time.process_time()
            batches = [normalize_wire(req) for req in decoded]
            steps["normalise"].append((time.process_time() - c) / n * 1e6)
            c = time.process_time()
            prepared = [prepare_batch(b, time.time_ns()) for b in batches]
            steps["price and lay out"].append((time.process_time() - c) / n * 1e6)
            c = time.process_time()
            for p in prepared:
                typed_tables(p, schemas)
            steps["Arrow tables"].append((time.process_time() - c) / n * 1e6)
            del batches, prepared  # a worker keeps no request's records past it
    return Ceilings(
        statistics.median(keys),
        statistics.median(full),
        statistics.median(cpu),
        {k: statistics.median(v) for k, v in steps.items()},
        statistics.median(protobuf_keys),
    )


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _tree(pid: int) -> list[int]:
    """A live process and its descendants (the collector and its decode workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(child for child, parent in parents.items() if parent == p)
    return out


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of live processes, all threads (/proc/PID/stat fields 14 and 15)."""
    total = 0
    for pid in pids:
        try:
            fields = _stat(pid)
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def _send(url: str, part: list[Body], refused: Any, cpu: Any, grpc_endpoint: str | None) -> None:
    try:
        if grpc_endpoint is None:
            _post_all(url, part, refused)
        else:
            _export_all(grpc_endpoint, part, refused)
    finally:
        with cpu.get_lock():
            cpu.value += time.process_time()


def _post_all(url: str, part: list[Body], refused: Any) -> None:
    with httpx.Client(timeout=60) as client:
        for body in part:
            headers = {"Content-Type": body.content_type}
            if body.encoding:
                headers["Content-Encoding"] = body.encoding
            while True:
                r = client.post(f"{url}/v1/traces", content=body.data, headers=headers)
                if r.status_code == 200:
                    break
                if r.status_code != 503:
                    raise RuntimeError(f"{r.status_code}: {r.text[:200]}")
                with refused.get_lock():
                    refused.value += 1
                time.sleep(float(r.headers.get("Retry-After", "1")))


def _export_all(endpoint: str, part: list[Body], refused: Any) -> None:
    """As an OTLP/gRPC exporter sends: each body is one Export call (UNAVAILABLE is retried)."""
    import grpc

    from taskcost.collector._grpc import EXPORT_METHOD

    with grpc.insecure_channel(endpoint) as channel:
        export = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        for body in part:
            while True:
                try:
                    export(body.data, timeout=60)
                    break
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:
                        raise RuntimeError(f"{exc.code()}: {exc.details()}") from None
                    with refused.get_lock():
                        refused.value += 1
                    time.sleep(1.0)


def _status_kb(pid: int, field: str, path: str = "status") -> int:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _peaks_mb(pids: list[int]) -> list[float]:
    """Each process's peak resident memory (VmHWM)."""
    return [_status_kb(pid, "VmHWM") / 1024 for pid in pids]


class _Sampler(threading.Thread):
    """Every 0.2 s: the collector's processes' RSS and PSS summed at that moment (the peaks are kept, and each
    process's PSS at the moment the sum peaked)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.rss_kb, self.pss_kb = pid, 0, 0
        self.pss_at_peak_kb: dict[int, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            pids = _tree(self.pid)
            self.rss_kb = max(self.rss_kb, sum(_status_kb(p, "VmRSS") for p in pids))
            each = {p: _status_kb(p, "Pss", "smaps_rollup") for p in pids}
            if (summed := sum(each.values())) > self.pss_kb:
                self.pss_kb, self.pss_at_peak_kb = summed, each


def _idle_rss_mb(pid: int, processes: int, timeout_s: float = 60.0) -> dict[int, float]:
    """Each process's RSS once the collector has started all ``processes`` and their memory stopped growing
    (the decode workers load their prices after /healthz already answers)."""
    deadline, last = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline:
        now = {p: _status_kb(p, "VmRSS") / 1024 for p in _tree(pid)}
        if len(now) >= processes and now.keys() == last.keys() and abs(sum(now.values()) - sum(last.values())) < 1:
            return now
        last = now
        time.sleep(0.5)
    return last


def _role(pid: int, server: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    if pid == server:
        return "server"
    if b"resource_tracker" in cmdline:
        return "resource tracker"
    try:
        parent = int(_stat(pid)[1])
    except OSError:
        parent = 0
    return "fork server" if parent == server and b"forkserver" in cmdline else "decode worker"


def _read_waits(url: str, stop: threading.Event, out: list[float]) -> None:
    """Once a second under load: how long a query takes (it first waits for what was acknowledged before it)."""
    with httpx.Client(timeout=60) as client:
        while not stop.wait(1.0):
            t = time.perf_counter()
            client.post(f"{url}/api/sql", json={"sql": "SELECT count(*) FROM spans"})
            out.append(time.perf_counter() - t)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ingest(
    total: int = 200_000,
    senders: int = 4,
    mix: Mix = DEFAULT_MIX,
    decode_workers: int | None = None,
    spool: bool = True,
    memory_limit: str | None = None,
    grpc: bool = False,
    duckdb_threads: int | None = None,
    clickhouse: bool = False,
    measure_ceilings: bool = True,
) -> IngestResult:
    """One ingest run of ``mix``'s traffic. ``decode_workers``, ``spool``, ``memory_limit``: the collector's settings
    (None: default). ``grpc``: the senders export protobuf over OTLP/gRPC (the mix's JSON share and gzip are then
    ignored). ``clickhouse``: the collector serves the ClickHouse store on chDB in its own process
    (``--store chdb://...``) instead of the DuckDB file. ``measure_ceilings``: False leaves the ceilings NaN (runs
    that do not show them)."""
    sent = bodies(total, mix, protobuf_only=grpc)
    n = sum(b.spans for b in sent)
    sample, in_sample = [], 0
    for b in sent:
        if in_sample >= min(CEILING_SPANS, max(1, n // 3)):
            break
        sample.append(b)
        in_sample += b.spans
    nan = float("nan")
    ceil = ceilings(sample) if measure_ceilings else Ceilings(nan, nan, nan)
    with tempfile.TemporaryDirectory() as tmp:
        db, port, grpc_port = Path(tmp) / "bench.duckdb", _free_port(), _free_port() if grpc else 0
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "taskcost",
                "serve",
                "--db",
                str(db),
                "--port",
                str(port),
                "--grpc-port",
                str(grpc_port),  # the dashboards stay mounted (and are opened below), as `taskcost serve` runs
                *(["--store", f"chdb://{Path(tmp) / 'ch'}"] if clickhouse else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={
                **os.environ,
                "TASKCOST_SPOOL": "true" if spool else "false",
                **({} if decode_workers is None else {"TASKCOST_DECODE_WORKERS": str(decode_workers)}),
                **({} if memory_limit is None else {"TASKCOST_MEMORY_LIMIT": memory_limit}),
                **({} if duckdb_threads is None else {"TASKCOST_DUCKDB_THREADS": str(duckdb_threads)}),
            },
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            # the dashboards opened once, as while someone watches them: the server builds them on the first request
            # (a collector nobody opens them on never does), and their memory is the collector's from then on
            httpx.get(f"{url}/dash/", timeout=120).raise_for_status()
            workers_n = decode_workers if decode_workers is not None else Settings().decode_workers  # env, file too
            # + the resource tracker and the fork server the workers are forked from
            idle = _idle_rss_mb(proc.pid, 1 + workers_n + (2 if workers_n else 0))
            idle_pss = {p: _status_kb(p, "Pss", "smaps_rollup") / 1024 for p in idle}
            refused, sender_cpu = mp.Value("i", 0), mp.Value("d", 0.0)
            parts = [sent[i::senders] for i in range(senders)]
            endpoint = f"127.0.0.1:{grpc_port}" if grpc else None
            workers = [mp.Process(target=_send, args=(url, part, refused, sender_cpu, endpoint)) for part in parts]
            cpu0_by = {p: _cpu_s([p]) for p in _tree(proc.pid)}
            cpu0 = sum(cpu0_by.values())
            sampler, waits, stop = _Sampler(proc.pid), [], threading.Event()
            reader = threading.Thread(target=_read_waits, args=(url, stop, waits), daemon=True)
            start = time.perf_counter()
            for w in workers:
                w.start()
            sampler.start()  # threads only after the senders are forked: a fork copies locks other threads hold
            reader.start()
            for w in workers:
                w.join()
            stop.set()
            # queryable, not merely acknowledged (every 200 already means committed; check anyway)
            while True:
                r = httpx.post(f"{url}/api/sql", json={"sql": "SELECT count(*) FROM spans"}, timeout=60)
                if r.json()["rows"][0][0] >= n:
                    break
                time.sleep(0.05)
            elapsed = time.perf_counter() - start
            collector = _tree(proc.pid)
            cpu_by = [_cpu_s([p]) - cpu0_by.get(p, 0.0) for p in collector]
            server_cpu = _cpu_s(collector) - cpu0
            peaks = _peaks_mb(collector)
            roles = [_role(p, proc.pid) for p in collector]
            sampler.done.set()
            sampler.join()
            reader.join()
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
        finally:
            proc.terminate()
            proc.wait(60)
    return IngestResult(
        n,
        n / elapsed,
        ceil.keys_spans_per_s,
        sum(peaks),
        refused.value,
        senders=senders,
        decode_workers=decode_workers,
        duckdb_threads=duckdb_threads,
        server_cpu_us_per_span=server_cpu / n * 1e6,
        sender_cpu_us_per_span=sender_cpu.value / n * 1e6,
        ceiling_cpu_us_per_span=1e6 / ceil.keys_spans_per_s,
        commits=int(_metric(metrics, "taskcost_write_seconds_count")),
        writer_busy_share=_metric(metrics, "taskcost_write_seconds_sum") / elapsed,
        collector_processes=len(collector),
        spool=spool,
        memory_limit=memory_limit,
        peak_rss_together_mb=sampler.rss_kb / 1024,
        peak_pss_mb=sampler.pss_kb / 1024,
        rss_by_process_mb=tuple(peaks),
        idle_rss_by_process_mb=tuple(idle.get(p, float("nan")) for p in collector),
        pss_by_process_mb=tuple(sampler.pss_at_peak_kb.get(p, 0) / 1024 for p in collector),
        idle_pss_by_process_mb=tuple(idle_pss.get(p, float("nan")) for p in collector),
        process_names=tuple(roles),
        read_wait_s=tuple(waits),
        grpc=grpc,
        clickhouse=clickhouse,
        mix=mix.name,
        normalise_spans_per_s=ceil.normalise_spans_per_s,
        normalise_cpu_us_per_span=ceil.normalise_cpu_us_per_span,
        protobuf_ceiling_spans_per_s=ceil.protobuf_keys_spans_per_s,
        steps=ceil.steps,
        bytes_per_span=sum(len(b.data) for b in sent) / n,
        cpu_us_by_process=tuple(c / n * 1e6 for c in cpu_by),
    )
