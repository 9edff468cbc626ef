"""The demo's vLLM deployments as the fake model server plays them: each one's Prometheus page, read the way a
scraper reads it (the URLs the demo gives the server, prometheus-client's own parser), counts exactly what it served,
under vLLM's names; and the latency model ranks the deployments the way the hardware, weights, topology and
speculation would. (That their server spans reach the collector under the calls' spans: tests/test_demo.py.)"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from taskcost.demo.endpoints import ENDPOINTS, SELF_HOSTED_MODEL, scrape_targets
from taskcost.demo.fake_llm import FakeLLM
from taskcost.demo.models import SimulatedModels, _timing

SPEED = 200.0  # the fake server's delays divided by this
VLLM_FAMILIES = {  # the names as a scraper of vLLM's /metrics reads them (counters without their _total)
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:request_success": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
}
SPEC_FAMILIES = {
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeLLM, dict[str, list[Any]]]]:
    """Three streamed chats (the same long prompt: the second and third read it from the prefix cache) to each vLLM
    deployment; each deployment's usage chunks, as the client got them."""
    models = SimulatedModels(seed=3, speed=SPEED)
    with FakeLLM(responder=models, pages=models.pages, record=False) as llm:
        usages: dict[str, list[Any]] = {}
        prompt = [{"role": "user", "content": "Summarise the incident report. " + "details " * 1_500}]
        for endpoint in (e for e in ENDPOINTS.values() if e.self_hosted):
            client = openai.OpenAI(base_url=endpoint.base_url(llm.url), api_key="k", max_retries=0)
            for output in ("300", "120", "40"):
                stream = client.chat.completions.create(
                    model=SELF_HOSTED_MODEL,
                    messages=prompt,  # type: ignore[arg-type]
                    max_tokens=2_000,
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_headers={"x-demo-output-tokens": output},
                )
                usages.setdefault(endpoint.name, []).extend(c.usage for c in stream if c.usage is not None)
        assert not llm.hook_errors
        yield llm, usages
    assert models.close()


def _families(url: str) -> dict[str, Any]:
    response = httpx.get(url, timeout=5)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(response.text)}


def _value(family: Any, suffix: str = "_total", **labels: str) -> float:
    [sample] = [s for s in family.samples if s.name == family.name + suffix and labels.items() <= s.labels.items()]
    return float(sample.value)


@pytest.mark.slow
def test_each_deployments_metrics_page_counts_what_it_served_under_vllms_names(
    served: tuple[FakeLLM, dict[str, list[Any]]],
) -> None:
    llm, usages = served
    targets = scrape_targets(llm.url)
    assert {t["cluster_id"] for t in targets} == {e.cluster_id for e in ENDPOINTS.values() if e.self_hosted}
    for target in targets:
        name = target["url"].removeprefix(llm.url + "/").removesuffix("/metrics")
        families = _families(target["url"])
        speculates = ENDPOINTS[name].speculation is not None
        assert {n: f.type for n, f in families.items() if n in VLLM_FAMILIES} == VLLM_FAMILIES, name
        created = {n for n in families if n.endswith("_created")}  # prometheus-client's, as vLLM's page has them
        assert set(families) - set(VLLM_FAMILIES) - created == (SPEC_FAMILIES if speculates else set()), name
        labels = {k for f in families.values() for s in f.samples for k in s.labels}
        assert labels == {"model_name", "engine", "finished_reason", "le"} | ({"position"} if speculates else set())
        assert {s.labels["model_name"] for f in families.values() for s in f.samples} == {SELF_HOSTED_MODEL}

        usage = usages[name]
        assert len(usage) == 3
        assert _value(families["vllm:prompt_tokens"]) == sum(u.prompt_tokens for u in usage)
        assert _value(families["vllm:generation_tokens"]) == sum(u.completion_tokens for u in usage) == 460
        assert _value(families["vllm:prefix_cache_queries"]) == sum(u.prompt_tokens for u in usage)
        cached = sum(u.prompt_tokens_details.cached_tokens for u in usage)
        assert _value(families["vllm:prefix_cache_hits"]) == cached > 0
        assert _value(families["vllm:request_success"], finished_reason="stop") == 3
        assert _value(families["vllm:request_success"], finished_reason="abort") == 0
        for histogram in (n for n, t in VLLM_FAMILIES.items() if t == "histogram"):
            assert _value(families[histogram], "_count") == 3, (name, histogram)
            assert _value(families[histogram], "_bucket", le="+Inf") == 3
        assert _value(families["vllm:num_requests_running"], "") == 0  # all three were answered
        if speculates:
            drafts = _value(families["vllm:spec_decode_num_drafts"])
            drafted = _value(families["vllm:spec_decode_num_draft_tokens"])
            accepted = _value(families["vllm:spec_decode_num_accepted_tokens"])
            per_position = [s.value for s in families["vllm:spec_decode_num_accepted_tokens_per_pos"].samples]
            assert drafted == 3 * drafts and sum(per_position) == accepted
            assert per_position == sorted(per_position, reverse=True)  # a later position is accepted after earlier
            assert drafts + accepted == 460 - 3  # every token after each answer's first came from a step
            assert 0.3 < accepted / drafted < 0.7  # a realistic acceptance, not all or nothing
    assert httpx.get(f"{llm.url}/openai/metrics", timeout=5).status_code == 404  # a paid API has no vLLM page


def _medians(name: str, load: int = 0, draws: int = 400) -> tuple[float, float]:
    """(median TTFT, median decode tokens/s) of 300-token answers to 4,000 uncached prompt tokens, at speed 1."""
    rng = random.Random(name)
    endpoint = ENDPOINTS[name]
    timings = [_timing(endpoint, rng, 4_000, 300, load, json_answer=False) for _ in range(draws)]
    return statistics.median(q + p for q, p, *_ in timings), statistics.median(300 / t[2] for t in timings)


def test_the_latency_model_ranks_the_deployments_as_their_variables_would() -> None:
    ttft = {name: _medians(name)[0] for name in ENDPOINTS}
    decode = {name: _medians(name)[1] for name in ENDPOINTS}
    assert decode["vllm-h100-v060"] > 1.2 * decode["vllm-h100-v060-bf16"]  # fp8 weights: half the bytes per token
    assert decode["vllm-h100-v060-bf16"] > 1.3 * decode["vllm-a100-v060"]  # H100 against A100, both bf16 TP4
    assert ttft["vllm-a100-v060"] > 2 * ttft["vllm-h100-v060-bf16"]  # and prefill, compute-bound
    assert decode["vllm-h100-v060-eagle"] > 1.5 * decode["vllm-h100-v060"]  # speculation at its acceptance
    assert decode["vllm-h100-v060"] < decode["vllm-h100-v070"] < 1.3 * decode["vllm-h100-v060"]  # a bit faster
    assert decode["vllm-a100-v060"] < decode["vllm-a100-v070"]
    assert max(decode.values()) > 3 * min(decode.values())  # the same weights, far apart
    # under load (four requests in flight) the prefill/decode split keeps its time to first token low
    pd, colocated = _medians("vllm-h100-v070-pd", load=4)[0], _medians("vllm-h100-v070", load=4)[0]
    assert colocated > 1.5 * pd
    assert _medians("vllm-h100-v070", load=4)[1] < 0.85 * decode["vllm-h100-v070"]  # batches shared: slower decode
