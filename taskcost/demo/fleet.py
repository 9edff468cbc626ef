"""The simulated fleet: agents as threads, recorded by the real SDK (``tc.instrument()``) on the real ``openai`` and
``anthropic`` clients, which talk over HTTP to the fake model server (``models.SimulatedModels``).

Four task kinds (``code_review``, ``bug_fix``, ``report``, ``triage``), eight agents (more are replicas of these):

| agent | kind | endpoint | prompt prefix |
|---|---|---|---|
| demo-reviewer-gpt-4o | code_review | OpenAI chat, gpt-4o | stable |
| demo-fixer-sonnet | bug_fix | Anthropic, claude-sonnet-4-5, streamed | stable (``cache_control``) |
| demo-reporter-h100 | report | vLLM on H100s, llama-3.1-70b, streamed | broken: a timestamp in the system prompt |
| demo-triager-haiku | triage | Anthropic, claude-haiku-4-5 | broken |
| demo-reviewer-a100 | code_review | vLLM on A100s, llama-3.1-70b, streamed | stable |
| demo-fixer-gpt-4o | bug_fix | OpenAI responses, gpt-4o | broken |
| demo-reporter-sonnet | report | Anthropic, claude-sonnet-4-5 | stable |
| demo-triager-mini | triage | OpenAI chat, gpt-4o-mini | stable |

Self-hosted agents send their tasks in turn to the deployments of their pool (``endpoints.POOLS``): on H100s, vLLM
0.6.0 with fp8 weights, its 0.7.0 canary, 0.6.0 with EAGLE speculation, 0.6.0 with bf16 weights, and a 0.7.0
prefill/decode split; on A100s, 0.6.0 two tasks in three and the 0.7.0 canary one.
Documents, answers and tool times are drawn from lognormal distributions. What goes wrong, by chance: 429s and
5xx the clients retry (each attempt a span), calls that fail after their retries (the task fails), answers that are
not the JSON asked for (the agent retries with ``t.retry(reason="invalid_json")``; still bad twice: failed), fixes
whose tests never pass and reports without sources (abandoned). One task in ten is golden (a fixed input set). The
first task of each of the first eight agents takes one of these turns for sure, so a short run shows them all.

Demo data is marked: ``service.name`` is ``taskcost-demo``, the resource says ``deployment.environment.name=demo``,
task ids start with ``demo-``, agent names too, and the self-hosted cluster ids are ``demo-*``.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anthropic
import openai

import taskcost_sdk as tc
from taskcost.demo.endpoints import ENDPOINTS, POOLS, SELF_HOSTED_MODEL, Endpoint, infra_profiles
from taskcost.demo.models import filler

__all__ = [
    "DEMO_RESOURCE",
    "ROSTER",
    "SERVICE_NAME",
    "AgentSpec",
    "Fleet",
    "FleetStats",
    "configure_sdk",
]

SERVICE_NAME = "taskcost-demo"
DEMO_RESOURCE = {"deployment.environment.name": "demo"}
HARNESS_VERSION = "demo-harness-1"

API = Literal["chat", "responses", "messages"]


@dataclass(frozen=True)
class AgentSpec:
    name: str
    kind: str
    route: str  # an endpoint name, or "h100" / "a100": a pool of self-hosted deployments (endpoints.POOLS)
    model: str
    stable_prefix: bool
    stream: bool = False
    api: API = "chat"
    version: str = "v3"


ROSTER: tuple[AgentSpec, ...] = (
    AgentSpec("demo-reviewer-gpt-4o", "code_review", "openai", "gpt-4o", True),
    AgentSpec("demo-fixer-sonnet", "bug_fix", "anthropic", "claude-sonnet-4-5", True, stream=True, api="messages"),
    AgentSpec("demo-reporter-h100", "report", "h100", SELF_HOSTED_MODEL, False, stream=True),
    AgentSpec("demo-triager-haiku", "triage", "anthropic", "claude-haiku-4-5", False, api="messages", version="v1"),
    AgentSpec("demo-reviewer-a100", "code_review", "a100", SELF_HOSTED_MODEL, True, stream=True),
    AgentSpec("demo-fixer-gpt-4o", "bug_fix", "openai", "gpt-4o", False, api="responses", version="v2"),
    AgentSpec("demo-reporter-sonnet", "report", "anthropic", "claude-sonnet-4-5", True, api="messages"),
    AgentSpec("demo-triager-mini", "triage", "openai", "gpt-4o-mini", True),
)

# the first task of agent i takes turn TOUR[i] (of the first eight), so that a short run has every case
TOUR = ("rate_limit", "invalid_json", "fail", "abandon", "golden", "overloaded", "plain", "golden")

GOLDEN_SET = 5  # golden inputs per kind
_THINK_S = {"code_review": 2.0, "bug_fix": 2.0, "report": 2.0, "triage": 8.0}  # mean wait for the next task

_SYSTEM = {
    "code_review": "You are a senior engineer reviewing pull requests. Be specific, cite lines, rank by severity.",
    "bug_fix": "You fix bugs. Diagnose first, then write a minimal patch that makes the failing tests pass.",
    "report": "You write research reports from sources. Summarise faithfully and cite every claim.",
    "triage": "You triage support tickets. Answer with a JSON object: label, priority, team.",
}
_SYSTEM_TOKENS = {"code_review": 1_800, "bug_fix": 2_600, "report": 1_300, "triage": 1_100}
_FIX_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} in the repository checkout. " + filler(random.Random(name), 400),
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
    for name in ("read_file", "run_tests", "search_code")
]


class _GiveUp(Exception):
    """The agent abandons its task."""


class _BadOutput(Exception):
    """The model never gave the JSON asked for: the task failed."""


@dataclass
class FleetStats:
    """What the fleet did so far (thread-safe counters)."""

    started: int = 0
    completed: int = 0
    failed: int = 0
    abandoned: int = 0
    golden: int = 0
    calls: int = 0  # logical LLM calls the agents made (the clients' own retries not counted)
    agent_retries: int = 0
    errors: list[str] = field(default_factory=list)  # unexpected exceptions (bugs), by agent
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.abandoned


def configure_sdk(collector_url: str, fake_url: str) -> None:
    """Set up the SDK in this process for the demo: spans to ``collector_url``, the demo's service name and resource,
    the endpoints' infra profiles; hooks the openai and anthropic clients. Exporter settings and infra tags from the
    environment (``OTEL_*``, ``TASKCOST_*`` of the SDK) are cleared first, so nothing from outside leaks into the
    demo's data; the export queue is made large enough that no span is dropped."""
    for name in list(os.environ):
        if name.startswith("OTEL_") or (name.startswith("TASKCOST_") and name != "TASKCOST_SDK_RAISE_INTERNAL"):
            del os.environ[name]
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = "200000"
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "1000"
    tc.configure(
        endpoint=collector_url,
        service_name=SERVICE_NAME,
        harness_version=HARNESS_VERSION,
        resource_attributes=DEMO_RESOURCE,
        infra_profiles=infra_profiles(fake_url),
    )
    tc.instrument()


class _Corpus:
    """Text to cut documents from: one long string, sliced at random offsets (cheap, and every slice differs)."""

    def __init__(self) -> None:
        self.text = filler(random.Random(7), 600_000)

    def cut(self, rng: random.Random, n_chars: int) -> str:
        n_chars = max(40, min(n_chars, len(self.text) - 1))
        start = rng.randrange(0, len(self.text) - n_chars)
        return self.text[start : start + n_chars]


_CORPUS = _Corpus()


def _lognormal(rng: random.Random, median: float, sigma: float, cap: float | None = None) -> int:
    value = rng.lognormvariate(math.log(median), sigma)
    return max(1, round(min(value, cap) if cap else value))


class Fleet:
    """``agents`` agent threads against the fake server at ``fake_url``; ``start()``, then ``stop()`` (each agent
    finishes its task) or ``abandon()`` (each abandons its task at its next step), then ``join()``."""

    def __init__(self, fake_url: str, *, agents: int = 16, seed: int = 0, speed: float = 1.0) -> None:
        if agents < 1:
            raise ValueError("agents must be at least 1")
        self.fake_url = fake_url
        self.speed = speed
        self.stats = FleetStats()
        self.stopping = threading.Event()
        self.abandoning = threading.Event()
        self.run_id = datetime.now(UTC).strftime("%y%m%d%H%M%S")
        master = random.Random(seed)
        self._agents = [
            _Agent(self, i, ROSTER[i % len(ROSTER)], random.Random(master.getrandbits(64))) for i in range(agents)
        ]
        self._threads = [
            threading.Thread(target=a.run, name=f"demo-agent-{a.index}", daemon=True) for a in self._agents
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()

    def abandon(self) -> None:
        self.abandoning.set()
        self.stopping.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the agents; True when all have ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def sleep(self, seconds: float) -> None:
        """A simulated wait (a tool, a CI run), divided by the speed; cut short when the agents must abandon."""
        self.abandoning.wait(seconds / self.speed)


class _Agent:
    def __init__(self, fleet: Fleet, index: int, spec: AgentSpec, rng: random.Random) -> None:
        self.fleet = fleet
        self.index = index
        self.spec = spec
        self.rng = rng
        self.tasks = 0
        self._clients: dict[str, Any] = {}
        self.system = (
            _SYSTEM[spec.kind] + "\n\nGuidelines:\n" + filler(random.Random(spec.name), _SYSTEM_TOKENS[spec.kind] * 4)
        )

    def endpoint(self, n: int) -> Endpoint:
        if self.spec.route in ENDPOINTS:
            return ENDPOINTS[self.spec.route]
        pool = POOLS[self.spec.route]  # one task each, in turn; replicas of an agent start further along
        return ENDPOINTS[pool[(n + self.index // len(ROSTER)) % len(pool)]]

    def client(self, endpoint: Endpoint) -> Any:
        if endpoint.name not in self._clients:
            make: Callable[..., Any] = openai.OpenAI if endpoint.client == "openai" else anthropic.Anthropic
            self._clients[endpoint.name] = make(
                base_url=endpoint.base_url(self.fleet.fake_url), api_key="demo-key", max_retries=2, timeout=300.0
            )
        return self._clients[endpoint.name]

    def run(self) -> None:
        fleet = self.fleet
        fleet.sleep(self.rng.uniform(0, 1.5))  # the agents do not all start at once
        while not fleet.stopping.is_set():
            try:
                self.one_task()
            except Exception as exc:  # a bug of the demo, not a simulated failure: report it, stop this agent
                fleet.stats.error(f"{self.spec.name}#{self.index}: {exc!r}")
                return
            if fleet.stopping.wait(self.rng.expovariate(1.0) * _THINK_S[self.spec.kind] / fleet.speed):
                return

    def one_task(self) -> None:
        n, self.tasks = self.tasks, self.tasks + 1
        turn = TOUR[self.index] if n == 0 and self.index < len(TOUR) else None
        rng = self.rng
        golden_index = rng.randrange(GOLDEN_SET) if turn == "golden" or (turn is None and rng.random() < 0.1) else None
        spec = self.spec
        ctx = _Ctx(self, self.endpoint(n), turn, golden_index)
        stats = self.fleet.stats
        stats.add(started=1, golden=int(golden_index is not None))
        outcome: tc.Outcome = "failed"
        try:
            with tc.task(
                spec.kind,
                f"demo-{self.fleet.run_id}-{self.index:02d}-{n:05d}",
                agent_name=spec.name,
                agent_version=spec.version,
                golden=golden_index is not None,
                conversation_id=f"demo-golden-{spec.kind}-{golden_index}" if golden_index is not None else None,
            ) as t:
                ctx.task = t
                try:
                    outcome = _FLOWS[spec.kind](ctx)
                except _GiveUp:
                    outcome = "abandoned"
                except _BadOutput:
                    outcome = "failed"
                t.set_outcome(outcome)
        except (openai.APIError, anthropic.APIError):
            outcome = "failed"  # the call failed after the client's retries: the SDK recorded the task as failed
        stats.add(**{outcome: 1})


class _Ctx:
    """One task of one agent: its endpoint, its turn (forced case), its random draws, its calls."""

    def __init__(self, agent: _Agent, endpoint: Endpoint, turn: str | None, golden: int | None) -> None:
        self.agent = agent
        self.endpoint = endpoint
        self.turn = turn
        self.calls = 0
        self.json_calls = 0
        self.task: Any = None
        # a golden task reads the same documents every time
        self.docs = random.Random(f"{agent.spec.kind}-{golden}") if golden is not None else agent.rng
        self.rng = agent.rng

    # -- what happens ------------------------------------------------------------------------------------------------
    def check(self) -> None:
        if self.agent.fleet.abandoning.is_set():
            raise _GiveUp

    def give_up(self, p: float) -> bool:
        return self.turn == "abandon" or (self.turn is None and self.rng.random() < p)

    def _faults(self) -> list[str]:
        first = self.calls == 0
        if first and self.turn == "rate_limit":
            return ["rate_limit"]
        if first and self.turn == "overloaded":
            return ["overloaded", "rate_limit"]
        if first and self.turn == "fail":
            return ["server_error"] * 3  # the clients try three times: the call fails
        if self.turn is not None and first:
            return []
        r = self.rng.random()
        api = not self.endpoint.self_hosted
        if r < (0.05 if api else 0.005):
            return ["rate_limit"] * (2 if self.rng.random() < 0.3 else 1)
        r -= 0.05 if api else 0.005
        if r < 0.015:
            return ["overloaded"]
        r -= 0.015
        if r < 0.01:
            return ["server_error"] * 3
        return []

    def _invalid(self, retry: int) -> bool:
        if retry == 0:
            return (self.turn == "invalid_json" and self.json_calls == 0) or self.rng.random() < 0.1
        return self.rng.random() < 0.25

    # -- documents and tools -----------------------------------------------------------------------------------------
    def doc(self, median_tokens: float, sigma: float = 0.8, cap_tokens: float = 60_000) -> str:
        return _CORPUS.cut(self.docs, _lognormal(self.docs, median_tokens, sigma, cap_tokens) * 4)

    def tool(self, name: str, median_s: float, cost_usd: str | None = None) -> None:
        self.check()
        with self.task.tool(name, cost_usd=cost_usd):
            self.agent.fleet.sleep(self.rng.lognormvariate(math.log(median_s), 0.5))

    # -- the model ---------------------------------------------------------------------------------------------------
    def ask(
        self, messages: list[dict[str, str]], out: tuple[float, float], *, as_json: bool = False, tools: bool = False
    ) -> str:
        """One LLM call (the clients retry 429/5xx on their own); ``as_json``: retried while the answer is not
        JSON, twice at most (then the task failed)."""
        self.check()
        headers = {"x-demo-output-tokens": str(_lognormal(self.rng, out[0], out[1], 8_000))}
        faults = self._faults()
        if faults:
            headers["x-demo-faults"] = ",".join(faults)
        self.calls += 1
        self.agent.fleet.stats.add(calls=1)
        if not as_json:
            return self._call(messages, headers, tools)
        headers["x-demo-answer"] = "invalid" if self._invalid(0) else "json"
        self.json_calls += 1
        text = self._call(messages, headers, tools)
        for retry in (1, 2):
            if _is_json(text):
                return text
            self.check()
            self.agent.fleet.stats.add(agent_retries=1)
            headers = {**headers, "x-demo-answer": "invalid" if self._invalid(retry) else "json"}
            headers.pop("x-demo-faults", None)
            with self.task.retry(reason="invalid_json"):
                text = self._call(messages, headers, tools)
        if not _is_json(text):
            raise _BadOutput
        return text

    def _system(self) -> str:
        if self.agent.spec.stable_prefix:
            return self.agent.system
        # the cache breaker: a timestamp at the front of the system prompt changes the whole prefix on every call
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return f"Current time: {now}. " + self.agent.system

    def _call(self, messages: list[dict[str, str]], headers: dict[str, str], tools: bool) -> str:
        spec, client = self.agent.spec, self.agent.client(self.endpoint)
        system = self._system()
        if spec.api == "messages":
            kwargs: dict[str, Any] = {
                "model": spec.model,
                "max_tokens": 8_192,
                "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                "messages": messages,
                "extra_headers": headers,
            }
            if tools:
                kwargs["tools"] = [
                    {
                        "name": t["function"]["name"],
                        "description": t["function"]["description"],
                        "input_schema": t["function"]["parameters"],
                    }
                    for t in _FIX_TOOLS
                ]
            if spec.stream:
                with client.messages.stream(**kwargs) as stream:
                    return str(stream.get_final_text())
            reply = client.messages.create(**kwargs)
            return "".join(getattr(b, "text", "") for b in reply.content)
        if spec.api == "responses":
            extra = {"tools": [{"type": "function", **t["function"]} for t in _FIX_TOOLS]} if tools else {}
            reply = client.responses.create(
                model=spec.model,
                instructions=system,
                input=messages,
                max_output_tokens=8_192,
                extra_headers=headers,
                **extra,
            )
            return str(reply.output_text)
        chat = [{"role": "system", "content": system}, *messages]
        extra = {"tools": _FIX_TOOLS} if tools else {}
        if spec.stream:
            stream = client.chat.completions.create(
                model=spec.model, messages=chat, max_tokens=8_192, stream=True, extra_headers=headers, **extra
            )
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        reply = client.chat.completions.create(
            model=spec.model, messages=chat, max_tokens=8_192, extra_headers=headers, **extra
        )
        return str(reply.choices[0].message.content or "")


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


# -- the task kinds -------------------------------------------------------------------------------------------------


def _code_review(c: _Ctx) -> tc.Outcome:
    messages = [_user("Review this diff and list the problems you find:\n" + c.doc(2_500, 0.9))]
    review = c.ask(messages, (350, 0.5))
    if c.give_up(0.05):  # the pull request was closed meanwhile
        raise _GiveUp
    if c.rng.random() < 0.5:
        c.tool("fetch_file", 0.1)
        messages += [_assistant(review), _user("The file the diff touches:\n" + c.doc(1_500, 0.7))]
        review = c.ask(messages, (250, 0.5))
    messages += [_assistant(review), _user('Give your verdict as JSON: {"verdict": ..., "notes": ...}')]
    c.ask(messages, (120, 0.4), as_json=True)
    return "completed"


def _bug_fix(c: _Ctx) -> tc.Outcome:
    messages = [_user(f"Issue:\n{c.doc(400, 0.6)}\n\nCode:\n{c.doc(3_000, 0.8)}\n\nFind the cause.")]
    messages.append(_assistant(c.ask(messages, (300, 0.5), tools=True)))
    forced = c.turn == "abandon"
    for attempt in range(2 if forced else 4):
        ask = "Write the patch." if attempt == 0 else "The tests failed:\n" + c.doc(250, 0.5) + "\nFix the patch."
        messages.append(_user(ask))
        messages.append(_assistant(c.ask(messages, (600, 0.6), tools=True)))
        c.tool("run_tests", 2.0, cost_usd="0.0020")  # CI minutes
        if not forced and c.rng.random() < 0.5:
            return "completed"
    return "abandoned"  # the tests never passed: the agent gave up


def _report(c: _Ctx) -> tc.Outcome:
    sources = []
    for _ in range(c.rng.randint(2, 4)):
        c.tool("web_search", 0.6, cost_usd="0.005")
        sources.append(c.doc(2_000, 0.8))
    if c.give_up(0.08):  # nothing usable found
        raise _GiveUp
    notes = [c.ask([_user("Summarise this source for a report:\n" + s)], (220, 0.5)) for s in sources]
    messages = [_user("Write the report from these notes:\n\n" + "\n\n".join(notes))]
    report = c.ask(messages, (1_100, 0.4))
    messages += [_assistant(report), _user("Give the report's title and tags as JSON.")]
    c.ask(messages, (80, 0.4), as_json=True)
    return "completed"


def _triage(c: _Ctx) -> tc.Outcome:
    if c.give_up(0.04):  # a duplicate ticket, closed before the agent got to it
        c.tool("find_duplicates", 0.2)
        raise _GiveUp
    ticket = c.doc(300, 0.7)
    label = c.ask([_user("Label this ticket:\n" + ticket)], (40, 0.3), as_json=True)
    if c.rng.random() < 0.2:  # low confidence: look at the customer's history and ask again
        c.tool("crm_lookup", 0.3)
        messages = [_user("Label this ticket:\n" + ticket), _assistant(label)]
        messages.append(_user("The customer's recent tickets:\n" + c.doc(800, 0.6) + "\nLabel it again."))
        c.ask(messages, (40, 0.3), as_json=True)
    return "completed"


_FLOWS: dict[str, Callable[[_Ctx], tc.Outcome]] = {
    "code_review": _code_review,
    "bug_fix": _bug_fix,
    "report": _report,
    "triage": _triage,
}
