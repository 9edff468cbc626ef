"""The SDK README's "Instrument your agent" example runs as it stands: here against a local server that
speaks the OpenAI and Anthropic wire formats, exporting to the real collector."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from tests.conftest import REPO, Server, cli_env
from tests.fake_llm import FakeLLM
from tests.fake_llm.fixtures import fake_llm, sql

__all__ = ["fake_llm"]  # fixtures

M = Decimal(1_000_000)
# The fake server's default usage: 100 input and 10 output tokens per answer.
GPT4O = 100 * Decimal("2.50") / M + 10 * Decimal("10.00") / M  # gpt-4o: $2.50/M in, $10/M out
SONNET = 100 * Decimal("3.00") / M + 10 * Decimal("15.00") / M  # claude-sonnet-4-5: $3/M in, $15/M out


def _example(readme: Path) -> str:
    text = readme.read_text(encoding="utf-8")
    section = text[text.index("## Instrument your agent") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python example under 'Instrument your agent' in {readme}"
    return match.group(1)


def readme_example() -> str:
    """The example of the top README; the SDK's README carries the same one (checked here)."""
    top, sdk = _example(REPO / "README.md"), _example(REPO / "sdk" / "README.md")
    assert top == sdk, "README.md and sdk/README.md show different 'Instrument your agent' examples"
    return top


def test_readme_example_runs_and_is_costed(server: Server, fake_llm: FakeLLM, tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(readme_example(), encoding="utf-8")
    env = {
        **{k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))},
        "OTEL_EXPORTER_OTLP_ENDPOINT": server.url,
        "OPENAI_BASE_URL": fake_llm.openai_url,
        "OPENAI_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_llm.anthropic_url,
        "ANTHROPIC_API_KEY": "test-key",
        "TASKCOST_SDK_RAISE_INTERNAL": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "sdk" / "src"), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(fake_llm.requests()) == 3  # review, fix, and the fix asked again (the answer was not JSON)

    calls = sql(
        server.db,
        "SELECT provider, model, call_id, attempt, cost_usd, service_name, harness_version FROM llm_calls"
        " ORDER BY start_time",
    )
    assert [(c["provider"], c["model"], c["attempt"]) for c in calls] == [
        ("openai", "gpt-4o", 1),
        ("anthropic", "claude-sonnet-4-5", 1),
        ("anthropic", "claude-sonnet-4-5", 2),
    ]
    assert calls[1]["call_id"] == calls[2]["call_id"]
    assert [Decimal(c["cost_usd"]) for c in calls] == [GPT4O, SONNET, SONNET]
    assert {(c["service_name"], c["harness_version"]) for c in calls} == {("review-bot", "3f2c1ab")}
    [task] = sql(server.db, "SELECT kind, outcome, llm_calls, attempts, tool_cost_usd, cost_usd FROM tasks")
    assert (task["kind"], task["outcome"], task["llm_calls"], task["attempts"]) == ("code_review", "completed", 2, 3)
    assert Decimal(task["cost_usd"]) == GPT4O + 2 * SONNET + Decimal("0.005")
