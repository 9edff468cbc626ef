"""`make bench`: ingest, query and SDK benchmarks on this machine; prints medians and ratios measured
in the same run, and writes bench/RESULTS.md. `python -m bench --quick` is a small smoke run."""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGETS = {
    "ingest_spans_per_s": 25_000,
    "ingest_ratio": 0.5,
    "pss_mb": 400,
    "query_1m_s": 0.1,
    "query_10m_s": 0.5,
    "sdk_ratio": 1.5,
    "queryable_s": 5.0,
    "analytics_1m_s": 0.2,
    "analytics_10m_s": 1.0,
    "dashboard_callback_10m_s": 1.0,
    "engines_10m_s": 1.0,
}


def _ok(good: bool) -> str:
    return "met" if good else "MISSED"


def _settings(run: Any) -> str:
    from taskcost.settings import Settings

    # the server's count when the run left it unset (env and config file included), as the tables' header says
    workers = run.decode_workers if run.decode_workers is not None else Settings().decode_workers
    limit = f", memory_limit {run.memory_limit}" if run.memory_limit else ""
    grpc = ", OTLP/gRPC (protobuf only)" if run.grpc else ""
    threads = f", duckdb_threads {run.duckdb_threads}" if run.duckdb_threads else ""
    store = ", store ClickHouse (chDB in the collector)" if run.clickhouse else ""
    return f"decode_workers {workers}, spool {'on' if run.spool else 'off'}{limit}{grpc}{threads}{store}"


def _layout_lines(layouts: list[Any]) -> list[str]:
    """Memory against speed: the defaults and the layouts that use less memory, each a sustained run (as the PSS
    target is measured), and whether it is within both the ingest and the PSS target."""
    pss, rate = TARGETS["pss_mb"], TARGETS["ingest_spans_per_s"]
    return [
        f"Memory against speed (one sustained run of {layouts[0].spans:,} spans each; the first row is the sustained"
        " run above): the ingest target and the memory target (PSS summed at one moment) together.",
        "",
        "| settings | spans/s | PSS at once, MB | RSS peaks summed, MB (processes) | >= "
        f"{rate:,} spans/s | PSS < {pss} MB |",
        "|---|---|---|---|---|---|",
        *(
            f"| {_settings(o)}{'' if o.memory_limit else ' (memory_limit default)'} | {o.spans_per_s:,.0f} |"
            f" {o.peak_pss_mb:.0f} | {o.peak_rss_mb:.0f} ({o.collector_processes}) | {_ok(o.spans_per_s >= rate)} |"
            f" {_ok(o.peak_pss_mb < pss)} |"
            for o in layouts
        ),
        "",
    ]


def _memory_lines(long: Any, memory_limit: str) -> list[str]:
    """Where the memory goes: each process idle and at its peak in the sustained run, and what each step of
    starting a worker and the server adds (measured now, in fresh interpreters)."""
    from bench.memory import startup_steps

    worker, server = startup_steps()
    idle, peak = long.idle_rss_by_process_mb, long.rss_by_process_mb
    idle_pss, at_peak = long.idle_pss_by_process_mb, long.pss_by_process_mb
    rows = sorted(zip(long.process_names, idle, peak, idle_pss, at_peak, strict=True), key=lambda x: -x[2])
    lines = [
        "Where the memory goes (same run): each process of the collector once started (before any load) and under the"
        " sustained run's load, in MB. RSS: its own peak; PSS (its shared pages divided among the processes that map"
        " them): at the moment the summed PSS peaked, the figure the target is judged on.",
        "",
        "| process | RSS idle | RSS peak under load | added | PSS idle | PSS at the summed peak | added |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {name} | {i:.0f} | {p:.0f} | {p - i:.0f} | {qi:.0f} | {q:.0f} | {q - qi:.0f} |"
            for name, i, p, qi, q in rows
        ),
        f"| summed | {sum(idle):.0f} | {sum(peak):.0f} | {sum(peak) - sum(idle):.0f} | {sum(idle_pss):.0f} |"
        f" {sum(at_peak):.0f} | {sum(at_peak) - sum(idle_pss):.0f} |",
        "",
        "What starting each process adds (a fresh interpreter, in this order; the server loads all a worker loads,"
        " then the rest):",
        "",
        "| step | + RSS, MB |",
        "|---|---|",
        *(f"| worker: {label} | {mb:.0f} |" for label, mb in worker),
        f"| **a decode worker, idle** | **{sum(mb for _, mb in worker):.0f}** |",
        *(f"| server: {label} | {mb:.0f} |" for label, mb in server),
        f"| **the server, idle** | **{sum(mb for _, mb in worker + server):.0f}** |",
        "",
        f"Under load the server adds DuckDB's memory_limit ({memory_limit}: the file's cache, and the rows of the"
        " transaction being committed), the Arrow tables of that commit (read back from the intake spool: up to"
        " writer_max_batch_spans spans; acknowledged batches waiting for the writer are in the spool, not in memory)"
        " and the request bodies being received (up to max_inflight_requests); a worker adds the objects of the"
        " request it decodes.",
        "",
    ]
    return lines


def _clickhouse_lines(quick: bool) -> list[str]:
    from bench.analytics import PARAMS
    from bench.clickhouse import failures, run_clickhouse_analytics

    print("clickhouse ...", flush=True)
    sizes = (20_000, 100_000) if quick else (1_000_000, 10_000_000)
    res = run_clickhouse_analytics(sizes, repeats=2 if quick else 3)
    lines = [
        "## The analytics on the ClickHouse store (chDB) beside DuckDB (median seconds)",
        "",
        f"The analytics history above at {sizes[0]:,} and {sizes[1]:,} calls, in a DuckDB file and copied into chDB"
        " (ClickHouse in this process); each question asked of both stores through the library door in the same"
        " run. The ClickHouse store deduplicates spans and responses and adds up tasks and hours at read time (exact"
        " with many writers); a query may use 8 GiB here (`sql_memory_limit`) and 60 s (the analytics' time"
        " limit); the copy into chDB took"
        f" {res[('load', sizes[0], 'ClickHouse')]:.1f} s and {res[('load', sizes[1], 'ClickHouse')]:.1f} s.",
        "",
        "| question | " + " | ".join(f"DuckDB {n:,} | ClickHouse {n:,} | ratio" for n in sizes) + " |",
        "|---|" + "---|---|---|" * len(sizes),
    ]
    for name in PARAMS:
        cells = []
        for n in sizes:
            d, c = res[(name, n, "DuckDB")], res[(name, n, "ClickHouse")]
            if math.isnan(c):  # refused: the failures below say why
                cells.append(f"{d:.3f} | failed | -")
            else:
                cells.append(f"{d:.3f} | {c:.3f} | {c / d:.1f}x")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", *(f"- {q} at {n:,} on {store}: failed: {why}" for (q, n, store), why in failures.items())]
    return [*lines, ""]


def _cli_lines(quick: bool) -> list[str]:
    from bench.cli import TARGET_S, run_cli

    print("cli ...", flush=True)
    calls = 2_000
    res = run_cli(calls, repeats=2 if quick else 5)
    lines = [
        "## The CLI at a demo's size, no server (median seconds)",
        "",
        f"`taskcost <command> --db <file>` over {calls:,} calls (the demo writes ~1,900), a fresh process each time:"
        " start-up, the read-only open, the answer and its table at 120 columns; bytecode cached, as after an"
        f" install. Target: < {TARGET_S:g} s each.",
        "",
        f"| command | seconds | < {TARGET_S:g} s |",
        "|---|---|---|",
    ]
    lines += [f"| `taskcost {cmd}` | {t:.3f} | {_ok(t < TARGET_S)} |" for cmd, t in res.items()]
    return [*lines, ""]


def _dashboard_lines(quick: bool, *, required: bool) -> list[str]:
    """Every page the dashboards list, in headless Chromium against the real server: each callback's median time
    and each page's load, at both sizes; the slowest callback of each page against the target."""
    from bench.dashboards import CHROMIUM, run_dashboards

    lines = ["## Dashboards (median seconds)", ""]
    if not CHROMIUM.exists() and not required:  # `make bench` without a browser: the other sections still run
        print(f"dashboards: skipped ({CHROMIUM} is missing: make install-browser)", flush=True)
        return [*lines, f"(skipped: {CHROMIUM} is missing; `make install-browser` installs it)", ""]
    print("dashboards ...", flush=True)
    sizes = (20_000, 100_000) if quick else (1_000_000, 10_000_000)
    repeats = 2 if quick else 5
    res = {(t.path, t.calls): t for t in run_dashboards(sizes, repeats=repeats)}
    paths = list(dict.fromkeys(path for path, _ in res))
    target = TARGETS["dashboard_callback_10m_s"]
    small, big = sizes
    lines += [
        f"Every page the dashboards list in their navigation, opened in headless Chromium (Debian's, driven by"
        f" Playwright) against the real `taskcost serve` (its defaults, auth off) over the analytics history"
        f" ({small:,} and {big:,} calls); one load to warm, then {repeats}. Each `_dash-update-component` request is"
        " timed by the browser from its start to its response's end (the callback, its queries and its JSON over"
        " loopback); a page's load runs from the navigation to its last callback's answer. The callback times are"
        f" medians over the loads; the target: every callback < {target:g} s at {big:,} calls.",
        "",
        f"| page | callbacks per load | slowest callback (at {big:,}) | {small:,} calls | {big:,} calls | ratio |"
        f" page load, {small:,} | page load, {big:,} | < {target:g} s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        a, b = res[(path, small)], res[(path, big)]
        name, slow_b = b.slowest()
        slow_a = a.medians().get(name, float("nan"))
        shown = f" ({a.errors_shown + b.errors_shown} error boxes shown)" if a.errors_shown + b.errors_shown else ""
        lines.append(
            f"| {path}{shown} | {b.per_load():.0f} | {name} | {slow_a:.3f} | {slow_b:.3f} | {slow_b / slow_a:.1f} |"
            f" {a.load():.3f} | {b.load():.3f} | {_ok(slow_b < target)} |"
        )
    lines += ["", "Every callback (median seconds):", "", f"| page | callback | {small:,} calls | {big:,} calls |"]
    lines.append("|---|---|---|---|")
    for path in paths:
        ma, mb = res[(path, small)].medians(), res[(path, big)].medians()
        for name in sorted(mb, key=lambda n: -mb[n]):
            lines.append(f"| {path} | {name} | {ma.get(name, float('nan')):.3f} | {mb[name]:.3f} |")
    return [*lines, ""]


def _by_process(r: Any) -> list[str]:
    """The collector's CPU per span by process role (the server: HTTP, spool, the writer's DuckDB work; the decode
    workers: decode, normalise, price, Arrow), and the rate that CPU allows on this machine's cores."""
    roles: dict[str, list[float]] = {}
    for name, us in zip(r.process_names, r.cpu_us_by_process, strict=False):
        roles.setdefault(name, []).append(us)
    lines = [
        f"| of it: {name}{f' ({len(each)} processes)' if len(each) > 1 else ''} | {sum(each):.0f} |"
        for name, each in roles.items()
        if sum(each) >= 0.5
    ]
    if r.server_cpu_us_per_span > 0:
        cores = os.cpu_count() or 1
        lines.append(
            f"| the rate the collector's CPU allows with all {cores} cores busy (1 s x cores / CPU per span)"
            f" | {cores * 1e6 / r.server_cpu_us_per_span:,.0f} spans/s |"
        )
    return lines


def _engine_lines(quick: bool) -> list[str]:
    from bench.engines import run_engine_history, run_engine_intake

    print("engines ...", flush=True)
    i = run_engine_intake(10_000 if quick else 40_000, 2 if quick else 5)
    sizes = (20_000, 100_000) if quick else (1_000_000, 10_000_000)
    h = run_engine_history(sizes, 2 if quick else 3)
    lines = [
        "## The engine view: intake and the engines question",
        "",
        f"Intake, one process, median of the runs: the normaliser over {i['client_spans']:,} spans of the ingest"
        f" traffic, and over the same requests with a vLLM server span beside each of its {i['engine_spans']:,}"
        " calls; a vLLM server's `/metrics` text parsed and mapped (prometheus-client's parser), and the same"
        " samples as an OTLP metrics request decoded and mapped.",
        "",
        "| what | microseconds |",
        "|---|---|",
        f"| normalising a client span (for scale) | {i['us_per_client_span']:.1f} |",
        f"| an engine span added to its request | {i['us_per_engine_span']:.1f} |",
        f"| a Prometheus text sample kept ({i['samples']} of a vLLM scrape) | {i['us_per_text_sample']:.1f} |",
        f"| an OTLP metrics sample | {i['us_per_otlp_sample']:.1f} |",
        "",
        "History: the analytics history (one task in five self-hosted), each self-hosted call with its vLLM server"
        " span and engine record; DuckDB store, median seconds. The DuckDB store's writer matches engine spans to"
        " calls as it commits, and keeps the calls' sums and busy parts per configuration and hour (the history's,"
        " loaded behind it, by the roll-ups' rebuild, every hour settled): the question reads those, and a sample of"
        " calls; `engine_calls` read whole is for scale. The last two rows are live traffic written into the history"
        " afterwards (20,000 spans a run, median of 3 runs of each, alternated): microseconds of the writer per"
        " client span, and what an engine span beside each call adds per engine span.",
        "",
        "| | " + " | ".join(f"{n:,} calls" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
        "| engine spans | " + " | ".join(f"{h[('engine_spans', n)]:,.0f}" for n in sizes) + " |",
    ]
    for what in ("engine_calls view", "engines question", "writer us per client span", "writer us per engine span"):
        if (what, sizes[0]) in h:
            digits = 1 if what.startswith("writer") else 3
            lines.append(f"| {what} | " + " | ".join(f"{h[(what, n)]:.{digits}f}" for n in sizes) + " |")
    if ("engines question", sizes[-1]) in h:
        q = h[("engines question", sizes[-1])]
        lines += [
            "",
            f"The engines question at {sizes[-1]:,} calls: {q:.2f} s, target < {TARGETS['engines_10m_s']:g} s"
            f' {_ok(q < TARGETS["engines_10m_s"])} (docs/analytics.md, Engines, "Speed": where it goes).',
        ]
    return [*lines, ""]


def _mix_lines(mixes: list[Any], default: str) -> list[str]:
    """The traffic mixes, one run each (the bench's own traffic: the median run)."""
    from bench.traffic import MIXES

    ratio = TARGETS["ingest_ratio"]
    own = next(m for m in mixes if m.mix == default)
    return [
        f"The traffic mixes: one run of about {own.spans:,} spans each, the collector's defaults, {own.senders}"
        f" senders; the {default} row is the median run above (the bench's traffic). Seeded: the same bodies every"
        " run. The ceiling, decode + normalise and the normaliser's CPU time are measured on each mix's own bodies.",
        "",
        "| mix | bytes/span sent | spans/s | ceiling: decode + keys, spans/s | ratio | >= "
        f"{ratio} | decode + normalise, spans/s | normalise, CPU us/span | PSS at once, MB | RSS summed peaks, MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {m.mix}: {MIXES[m.mix].label} | {m.bytes_per_span:,.0f} | {m.spans_per_s:,.0f} |"
            f" {m.ceiling_spans_per_s:,.0f} | {m.ratio:.2f} | {_ok(m.ratio >= ratio)} | {m.normalise_spans_per_s:,.0f}"
            f" | {m.normalise_cpu_us_per_span:.1f} | {m.peak_pss_mb:.0f} | {m.peak_rss_mb:.0f} |"
            for m in mixes
        ),
        "",
    ]


def _ingest_lines(quick: bool, senders: int, ingest_runs: int) -> list[str]:
    from bench.ingest import CEILING_SPANS, run_ingest
    from bench.traffic import DEFAULT_MIX, MIXES, bodies
    from bench.writer import writer_lines, writer_steps
    from taskcost.collector._decoders import GC_THRESHOLD
    from taskcost.settings import Settings

    defaults = Settings()  # the collector's defaults on this machine (env and config file included)
    workers = defaults.decode_workers
    size = 20_000 if quick else 200_000
    print(f"ingest ({DEFAULT_MIX.name} mix) ...", flush=True)
    runs = [run_ingest(size, senders=senders) for _ in range(1 if quick else ingest_runs)]
    for i, run in enumerate(runs, 1):
        print(f"  run {i}: {run.spans_per_s:,.0f} spans/s (ceiling {run.ceiling_spans_per_s:,.0f})", flush=True)
    r = sorted(runs, key=lambda x: x.spans_per_s)[len(runs) // 2]  # the median run
    mixes = []
    for mix in MIXES.values():
        mixes.append(r if mix == DEFAULT_MIX else run_ingest(size, senders=senders, mix=mix))
        print(f"  mix {mix.name}: {mixes[-1].spans_per_s:,.0f} spans/s, ratio {mixes[-1].ratio:.2f}", flush=True)
    others = [
        *(run_ingest(size, senders=senders, decode_workers=w) for w in (0, 1, 2) if w != workers),
        run_ingest(size, senders=senders, spool=False),
        run_ingest(size, senders=senders, memory_limit="512MB"),  # the default before 128MB per core
        run_ingest(size, senders=senders, grpc=True),
        run_ingest(size, senders=senders, duckdb_threads=1),  # the default before queries got 2 on 2 cores
        run_ingest(size, senders=senders, clickhouse=True),  # the same traffic into the ClickHouse store
    ]
    # sustained: 5x longer, so that DuckDB's cache, its indexes and the queue reach what a running collector holds
    long = run_ingest(size * 5, senders=senders, measure_ceilings=False)
    print(f"  sustained: {long.spans_per_s:,.0f} spans/s, PSS at once {long.peak_pss_mb:,.0f} MB", flush=True)
    # the layouts that trade speed for memory, sustained as the PSS target is: is any within both targets?
    layouts = [long]
    for w, m in ((None, "64MB"), (1, "64MB"), (0, None)):
        layouts.append(run_ingest(size * 5, senders=senders, decode_workers=w, memory_limit=m, measure_ceilings=False))
        print(
            f"  {_settings(layouts[-1])}: {layouts[-1].spans_per_s:,.0f} spans/s, PSS at once"
            f" {layouts[-1].peak_pss_mb:,.0f} MB",
            flush=True,
        )
    print("  the writer alone ...", flush=True)
    alone = writer_steps(bodies(size, DEFAULT_MIX), max(1, round(r.spans / max(1, r.commits))))
    waits = r.read_wait_s + long.read_wait_s
    wait = statistics.median(waits) if waits else float("nan")
    worst = max(waits, default=float("nan"))
    pss, rate, ratio = TARGETS["pss_mb"], TARGETS["ingest_spans_per_s"], TARGETS["ingest_ratio"]
    return [
        "## Ingest",
        "",
        "Durable: a 200 once the batch is fsynced (to the intake spool, the default); counted when every span is"
        f" queryable; median of {len(runs)} runs. The collector is `taskcost serve` with its defaults (dashboards"
        f" mounted, and opened once before the load: they are built on first use), OTLP/gRPC off but in its own row."
        f" The traffic is the {DEFAULT_MIX.name} mix"
        f" ({DEFAULT_MIX.label}); the other mixes are one run each, below. The ceiling is one process decoding the"
        " same bodies (gunzipped first where they are compressed; JSON into its protobuf wire form) with the"
        " collector's own compiled wire reader and reading the keys the normaliser needs: each span's ids, times,"
        " status, attributes and events (and each resource's attributes) as dicts. The same through protobuf's"
        " Python messages (the ceiling's definition until the compiled reader) is a row for reference; the whole"
        " normaliser (decode + normalise) is its own row. All are measured on the run's first"
        f" {CEILING_SPANS:,} spans, median of 5, with a decode worker's garbage-collector settings (what was"
        f" loaded frozen, thresholds {', '.join(map(str, GC_THRESHOLD))}); the sustained runs skip them (no row"
        " shows them).",
        "",
        "| figure | value | target | |",
        "|---|---|---|---|",
        f"| spans per run; concurrent senders; decode_workers; DuckDB threads | {r.spans:,}; {r.senders};"
        f" default ({workers}); default ({defaults.server_duckdb_threads()}) | | |",
        f"| durable ingest, spans/s | {r.spans_per_s:,.0f} | >= {rate:,} | {_ok(r.spans_per_s >= rate)} |",
        "| ceiling: decode + reading the keys the normaliser needs (same run, 1 process), spans/s |"
        f" {r.ceiling_spans_per_s:,.0f} | | |",
        f"| ingest / ceiling | {r.ratio:.2f} | >= {ratio} | {_ok(r.ratio >= ratio)} |",
        "| for reference: the ceiling through protobuf's Python messages (as measured before the compiled reader),"
        f" spans/s; ingest / it | {r.protobuf_ceiling_spans_per_s:,.0f};"
        f" {r.spans_per_s / r.protobuf_ceiling_spans_per_s:.2f} | | |",
        "| for comparison: the store's writer alone (its commits of these spans, in one process with no load and"
        " nothing else to do: the table below), spans/s; / ceiling |"
        f" {alone.spans_per_s:,.0f}; {alone.spans_per_s / r.ceiling_spans_per_s:.2f} | | |",
        "| decode + normalise, the whole normaliser (same run, 1 process), spans/s |"
        f" {r.normalise_spans_per_s:,.0f} | | |",
        "| normalise, CPU us per span (one process, the requests' protobuf wire form in memory: reading it is the"
        " normaliser's first step; median of 5) |"
        f" {r.normalise_cpu_us_per_span:.1f} | | |",
        f"| sustained: one run of {long.spans:,} spans, spans/s | {long.spans_per_s:,.0f} | >= {rate:,} |"
        f" {_ok(long.spans_per_s >= rate)} |",
        f"| collector memory over the sustained run: the largest PSS summed over its {long.collector_processes}"
        " processes at one moment (sampled every 0.2 s; shared pages counted once), MB |"
        f" {long.peak_pss_mb:.0f} | < {pss} | {_ok(long.peak_pss_mb < pss)} |",
        "| for reference: each process's peak RSS (VmHWM) over the sustained run, summed, MB (per process: server,"
        f" then its children) | {long.peak_rss_mb:.0f} ("
        + " + ".join(f"{m:.0f}" for m in long.rss_by_process_mb)
        + ") | | |",
        f"| largest RSS summed at one moment (sampled every 0.2 s) | {long.peak_rss_together_mb:.0f} | | |",
        f"| the {r.spans:,}-span median run: PSS at one moment; RSS peaks summed (per process), MB |"
        f" {r.peak_pss_mb:.0f}; {r.peak_rss_mb:.0f} ("
        + " + ".join(f"{m:.0f}" for m in r.rss_by_process_mb)
        + ") | | |",
        "| a query under this load, once a second in the median and the sustained run (it waits for every span"
        " acknowledged before it): median; max, s"
        f" | {wait:.2f}; {worst:.2f} | < {TARGETS['queryable_s']:g} | {_ok(worst < TARGETS['queryable_s'])} |",
        f"| requests refused with 503 (retried), median run; sustained run | {r.refused}; {long.refused} | | |",
        "",
        *_mix_lines(mixes, DEFAULT_MIX.name),
        f"The same load ({DEFAULT_MIX.name} mix) with other settings (one run each; the defaults: decode_workers"
        f" {workers}, spool on, DuckDB memory_limit {defaults.server_memory_limit()} (128MB per core left after the"
        f" decode workers), DuckDB threads {defaults.server_duckdb_threads()} (the cores left after the decode workers,"
        " at least 2 on 2 cores or more)); the gRPC row sends protobuf only, its ceiling measured on those bodies:",
        "",
        "| settings | spans/s | ceiling, same run | ratio | PSS at once, MB | RSS, MB (processes): summed peaks; at"
        " once |",
        "|---|---|---|---|---|---|",
        *(
            f"| {_settings(o)} | {o.spans_per_s:,.0f} | {o.ceiling_spans_per_s:,.0f} | {o.ratio:.2f} |"
            f" {o.peak_pss_mb:.0f} | {o.peak_rss_mb:.0f} ({o.collector_processes}); {o.peak_rss_together_mb:.0f} |"
            for o in others
        ),
        "",
        *_layout_lines(layouts),
        "Where the time goes (same run): CPU microseconds per span; the machine has "
        f"{os.cpu_count()} cores for all of it.",
        "",
        "| | CPU us/span |",
        "|---|---|",
        f"| collector, {r.collector_processes} processes (HTTP, decode, extract, price, Arrow, DuckDB)"
        f" | {r.server_cpu_us_per_span:.0f} |",
        *_by_process(r),
        f"| decode + reading the keys alone (the ceiling's rate) | {r.ceiling_cpu_us_per_span:.0f} |",
        f"| decode + normalise (its rate) | {1e6 / r.normalise_spans_per_s:.0f} |",
        f"| the normaliser alone (CPU, the requests' wire form) | {r.normalise_cpu_us_per_span:.0f} |",
        *(f"| a decode worker's step alone: {step} | {us:.1f} |" for step, us in r.steps.items()),
        f"| load generator (senders) | {r.sender_cpu_us_per_span:.0f} |",
        f"| commits; spans per commit | {r.commits:,}; {r.spans / max(1, r.commits):,.0f} |",
        f"| writer busy (time in commits / elapsed) | {r.writer_busy_share:.0%} |",
        "",
        *writer_lines(alone, r.writer_busy_share),
        *_memory_lines(long, defaults.server_memory_limit()),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a measurement")
    parts_known = ["ingest", "query", "analytics", "clickhouse", "engines", "cli", "dashboards", "reprice", "sdk"]
    ap.add_argument("--only", choices=parts_known, action="append")
    ap.add_argument("--senders", type=int, default=8, help="concurrent senders (agents) in the ingest run")
    ap.add_argument("--ingest-runs", type=int, default=3, help="ingest runs; the median is reported")
    args = ap.parse_args()
    parts = args.only or parts_known
    lines = [
        "# Benchmark results",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}{' (QUICK smoke run: sizes too small to judge)' if args.quick else ''}.",
        "Medians of repeated runs; ratios are between figures measured in this same run.",
        "",
    ]
    if "ingest" in parts:
        lines += _ingest_lines(args.quick, args.senders, args.ingest_runs)
    if "query" in parts:
        from bench.query import LIVE, LIVE_SPANS, run_queries

        print("query ...", flush=True)
        sizes = (20_000, 100_000) if args.quick else (1_000_000, 10_000_000)
        res = run_queries(sizes, repeats=3 if args.quick else 5)
        lines += [
            "## Queries (median seconds)",
            "",
            f"| query | {sizes[0]:,} calls | {sizes[1]:,} calls | targets < {TARGETS['query_1m_s']} s / < "
            f"{TARGETS['query_10m_s']} s |",
            "|---|---|---|---|",
        ]
        names = sorted({k[0] for k in res} - {LIVE})
        for name in names:
            a, b = res[(name, sizes[0])], res[(name, sizes[1])]
            good = a < TARGETS["query_1m_s"] and b < TARGETS["query_10m_s"]
            lines.append(f"| {name} | {a:.3f} | {b:.3f} | {_ok(good)} |")
        lines += [
            "",
            f"Live traffic into the loaded store ({LIVE_SPANS:,} spans normalised, priced and committed in one "
            f"process, under the server's memory limit): {res[(LIVE, sizes[0])]:,.0f} spans/s at {sizes[0]:,} calls, "
            f"{res[(LIVE, sizes[1])]:,.0f} at {sizes[1]:,}. Its keys are checked against the dedupe window "
            "(`dedupe_window_spans`) whatever the history's size.",
            "",
        ]
    if "analytics" in parts:
        from bench.analytics import DOORS, PARAMS, run_analytics

        print("analytics ...", flush=True)
        sizes = (20_000, 100_000) if args.quick else (1_000_000, 10_000_000)
        res = run_analytics(sizes, repeats=3 if args.quick else 5, cli_repeats=2 if args.quick else 7)
        t1, t10 = TARGETS["analytics_1m_s"], TARGETS["analytics_10m_s"]
        lines += [
            "## Analytics questions (median seconds)",
            "",
            f"Each question over the query history above ({sizes[0]:,} and {sizes[1]:,} calls), asked three ways:"
            " the library function on the open store; `GET /api/analytics/<question>` from a client to the real"
            " server (uvicorn, DuckDB with the server's memory limit and threads) and back; the CLI"
            " (`taskcost <question> --url ... --format json`, a fresh process each time, start-up included: the"
            " CLI's quick path, in the standard library; its bytecode cached, as after an install)."
            f" Targets: < {t1} s at 1M calls, < {t10} s at 10M, end to end.",
            "",
            "| question (parameters) | door | " + " | ".join(f"{n:,} calls" for n in sizes) + " | targets |",
            "|---|---|---|---|---|",
        ]
        for name, params in PARAMS.items():
            shown = " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
            for door in DOORS:
                a, b = res[(name, sizes[0], door)], res[(name, sizes[1], door)]
                lines.append(f"| {name} ({shown}) | {door} | {a:.3f} | {b:.3f} | {_ok(a < t1)} / {_ok(b < t10)} |")
        lines.append("")
    if "clickhouse" in parts:
        lines += _clickhouse_lines(args.quick)
    if "engines" in parts:
        lines += _engine_lines(args.quick)
    if "cli" in parts:
        lines += _cli_lines(args.quick)
    if "dashboards" in parts:
        lines += _dashboard_lines(args.quick, required=bool(args.only))
    if "reprice" in parts:
        from bench.reprice import run_reprice

        print("reprice ...", flush=True)
        reprices = run_reprice((20_000, 100_000) if args.quick else (1_000_000, 10_000_000))
        lines += [
            "## Re-pricing the whole history",
            "",
            "`taskcost reprice` of every stored call (each with its span), in a fresh process opened as the server"
            " opens the file; pages of 5,000 calls, each its own transaction. One run each. The roll-up delta left"
            " is what the writer had not folded into the task roll-up after it (0: its task cost changes all were).",
            "",
            "| stored calls | re-priced; changed | seconds | calls/s | peak RSS, MB | DuckDB holds at the end, MB |"
            " memory_limit | roll-up delta left |",
            "|---|---|---|---|---|---|---|---|",
            *(
                f"| {r.calls:,} | {r.calls:,}; {r.changed:,} | {r.seconds:,.1f} | {r.calls / r.seconds:,.0f} |"
                f" {r.peak_rss_mb:,.0f} | {r.duckdb_mb:,.0f} | {r.memory_limit} | {r.delta_left:,} |"
                for r in reprices
            ),
            "",
        ]
    if "sdk" in parts:
        script = HERE.parent / "sdk" / "bench" / "bench_overhead.py"
        lines += ["## SDK overhead", ""]
        if script.exists():
            print("sdk ...", flush=True)
            quick = ["--calls", "100", "--rounds", "5"] if args.quick else []
            proc = subprocess.run([sys.executable, str(script), *quick], capture_output=True, text=True, timeout=900)
            lines += ["```", proc.stdout.strip() or proc.stderr.strip(), "```", ""]
        else:
            lines += ["(no SDK benchmark script yet)", ""]
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        path = HERE / "RESULTS.md"
        if args.only and path.exists():  # a partial run replaces its own sections, and keeps the others (dated)
            text = _merged(path.read_text(), text)
        path.write_text(text + "\n")
        print(f"\nwritten to {path}")


def _sections(text: str) -> tuple[str, dict[str, str]]:
    head, *parts = text.split("\n## ")
    return head, {p.split("\n", 1)[0]: "## " + p.rstrip("\n") for p in parts}


_KEPT = "(Kept from the earlier run: "


def _merged(old: str, new: str) -> str:
    """``new``'s sections in place of ``old``'s of the same title; ``old``'s other sections kept, marked with the run
    that measured them (the earlier file's header; a section kept before keeps its mark)."""
    old_head, old_parts = _sections(old)
    new_head, new_parts = _sections(new)
    when = next((line for line in old_head.splitlines() if line.startswith("Run ")), "an earlier run")
    out = [new_head.rstrip("\n")]
    for title in [*old_parts, *(t for t in new_parts if t not in old_parts)]:
        if title in new_parts:
            out.append(new_parts[title])
        elif _KEPT in old_parts[title]:
            out.append(old_parts[title])
        else:
            out.append(old_parts[title].replace("\n", f"\n\n{_KEPT}{when})\n", 1))
    return "\n\n".join(out)


if __name__ == "__main__":
    main()
