"""`taskcost demo`: the service on a database of its own, fed live by a simulated fleet of agents.

The service is ``taskcost serve`` itself, run as a child process (in a session of its own, so that Ctrl-C reaches
the demo first and the server is stopped only after every span was flushed), with the demo's clusters file and a
one-minute GPU-hour window. The fleet (``taskcost.demo.fleet``) runs in this process: agent threads, the real SDK
and the real ``openai`` / ``anthropic`` clients, against the fake model server (``taskcost.demo.fake_llm``) on a
loopback port. The server allocates the clusters' GPU-hours by itself a few seconds after each one-minute window
has ended (as any server does with a clusters file), so self-hosted calls get their share as the demo runs.

The fake server plays seven vLLM deployments of one open model (``taskcost.demo.endpoints``): each sends its own
server span per request to the service (OTLP/HTTP, parented by the call's ``traceparent``) and serves a Prometheus
``/metrics`` page, which the server is told to scrape (``TASKCOST_ENGINE_SCRAPE``).

Ctrl-C (or SIGTERM) once: the agents finish the task in hand; twice: they abandon it (the fake model answers the
calls in flight at once). Then the spans are flushed, the clusters are handed back at the end of the current window,
the demo waits for that window to end and for the server to allocate it (Ctrl-C again: it does not), and the server
stops (its writer drained): every span sent is stored, and the summary says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from taskcost._internal.lazy import httpx
from taskcost.cli._common import app, err, fail, out
from taskcost.cli._demo_wait import Allocation, Shown, progress, wait_for_allocation
from taskcost.cli._target import RemoteStore, running_server, server_info_path
from taskcost.pricing import format_usd
from taskcost.store import QueryError, StoreUnavailableError

if TYPE_CHECKING:
    from taskcost.demo.fake_llm import FakeLLM
    from taskcost.demo.fleet import Fleet
    from taskcost.demo.models import SimulatedModels
    from taskcost.pricing import ClusterWindowCost

__all__ = ["demo"]

DEFAULT_DB = Path("taskcost-demo.duckdb")
DEFAULT_PORT = 4318
_PORTS_TRIED = 20
_STARTUP_S = 120.0
_FINISH_TASKS_S = 120.0  # after the first Ctrl-C, how long the agents may take to finish their tasks
_ALLOCATION_DELAY_S = 3  # the server allocates a window this long after it ends (the fleet's spans are in by then)
_ALLOCATION_WAIT_S = 120.0  # how long the demo waits for the server to allocate the last window, at most


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no obstacle
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_port(port: int | None) -> int:
    if port is not None:
        if not _free(port):
            raise fail(f"port {port} on 127.0.0.1 is in use; pick another with --port")
        return port
    for candidate in range(DEFAULT_PORT, DEFAULT_PORT + _PORTS_TRIED):
        if _free(candidate):
            return candidate
    raise fail(f"ports {DEFAULT_PORT}-{DEFAULT_PORT + _PORTS_TRIED - 1} are all in use; pick one with --port")


def clusters_path(db: Path) -> Path:
    return db.with_name(db.stem + ".clusters.toml")


def log_path(db: Path) -> Path:
    return db.with_name(db.stem + ".serve.log")


@dataclass
class _Server:
    proc: subprocess.Popen[bytes]
    db: Path
    url: str
    token: str
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> int | None:
        """SIGTERM (uvicorn's graceful stop: requests finish, the writer drains), then wait; kill only if stuck."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _start_server(db: Path, port: int, clusters: Path, signals: _Signals, fake_url: str) -> _Server:
    """``taskcost serve`` on the demo database, in a session of its own (the terminal's Ctrl-C goes to the demo),
    told to scrape the fake vLLM deployments' metrics pages."""
    from taskcost.demo.endpoints import scrape_targets
    from taskcost.demo.models import CLUSTER_WINDOW_S

    log = log_path(db)
    env = {
        **os.environ,
        "TASKCOST_CLUSTERS_FILE": str(clusters),
        "TASKCOST_CLUSTER_WINDOW_S": str(CLUSTER_WINDOW_S),
        "TASKCOST_ALLOCATE_CLUSTERS": "true",
        "TASKCOST_CLUSTER_ALLOCATION_DELAY_S": str(_ALLOCATION_DELAY_S),
        "TASKCOST_ENGINE_SCRAPE": json.dumps(scrape_targets(fake_url)),
    }
    cmd = [sys.executable, "-m", "taskcost", "serve", "--db", str(db), "--port", str(port)]
    cmd += ["--host", "127.0.0.1", "--grpc-port", "0"]
    with log.open("ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    server = _Server(proc, db, url, "", log)
    deadline = time.monotonic() + _STARTUP_S
    while True:
        if not server.alive():
            raise fail(f"the server did not start (see {log}):\n{server.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                info = running_server(db)
                if info is not None and info.get("url") == url:
                    server.token = str(info.get("admin_token") or "")
                    return server
        if signals.count:
            server.stop()
            raise typer.Exit(130)
        if time.monotonic() > deadline:
            server.stop()
            raise fail(f"the server did not answer within {_STARTUP_S:.0f} s (see {log})")
        signals.changed.wait(0.2)


@dataclass
class _Totals:
    completed: int = 0
    failed: int = 0
    abandoned: int = 0
    spend: Decimal | None = None
    awaiting: int = 0  # self-hosted calls not priced yet (their window has not been allocated)
    calls: int = 0
    spans: int | None = None  # spans stored (asked for at the end only)
    clusters_priced: tuple[tuple[str, int], ...] = ()  # the clusters files (label) self-hosted calls were priced with


def _totals(server: _Server, run_like: str, *, spans: bool = False) -> _Totals | None:
    """This run's figures as the server has them (None when it cannot answer now)."""
    from taskcost.demo.fleet import SERVICE_NAME

    store = RemoteStore(server.url, server.token, timeout_s=10.0)
    try:
        [tasks] = store.query(
            "SELECT count(*) FILTER (WHERE outcome = 'completed'), count(*) FILTER (WHERE outcome = 'failed'),"
            " count(*) FILTER (WHERE outcome = 'abandoned'), sum(cost_usd) FROM tasks"
            " WHERE service_name = ? AND task_id LIKE ?",
            [SERVICE_NAME, run_like],
        ).rows
        [calls] = store.query(
            "SELECT count(*), count(*) FILTER (WHERE deployment = 'self_hosted' AND cost_usd IS NULL) FROM llm_calls"
            " WHERE service_name = ? AND task_id LIKE ?",
            [SERVICE_NAME, run_like],
        ).rows
        stored = None
        priced: tuple[tuple[str, int], ...] = ()
        if spans:
            [(stored,)] = store.query(
                "SELECT count(*) FROM spans WHERE service_name = ? AND attributes->>'taskcost.task.id' LIKE ?",
                [SERVICE_NAME, run_like],
            ).rows
            priced = tuple(
                (str(label), int(n))
                for label, n in store.query(
                    "SELECT price_source, count(*) AS n FROM llm_calls WHERE service_name = ? AND task_id LIKE ?"
                    " AND deployment = 'self_hosted' AND cost_usd IS NOT NULL AND price_source IS NOT NULL"
                    " GROUP BY 1 ORDER BY n DESC, 1",
                    [SERVICE_NAME, run_like],
                ).rows
            )
    except (QueryError, StoreUnavailableError, httpx.HTTPError, ValueError):
        return None
    finally:
        store.close()
    spend = tasks[3] if tasks[3] is None else Decimal(str(tasks[3]))
    return _Totals(
        int(tasks[0]),
        int(tasks[1]),
        int(tasks[2]),
        spend,
        int(calls[1]),
        int(calls[0]),
        None if stored is None else int(stored),
        priced,
    )


class _Signals:
    """Ctrl-C / SIGTERM: the first stops the fleet (tasks in hand finish), the second abandons the tasks."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.changed.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Signals]:
        previous = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


@contextlib.contextmanager
def _stopped_on_error(fleet: Fleet) -> Iterator[None]:
    try:
        yield
    except BaseException:
        fleet.abandon()
        fleet.join(30)
        raise


@app.command()
def demo(
    db: Annotated[
        Path, typer.Option("--db", help="The demo's own DuckDB file (created; kept afterwards, runs add up)")
    ] = DEFAULT_DB,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port of the service (default: 4318, or the next free port after it) [env TASKCOST_PORT; with make: "
            "make demo PORT=N]",
            envvar="TASKCOST_PORT",
            show_default=False,
        ),
    ] = None,
    minutes: Annotated[float, typer.Option(min=0.05, help="How long the fleet runs (or until Ctrl-C)")] = 5.0,
    agents: Annotated[int, typer.Option(min=1, max=200, help="Agent threads (eight kinds of agent, replicated)")] = 16,
    seed: Annotated[
        int | None, typer.Option(help="Random seed of the fleet and the fake models (default: a new one, printed)")
    ] = None,
    speed: Annotated[
        float, typer.Option(min=0.1, max=100.0, help="Simulated time runs this much faster (latencies divided)")
    ] = 1.0,
    keep_serving: Annotated[
        bool, typer.Option("--keep-serving", help="After the fleet stops, keep serving the data until Ctrl-C")
    ] = False,
) -> None:
    """Start the service on its own demo database and feed it live from a simulated fleet of agents (real SDK,
    real openai/anthropic clients, a local fake model server): several task kinds, API and self-hosted endpoints
    (GPU-hours from a clusters file), one open model on seven vLLM deployments (two versions, two GPU types, fp8
    and bf16, speculative decoding, a prefill/decode split) that send their own server spans and serve /metrics,
    stable and broken prompt prefixes, retries, failed and abandoned tasks. Prints the dashboard URL; stops after
    --minutes or on Ctrl-C."""
    try:
        import taskcost.demo.fleet  # noqa: F401  (the demo extra: taskcost-sdk, openai, anthropic)
        from taskcost.demo.fake_llm import FakeLLM
        from taskcost.demo.models import CLUSTER_WINDOW_S, SimulatedModels, clusters_toml, read_periods, rent
    except ImportError as exc:
        raise fail(
            f"the demo needs the openai and anthropic clients and taskcost-sdk ({exc.name} is missing): "
            "pip install 'taskcost[demo]' (make install does)"
        ) from None
    import taskcost_sdk as tc

    db = db.absolute()
    if running_server(db) is not None:
        raise fail(f"a taskcost server already runs on {db} (see {server_info_path(db)}); stop it, or pick --db")
    seed = seed if seed is not None else int.from_bytes(os.urandom(4), "big")
    chosen = _pick_port(port)
    clusters = clusters_path(db)
    earlier = read_periods(clusters.read_text()) if clusters.exists() else []
    if earlier is None:
        raise fail(f"{clusters} exists and was not written by taskcost demo; move it, or pick another --db")
    # the clusters are rented for this run (and a margin for the tasks in hand): the end is set when it stops
    now = datetime.now(UTC)
    periods = rent(earlier, now, now + timedelta(minutes=minutes, seconds=_FINISH_TASKS_S + 60))
    clusters.write_text(clusters_toml(periods))
    signals = _Signals()
    # the fake vLLM deployments send their server spans to the service (it answers by the time they serve a call)
    models = SimulatedModels(seed=seed, speed=speed, traces_url=f"http://127.0.0.1:{chosen}/v1/traces")
    fake = FakeLLM(responder=models, pages=models.pages, record=False).start()
    with signals.installed():
        try:
            server = _start_server(db, chosen, clusters, signals, fake.url)
        except BaseException:
            fake.close()
            models.close(timeout_s=1.0)
            raise
        try:
            code = _run(
                server,
                fake,
                models,
                _Rental(clusters, periods),
                signals,
                agents=agents,
                seed=seed,
                speed=speed,
                minutes=minutes,
                keep=keep_serving,
            )
        finally:
            tc.shutdown(timeout_millis=60_000)  # a no-op after a clean run
            tc.uninstrument()
            fake.close()
            models.close()  # a no-op after a clean run
            stopped = server.stop()
    how = "" if stopped in (0, -signal.SIGTERM) else f" (exit code {stopped}; see {server.log})"
    out.print(
        f"server stopped{how}. To look at the demo data again:\n"
        f"  TASKCOST_CLUSTERS_FILE={clusters} TASKCOST_CLUSTER_WINDOW_S={CLUSTER_WINDOW_S} taskcost serve --db {db} "
        f"--port {chosen} --grpc-port 0",
        highlight=False,
    )
    if code:
        raise typer.Exit(code)


@dataclass
class _Rental:
    """The demo's clusters file and the periods it rents the clusters for."""

    path: Path
    periods: list[tuple[datetime, datetime]]

    def end(self, at: datetime) -> datetime:
        """Hand the clusters back at the end of ``at``'s window (written to the file); returns that end."""
        from taskcost.demo.models import clusters_toml, return_at

        self.periods = return_at(self.periods, at)
        self.path.write_text(clusters_toml(self.periods))
        return self.periods[-1][1]


def _run(
    server: _Server,
    fake: FakeLLM,
    models: SimulatedModels,
    rental: _Rental,
    signals: _Signals,
    *,
    agents: int,
    seed: int,
    speed: float,
    minutes: float,
    keep: bool,
) -> int:
    """The fleet against the running server until the time is up or a signal; flush, allocate, report. The exit
    code: 1 when spans were not delivered or the fleet hit a bug."""
    import taskcost_sdk as tc
    from taskcost.demo.endpoints import SELF_HOSTED_MODEL
    from taskcost.demo.fleet import SERVICE_NAME, Fleet, configure_sdk

    fake_url = fake.url
    configure_sdk(server.url, fake_url)
    fleet = Fleet(fake_url, agents=agents, seed=seed, speed=speed)
    run_like = f"demo-{fleet.run_id}-%"
    allocation = Allocation(server, rental.periods[-1][0])
    out.print(
        f"[bold]taskcost demo[/]: DEMO DATA (service.name [bold]{SERVICE_NAME}[/], "
        f"deployment.environment.name=demo, task ids {run_like.rstrip('%')}...) in {server.db}\n"
        f"  dashboards  [bold]{server.url}/dash/[/]\n"
        f'  SQL         taskcost sql --db {server.db} "SELECT kind, outcome, count(*) FROM tasks GROUP BY ALL"\n'
        f"  {agents} agents, seed {seed}, speed {speed:g}, for {minutes:g} min; Ctrl-C stops (twice: abandons tasks)\n"
        f"  fake model server {fake_url} (vLLM metrics: {fake_url}/<deployment>/metrics), server log {server.log}",
        highlight=False,
    )
    total_s = minutes * 60.0
    start = time.monotonic()
    totals: _Totals | None = None
    code = 0
    with _stopped_on_error(fleet):
        fleet.start()
        last_query = 0.0
        with Shown(err) as show:
            while True:
                elapsed = time.monotonic() - start
                if signals.count or elapsed >= total_s or not server.alive() or fleet.stats.errors:
                    break
                if time.monotonic() - last_query >= 3.0:
                    totals = _totals(server, run_like) or totals
                    last_query = time.monotonic()
                show(progress(fleet, totals, elapsed, total_s), 15.0)
                signals.changed.wait(0.5)
            # stopping: the agents finish their tasks (or abandon them: a second Ctrl-C, or they take too long)
            fleet.stop()
            finish_by = time.monotonic() + _FINISH_TASKS_S
            while not fleet.join(0.5):
                if signals.count >= 2 or time.monotonic() > finish_by or not server.alive():
                    fleet.abandon()
                    fake.hurry()  # the calls in flight answer now: the agents abandon at their next step
                    note = "abandoning the tasks in hand ..."
                elif signals.count:
                    note = "finishing the tasks in hand (Ctrl-C again: abandon them) ..."
                else:
                    note = "time is up: finishing the tasks in hand ..."
                show(progress(fleet, totals, time.monotonic() - start, total_s, note), 5.0, note)
            if not server.alive():
                raise fail(f"the server stopped unexpectedly (see {server.log}):\n{server.log_tail()}")
            note = "sending the last spans ..."
            show(progress(fleet, totals, time.monotonic() - start, total_s, note), 0.0, note)
            flushed = tc.force_flush(timeout_millis=60_000)
            exported = tc.export_stats()
            tc.shutdown(timeout_millis=60_000)
            engines_flushed = models.close(timeout_s=60.0)
            # the clusters are handed back at the end of this window; once it has ended, the server shares it out
            until = rental.end(datetime.now(UTC))
            wait_for_allocation(allocation, until, signals, show, _ALLOCATION_WAIT_S)
        if exported.failed or exported.dropped or not flushed:
            err.print(
                f"[bold red]warning:[/] spans not delivered: {exported.failed} failed, {exported.dropped} dropped"
                + ("" if flushed else ", the flush timed out"),
                highlight=False,
            )
            code = 1
        if not engines_flushed:
            err.print("[bold red]warning:[/] the vLLM deployments' server spans were not all sent", highlight=False)
            code = 1
        totals = _totals(server, run_like, spans=True) or totals
        _summary(fleet, totals, allocation, exported.exported)
        out.print(
            f"engines: {models.engine_spans} vLLM server spans sent by {len(models.deployments)} deployments of "
            f"{SELF_HOSTED_MODEL} (their /metrics pages are the server's TASKCOST_ENGINE_SCRAPE targets)",
            highlight=False,
        )
        for e in fake.hook_errors:
            err.print(f"[bold red]error in the fake vLLM deployments:[/] {e}", highlight=False)
            code = 1
        for e in fleet.stats.errors:
            err.print(f"[bold red]error in the fleet:[/] {e}", highlight=False)
            code = 1
        if keep and signals.count == 0 and server.alive():
            out.print(f"the fleet stopped; still serving {server.url}/dash/ until Ctrl-C", highlight=False)
            while not signals.count and server.alive():
                signals.changed.wait(1.0)
    return code


def _clusters_line(priced: tuple[tuple[str, int], ...], windows: list[ClusterWindowCost] | str) -> str:
    """Which clusters file the stored self-hosted calls were priced with (each call's ``price_source``: ``clusters
    <version> (<hash>)``), and the file the server shares out with now when no call was priced with it (the demo
    rewrites the file when it hands the clusters back, so its hash changes after the last call was priced)."""
    now = windows[-1].clusters_version if isinstance(windows, list) and windows else None
    if not priced:
        line = "self-hosted calls: none priced with a clusters file yet"
    else:
        line = "self-hosted calls priced with " + ", ".join(f"{label} ({n} calls)" for label, n in priced)
    if now is not None and now not in {label for label, _ in priced}:
        line += f"; the clusters file configured now is {now} (no call was priced with it)"
    return line


def _summary(fleet: Fleet, totals: _Totals | None, allocation: Allocation, spans: int) -> None:
    st = fleet.stats
    out.print(
        f"fleet: {st.started} tasks ({st.completed} completed, {st.failed} failed, {st.abandoned} abandoned, "
        f"{st.golden} golden), {st.calls} LLM calls, {st.agent_retries} agent retries; {spans} spans sent",
        highlight=False,
    )
    if totals is not None:
        out.print(
            f"collector: {totals.calls} call attempts, spend {format_usd(totals.spend, none='$0')}"
            + ("" if totals.spans is None else f", {totals.spans} spans stored")
            + (f"; {totals.awaiting} self-hosted calls await their window" if totals.awaiting else ""),
            highlight=False,
        )
    windows = allocation.windows()
    state = allocation.state() or {}
    if isinstance(windows, str):
        err.print(f"the GPU-hour windows could not be read: {windows}", highlight=False)
    elif windows:
        bill = sum((w.bill_usd for w in windows), Decimal(0))
        attributed = sum((w.attributed_usd for w in windows), Decimal(0))
        out.print(
            f"GPU-hours, allocated by the server: {len(windows)} window(s), bill "
            f"{format_usd(bill)} = attributed {format_usd(attributed)} + idle {format_usd(bill - attributed)}",
            highlight=False,
        )
    if totals is not None and (isinstance(windows, list) or totals.clusters_priced):
        out.print(_clusters_line(totals.clusters_priced, windows), highlight=False)
    if state.get("error"):
        err.print(f"allocating the GPU-hours failed: {state['error']}", highlight=False)
