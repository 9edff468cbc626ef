"""The walking skeleton, end to end, with real parts only: the real `taskcost serve` process on a
loopback port, an agent script using the SDK and the real OTLP/HTTP exporter, and `taskcost sql`
and `taskcost tasks` as a user would run them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from decimal import Decimal

from tests.conftest import REPO, Server, cli_env, free_port, run_cli, start_server, stop_server

M = Decimal(1_000_000)
# Published list prices (USD per million tokens), as the providers' pricing pages give them:
# OpenAI gpt-4o: input 2.50, cached input 1.25, output 10.00
# Anthropic claude-sonnet-4-5: input 3.00, cache read 0.30, cache write (5 min) 3.75, output 15.00
GPT4O_READ = (4_000 * Decimal("2.50") + 8_000 * Decimal("1.25") + 600 * Decimal("10.00")) / M
SONNET_FIRST = (
    1_000 * Decimal("3.00") + 6_000 * Decimal("0.30") + 2_000 * Decimal("3.75") + 700 * Decimal("15.00")
) / M
SONNET_RETRY = (1_500 * Decimal("3.00") + 8_000 * Decimal("0.30") + 800 * Decimal("15.00")) / M
TOOL = Decimal("0.005")


def _run_agent(server: Server) -> None:
    env = {**cli_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": server.url}
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart_agent.py"), "--task-id", "review-42"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def _sql(server: Server, query: str) -> list[dict]:
    out = run_cli("sql", "--db", str(server.db), "--format", "json", query).stdout
    return json.loads(out)


def test_one_priced_completed_task_from_agent_code_to_sql(server: Server) -> None:
    _run_agent(server)  # its shutdown() returns after the collector answered, i.e. after the commit

    calls = _sql(
        server,
        "SELECT task_id, call_id, attempt, provider, model, input_tokens, cache_read_tokens, cache_write_tokens,"
        " output_tokens, status, error_type, cost_usd, unpriced_reason, service_name, harness_version"
        " FROM llm_calls ORDER BY start_time",
    )
    assert [(c["provider"], c["model"], c["attempt"]) for c in calls] == [
        ("openai", "gpt-4o", 1),
        ("anthropic", "claude-sonnet-4-5", 1),
        ("anthropic", "claude-sonnet-4-5", 2),
    ]
    assert {c["task_id"] for c in calls} == {"review-42"}
    assert calls[1]["call_id"] == calls[2]["call_id"] != calls[0]["call_id"]
    assert [
        (c["input_tokens"], c["cache_read_tokens"], c["cache_write_tokens"], c["output_tokens"]) for c in calls
    ] == [
        (12_000, 8_000, 0, 600),
        (9_000, 6_000, 2_000, 700),
        (9_500, 8_000, None, 800),  # cache writes not reported: NULL, not 0
    ]
    assert [(c["status"], c["error_type"]) for c in calls] == [
        ("ok", None),
        ("error", "invalid_json"),
        ("ok", None),
    ]
    assert [Decimal(c["cost_usd"]) for c in calls] == [GPT4O_READ, SONNET_FIRST, SONNET_RETRY]
    assert {c["unpriced_reason"] for c in calls} == {None}
    assert {(c["service_name"], c["harness_version"]) for c in calls} == {("review-bot", "quickstart-1")}

    [task] = _sql(server, "SELECT * FROM tasks")
    assert (task["task_id"], task["kind"], task["outcome"]) == ("review-42", "code_review", "completed")
    assert (task["llm_calls"], task["attempts"], task["retries"], task["failed_attempts"]) == (2, 3, 1, 1)
    assert task["tool_calls"] == 1 and Decimal(task["tool_cost_usd"]) == TOOL
    assert Decimal(task["llm_cost_usd"]) == GPT4O_READ + SONNET_FIRST + SONNET_RETRY
    assert Decimal(task["cost_usd"]) == GPT4O_READ + SONNET_FIRST + SONNET_RETRY + TOOL == Decimal("0.0727")
    assert task["unpriced_calls"] == 0

    summary = run_cli("tasks", "--db", str(server.db)).stdout
    assert "cost per completed task (all spend / completed tasks): $0.072700" in summary
    assert "coverage: 3 of 3 call attempts priced" in summary


def test_the_readmes_four_questions_answer_as_it_shows(server: Server) -> None:
    """README.md, "The four questions": the figures it prints from the quick-start task."""
    _run_agent(server)
    readme = (REPO / "README.md").read_text()
    cost = run_cli("cost", "--db", str(server.db)).stdout
    for line in (
        "  cost per completed task usd: $0.072700",
        "  waste usd: $0.025500",
        "  waste share: 35.1%",
        "│ failed_attempts  │ $0.022800  │ 31.4%          │ -     │ 1     │ 1,000  │ 0              │",
        "│ cache_misses     │ $0.002700  │ 3.7%           │ -     │ 1     │ 1,000  │ 0              │",
    ):
        assert line in cost and line in readme, line
    # the waste by hand: the failed first answer, and the retry's 1,000 re-sent prompt tokens at sonnet's input
    # rate less its cache-read rate ($3.00 - $0.30 per million)
    assert Decimal("0.0228") == SONNET_FIRST and 1_000 * (Decimal("3.00") - Decimal("0.30")) / M == Decimal("0.0027")
    canary = run_cli(
        "canary", "--db", str(server.db), "--dimension", "model", "--baseline", "gpt-4o",
        "--candidate", "claude-sonnet-4-5", check=False,
    )  # fmt: skip
    assert canary.returncode == 3
    for line in ("  verdict: not_enough_data", "  needed calls per arm: 1,000", "  needed tasks per arm: 100"):
        assert line in canary.stdout and line in readme, line
    breakeven = run_cli("breakeven", "--db", str(server.db), "--gpu", "coreweave-1x-h100", "--tokens-per-s", "2500")
    verdict = next(x for x in breakeven.stdout.splitlines() if x.startswith("  verdict: "))
    assert verdict in readme and "would break even at 2,966,263 tokens/hour" in verdict


def test_cli_reads_the_file_directly_once_the_server_is_gone(server: Server) -> None:
    _run_agent(server)
    server.proc.terminate()
    server.proc.wait(30)
    assert not (server.db.parent / (server.db.name + ".serve.json")).exists()
    out = run_cli("sql", "--db", str(server.db), "--format", "csv", "SELECT task_id, outcome, cost_usd FROM tasks")
    assert out.stdout.splitlines() == ["task_id,outcome,cost_usd", "review-42,completed,0.072700000000"]


def test_sql_refuses_writes_through_the_server(server: Server) -> None:
    proc = run_cli("sql", "--db", str(server.db), "DELETE FROM spans", check=False)
    assert proc.returncode == 1
    assert "only read-only SELECT queries are allowed" in proc.stderr


def test_agent_without_a_collector_runs_and_exits(tmp_path) -> None:
    """Nothing listens: the agent still finishes its work, and exits 1 saying nothing was accepted; its flush at
    exit is bounded (the script gives shutdown 10 s; the exporter's own retries would take longer if they blocked
    it)."""
    env = {**cli_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens there
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "quickstart_agent.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "accepted 0 spans" in proc.stderr
    assert "nothing listens there" in proc.stderr
    assert time.monotonic() - started < 5  # it says so at once (7.6 s of exporter retries before)


def test_the_server_applies_its_duckdb_memory_limit(tmp_path) -> None:
    """The served DuckDB gets the default limit of 128MB per DuckDB thread (two threads here: 256MB, which
    DuckDB shows as 244.1 MiB), not DuckDB's own default of 80% of the machine's memory."""
    srv = start_server(
        tmp_path / "m.duckdb", free_port(), tmp_path / "server.log", env={"TASKCOST_DUCKDB_THREADS": "2"}
    )
    try:
        import httpx

        metrics = httpx.get(f"{srv.url}/metrics", timeout=10).text
    finally:
        stop_server(srv)
    assert 'taskcost_store_info{memory_limit="244.1 MiB",threads="2"} 1.0' in metrics


def test_the_server_bounds_its_queue_by_seconds_of_its_commit_rate(tmp_path) -> None:
    """`max_queued_s` reaches the served store: once a commit of 1,000 spans or more is measured, the queue's
    limit (in /metrics and /readyz) is that many seconds of it, here one commit's worth (writer_max_batch_spans)."""
    import httpx
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from bench.traffic import requests

    big = ExportTraceServiceRequest()
    for r in requests(2_000):
        big.resource_spans.extend(r.resource_spans)
    env = {"TASKCOST_MAX_QUEUED_S": "0.000001", "TASKCOST_WRITER_MAX_BATCH_SPANS": "500"}
    srv = start_server(tmp_path / "q.duckdb", free_port(), tmp_path / "server.log", env=env)
    try:

        def limit() -> float:
            text = httpx.get(f"{srv.url}/metrics", timeout=10).text
            return float(next(ln.split()[1] for ln in text.splitlines() if ln.startswith("taskcost_write_queue_limit")))

        assert limit() == 100_000  # the count, until a commit is measured
        r = httpx.post(
            f"{srv.url}/v1/traces",
            content=big.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
            timeout=60,
        )
        assert r.status_code == 200
        _sql(srv, "SELECT count(*) FROM spans")  # waits for the commit
        assert limit() == 500
    finally:
        stop_server(srv)
