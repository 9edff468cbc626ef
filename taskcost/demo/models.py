"""The demo's simulated model endpoints: two paid APIs and four self-hosted vLLM deployments, one fake server.

Every endpoint is a path prefix on the one ``FakeLLM`` (``/openai/v1``, ``/anthropic``, ``/vllm-h100-v060/v1``, ...).
``SimulatedModels`` is its responder: it answers each request as that endpoint would, from the request itself:

- **tokens**: input tokens are counted from the prompt (about 4 characters a token); output tokens are what the agent
  asked for (``x-demo-output-tokens``: the fleet draws them from lognormal distributions), capped by ``max_tokens``;
- **prompt cache**: each endpoint keeps a prefix cache keyed by chain hashes of the prompt's blocks (tools, system,
  messages), so a stable prompt prefix is read from cache and a prefix that changes on every call (a timestamp in the
  system prompt) never is. OpenAI caches automatically from 1,024 tokens in steps of 128; Anthropic only up to a block
  marked ``cache_control`` (written at the 1.25x rate, read at 0.1x); vLLM's automatic prefix caching in blocks of 16;
- **latency**: time to first token from queueing and prefill of the uncached input, then decoding at the engine's
  speed, with lognormal jitter; vLLM 0.7.0 decodes faster than 0.6.0 (a better median, cheaper per token on GPU-hours)
  but preempts long generations often (a worse p95 and p99, and time to first token);
- **faults**: ``x-demo-faults`` lists what the attempts of a call meet, by the client's retry count
  (``x-stainless-retry-count``): ``rate_limit`` (429), ``overloaded`` (529 at Anthropic, 503 elsewhere),
  ``server_error`` (500); ``x-demo-answer: invalid`` makes an answer that is not the JSON asked for.

Standard library only. ``speed`` divides every latency (a quicker demo; 1 is real time).
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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

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

SELF_HOSTED_MODEL = "llama-3.1-70b-instruct"
CLUSTER_WINDOW_S = 60  # the demo server allocates GPU-hours per minute (the shortest window allowed)
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Engine:
    """How fast an endpoint answers (seconds and tokens per second at speed 1)."""

    queue_s: float  # median wait before prefill starts
    prefill_tps: float  # uncached input tokens per second
    decode_tps: float  # output tokens per second (median)
    jitter: float = 0.25  # lognormal sigma of each request's speed
    # chance of a stall (preemption, recompute) for a 250-token answer, more for longer ones (at most 0.6): the
    # request decodes stall_factor times slower
    stall_p: float = 0.0
    stall_factor: float = 1.0
    stall_s: float = 0.0  # and waits this long more before its first token


@dataclass(frozen=True)
class Endpoint:
    name: str  # the path prefix on the fake server
    client: Literal["openai", "anthropic"]  # the client library that talks to it
    cache: Literal["openai", "anthropic", "vllm"]
    engine: Engine
    response_models: Mapping[str, str] = field(default_factory=dict)  # requested -> answered (dated snapshot)
    # self-hosted: the SDK infra profile (taskcost.* tags) and the clusters file entry
    engine_version: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    quantization: str | None = None
    catalogue: str | None = None  # GPU rate: an offer of taskcost's shipped catalogue (`taskcost prices gpus`)

    @property
    def self_hosted(self) -> bool:
        return self.engine_version is not None

    @property
    def cluster_id(self) -> str:
        return f"demo-{self.name.removeprefix('vllm-')}"

    def base_url(self, fake_url: str) -> str:
        return f"{fake_url}/{self.name}" + ("/v1" if self.client == "openai" else "")

    def profile(self) -> dict[str, Any]:
        """The SDK's infra profile for this endpoint's base URL."""
        if not self.self_hosted:
            return {"deployment": "api"}
        return {
            "provider": "vllm",
            "engine": "vllm",
            "engine_version": self.engine_version,
            "quantization": self.quantization,
            "gpu_type": self.gpu_type,
            "gpu_count": self.gpu_count,
            "cluster_id": self.cluster_id,
            "deployment": "self_hosted",
            "container_image_name": "vllm/vllm-openai",
            "container_image_tags": [f"v{self.engine_version}"],
            "k8s_cluster_name": "demo-gpu",
            "cloud_region": "demo-region-1",
        }


_OPENAI = Engine(queue_s=0.25, prefill_tps=25_000, decode_tps=85, jitter=0.3, stall_p=0.02, stall_factor=2.0)
_ANTHROPIC = Engine(queue_s=0.45, prefill_tps=20_000, decode_tps=65, jitter=0.3, stall_p=0.02, stall_factor=2.0)
# vLLM 0.7.0 against 0.6.0: it decodes two thirds faster (more tokens per GPU-second: cheaper per token on GPU-hours,
# and a better median), but preempts long generations far more often and recomputes them: the p95 and p99 of its
# calls, and of its time to first token, get worse (the regression a canary should catch)
_H100_060 = Engine(queue_s=0.05, prefill_tps=9_000, decode_tps=48, jitter=0.15, stall_p=0.01, stall_factor=1.3)
_H100_070 = Engine(
    queue_s=0.05, prefill_tps=11_000, decode_tps=80, jitter=0.15, stall_p=0.12, stall_factor=2.5, stall_s=2.0
)
_A100_060 = Engine(queue_s=0.08, prefill_tps=5_000, decode_tps=32, jitter=0.15, stall_p=0.01, stall_factor=1.3)
_A100_070 = Engine(
    queue_s=0.08, prefill_tps=6_000, decode_tps=53, jitter=0.15, stall_p=0.12, stall_factor=2.5, stall_s=2.5
)


def _vllm(name: str, engine: Engine, version: str, gpu: str, count: int, quant: str, catalogue: str) -> Endpoint:
    return Endpoint(
        name,
        "openai",
        "vllm",
        engine,
        engine_version=version,
        gpu_type=gpu,
        gpu_count=count,
        quantization=quant,
        catalogue=catalogue,
    )


ENDPOINTS: dict[str, Endpoint] = {
    e.name: e
    for e in (
        Endpoint(
            "openai",
            "openai",
            "openai",
            _OPENAI,
            {"gpt-4o": "gpt-4o-2024-08-06", "gpt-4o-mini": "gpt-4o-mini-2024-07-18"},
        ),
        Endpoint(
            "anthropic",
            "anthropic",
            "anthropic",
            _ANTHROPIC,
            {"claude-sonnet-4-5": "claude-sonnet-4-5-20250929", "claude-haiku-4-5": "claude-haiku-4-5-20251001"},
        ),
        # the 0.7.0 canaries take a third of the traffic on half the GPUs of the 0.6.0 deployments
        _vllm("vllm-h100-v060", _H100_060, "0.6.0", "H100-SXM", 2, "fp8", "lambda-8x-h100-sxm"),
        _vllm("vllm-h100-v070", _H100_070, "0.7.0", "H100-SXM", 1, "fp8", "lambda-8x-h100-sxm"),
        _vllm("vllm-a100-v060", _A100_060, "0.6.0", "A100-80GB", 4, "bf16", "lambda-8x-a100-80gb-sxm"),
        _vllm("vllm-a100-v070", _A100_070, "0.7.0", "A100-80GB", 2, "bf16", "lambda-8x-a100-80gb-sxm"),
    )
}


def infra_profiles(fake_url: str) -> dict[str, dict[str, Any]]:
    """``tc.configure(infra_profiles=...)``: every endpoint's base URL on the fake server and its infra tags."""
    return {e.base_url(fake_url): e.profile() for e in ENDPOINTS.values()}


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
                f'id = "{e.cluster_id}"  # vLLM {e.engine_version}, {e.quantization}',
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
    """The fake server's responder for the demo endpoints (see the module docstring). Thread-safe."""

    def __init__(self, seed: int = 0, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.cache = PromptCache()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.answered = 0
        self.faults = 0

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
        engine = endpoint.engine
        slow = rng.lognormvariate(0.0, engine.jitter)
        stall = rng.random() < min(0.6, engine.stall_p * output / 250)
        ttft = engine.queue_s * rng.lognormvariate(0.0, 0.5) + (total - read) / engine.prefill_tps * slow
        decode = output / engine.decode_tps * slow
        if stall:
            ttft += engine.stall_s
            decode *= engine.stall_factor
        pieces = max(1, min(48, output // 12))
        want_json = headers.get("x-demo-answer") in ("json", "invalid")
        text = _answer_text(rng, output, want_json, headers.get("x-demo-answer") == "invalid")
        with self._lock:
            self.answered += 1
        return Reply(
            text=text,
            model=endpoint.response_models.get(model, model),
            usage=_usage(api, total, read, write, output),
            finish_reason=finish,
            first_token_delay=ttft / self.speed,
            chunk_delay=decode / pieces / self.speed,
            chunks=pieces,
        )
