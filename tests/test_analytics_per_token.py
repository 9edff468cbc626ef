"""``taskcost per-token``: blended $/1M tokens against $/completed task, ranked both ways, on a hand-built fleet
whose every figure is worked out below from the builder's round rates (tests/builders/analytics.py).

One call shape everywhere (9,000 input + 1,000 output tokens = 10,000 tokens):

- cheap-1:  9,000 x $1/M  + 1,000 x $2/M  = $0.009 + $0.002 = $0.011  -> $1.10 per 1M tokens
- claude-x: 9,000 x $3/M  + 1,000 x $15/M = $0.027 + $0.015 = $0.042  -> $4.20 per 1M tokens
- pricey-1: 9,000 x $10/M + 1,000 x $20/M = $0.090 + $0.020 = $0.110  -> $11.00 per 1M tokens

Project ``default``, kind ``review`` unless said (minute = the task's start after T0):

- c1 (0, completed): cheap-1, call a tried 4 times (3 errors), call b twice (1 error): 6 attempts = $0.066
- c2 (10, failed): cheap-1, 6 attempts (errors) = $0.066
- c3 (20, failed): cheap-1, 4 attempts = $0.044
- r1 (30, still running): cheap-1, 1 attempt = $0.011
- p1 (40, completed): pricey-1, 1 call ($0.11) + a tool at $0.01; api, engine vllm
- p2 (50, completed): pricey-1, 1 call ($0.11); api, engine vllm
- x1 (60, completed): claude-x, 2 calls ($0.084) + 1 call without usage (unpriced); api, engine sglang
- x2 (70, failed): claude-x, 1 call ($0.042); api, engine sglang
- m1 (80, completed): cheap-1 ($0.011) + pricey-1 ($0.11): mixed
- u1 (90, completed): mystery-9 (no price), 5,000 input + 500 output tokens
- k1 (100, completed, kind triage): claude-x, 1 call ($0.042); api, engine sglang

Project ``other``: o1 (0, completed): pricey-1, 1 call ($0.11).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import pytest

from taskcost.analytics._filters import Filters
from taskcost.analytics._per_token import QUESTION, PerTokenAnswer, PerTokenOptions, per_token
from taskcost.store import DuckDBStore
from tests.builders.analytics import T0, Fleet

SHAPE: dict[str, Any] = {"input_tokens": 9000, "output_tokens": 1000}
API: dict[str, Any] = {"deployment": "api"}
DEFAULT = Filters(project="default")


def _fleet() -> Fleet:
    f = Fleet()
    c1 = f.task("c1", minute=0)
    for attempt in (1, 2, 3, 4):
        c1.call("cheap-1", call_id="c1-a", attempt=attempt, status="error" if attempt < 4 else "ok", **SHAPE)
    c1.call("cheap-1", call_id="c1-b", attempt=1, status="error", **SHAPE)
    c1.call("cheap-1", call_id="c1-b", attempt=2, **SHAPE)
    c2 = f.task("c2", outcome="failed", minute=10)
    for attempt in range(1, 7):
        c2.call("cheap-1", call_id="c2-a", attempt=attempt, status="error", **SHAPE)
    c3 = f.task("c3", outcome="failed", minute=20)
    for attempt in range(1, 5):
        c3.call("cheap-1", call_id="c3-a", attempt=attempt, status="error", **SHAPE)
    f.task("r1", outcome=None, minute=30).call("cheap-1", **SHAPE)
    f.task("p1", minute=40).call("pricey-1", engine="vllm", **API, **SHAPE).tool(cost=Decimal("0.01"))
    f.task("p2", minute=50).call("pricey-1", engine="vllm", **API, **SHAPE)
    x1 = f.task("x1", minute=60)
    x1.call("claude-x", engine="sglang", **API, **SHAPE).call("claude-x", engine="sglang", **API, **SHAPE)
    x1.call("claude-x", input_tokens=None, output_tokens=None, engine="sglang", **API)  # type: ignore[arg-type]
    f.task("x2", outcome="failed", minute=70).call("claude-x", engine="sglang", **API, **SHAPE)
    f.task("m1", minute=80).call("cheap-1", **SHAPE).call("pricey-1", **SHAPE)
    f.task("u1", minute=90).call("mystery-9", input_tokens=5000, output_tokens=500)
    f.task("k1", kind="triage", minute=100).call("claude-x", engine="sglang", **API, **SHAPE)
    f.task("o1", project="other", minute=0).call("pricey-1", **SHAPE)
    return f


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DuckDBStore]:
    path: Path = tmp_path_factory.mktemp("per_token") / "a.duckdb"
    with DuckDBStore.open(path) as s:
        _fleet().write(s)
        yield s


def _rows(df: Any, key: str) -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in df.iter_rows(named=True)}


def _ask(store: DuckDBStore, filters: Filters = DEFAULT, **options: Any) -> PerTokenAnswer:
    return per_token(store, filters, PerTokenOptions(**options))


_RANKING = (
    "per_token_rank",
    "per_task_rank",
    "rank_change",
    "per_mtok_usd",
    "unpriced_attempts",
    "per_completed_task_usd",
    "task_unpriced_attempts",
    "success_rate",
    "attempts_per_completed_task",
    "completed_tasks",
    "unranked_because",
)


def _ranking(answer: PerTokenAnswer) -> list[tuple[Any, ...]]:
    return [(r[answer.by], *(r[c] for c in _RANKING)) for r in answer.ranking.iter_rows(named=True)]


def test_the_cheap_per_token_model_is_the_expensive_one_per_completed_task(store: DuckDBStore) -> None:
    a = _ask(store)
    assert _ranking(a) == [
        # cheap-1: 18 attempts (c1 6 + c2 6 + c3 4 + r1 1 + m1 1) x $0.011 = $0.198 over 180,000 tokens = $1.10/M;
        #   its own finished tasks c1, c2, c3 spent 16 x $0.011 = $0.176 for 1 completed; 16 attempts / 1; 1 of 3
        ("cheap-1", 1, 3, 2, Decimal("1.1"), 0, Decimal("0.176"), 0, 1 / 3, 16.0, 1, None),
        # claude-x: 4 priced x $0.042 = $0.168 over 40,000 tokens = $4.20/M (+1 unpriced attempt);
        #   x1 $0.084 + x2 $0.042 + k1 $0.042 = $0.168 for 2 completed = $0.084; 5 attempts / 2 = 2.5; 2 of 3
        ("claude-x", 2, 1, -1, Decimal("4.2"), 1, Decimal("0.084"), 1, 2 / 3, 2.5, 2, None),
        # pricey-1: 3 x $0.11 = $0.33 over 30,000 tokens = $11/M; p1 $0.11 + $0.01 tool + p2 $0.11 = $0.23 / 2
        ("pricey-1", 3, 2, -1, Decimal("11"), 0, Decimal("0.115"), 0, 1.0, 1.0, 2, None),
        # listed, not ranked: no price at all (its spend is unknown, not $0), and the mixed task ($0.121, 2 attempts)
        ("mystery-9", None, None, None, None, 1, None, 1, 1.0, 1.0, 1, "no priced calls"),
        ("mixed", None, None, None, None, 0, Decimal("0.121"), 0, 1.0, 2.0, 1, "tasks using several models"),
    ]
    s = a.summary()
    assert s["headline"] == (
        "cheap-1 is the cheapest per token (rank 1) but the most expensive per completed task (rank 3); "
        "claude-x is rank 2 of 3 per token but the cheapest per completed task (rank 1); "
        "pricey-1 is the most expensive per token (rank 3) but rank 2 of 3 per completed task"
    )
    assert [(f["model"], f["per_token_rank"], f["per_task_rank"], f["rank_change"]) for f in s["flips"]] == [
        ("cheap-1", 1, 3, 2),
        ("claude-x", 2, 1, -1),
        ("pricey-1", 3, 2, -1),
    ]
    assert (s["ranked_groups"], s["cheapest_per_token"], s["cheapest_per_completed_task"], s["rank_changes"]) == (
        3,
        "cheap-1",
        "claude-x",
        3,
    )
    # 27 attempts (18 + 5 + 3 + 1), 2 unpriced (x1's, u1's); finished: 3 + 3 + 2 + 1 + 1 = 10, completed 1+2+2+1+1
    assert {k: s[k] for k in ("call_attempts", "unpriced_attempts", "finished_tasks", "completed_tasks")} == {
        "call_attempts": 27,
        "unpriced_attempts": 2,
        "finished_tasks": 10,
        "completed_tasks": 7,
    }
    assert (s["running_tasks"], s["mixed_tasks"], s["task_unpriced_attempts"]) == (1, 1, 2)


def test_the_detail_counts_tokens_spend_and_coverage(store: DuckDBStore) -> None:
    d = _rows(_ask(store).detail, "model")
    cols = (
        "call_attempts",
        "unpriced_attempts",
        "priced_input_tokens",
        "priced_output_tokens",
        "unpriced_input_tokens",
        "unpriced_output_tokens",
        "call_spend_usd",
        "tasks",
        "running_tasks",
        "finished_tasks",
        "completed_tasks",
        "task_spend_usd",
        "tool_spend_usd",
        "task_attempts",
        "task_unpriced_attempts",
    )
    got = {m: tuple(r[c] for c in cols) for m, r in d.items()}
    assert got == {
        # 18 x 9,000 = 162,000 in, 18 x 1,000 out; tasks c1, c2, c3 and r1 (running: not in the task figures)
        "cheap-1": (18, 0, 162_000, 18_000, 0, 0, Decimal("0.198"), 4, 1, 3, 1, Decimal("0.176"), None, 16, 0),
        # the call without usage has no tokens to count; it is one of x1's 3 attempts
        # its task spend is over the fully priced tasks only: x2 + k1 = $0.084 (x1 has the unpriced attempt)
        "claude-x": (5, 1, 36_000, 4_000, 0, 0, Decimal("0.168"), 3, 0, 3, 2, Decimal("0.084"), None, 5, 1),
        "pricey-1": (3, 0, 27_000, 3_000, 0, 0, Decimal("0.33"), 2, 0, 2, 2, Decimal("0.23"), Decimal("0.01"), 2, 0),
        "mystery-9": (1, 1, 0, 0, 5_000, 500, None, 1, 0, 1, 1, None, None, 1, 1),
        "mixed": (0, 0, 0, 0, 0, 0, None, 1, 0, 1, 1, Decimal("0.121"), None, 2, 0),
    }


def test_the_notes_say_what_is_left_out(store: DuckDBStore) -> None:
    notes = _ask(store).notes
    assert any(n.startswith("2 of 27 call attempts are unpriced") for n in notes)
    assert any(n.startswith("2 call attempts of finished tasks are unpriced") for n in notes)
    assert any(n.startswith("1 task(s) still running") for n in notes)
    assert any(n.startswith("1 tasks used more than one model: shown as 'mixed'") for n in notes)


def test_the_interval_of_cost_per_completed_task(store: DuckDBStore) -> None:
    r = _rows(_ask(store).ranking, "model")
    d = _rows(_ask(store).detail, "model")
    # pricey-1's finished tasks: $0.12 and $0.11, both completed: any resample's ratio is between the two
    p = r["pricey-1"]
    assert d["pricey-1"]["ci_method"] == "bootstrap"
    assert Decimal("0.11") <= p["per_completed_task_low_usd"] < p["per_completed_task_high_usd"] <= Decimal("0.12")
    # cheap-1: tasks c1 ($0.066, completed), c2 ($0.066) and c3 ($0.044), both failed. (2/3)^3 = 8/27 = 30% of the
    # resamples draw no completed task: no finite ratio, so the upper end is unbounded (none, never $0). The lowest
    # ratio is c1 drawn 3 times, 3 x $0.066 / 3 = $0.066, with probability 1/27 = 3.7% > 2.5%: the lower end
    c = r["cheap-1"]
    assert (c["per_completed_task_low_usd"], c["per_completed_task_high_usd"]) == (Decimal("0.066"), None)
    assert d["cheap-1"]["ci_method"] == "bootstrap"
    # Wilson 95% for 1 of 3: centre (1/3 + z^2/6) / (1 + z^2/3) = 0.42692, half-width 0.36542 (z = 1.95996)
    assert d["cheap-1"]["success_rate_low"] == pytest.approx(0.06149, abs=1e-4)
    assert d["cheap-1"]["success_rate_high"] == pytest.approx(0.79234, abs=1e-4)
    # one finished task: no interval
    other = _rows(_ask(store, Filters(project="other")).ranking, "model")["pricey-1"]
    assert (other["per_completed_task_low_usd"], other["per_completed_task_high_usd"]) == (None, None)


def test_kind_narrows(store: DuckDBStore) -> None:
    # without k1 (triage): claude-x's tasks are x1 (completed, with an unpriced attempt: left out, not $0) and x2
    # (failed): no fully priced completed task, so no $/completed task and no rank; per token its 3 priced calls
    # still make $4.20/M
    a = _ask(store, DEFAULT.narrowed(kind="review"))
    r = _rows(a.ranking, "model")
    assert (r["claude-x"]["per_completed_task_usd"], r["claude-x"]["per_mtok_usd"]) == (None, Decimal("4.2"))
    assert r["claude-x"]["unranked_because"] == "no fully priced completed task"
    assert (r["claude-x"]["unpriced_tasks"], a.summary()["unpriced_tasks"]) == (1, 2)  # x1; and u1 (mystery-9)
    assert _rows(a.detail, "model")["claude-x"]["call_attempts"] == 4
    assert [(m, r[m]["per_token_rank"], r[m]["per_task_rank"]) for m in ("cheap-1", "claude-x", "pricey-1")] == [
        ("cheap-1", 1, 2),
        ("claude-x", None, None),
        ("pricey-1", 2, 1),
    ]
    assert a.summary()["headline"] == (
        "cheap-1 is the cheapest per token (rank 1) but the most expensive per completed task (rank 2); "
        "pricey-1 is the most expensive per token (rank 2) but the cheapest per completed task (rank 1)"
    )
    assert _rows(_ask(store, DEFAULT.narrowed(kind="triage")).ranking, "model").keys() == {"claude-x"}


def test_since_and_until_narrow(store: DuckDBStore) -> None:
    # [40 min, 75 min): tasks p1, p2, x1, x2 and their calls only
    a = _ask(store, DEFAULT.narrowed(since=T0 + timedelta(minutes=35), until=T0 + timedelta(minutes=75)))
    assert _ranking(a) == [
        # pricey-1: p1 + p2 = $0.22 / 20,000 tokens = $11/M; ($0.12 + $0.11) / 2 = $0.115
        ("pricey-1", 1, 1, 0, Decimal("11"), 0, Decimal("0.115"), 0, 1.0, 1.0, 2, None),
        # claude-x: x1 + x2 = 3 priced calls, $0.126 / 30,000 tokens = $4.20/M; its one completed task (x1) has an
        # unpriced attempt: no fully priced completed task, so no $/completed task (not $0) and no rank; 4 attempts
        ("claude-x", None, None, None, Decimal("4.2"), 1, None, 1, 0.5, 4.0, 1, "no fully priced completed task"),
    ]


def test_deployment_narrows(store: DuckDBStore) -> None:
    # api calls: p1, p2 (pricey-1) and x1, x2, k1 (claude-x); the cheap-1, mixed and mystery tasks have none
    a = _ask(store, DEFAULT.narrowed(deployment="api"))
    assert [(r["model"], r["per_mtok_usd"], r["per_completed_task_usd"]) for r in a.ranking.iter_rows(named=True)] == [
        ("claude-x", Decimal("4.2"), Decimal("0.084")),
        ("pricey-1", Decimal("11"), Decimal("0.115")),
    ]
    assert a.summary()["headline"] == (
        "the rankings agree: claude-x is the cheapest both per token and per completed task"
    )
    assert a.flips == []
    empty = _ask(store, DEFAULT.narrowed(deployment="self_hosted"))
    assert empty.ranking.height == 0
    assert empty.summary()["headline"].startswith("no model can be ranked")


def test_a_call_dimension_narrows_calls_and_tasks(store: DuckDBStore) -> None:
    # model=cheap-1: its 18 calls; tasks whose calls are all cheap-1 (c1, c2, c3, r1), not the mixed m1
    a = _ask(store, DEFAULT.narrowed(model="cheap-1"))
    assert _ranking(a) == [("cheap-1", 1, 1, 0, Decimal("1.1"), 0, Decimal("0.176"), 0, 1 / 3, 16.0, 1, None)]
    assert a.summary()["headline"] == "only cheap-1 can be ranked both ways: nothing to compare it with"
    # engine=sglang: claude-x's calls and tasks only
    assert _rows(_ask(store, DEFAULT.narrowed(engine="sglang")).ranking, "model").keys() == {"claude-x"}


def test_project_isolation(store: DuckDBStore) -> None:
    other = _ask(store, Filters(project="other"))
    assert _ranking(other) == [("pricey-1", 1, 1, 0, Decimal("11"), 0, Decimal("0.11"), 0, 1.0, 1.0, 1, None)]
    # project=default never sees o1: pricey-1 has 3 calls and 2 tasks there (see the detail test); all projects: 4, 3
    everything = _rows(_ask(store, Filters()).detail, "model")["pricey-1"]
    assert (everything["call_attempts"], everything["finished_tasks"]) == (4, 3)
    # ($0.23 + $0.11) / 3 = $0.113333 (to micro-dollars)
    assert _rows(_ask(store, Filters()).ranking, "model")["pricey-1"]["per_completed_task_usd"] == Decimal("0.113333")


def test_by_provider(store: DuckDBStore) -> None:
    a = _ask(store, by="provider")
    assert _ranking(a) == [
        # openai = cheap-1 + pricey-1 + mystery-9: ($0.198 + $0.33) / (180,000 + 30,000) tokens = $2.514286/M
        #   (1 unpriced attempt); tasks c1 c2 c3 p1 p2 m1 u1 (m1 is all openai), u1 unpriced so left out of
        #   $/completed task: ($0.176 + $0.23 + $0.121) / 4 completed = $0.13175; (16 + 2 + 2 + 1) attempts / 5
        #   completed = 4.2; 5 of 7
        ("openai", 1, 2, 1, Decimal("2.514286"), 1, Decimal("0.13175"), 1, 5 / 7, 4.2, 5, None),
        ("anthropic", 2, 1, -1, Decimal("4.2"), 1, Decimal("0.084"), 1, 2 / 3, 2.5, 2, None),
    ]
    assert a.summary()["headline"] == (
        "openai is the cheapest per token (rank 1) but the most expensive per completed task (rank 2); "
        "anthropic is the most expensive per token (rank 2) but the cheapest per completed task (rank 1)"
    )


def test_by_engine_lists_calls_without_one_unranked(store: DuckDBStore) -> None:
    a = _ask(store, by="engine")
    r = _rows(a.ranking, "engine")
    assert [(e, r[e]["per_token_rank"], r[e]["per_mtok_usd"], r[e]["per_completed_task_usd"]) for e in r] == [
        ("sglang", 1, Decimal("4.2"), Decimal("0.084")),
        ("vllm", 2, Decimal("11"), Decimal("0.115")),
        (None, None, Decimal("1.621053"), Decimal("0.1485")),
    ]
    # no engine: cheap-1's 18 calls ($0.198), m1's pricey-1 ($0.11), u1's unpriced one: $0.308 / 190,000 tokens;
    # tasks c1 c2 c3 m1 u1 (r1 runs), u1 unpriced so left out: ($0.176 + $0.121) / 2 completed (c1, m1) = $0.1485
    assert r[None]["unranked_because"] == "no engine"
    assert a.summary()["headline"] == "the rankings agree: sglang is the cheapest both per token and per completed task"
    assert any("with no engine" in n for n in a.notes)


def test_min_completed_lists_but_does_not_rank(store: DuckDBStore) -> None:
    a = _ask(store, min_completed=2)
    r = _rows(a.ranking, "model")
    assert (r["cheap-1"]["per_token_rank"], r["cheap-1"]["unranked_because"]) == (None, "fewer than 2 completed tasks")
    assert r["cheap-1"]["per_completed_task_usd"] == Decimal("0.176")  # still shown
    assert [(m, r[m]["per_token_rank"], r[m]["per_task_rank"]) for m in ("claude-x", "pricey-1")] == [
        ("claude-x", 1, 1),
        ("pricey-1", 2, 2),
    ]
    assert any(n.startswith("1 model(s) with fewer than 2 completed tasks") for n in a.notes)


def test_options_are_validated() -> None:
    with pytest.raises(pydantic.ValidationError):
        PerTokenOptions(min_completed=0)
    with pytest.raises(pydantic.ValidationError):
        PerTokenOptions(by="gpu_type")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError):
        PerTokenOptions(confidence=1.0)
    assert QUESTION.name == "per-token" and QUESTION.options is PerTokenOptions
    assert not set(PerTokenOptions.model_fields) & set(Filters.model_fields)


def test_the_json_answer(store: DuckDBStore) -> None:
    doc = json.loads(json.dumps(_ask(store).to_json(), allow_nan=False))
    assert doc["question"] == "per-token"
    assert doc["filters"] == {"project": "default"}
    ranking = doc["tables"]["ranking"]
    first = dict(zip(ranking["columns"], ranking["rows"][0], strict=True))
    assert (first["model"], first["per_mtok_usd"], first["per_completed_task_usd"]) == (
        "cheap-1",
        "1.100000",
        "0.176000",
    )
    assert set(doc["tables"]) == {"ranking", "detail"}


def test_a_flip_inside_the_intervals_is_called_noise(tmp_path: Path) -> None:
    f = Fleet()
    # kind "clear": cheap-1 tasks of 10 calls each = $0.11 per task, every time; pricey-1 tasks of one 4,500 + 500
    # token call = $0.045 + $0.010 = $0.055 per task, every time: both intervals are single points, far apart
    for task in ("a1", "a2"):
        t = f.task(task, kind="clear")
        for _ in range(10):
            t.call("cheap-1", **SHAPE)
    for task in ("b1", "b2"):
        f.task(task, kind="clear").call("pricey-1", input_tokens=4500, output_tokens=500)
    # kind "noisy": cheap-1 tasks of 1 call ($0.011) and 20 calls ($0.22): $0.1155 per completed task, interval from
    # $0.011 (n1 twice: a quarter of the resamples) to $0.22 (n2 twice); pricey-1: $0.11 and $0.11
    f.task("n1", kind="noisy").call("cheap-1", **SHAPE)
    n2 = f.task("n2", kind="noisy")
    for _ in range(20):
        n2.call("cheap-1", **SHAPE)
    for task in ("n3", "n4"):
        f.task(task, kind="noisy").call("pricey-1", **SHAPE)
    with DuckDBStore.open(tmp_path / "a.duckdb") as store:
        f.write(store)
        clear = _ask(store, Filters(kind="clear"))
        noisy = _ask(store, Filters(kind="noisy"))
    assert [(x["model"], x["rank_change"], x["clear"]) for x in clear.flips] == [
        ("cheap-1", 1, True),
        ("pricey-1", -1, True),
    ]
    assert clear.summary()["headline"] == (
        "cheap-1 is the cheapest per token (rank 1) but the most expensive per completed task (rank 2); "
        "pricey-1 is the most expensive per token (rank 2) but the cheapest per completed task (rank 1)"
    )
    r = _rows(noisy.ranking, "model")
    assert (r["cheap-1"]["per_completed_task_usd"], r["pricey-1"]["per_completed_task_usd"]) == (
        Decimal("0.1155"),
        Decimal("0.11"),
    )
    assert [(x["model"], x["clear"]) for x in noisy.flips] == [("cheap-1", False), ("pricey-1", False)]
    assert noisy.flips[0]["sentence"] == (
        "cheap-1 is the cheapest per token (rank 1) but the most expensive per completed task (rank 2) "
        "(the $/completed task intervals overlap: this may be noise)"
    )


def test_a_row_of_only_unanswered_attempts_says_where_their_tasks_went(tmp_path: Path) -> None:
    """An attempt no response came back for keeps the name it asked for: its row says why it is not ranked."""
    fleet = Fleet()
    unanswered = {"input_tokens": 0, "output_tokens": 0, "status": "error", "response_model": None}
    # a 429 on the alias, then the retry answered by the dated model: the task is cheap-1's
    fleet.task("r1", minute=1).call("cheap-1", request_model="cheap", **unanswered).call(
        "cheap-1", attempt=2, response_model="cheap-1"
    )
    # never answered: the task keeps the name it asked for
    fleet.task("lost", minute=2, outcome="failed").call("gone-1", request_model="gone", **unanswered)
    with DuckDBStore.open(tmp_path / "u.duckdb") as store:
        fleet.write(store)
        rows = {r["model"]: r for r in per_token(store, Filters(), PerTokenOptions()).ranking.iter_rows(named=True)}
    # the 429 counts under the model that answered its task (no row of its own); the lost task keeps its name
    assert "cheap" not in rows
    assert rows["gone"]["unranked_because"] == "only unanswered attempts"
    # the retried task and both its attempts count under the model that answered
    assert (rows["cheap-1"]["completed_tasks"], rows["cheap-1"]["attempts_per_completed_task"]) == (1, 2.0)
