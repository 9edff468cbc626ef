"""Pages and answers hold on data in any state: tasks in progress, calls unpriced or awaiting their GPU-hour
allocation, NULL models, failed attempts, one row, a window with nothing in it. Random stores, every question and
every page's body (as the browser asks it, through the real app): no exception, no ``None``, ``NaN`` or error shown.

More examples: TASKCOST_ANY_STATE_EXAMPLES=200 (default 4: each builds a store and the app)."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskcost.analytics import QUESTIONS, Filters, UsageError
from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet

EXAMPLES = int(os.environ.get("TASKCOST_ANY_STATE_EXAMPLES", "4"))
SHOWN_WRONG = re.compile(r"\bNone\b|\bNaN\b|\bnan\b|\binf\b|Cannot show this|Traceback")
# the page bodies the browser asks for when a page opens (inputs: the page's address, and Data health's timer)
QUERIES: list[dict[str, str]] = [{}, {"since": "2031-01-01T00:00:00", "until": "2031-01-02T00:00:00"}]

_call = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["cheap-1", "pricey-1", "claude-x", "no-such-model", None]),
        "status": st.sampled_from(["ok", "ok", "error"]),
        "input_tokens": st.integers(0, 50_000),
        "output_tokens": st.integers(0, 2_000),
        "cache_read": st.one_of(st.none(), st.integers(0, 1_000)),
        "self_hosted": st.booleans(),
        "at_s": st.floats(0, 30),
    }
)
_task = st.fixed_dictionaries(
    {
        "outcome": st.sampled_from(["completed", "completed", "failed", "abandoned", None]),  # None: still running
        "kind": st.sampled_from(["review", "triage", None]),
        "minute": st.integers(0, 600),
        "calls": st.lists(_call, max_size=3),
        "tool": st.sampled_from([None, "priced", "unpriced"]),
    }
)


def _fleet(tasks: list[dict[str, Any]]) -> Fleet:
    fleet = Fleet()
    for i, spec in enumerate(tasks):
        t = fleet.task(f"t{i}", kind=spec["kind"] or "review", outcome=spec["outcome"], minute=spec["minute"])
        for c in spec["calls"]:
            extra: dict[str, Any] = {}
            if c["self_hosted"]:  # no clusters file: awaiting allocation, unpriced
                extra = {"deployment": "self_hosted", "cluster_id": "c1", "gpu_type": "H100-SXM", "gpu_count": 1}
            t.call(
                c["model"],  # type: ignore[arg-type]
                input_tokens=c["input_tokens"],
                output_tokens=c["output_tokens"],
                cache_read=None if c["cache_read"] is None else min(c["cache_read"], c["input_tokens"]),
                status=c["status"],
                at_s=c["at_s"],
                **extra,
            )
        if spec["tool"] is not None:
            from decimal import Decimal

            t.tool(Decimal("0.01") if spec["tool"] == "priced" else None)
    return fleet


def _text(component: Any) -> str:
    """What a component tree shows: its strings, its figures' texts and hover labels."""
    if component is None or isinstance(component, bool):
        return ""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list):
        return " ".join(_text(c) for c in component)
    if isinstance(component, dict):
        props = component.get("props", component)
        shown = [props.get(k) for k in ("children", "label", "title", "placeholder", "description")]
        figure = props.get("figure")
        if isinstance(figure, dict):
            for trace in figure.get("data", []):
                shown += [trace.get(k) for k in ("name", "text", "customdata", "hovertext")]
        return " ".join(_text(c) for c in shown)
    return ""


def _bodies(client: TestClient) -> list[dict[str, Any]]:
    """The callbacks a page runs when it opens: those whose inputs are its address (and Data health's timer)."""
    deps = client.get("/dash/_dash-dependencies").json()
    return [
        d
        for d in deps
        if d["inputs"]
        and all(
            i["property"] == "data" and i["id"].endswith("-query") or i["id"].endswith("-tick") for i in d["inputs"]
        )  # fmt: skip
    ]


def _ask(client: TestClient, dep: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
    output = dep["output"]
    multi = output.startswith("..")
    outputs = [dict(zip(("id", "property"), o.rsplit(".", 1), strict=True)) for o in output.strip(".").split("...")]
    inputs = [
        {"id": i["id"], "property": i["property"], "value": query if i["property"] == "data" else 0}
        for i in dep["inputs"]
    ]
    payload = {
        "output": output,
        "outputs": outputs if multi else outputs[0],
        "inputs": inputs,
        "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs],
    }
    r = client.post("/dash/_dash-update-component", json=payload)
    assert r.status_code in (200, 204), (output, r.text[:500])
    return r.json()["response"] if r.status_code == 200 else {}


def _no_nan(value: Any) -> None:
    json.dumps(value, allow_nan=False, default=str)  # raises on NaN / infinity anywhere in an answer


def _check_questions(store: DuckDBStore) -> None:
    for name, q in QUESTIONS.items():
        for filters in (Filters(), Filters.model_validate({"since": "2031-01-01", "until": "2031-01-02"})):
            try:
                doc = q.run(store, filters, q.options.model_validate({})).to_json()
            except UsageError:
                continue  # the question cannot be asked so (canary without arms...): a message, not a crash
            _no_nan(doc)
            for key, value in doc["summary"].items():
                assert not (isinstance(value, float) and not math.isfinite(value)), (name, key)
                assert value != "None", (name, key)
            for note in doc["notes"]:
                assert not SHOWN_WRONG.search(note), (name, note)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_task, min_size=0, max_size=6))
def test_every_question_and_page_holds_on_a_store_in_any_state(tasks: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "s.duckdb"
        with DuckDBStore.open(db) as store:
            _fleet(tasks).write(store, received_ns=time.time_ns())
            _check_questions(store)
            app = create_app(Settings(db=db, decode_workers=0, grpc_port=0), store)
            with TestClient(app) as client:
                bodies = _bodies(client)
                assert len(bodies) >= 10  # every page's
                for dep in bodies:
                    for query in QUERIES:
                        shown = _text(list(_ask(client, dep, query).values()))
                        bad = SHOWN_WRONG.search(shown)
                        assert bad is None, (dep["output"], query, shown[max(0, bad.start() - 200) : bad.end() + 200])
