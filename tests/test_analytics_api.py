"""Every analytics question through its three doors: the HTTP API (read keys, project isolation, the error shape,
the OpenAPI schema), the CLI on the file, and the CLI through a running server; all give the library's answer."""

from __future__ import annotations

import csv
import io
import json
import shutil
import typing
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from taskcost.analytics import QUESTIONS, Filters
from taskcost.analytics._stats import MAX_CONFIDENCE
from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.builders.analytics import Fleet
from tests.conftest import free_port, run_cli, start_server, stop_server

# what each question needs besides the filters, to be asked at all
PARAMS: dict[str, dict[str, str]] = {
    "cost": {"by": "model"},
    "per-token": {},
    "cache": {},
    "canary": {"dimension": "model", "baseline": "cheap-1", "candidate": "pricey-1"},
    "breakeven": {"gpu_type": "H100", "usd_per_gpu_hour": "2.50", "tokens_per_s": "2000"},
    "changes": {"since": "2026-11-02T09:30:00", "until": "2026-11-02T10:00:00"},
    "reconcile": {},
    "engines": {"model": "cheap-1", "same_as": "pricey-1", "min_calls": "2"},
}


def test_every_question_has_its_parameters_here() -> None:
    assert set(PARAMS) == set(QUESTIONS)


def test_every_integer_option_has_bounds_a_json_answer_can_carry() -> None:
    # an answer echoes its options: an unbounded integer (2**64 from a fuzzer) would be a 500 when it is written out
    for model in (Filters, *(q.options for q in QUESTIONS.values())):
        for n, f in model.model_fields.items():
            if int in (f.annotation, *typing.get_args(f.annotation)):
                bounds = {type(m).__name__: m for m in f.metadata}
                assert "Le" in bounds or "Lt" in bounds, f"{model.__name__}.{n} has no upper bound"
                upper = bounds["Le"].le if "Le" in bounds else bounds["Lt"].lt
                assert upper < 2**53 and ("Ge" in bounds or "Gt" in bounds), f"{model.__name__}.{n}"


def _fleet(fleet: Fleet, project: str, scale: int) -> None:
    for i in range(6):
        t = fleet.task(f"{project}-t{i}", project=project, minute=10 * i, kind="review" if i % 2 else "fix")
        t.call("cheap-1" if i < 3 else "pricey-1", input_tokens=1000 * scale, output_tokens=100, ttft_s=0.2)
        t.call("cheap-1" if i < 3 else "pricey-1", input_tokens=1500 * scale, cache_read=500, ttft_s=0.1)
    fleet.task(f"{project}-failed", project=project, outcome="failed", minute=5).call("cheap-1", status="error")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two projects' store, written once for the module (each test gets its own copy of the file)."""
    path = tmp_path_factory.mktemp("analytics-api") / "a.duckdb"
    fleet = Fleet()
    _fleet(fleet, "p1", 1)
    _fleet(fleet, "p2", 7)  # another project: bigger prompts, so a leak shows in every figure
    with DuckDBStore.open(path) as store:
        fleet.write(store)
    return path


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    path = tmp_path / "a.duckdb"
    shutil.copy(built, path)
    return path


def _ask(store: DuckDBStore, name: str, params: dict[str, str], project: str | None) -> dict[str, Any]:
    q = QUESTIONS[name]
    filter_fields = set(Filters.model_fields)
    filters = Filters.model_validate({k: v for k, v in params.items() if k in filter_fields} | {"project": project})
    options = q.options.model_validate({k: v for k, v in params.items() if k not in filter_fields})
    return q.run(store, filters, options).to_json()


def _library(path: Path, name: str, params: dict[str, str], project: str | None) -> dict[str, Any]:
    with DuckDBStore.open(path, read_only=True) as store:
        return _ask(store, name, params, project)


@pytest.fixture(scope="module")
def keyed(
    built: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, dict[str, str], DuckDBStore]]:
    """The app in-process on its own copy of the store, with a read key per project; shared by the module's tests,
    which only read through it."""
    db = tmp_path_factory.mktemp("analytics-api-keyed") / "a.duckdb"
    shutil.copy(built, db)
    with DuckDBStore.open(db) as store:
        secrets = {p: store.create_key(p, "read")[1] for p in ("p1", "p2")}
        app = create_app(Settings(db=db, decode_workers=0), store, dashboards=False)
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, secrets, store


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_a_read_key_gets_its_projects_answer_and_nothing_else(keyed: Any, name: str) -> None:
    client, secrets, _ = keyed
    r = client.get(f"/api/analytics/{name}", params=PARAMS[name], headers={"Authorization": f"Bearer {secrets['p1']}"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["question"] == name and doc["filters"]["project"] == "p1"
    # asking for another project's rows with p1's key: the key's project wins, never p2's data
    r2 = client.get(
        f"/api/analytics/{name}",
        params={**PARAMS[name], "project": "p2"},
        headers={"Authorization": f"Bearer {secrets['p1']}"},
    )
    assert r2.status_code == 200 and r2.json() == doc
    other = client.get(
        f"/api/analytics/{name}", params=PARAMS[name], headers={"Authorization": f"Bearer {secrets['p2']}"}
    ).json()
    assert other["filters"]["project"] == "p2"
    assert json.dumps(other["summary"]) != json.dumps(doc["summary"]) or other["tables"] != doc["tables"]


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_the_http_answer_is_the_librarys(keyed: Any, name: str) -> None:
    client, secrets, store = keyed
    r = client.get(f"/api/analytics/{name}", params=PARAMS[name], headers={"Authorization": f"Bearer {secrets['p2']}"})
    assert r.json() == json.loads(json.dumps(_ask(store, name, PARAMS[name], "p2")))


@pytest.mark.parametrize("name", sorted(n for n, q in QUESTIONS.items() if "confidence" in q.options.model_fields))
def test_every_confidence_the_options_take_is_answered(keyed: Any, name: str) -> None:
    """Found by the fuzzer: confidence=0.9999999999999999 passed ``< 1`` but made the interval's quantile
    0.5 + 0.9999999999999999 / 2, which is 1.0 in floating point: a 500. The top of the range is answered; anything
    above it is a 422 that names the option."""
    client, secrets, _ = keyed
    auth = {"Authorization": f"Bearer {secrets['p1']}"}
    top = QUESTIONS[name].options.model_fields["confidence"]
    assert {type(m).__name__: m for m in top.metadata}["Le"].le == MAX_CONFIDENCE
    r = client.get(f"/api/analytics/{name}", params={**PARAMS[name], "confidence": str(MAX_CONFIDENCE)}, headers=auth)
    assert r.status_code == 200 and r.json()["question"] == name, r.text  # (an infinite bound is no JSON)
    for above in ("0.9999999999999999", "0.9999991", "1"):
        r = client.get(f"/api/analytics/{name}", params={**PARAMS[name], "confidence": above}, headers=auth)
        assert r.status_code == 422 and "confidence" in r.json()["message"], r.text


def test_without_a_key_or_with_bad_parameters_the_error_shape(keyed: Any) -> None:
    client, secrets, _ = keyed
    auth = {"Authorization": f"Bearer {secrets['p1']}"}
    r = client.get("/api/analytics/cost")
    assert r.status_code == 401 and set(r.json()) == {"error", "code", "status", "message"}
    r = client.get("/api/analytics/cost", params={"nonsense": "1"}, headers=auth)
    assert r.status_code == 422 and "nonsense" in r.json()["message"]
    r = client.get("/api/analytics/cost", params={"since": "not a time"}, headers=auth)
    assert r.status_code == 422 and "since" in r.json()["message"]
    r = client.get("/api/analytics/cost", params={"by": "colour"}, headers=auth)
    assert r.status_code in (400, 422) and "colour" in r.json()["message"]
    r = client.get("/api/analytics/canary", params={"dimension": "model"}, headers=auth)
    assert r.status_code in (400, 422), r.text


def test_the_openapi_schema_documents_every_question_and_its_parameters(keyed: Any) -> None:
    client, secrets, _ = keyed
    schema = client.get("/openapi.json", headers={"Authorization": f"Bearer {secrets['p1']}"}).json()
    for name, q in QUESTIONS.items():
        op = schema["paths"][f"/api/analytics/{name}"]["get"]
        names = {p["name"] for p in op["parameters"]}
        assert set(Filters.model_fields) <= names and set(q.options.model_fields) <= names, name
        assert all(p.get("description") for p in op["parameters"]), name
        assert "200" in op["responses"] and "400" in op["responses"]


def test_the_cli_on_the_file_prints_the_librarys_answer_as_json_csv_and_tables(db: Path) -> None:
    doc = json.loads(run_cli("cost", "--db", str(db), "--by", "model", "--project", "p1", "--format", "json").stdout)
    assert doc == json.loads(json.dumps(_library(db, "cost", {"by": "model"}, "p1")))
    first = next(iter(doc["tables"]))
    rows = list(csv.reader(io.StringIO(run_cli("cost", "--db", str(db), "--by", "model", "--format", "csv").stdout)))
    assert rows[0] == doc["tables"][first]["columns"]
    shown = run_cli("cost", "--db", str(db), "--by", "model", "--project", "p1")
    text = shown.stdout
    money = [v for k, v in doc["summary"].items() if k.endswith("_usd") and v is not None]
    assert money and all(f"${Decimal(v):,.6f}" in text for v in money[:3]), text
    # a terminal gets the groups' main columns, and is told where the rest are
    groups = doc["tables"]["groups"]
    assert "cost_per_completed_task_usd" in text and "superseded_attempts_usd" not in text
    hidden = len(groups["columns"]) - len([c for c in groups["display"] if c in groups["columns"]])
    assert f"({hidden} more columns: --format csv or json)" in shown.stderr


def test_cli_usage_errors_exit_2(db: Path) -> None:
    assert run_cli("cost", "--db", str(db), "--by", "colour", check=False).returncode == 2
    assert run_cli("cost", "--db", str(db), "--since", "yesterday-ish", check=False).returncode == 2
    assert run_cli("cost", "--db", str(db), "--table", "nope", check=False).returncode == 2
    assert run_cli("canary", "--db", str(db), "--dimension", "model", check=False).returncode == 2


def test_the_cli_asks_the_running_server_that_owns_the_file(db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"  # the library's answer from a copy: the server holds the original
    shutil.copy(db, copy)
    server = start_server(db, free_port(), tmp_path / "server.log")
    try:
        for name in ("cost", "per-token"):
            args = [f"--{k.replace('_', '-')}={v}" for k, v in PARAMS[name].items()]
            doc = json.loads(run_cli(name, "--db", str(db), *args, "--format", "json").stdout)
            assert doc == json.loads(json.dumps(_library(copy, name, PARAMS[name], None))), name
    finally:
        stop_server(server)


# -- a time out of the store's range, or a reversed range: a usage error on every surface, never a 500 ------------
OUT_OF_RANGE = [
    ({"since": "9999-12-31T23:30:00"}, "since"),  # past the range: an hour's arithmetic on it would overflow
    ({"until": "0001-01-01T00:00:00+01:00"}, "until"),  # its conversion to UTC overflows
    ({"since": "1677-12-31T23:59:59"}, "since"),
    ({"until": "2262-01-01T00:30:00+00:00"}, "until"),
]


@pytest.mark.parametrize("name", sorted(PARAMS))
@pytest.mark.parametrize("times, field", OUT_OF_RANGE)
def test_a_time_out_of_range_is_a_400_naming_the_range(
    keyed: Any, name: str, times: dict[str, str], field: str
) -> None:
    client, secrets, _ = keyed
    r = client.get(
        f"/api/analytics/{name}",
        params={**PARAMS[name], **times},
        headers={"Authorization": f"Bearer {secrets['p1']}"},
    )
    assert r.status_code == 400, r.text
    message = r.json()["message"]
    assert message.startswith(f"{field} ") and "out of range" in message, message
    assert "1678-01-01" in message and "2262-01-01" in message, message


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_a_reversed_or_empty_time_range_is_a_400(keyed: Any, name: str) -> None:
    client, secrets, _ = keyed
    auth = {"Authorization": f"Bearer {secrets['p1']}"}
    for since, until in (
        ("2026-11-02T10:00:00", "2026-11-02T09:00:00"),
        ("2026-11-02T09:00:00Z", "2026-11-02T10:00+01:00"),
    ):
        r = client.get(f"/api/analytics/{name}", params={**PARAMS[name], "since": since, "until": until}, headers=auth)
        assert r.status_code == 400, r.text
        assert "must be before until" in r.json()["message"]


def test_the_ends_of_the_range_are_accepted(keyed: Any) -> None:
    client, secrets, _ = keyed
    auth = {"Authorization": f"Bearer {secrets['p1']}"}
    ends = {"since": "1678-01-01T00:00:00", "until": "2262-01-01T01:00:00+01:00"}  # both ends, inclusive
    whole = client.get("/api/analytics/cost", params={"by": "model"}, headers=auth).json()
    r = client.get("/api/analytics/cost", params={"by": "model", **ends}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["summary"] == whole["summary"] and r.json()["tables"] == whole["tables"]
    for name in sorted(PARAMS):  # every other question: an answer, or a usage error of its own (never a 500)
        r = client.get(f"/api/analytics/{name}", params={**PARAMS[name], **ends}, headers=auth)
        assert r.status_code in (200, 400), (name, r.text)


def test_cli_a_time_out_of_range_or_a_reversed_range_exits_2_with_the_message(db: Path) -> None:
    for args, text in (
        (("cost", "--by", "kind", "--since", "9999-12-31T23:30:00"), "since 9999-12-31T23:30:00 is out of range"),
        (("cache", "--until", "0001-01-01T00:00:00+01:00"), "until 0001-01-01T00:00:00+01:00 is out of range"),
        (("changes", "--since", "2026-11-02T10:00", "--until", "2026-11-02T09:00"), "must be before until"),
        (("per-token", "--since", "2026-11-02T10:00", "--until", "2026-11-02T10:00"), "must be before until"),
    ):
        proc = run_cli(args[0], "--db", str(db), *args[1:], check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert text in " ".join(proc.stderr.split()), proc.stderr  # a message, not a traceback
        assert "Traceback" not in proc.stderr
