"""Every taskcost.* attribute the SDK emits must be listed in docs/attributes.md (the contract)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import taskcost_sdk as tc
from taskcost_sdk._internal import names
from taskcost_sdk.testing import CapturedSpans

DOC = Path(__file__).resolve().parent / ".." / ".." / "docs" / "attributes.md"
SRC = Path(tc.__file__).resolve().parent
NAME = re.compile(r"taskcost\.[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*")


@pytest.fixture(scope="module")
def documented() -> set[str]:
    names_in_doc = set(re.findall(r"`(taskcost\.[^`]+)`", DOC.read_text(encoding="utf-8")))
    assert len(names_in_doc) > 10, f"no taskcost.* names found in {DOC}"
    return names_in_doc


def test_name_constants_are_documented(documented: set[str]) -> None:
    constants = {v for v in vars(names).values() if isinstance(v, str) and v.startswith("taskcost.")}
    assert constants, "no taskcost.* constants found"
    assert constants - documented == set()


def test_names_in_source_are_documented(documented: set[str]) -> None:
    in_source = {m for path in SRC.rglob("*.py") for m in NAME.findall(path.read_text(encoding="utf-8"))}
    assert in_source - documented == set()


def test_emitted_names_are_documented(documented: set[str], taskcost_spans: CapturedSpans) -> None:
    taskcost_spans.configure(
        harness_version="sha",
        infra={
            "engine": "vllm",
            "engine_version": "1",
            "quantization": "fp8",
            "gpu_type": "H100-SXM",
            "gpu_count": 8,
            "cluster_id": "c1",
            "deployment": "self_hosted",
        },
    )
    with tc.task("bug_fix") as t:
        with t.llm_call("vllm", "llama", engine="vllm", gpu_count=2, deployment="api", harness_version="x") as c:
            c.set_usage(input_tokens=3, output_tokens=2, cache_read_tokens=1, cache_write_tokens=1, reasoning_tokens=1)
            c.set_response(model="llama", response_id="r", finish_reasons=["stop"])
            c.set_ttft(0.1)
            c.set_error("timeout")
        t.record_llm_call("vllm", "llama", input_tokens=1, output_tokens=1, retry_of=c, quantization="bf16")
        for now in ("2025-01-01T00:00:00Z", "2025-01-01T00:00:05Z"):
            with t.retry(reason="invalid_json"), t.llm_call("vllm", "llama") as again:
                again.set_prompt([{"role": "user", "content": "hi"}], system=f"Now: {now}", tools=[{"name": "x"}])
        with t.tool("search", cost_usd="0.01"):
            pass
    emitted: set[str] = set()
    for span in taskcost_spans.spans():
        emitted.update(span.attributes or {})
        emitted.update(span.resource.attributes)
    taskcost_names = {k for k in emitted if k.startswith("taskcost.")}
    assert len(taskcost_names) >= 22
    assert taskcost_names - documented == set()
