"""`taskcost demo`, real parts only: the real `taskcost serve` process, the real SDK, the real `openai` and
`anthropic` clients, the fake model server over HTTP. A short, sped-up run must leave in its database everything the
demo promises (task kinds, both deployments, the seven vLLM deployments of one open model with their topology tags
and their own server spans, GPU-hour costs, broken prefixes, retries, failed, abandoned and golden tasks), all of it
marked as demo data, with every span sent stored."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import pytest

from tests import demo_short_run
from tests.conftest import cli_env, free_port, sql_json

pytestmark = pytest.mark.slow

SERVICE = "taskcost-demo"


def _demo(db: Path, port: int, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        demo_short_run.command(db, port, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        start_new_session=True,  # as in a terminal: the signals below reach the demo only
    )


def sql(db: Path, query: str) -> list[dict[str, Any]]:
    return sql_json(db, query)


def one(db: Path, query: str) -> Any:
    [row] = sql(db, query)
    [value] = row.values()
    return value


def _sent_and_stored(output: str) -> tuple[int, int]:
    sent = re.search(r"(\d+) spans sent", output)
    stored = re.search(r"(\d+) spans stored", output)
    assert sent and stored, output
    return int(sent.group(1)), int(stored.group(1))


def _the_printed_command_serves_the_data_again(out: str, port: int) -> None:
    """The command the demo prints when it stops serves its data again, on the demo's own port (not 4318/4317)."""
    import shlex

    import httpx

    line = next(x for x in out.splitlines() if "taskcost serve --db" in x)
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    args = words[words.index("taskcost") + 1 :]
    assert args[-4:] == ["--port", str(port), "--grpc-port", "0"]
    server = subprocess.Popen(
        [sys.executable, "-m", "taskcost", *args], env={**cli_env(), **env}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(150):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError(f"the printed command did not serve: {line}")
    finally:
        server.terminate()
        server.wait(30)


def test_a_short_demo_run_has_everything_the_demo_promises() -> None:
    # the run (tests/demo_short_run.py: 9 s at 30x, then the wait for its last GPU-hour window) started when
    # collection ended
    run = demo_short_run.result()
    db, port, out = run.db, run.port, run.out
    assert run.returncode == 0, f"{out}\n{run.err}"
    assert f"http://127.0.0.1:{port}/dash/" in out and "DEMO DATA" in out
    sent, stored = _sent_and_stored(out)
    assert sent == stored > 100  # nothing lost on the way
    assert not db.with_name(db.name + ".serve.json").exists()  # the server stopped and let go of the file
    _the_printed_command_serves_the_data_again(out, port)

    # marked as demo data wherever it shows
    assert sql(db, "SELECT DISTINCT service_name FROM tasks") == [{"service_name": SERVICE}]
    assert sql(db, "SELECT DISTINCT service_name FROM llm_calls") == [{"service_name": SERVICE}]
    assert one(db, "SELECT count(*) FROM tasks WHERE task_id NOT LIKE 'demo-%' OR agent_name NOT LIKE 'demo-%'") == 0
    envs = sql(db, "SELECT DISTINCT resource_attributes->>'deployment.environment.name' AS env FROM spans")
    assert envs == [{"env": "demo"}]

    # the fleet: kinds, outcomes, golden tasks, agent retries
    kinds = {r["kind"] for r in sql(db, "SELECT DISTINCT kind FROM tasks")}
    assert kinds == {"code_review", "bug_fix", "report", "triage"}
    outcomes = {r["outcome"]: r["n"] for r in sql(db, "SELECT outcome, count(*) AS n FROM tasks GROUP BY ALL")}
    assert set(outcomes) == {"completed", "failed", "abandoned"}, outcomes
    assert outcomes["completed"] > outcomes["failed"] + outcomes["abandoned"]
    assert one(db, "SELECT count(*) FROM tasks WHERE golden") > 0
    assert one(db, "SELECT count(*) FROM tasks WHERE retries > 0") > 0
    reason = "attributes->>'taskcost.call.retry_reason'"
    assert sql(db, f"SELECT DISTINCT {reason} AS r FROM spans WHERE {reason} IS NOT NULL") == [{"r": "invalid_json"}]
    # the clients' own retries: failed attempts (429, 5xx) and then, mostly, an answer
    errors = {r["error_type"] for r in sql(db, "SELECT DISTINCT error_type FROM llm_calls WHERE status = 'error'")}
    assert {"429", "500"} <= errors, errors
    assert one(db, "SELECT count(*) FROM llm_calls WHERE attempt > 1 AND status = 'ok'") > 0
    assert one(db, "SELECT count(*) FROM tool_calls WHERE cost_usd > 0") > 0

    # endpoints: paid APIs priced per token, the real model names
    api = sql(
        db,
        "SELECT provider, model, count(*) AS n, count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced"
        " FROM llm_calls WHERE deployment = 'api' AND status = 'ok' GROUP BY ALL ORDER BY ALL",
    )
    assert {(r["provider"], r["model"]) for r in api} == {
        ("anthropic", "claude-haiku-4-5-20251001"),
        ("anthropic", "claude-sonnet-4-5-20250929"),
        ("openai", "gpt-4o-2024-08-06"),
        ("openai", "gpt-4o-mini-2024-07-18"),
    }
    assert all(r["unpriced"] == 0 for r in api), api
    # self-hosted: one open model on seven vLLM deployments (two versions, two GPU types, fp8 and bf16, speculation,
    # a prefill/decode split), every call priced by GPU-hours once its window ended
    hosted = sql(
        db,
        "SELECT engine, engine_version, gpu_type, quantization, cluster_id, count(*) AS n,"
        " count(*) FILTER (WHERE cost_usd IS NULL OR price_source NOT LIKE 'clusters demo-1%') AS not_by_gpu_hours"
        " FROM llm_calls WHERE deployment = 'self_hosted' GROUP BY ALL ORDER BY ALL",
    )
    assert [tuple(r.values())[:5] for r in hosted] == [
        ("vllm", "0.6.0", "A100-80GB", "bf16", "demo-a100-v060"),
        ("vllm", "0.6.0", "H100-SXM", "bf16", "demo-h100-v060-bf16"),
        ("vllm", "0.6.0", "H100-SXM", "fp8", "demo-h100-v060"),
        ("vllm", "0.6.0", "H100-SXM", "fp8", "demo-h100-v060-eagle"),
        ("vllm", "0.7.0", "A100-80GB", "bf16", "demo-a100-v070"),
        ("vllm", "0.7.0", "H100-SXM", "fp8", "demo-h100-v070"),
        ("vllm", "0.7.0", "H100-SXM", "fp8", "demo-h100-v070-pd"),
    ]
    assert all(r["not_by_gpu_hours"] == 0 for r in hosted), hosted
    assert Decimal(one(db, "SELECT sum(cost_usd) FROM llm_calls WHERE deployment = 'self_hosted'")) > 0
    _the_engines_are_tagged_and_report_their_own_spans(db)

    # prompt prefixes: stable ones are read from the cache; broken ones (a timestamp up front, which the SDK's lint
    # reports) never are, and the fingerprint says where the prefix broke
    cached = {
        r["agent_name"]: r["cached"]
        for r in sql(db, "SELECT agent_name, sum(cache_read_tokens) AS cached FROM llm_calls GROUP BY ALL")
    }
    linted = {
        r["agent"]
        for r in sql(
            db,
            "SELECT DISTINCT attributes->>'gen_ai.agent.name' AS agent FROM spans"
            " WHERE attributes->>'taskcost.prompt.cache_breakers' LIKE '%timestamp@%'",
        )
    }
    broken = {"demo-reporter-h100", "demo-triager-haiku", "demo-fixer-gpt-4o"}
    assert linted == broken
    assert all(not cached[a] for a in broken), cached
    assert all(cached[a] for a in set(cached) - broken), cached
    assert one(db, "SELECT count(*) FROM llm_calls WHERE prefix_break_block IS NOT NULL") > 0
    # streamed calls have a time to first token; token counts are spread out, not constant
    assert one(db, "SELECT count(*) FROM llm_calls WHERE ttft_s > 0") > 0
    assert one(db, "SELECT count(DISTINCT output_tokens) FROM llm_calls WHERE status = 'ok'") > 50


def _the_engines_are_tagged_and_report_their_own_spans(db: Path) -> None:
    """The topology and decoding tags reach the calls through the SDK's infra profiles; each vLLM deployment's server
    span for a call it answered is a child of that call's span, inside it in time, with the call's response id, and
    its queue + prefill + decode make its e2e; the deployments' decode speeds are far apart; and the server scraped
    each deployment's metrics page (the demo's TASKCOST_ENGINE_SCRAPE)."""
    tags = sql(
        db,
        "SELECT DISTINCT attributes->>'taskcost.cluster.id' AS cluster, attributes->>'taskcost.spec.method' AS spec,"
        " attributes->>'taskcost.pd.disaggregated' AS pd, attributes->>'taskcost.parallel.tensor' AS tp"
        " FROM spans WHERE attributes->>'taskcost.deployment' = 'self_hosted' ORDER BY ALL",
    )
    assert [tuple(r.values()) for r in tags] == [
        ("demo-a100-v060", "none", "false", "4"),
        ("demo-a100-v070", "none", "false", "4"),
        ("demo-h100-v060", "none", "false", "2"),
        ("demo-h100-v060-bf16", "none", "false", "4"),
        ("demo-h100-v060-eagle", "eagle", "false", "2"),
        ("demo-h100-v070", "none", "false", "2"),
        ("demo-h100-v070-pd", "none", "true", "2"),
    ]
    latency = "(e.attributes->>'gen_ai.latency.{}')::DOUBLE".format
    [engine] = sql(
        db,
        "WITH speeds AS (SELECT resource_attributes->>'taskcost.cluster.id' AS cluster,"
        " median((attributes->>'gen_ai.usage.completion_tokens')::DOUBLE"
        " / (attributes->>'gen_ai.latency.time_in_model_decode')::DOUBLE) AS tps FROM spans"
        " WHERE service_name = 'vllm' GROUP BY ALL)"
        " SELECT count(*) AS spans, count(c.span_id) AS under_a_call,"
        " count(*) FILTER (WHERE e.start_ns >= c.start_ns AND e.end_ns <= c.end_ns) AS inside,"
        " count(*) FILTER (WHERE c.attributes->>'gen_ai.response.id' = e.attributes->>'gen_ai.request.id') AS same_id,"
        " count(*) FILTER (WHERE c.attributes->>'taskcost.cluster.id' = e.resource_attributes->>'taskcost.cluster.id')"
        " AS same_cluster,"
        f" max(abs({latency('time_in_queue')} + {latency('time_in_model_prefill')}"
        f" + {latency('time_in_model_decode')} - {latency('e2e')})) AS worst_sum_gap,"
        f" count(*) FILTER (WHERE {latency('e2e')} <= (c.end_ns - c.start_ns) / 1e9) AS within_client,"
        " (SELECT count(*) FROM llm_calls WHERE deployment = 'self_hosted' AND status = 'ok') AS answered,"
        " (SELECT arg_max(cluster, tps) FROM speeds) AS fastest, (SELECT arg_min(cluster, tps) FROM speeds) AS slowest,"
        " (SELECT max(tps) / min(tps) FROM speeds) AS spread,"
        " (SELECT count(DISTINCT cluster_id) FROM engine_metrics WHERE engine = 'vllm' AND source = 'scrape'"
        " AND metric = 'prompt_tokens' AND source_metric = 'vllm:prompt_tokens_total') AS scraped_clusters"
        " FROM spans e LEFT JOIN spans c ON c.trace_id = e.trace_id AND c.span_id = e.parent_span_id"
        " WHERE e.service_name = 'vllm' AND e.name = 'llm_request' AND e.scope_name = 'vllm.llm_engine'",
    )
    # decode speed (output tokens per second of decode, as the clock measured it): H100s lead, A100s trail, far
    # apart. Which H100 deployment leads is left open: the demo's engines slow with the requests in flight, and on a
    # loaded machine the prefill/decode split (least slowed by load) has come out ahead of speculation
    assert engine.pop("fastest").startswith("demo-h100") and engine.pop("slowest").startswith("demo-a100"), engine
    # far apart: the deployments' median decode speeds are set 26-60 tokens/s (taskcost/demo/endpoints.py), 2.3x; a
    # loaded machine's clock moves the measured spread both ways (2.46 in a clean-clone run of the whole suite, above
    # 2.5 before), so the bound sits below the set ratio
    assert engine.pop("spread") > 2.0
    assert engine.pop("worst_sum_gap") < 1e-6
    assert engine.pop("scraped_clusters") == 7  # the server scraped every deployment's /metrics page
    n = engine.pop("spans")
    assert n == engine.pop("answered") > 20  # one server span for each call a deployment answered
    assert engine == dict.fromkeys(engine, n), engine


class _Output:
    """A process's stdout and stderr, read as they come (lines), so that a test can act on what it prints."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.out: list[str] = []
        self.err: list[str] = []
        self.changed = threading.Condition()
        self._threads = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((proc.stdout, self.out), (proc.stderr, self.err))
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream: IO[str] | None, lines: list[str]) -> None:
        assert stream is not None
        for line in stream:
            with self.changed:
                lines.append(line)
                self.changed.notify_all()

    def wait_for_err(self, pattern: str, timeout: float) -> str | None:
        """The first stderr line that matches ``pattern`` (from the start), or None when the process ended first or
        the time is up."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                hit = next((x for x in self.err if re.search(pattern, x)), None)
                if hit is not None or not any(t.is_alive() for t in self._threads) or time.monotonic() > deadline:
                    return hit
                self.changed.wait(0.5)

    def communicate(self, timeout: float) -> tuple[str, str]:
        self.proc.wait(timeout)
        for t in self._threads:
            t.join(30)
        return "".join(self.out), "".join(self.err)


def test_ctrl_c_stops_the_demo_cleanly_and_loses_nothing(tmp_path: Path) -> None:
    db, port = tmp_path / "demo.duckdb", free_port()
    proc = _demo(db, port, "--minutes", "5")
    output = _Output(proc)
    out = err = ""
    try:
        deadline = time.monotonic() + 120
        while True:  # until the fleet's first tasks are in
            assert proc.poll() is None, output.communicate(30)
            if (tmp_path / "demo.duckdb.serve.json").exists():  # the server is starting (or answers already)
                query = "SELECT count(*) AS n FROM tasks WHERE outcome IS NOT NULL"
                with contextlib.suppress(Exception):  # not answering yet
                    if one(db, query) >= 10:
                        break
            assert time.monotonic() < deadline, "no tasks arrived"
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)  # the agents finish their tasks ...
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)  # ... or abandon them now
        # then it flushes, and waits for the last GPU-hour window to end: Ctrl-C again, and it does not (its note says
        # so). When the window is (about to be) shared out already, the wait ends by itself within seconds.
        if output.wait_for_err(r"waiting \d+ s for the GPU-hour window to end", timeout=120) is not None:
            proc.send_signal(signal.SIGINT)
        out, err = output.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            output.communicate(30)
    assert proc.returncode == 0, f"{out}\n{err}"
    sent, stored = _sent_and_stored(out)
    assert sent == stored > 0
    assert not (tmp_path / "demo.duckdb.serve.json").exists()
    # every task the fleet started ended with an outcome: none is left open
    assert one(db, "SELECT count(*) FROM tasks WHERE outcome IS NULL") == 0
    assert "server stopped." in out
