"""The demo's simulated model endpoints (``endpoints``: two paid APIs, and one open model on seven vLLM deployments),
served by one fake server.

Every endpoint is a path prefix on the one ``FakeLLM`` (``/openai/v1``, ``/anthropic``, ``/vllm-h100-v060/v1``, ...).
``SimulatedModels`` is its responder: it answers each request as that endpoint would, from the request itself:

- **tokens**: input tokens are counted from the prompt (about 4 characters a token); output tokens are what the agent
  asked for (``x-demo-output-tokens``: the fleet draws them from lognormal distributions), capped by ``max_tokens``;
- **prompt cache**: each endpoint keeps a prefix cache keyed by chain hashes of the prompt's blocks (tools, system,
  messages), so a stable prompt prefix is read from cache and a prefix that changes on every call (a timestamp in the
  system prompt) never is. OpenAI caches automatically from 1,024 tokens in steps of 128; Anthropic only up to a block
  marked ``cache_control`` (written at the 1.25x rate, read at 0.1x); vLLM's automatic prefix caching in blocks of 16;
- **latency**: time to first token from queueing and prefill of the uncached input, then decoding at the engine's
  speed, with lognormal jitter; a vLLM deployment's speed follows its GPU, weights, topology, speculation, version
  and the requests it has in flight (see ``endpoints``);
- **the engine's own view**: each vLLM deployment (``_vllm.VLLMDeployment``) counts what it served on its
  ``/metrics`` page (``pages``) and, given an OTLP endpoint, sends its server span per request;
- **faults**: ``x-demo-faults`` lists what the attempts of a call meet, by the client's retry count
  (``x-stainless-retry-count``): ``rate_limit`` (429), ``overloaded`` (529 at Anthropic, 503 elsewhere),
  ``server_error`` (500); ``x-demo-answer: invalid`` makes an answer that is not the JSON asked for.

The standard library and prometheus-client; OpenTelemetry's SDK (the demo extra) when engine spans are sent.
``speed`` divides every latency (a quicker demo; 1 is real time).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
import time
import tomllib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from taskcost.demo._vllm import METRICS_CONTENT_TYPE, Drafts, Served, VLLMDeployment
from taskcost.demo.endpoints import ENDPOINTS, SELF_HOSTED_MODEL, Endpoint, Engine, infra_profiles
from taskcost.demo.fake_llm import Fault, Received, Reply, Step

__all__ = [
    "CLUSTER_WINDOW_S",
    "ENDPOINTS",
    "Period",
    "SELF_HOSTED_MODEL",
    "Endpoint",
    "Engine",
    "PromptCache",
    "SimulatedModels",
    "clusters_toml",
    "infra_profiles",
    "read_periods",
    "rent",
    "return_at",
]

CLUSTER_WINDOW_S = 60  # the demo server allocates GPU-hours per minute (the shortest window allowed)
CHARS_PER_TOKEN = 4


Period = tuple[datetime, datetime]
"""When the demo's clusters are rented: [effective_from, effective_to), whole windows."""


def _floor(at: datetime) -> datetime:
    epoch = int(at.timestamp())
    return datetime.fromtimestamp(epoch - epoch % CLUSTER_WINDOW_S, UTC)


def _ceil(at: datetime) -> datetime:
    epoch = math.ceil(at.timestamp())
    return datetime.fromtimestamp(-(-epoch // CLUSTER_WINDOW_S) * CLUSTER_WINDOW_S, UTC)


def rent(periods: Sequence[Period], start: datetime, until: datetime) -> list[Period]:
    """The periods with the clusters rented from ``start`` (its window) until ``until`` (the end of its window); a
    period that reaches that far already is extended (periods of one cluster must not overlap)."""
    lo, hi = _floor(start), _ceil(until)
    out = sorted(periods)
    if out and out[-1][1] >= lo:
        out[-1] = (out[-1][0], max(out[-1][1], hi))
    else:
        out.append((lo, max(hi, lo + timedelta(seconds=CLUSTER_WINDOW_S))))
    return out


def return_at(periods: Sequence[Period], end: datetime) -> list[Period]:
    """The periods with the last one ended at the end of ``end``'s window (the clusters handed back)."""
    out = sorted(periods)
    if out:
        first, _ = out[-1]
        out[-1] = (first, max(_ceil(end), first + timedelta(seconds=CLUSTER_WINDOW_S)))
    return out


def read_periods(text: str) -> list[Period] | None:
    """The rental periods in a clusters file the demo wrote (None: not one of the demo's files)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    if not str(doc.get("version", "")).startswith("demo-"):
        return None
    first = next(e for e in ENDPOINTS.values() if e.self_hosted).cluster_id
    periods = []
    for c in doc.get("clusters", []):
        start, end = c.get("effective_from"), c.get("effective_to")
        if c.get("id") == first and isinstance(start, datetime) and isinstance(end, datetime):
            periods.append((start.astimezone(UTC), end.astimezone(UTC)))
    return periods


def _toml_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _described(e: Endpoint) -> str:
    """``vLLM 0.6.0, fp8, TP2, EAGLE``: what the clusters file's comment says of a deployment."""
    topology = f"prefill/decode split, TP{e.tensor_parallel} each" if e.pd_split else f"TP{e.tensor_parallel}"
    spec = f", {e.speculation.method} ({e.speculation.tokens} draft tokens)" if e.speculation else ""
    return f"vLLM {e.engine_version}, {e.quantization}, {topology}{spec}"


def clusters_toml(periods: Sequence[Period]) -> str:
    """The clusters file of the self-hosted endpoints (docs/pricing.md, "Self-hosted clusters"): each cluster rented
    for the given periods (the demo's runs), so that idle GPU-hours are counted while the demo runs and not between
    its runs."""
    lines = [
        "# Written by `taskcost demo`: the simulated self-hosted clusters (DEMO DATA), one per vLLM deployment, rented",
        "# while the demo runs, at public on-demand rates from taskcost's GPU catalogue (`taskcost prices gpus`).",
        'version = "demo-1"',
    ]
    for e in ENDPOINTS.values():
        if not e.self_hosted:
            continue
        for start, end in sorted(periods):
            lines += [
                "",
                "[[clusters]]",
                f'id = "{e.cluster_id}"  # {_described(e)}',
                f'gpu_type = "{e.gpu_type}"',
                f"gpu_count = {e.gpu_count}",
                f'catalogue = "{e.catalogue}"',
                f"effective_from = {_toml_time(start)}",
                f"effective_to = {_toml_time(end)}",
            ]
    return "\n".join(lines) + "\n"


# -- the prompt, as blocks ------------------------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True, separators=(",", ":"))


def _marked(content: Any) -> bool:
    """A block (or a list of content blocks) that carries Anthropic's ``cache_control``."""
    if isinstance(content, dict):
        return "cache_control" in content
    if isinstance(content, list):
        return any(isinstance(c, dict) and "cache_control" in c for c in content)
    return False


def prompt_blocks(api: str, body: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """The prompt as the cache sees it: (text, marked for caching) per block, in order: tools, system, messages."""
    blocks: list[tuple[str, bool]] = []
    if body.get("tools"):
        blocks.append((_text_of(body["tools"]), _marked(body["tools"])))
    system = body.get("instructions") if api == "responses" else body.get("system")
    if system:
        blocks.append((_text_of(system), _marked(system)))
    messages = body.get("input") if api == "responses" else body.get("messages")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    for m in messages or []:
        content = m.get("content", "") if isinstance(m, dict) else m
        blocks.append((f"{m.get('role', '') if isinstance(m, dict) else ''}:{_text_of(content)}", _marked(content)))
    return blocks


def tokens_of(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class PromptCache:
    """Prefix caches of one fake server: (endpoint, model, chain hash of the first i blocks) -> expiry."""

    def __init__(self, ttl_s: float = 300.0, max_entries: int = 50_000) -> None:
        self._entries: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()
        self.ttl_s = ttl_s
        self.max_entries = max_entries

    def lookup(self, endpoint: Endpoint, model: str, blocks: list[tuple[str, bool]]) -> tuple[int, int, int]:
        """(input tokens, cache read tokens, cache write tokens) of a request; remembers its prefixes."""
        hashes, cumulative = [], []
        h = hashlib.blake2b(digest_size=12)
        total = 0
        for text, _ in blocks:
            h.update(text.encode())
            hashes.append(h.copy().hexdigest())
            total += tokens_of(text) + 4  # a few tokens of framing per block
            cumulative.append(total)
        if not blocks:
            return 1, 0, 0
        now = time.monotonic()
        with self._lock:
            hit = 0  # blocks of the longest cached prefix
            for i in range(len(hashes), 0, -1):
                expiry = self._entries.get((endpoint.name, model, hashes[i - 1]))
                if expiry is not None and expiry > now:
                    hit = i
                    break
            matched = cumulative[hit - 1] if hit else 0
            read = write = 0
            if endpoint.cache == "anthropic":
                marks = [i for i, (_, marked) in enumerate(blocks) if marked]
                upto = marks[-1] + 1 if marks else 0  # blocks up to the last cache_control breakpoint
                if upto and cumulative[upto - 1] >= 1024:
                    read = matched if hit <= upto else cumulative[upto - 1]
                    write = cumulative[upto - 1] - read
                    self._remember(endpoint, model, hashes[:upto], now)
                    if hit:  # a read refreshes the entry's time to live
                        self._remember(endpoint, model, hashes[: min(hit, upto)], now)
            elif endpoint.cache == "openai":
                if total >= 1024:
                    read = matched // 128 * 128 if matched >= 1024 else 0
                    self._remember(endpoint, model, hashes, now)
            else:  # vLLM's automatic prefix caching, blocks of 16 tokens
                read = matched // 16 * 16
                self._remember(endpoint, model, hashes, now)
        return total, min(read, total), write

    def _remember(self, endpoint: Endpoint, model: str, hashes: list[str], now: float) -> None:
        for h in hashes:
            key = (endpoint.name, model, h)
            self._entries[key] = now + self.ttl_s
            self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


# -- answers --------------------------------------------------------------------------------------------------------

_PROSE = (
    "the function returns early when the input is empty so the caller sees none instead of zero and the test "
    "expects an integer we should parse the value once keep the cache warm and log the retry with its reason "
    "latency improved after the change but the error rate rose for large requests consider a guard clause "
    "the report covers costs per task by kind cached tokens failed attempts and the tail of the latency"
)
_WORDS = _PROSE.split(" ")


def filler(rng: random.Random, n_chars: int) -> str:
    """About ``n_chars`` characters of plausible prose."""
    words: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(_WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)


def _answer_text(rng: random.Random, output_tokens: int, want_json: bool, invalid: bool) -> str:
    body = filler(rng, output_tokens * CHARS_PER_TOKEN)
    if not want_json:
        return body
    doc = json.dumps({"verdict": rng.choice(["approve", "request_changes", "done"]), "notes": body[:-40]})
    return f"Sure! Here is the JSON you asked for:\n{doc}" if invalid else doc


def _usage(api: str, total: int, read: int, write: int, output: int) -> dict[str, Any]:
    if api == "messages":  # Anthropic: input exclusive of the cache fields
        return {
            "input_tokens": max(0, total - read - write),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
            "output_tokens": output,
        }
    if api == "responses":
        return {
            "input_tokens": total,
            "input_tokens_details": {"cached_tokens": read},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total + output,
        }
    return {
        "prompt_tokens": total,
        "completion_tokens": output,
        "total_tokens": total + output,
        "prompt_tokens_details": {"cached_tokens": read},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


_FAULTS = {"rate_limit": 429, "server_error": 500}


class SimulatedModels:
    """The fake server's responder for the demo endpoints (see the module docstring), and its ``pages`` (each vLLM
    deployment's ``/metrics``). With ``traces_url`` (an OTLP/HTTP traces endpoint), each vLLM deployment sends its
    server spans there; ``close()`` sends the last ones. Thread-safe."""

    def __init__(self, seed: int = 0, speed: float = 1.0, *, traces_url: str | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.cache = PromptCache()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.answered = 0
        self.faults = 0
        self.deployments = {
            e.name: VLLMDeployment(
                cluster_id=e.cluster_id,
                model=SELF_HOSTED_MODEL,
                version=str(e.engine_version),
                kv_cache_tokens=e.kv_cache_tokens,
                speculation=e.speculation,
                traces_url=traces_url,
                resource={
                    "service.name": "vllm",
                    "service.version": str(e.engine_version),
                    "deployment.environment.name": "demo",
                    "taskcost.cluster.id": e.cluster_id,
                    "taskcost.engine.name": "vllm",
                    "taskcost.engine.version": str(e.engine_version),
                },
            )
            for e in ENDPOINTS.values()
            if e.self_hosted
        }

    @property
    def engine_spans(self) -> int:
        """Server spans the vLLM deployments ended so far."""
        return sum(d.spans for d in self.deployments.values())

    def pages(self, path: str) -> tuple[str, bytes] | None:
        """``FakeLLM(pages=...)``: ``/<deployment>/metrics`` is that vLLM deployment's Prometheus page."""
        parts = path.split("?")[0].strip("/").split("/")
        deployment = self.deployments.get(parts[0]) if len(parts) == 2 and parts[1] == "metrics" else None
        return None if deployment is None else (METRICS_CONTENT_TYPE, deployment.metrics_page())

    def close(self, timeout_s: float = 30.0) -> bool:
        """Send the engine spans still queued; False when some could not be sent in time."""
        closed = [d.close(timeout_s) for d in self.deployments.values()]  # every one, not up to the first failure
        return all(closed)

    def _random(self) -> random.Random:
        with self._lock:
            return random.Random(self._rng.getrandbits(64))

    def __call__(self, request: Received) -> Step:
        api = request.api
        name = request.path.lstrip("/").split("/", 1)[0]
        endpoint = ENDPOINTS.get(name)
        body = request.body if isinstance(request.body, dict) else {}
        if endpoint is None or api is None:
            return Fault(404, retry_after_ms=None)
        rng = self._random()
        headers = request.headers
        faults = [f.strip() for f in headers.get("x-demo-faults", "").split(",") if f.strip()]
        try:
            attempt = int(headers.get("x-stainless-retry-count", "0"))
        except ValueError:
            attempt = 0
        if attempt < len(faults):
            with self._lock:
                self.faults += 1
            kind = faults[attempt]
            status = _FAULTS.get(kind) or (529 if endpoint.client == "anthropic" else 503)
            return Fault(status, retry_after_ms=max(1, round(rng.uniform(200, 900) / self.speed)), delay=0.05)
        model = str(body.get("model", "model"))
        total, read, write = self.cache.lookup(endpoint, model, prompt_blocks(api, body))
        try:
            wanted = int(headers.get("x-demo-output-tokens", "0")) or round(rng.lognormvariate(math.log(250), 0.6))
        except ValueError:
            wanted = 250
        limit = body.get("max_tokens") or body.get("max_output_tokens") or body.get("max_completion_tokens")
        output = max(1, min(wanted, int(limit))) if isinstance(limit, int) and limit > 0 else max(1, wanted)
        finish = "length" if isinstance(limit, int) and 0 < limit < wanted else None
        if finish and api == "messages":
            finish = "max_tokens"
        want_json = headers.get("x-demo-answer") in ("json", "invalid")
        deployment = self.deployments.get(endpoint.name)
        load = deployment.load() if deployment is not None else 0
        timing = _timing(endpoint, rng, total - read, output, load, json_answer=want_json)
        queue, prefill, decode = (t / self.speed for t in timing[:3])
        pieces = max(1, min(48, output // 12))
        text = _answer_text(rng, output, want_json, headers.get("x-demo-answer") == "invalid")
        with self._lock:
            self.answered += 1
        served = None
        if deployment is not None:
            served = deployment.admit(
                Served(
                    deployment,
                    f"chatcmpl-{rng.getrandbits(128):032x}",
                    model,
                    total,
                    read,
                    output,
                    finish or "stop",
                    request.at,
                    queue,
                    prefill,
                    decode,
                    preempted=timing[3],
                    drafts=timing[4],
                    headers={k: v for k, v in headers.items() if k in ("traceparent", "tracestate")},
                    params={
                        "max_tokens": limit if isinstance(limit, int) else None,
                        "temperature": body.get("temperature", 1.0),
                        "top_p": body.get("top_p", 1.0),
                        "n": body.get("n", 1),
                    },
                )
            )
        return Reply(
            text=text,
            model=endpoint.response_models.get(model, model),
            usage=_usage(api, total, read, write, output),
            finish_reason=finish,
            first_token_delay=queue + prefill,
            chunk_delay=decode / pieces,
            chunks=pieces,
            response_id=served.request_id if served is not None else None,
            on_done=served.done if served is not None else None,
        )


def _timing(
    endpoint: Endpoint, rng: random.Random, uncached: int, output: int, load: int, *, json_answer: bool
) -> tuple[float, float, float, bool, Drafts | None]:
    """(queue, prefill, decode seconds at speed 1, preempted, speculation's drafts) of one request, with ``load``
    requests already in flight on its deployment."""
    engine: Engine = endpoint.engine
    slow = rng.lognormvariate(0.0, engine.jitter)
    stall = rng.random() < min(0.6, engine.stall_p * output / 250)
    queue = engine.queue_s * rng.lognormvariate(0.0, 0.5) + engine.queue_per_request_s * load
    prefill = uncached / engine.prefill_tps * slow * (1 + engine.prefill_per_request * load) + engine.kv_transfer_s
    per_token = slow * (1 + engine.decode_per_request * load) / engine.decode_tps
    spec = endpoint.speculation
    drafts = None
    if spec is None:
        decode = output * per_token
    else:  # each step emits 1 + the accepted draft tokens, and costs the draft passes too
        drafts = spec.decode(rng, output, ease=rng.uniform(0.85, 1.05) * (1.15 if json_answer else 1.0))
        decode = (1 + drafts.steps * spec.step_cost) * per_token
    if stall:
        queue += engine.stall_s
        decode *= engine.stall_factor
    return queue, prefill, decode, stall, drafts
