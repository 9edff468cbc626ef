"""The CLI's quick path (taskcost/cli/_quick.py) against the full command, over a real server.

The quick path may decline any command line, but when it answers, it must print what the full command prints and
exit as it exits: generated command lines (valid and broken options, flags, formats, tables, the server found four
ways) are run through both."""

from __future__ import annotations

import contextlib
import io
import os
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from taskcost.analytics import QUESTIONS, Filters
from taskcost.cli import app
from taskcost.cli._quick import EXIT_CODES, FLAGS, QUESTION_NAMES, answer_quickly
from taskcost.store import DuckDBStore
from tests.budget import examples
from tests.builders.analytics import Fleet
from tests.conftest import Server, free_port, start_server, stop_server
from tests.test_analytics_api import PARAMS, _fleet


def test_the_quick_path_restates_the_registry() -> None:
    assert tuple(QUESTIONS) == QUESTION_NAMES
    filter_flags = {n: f.default for n, f in Filters.model_fields.items() if f.annotation is bool}
    assert FLAGS[""] == filter_flags
    for name, q in QUESTIONS.items():
        flags = {n: f.default for n, f in q.options.model_fields.items() if f.annotation is bool}
        assert FLAGS.get(name, {}) == flags, name
        assert EXIT_CODES.get(name) is q.exit_code, name
    for model in (Filters, *(q.options for q in QUESTIONS.values())):
        for n, f in model.model_fields.items():  # a list or a bool in a union would be read differently
            assert f.annotation is bool or bool not in typing.get_args(f.annotation), n


@dataclass
class Served:
    server: Server
    home: Path  # an empty working directory with its own (empty) config file


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("quick")
    db = tmp / "a.duckdb"
    fleet = Fleet()
    _fleet(fleet, "p1", 1)
    _fleet(fleet, "p2", 7)
    with DuckDBStore.open(db) as store:
        fleet.write(store)
    server = start_server(db, free_port(), tmp / "server.log")
    (tmp / "taskcost.toml").write_text("")
    yield Served(server, tmp)
    stop_server(server)


def _env(s: Served, where: str) -> dict[str, str]:
    """A clean environment in which the server is found by ``where`` (``--url`` is added to the line for "arg"), and
    every setting of lower precedence names a port where nothing listens (argument > environment > file)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("TASKCOST_", "OTEL_"))}
    env = {k: v for k, v in env.items() if not k.lower().endswith("_proxy")}
    dead = "http://127.0.0.1:9"  # nothing listens: a setting of lower precedence that must lose
    config = s.home / f"{where}.toml"
    config.write_text(f'url = "{s.server.url if where == "file" else dead}"\n' if where != "db" else "")
    env["TASKCOST_CONFIG"] = str(config)
    if where in ("env", "arg"):
        env["TASKCOST_URL"] = s.server.url if where == "env" else dead
    if where == "db":
        env["TASKCOST_DB"] = str(s.server.db)  # the server that owns the file, from its .serve.json
    return env


def _both(s: Served, argv: list[str], where: str) -> tuple[tuple[int, str, str] | None, tuple[int, str, str]]:
    """(quick: exit code, stdout, stderr, or None when it declined; the full command's)."""
    if where == "arg":
        argv = [*argv, "--url", s.server.url]
    with mock.patch.dict(os.environ, _env(s, where), clear=True):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = answer_quickly(argv)
        quick = None if code is None else (code, out.getvalue(), err.getvalue())
        if code is None:
            assert out.getvalue() == err.getvalue() == "", "declined after printing"
        full = CliRunner().invoke(app, argv)
    return quick, (full.exit_code, full.stdout, full.stderr)


def _line(name: str, params: dict[str, str]) -> list[str]:
    return [name, *(t for k, v in params.items() for t in (f"--{k.replace('_', '-')}", v))]


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
@pytest.mark.parametrize("name", list(QUESTIONS))
def test_a_plain_question_is_answered_quickly_and_as_the_full_command_does(served: Served, name: str, fmt: str) -> None:
    quick, full = _both(served, [*_line(name, PARAMS[name]), "--format", fmt], "arg")
    assert full[0] in (0, 1, 3), full
    assert quick == full


@pytest.mark.parametrize("where", ["arg", "env", "file", "db"])
def test_the_server_is_found_as_the_settings_say(served: Served, where: str) -> None:
    quick, full = _both(served, ["cost", "--by", "model", "-f", "json", "--project", "p2"], where)
    assert full[0] == 0 and '"project": "p2"' in full[1]
    assert quick == full


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["cost", "--by", "colour"], 2),  # the server says 422: the full command says why
        (["cost", "--help"], 0),
        (["cost", "--table", "nope"], 2),
        (["cost", "--frobnicate", "1"], 2),
        (["cost", "--by_x", "model"], 2),
        (["cost", "--golden", "true"], 2),
        (["cost", "--no-golden"], 2),
        (["cost", "-fjson"], 0),  # click reads it; the quick path leaves short forms alone
        (["cost", "--by", "model", "--by", "kind"], 0),
        (["cost", "--db", "elsewhere.duckdb"], 0),
        (["canary", "--dimension", "model"], 2),
        (["sql", "select 1"], 0),
    ],
)
def test_what_the_quick_path_does_not_read_goes_to_the_full_command(served: Served, argv: list[str], code: int) -> None:
    quick, full = _both(served, argv, "arg")
    assert quick is None
    assert full[0] == code, full


def test_no_server_no_quick_answer(served: Served, tmp_path: Path) -> None:
    with mock.patch.dict(os.environ, {"TASKCOST_URL": "http://127.0.0.1:9"}):
        assert answer_quickly(["cost", "--by", "model"]) is None  # connection refused
    with mock.patch.dict(os.environ, {"TASKCOST_DB": str(tmp_path / "none.duckdb")}, clear=True):
        assert answer_quickly(["cost"]) is None  # no server owns the file: the full command opens it
    with mock.patch.dict(os.environ, {"TASKCOST_URL": served.server.url, "HTTPS_PROXY": "http://proxy:3128"}):
        assert answer_quickly(["cost"]) is None  # httpx would use the proxy


# -- generated command lines ----------------------------------------------------------------------------------------
# per option: values the server accepts, then values it refuses (drawn a quarter of the time)
_VALUES: dict[str, tuple[list[str], list[str]]] = {
    "by": (["model", "kind", "provider", "engine"], ["colour", ""]),
    "bucket": (["hour", "day"], ["fortnight"]),
    "confidence": (["0.9", "0.95", ".8"], ["1.5", "abc"]),
    "since": (["2026-11-02T09:00:00", "2026-11-02"], ["yesterday"]),
    "until": (["2026-11-02T10:00:00", "2026-11-03"], ["2026-11-02T25:00"]),
    "project": (["p1", "p2", "p3"], []),
    "model": (["cheap-1", "pricey-1", "nope"], []),
    "kind": (["review", "fix"], []),
    "deployment": (["api", "self_hosted"], ["cloud"]),
    "min_completed": (["1", "2"], ["1.5", "-1"]),
    "dimension": (["model", "engine_version"], ["colour"]),
    "baseline": (["cheap-1"], []),
    "candidate": (["pricey-1", "cheap-1"], []),
    "gpu_type": (["H100"], []),
    "usd_per_gpu_hour": (["2.50", "4"], ["-1", "x"]),
    "tokens_per_s": (["2000"], ["0"]),
    "table": (["groups", "by_model", "tasks"], ["nope"]),
    "format": (["json", "csv", "table"], ["JSON"]),
    "frobnicate": ([], ["1"]),
}
_FLAGS = (["--golden", "--exact", "--misses", "--no-misses"], ["--no-golden", "--exact=1", "-h", "--", "extra"])


def _pick(draw: st.DrawFn, good_bad: tuple[list[str], list[str]]) -> str:
    good, bad = good_bad
    bad_one = not good or (bad and draw(st.integers(0, 3)) == 0)
    return draw(st.sampled_from(bad if bad_one else good))


@st.composite
def _command_lines(draw: st.DrawFn) -> tuple[list[str], str]:
    name = draw(st.sampled_from([*QUESTION_NAMES, "nope"]))
    pieces = [[_pick(draw, _FLAGS)] for _ in range(draw(st.integers(0, 1)))]
    q = QUESTIONS.get(name)
    known = {*Filters.model_fields, "format", "table", *(q.options.model_fields if q else ())}
    own = sorted(k for k in _VALUES if k in known and k not in PARAMS.get(name, {}))
    keys = st.sampled_from(sorted(_VALUES)) if not own or draw(st.integers(0, 3)) == 0 else st.sampled_from(own)
    for key in draw(st.lists(keys, max_size=4, unique=True)):
        flag, value = f"--{key.replace('_', '-')}", _pick(draw, _VALUES[key])
        if key == "format" and draw(st.booleans()):
            flag = "-f"
        pieces.append([f"{flag}={value}"] if draw(st.booleans()) and flag != "-f" else [flag, value])
    if name in PARAMS and draw(st.integers(0, 3)) > 0:
        pieces.append(_line(name, PARAMS[name])[1:])
    order = draw(st.permutations(pieces))
    return [name, *(t for p in order for t in p)], draw(st.sampled_from(["arg", "env", "file", "db"]))


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_command_lines())
def test_when_the_quick_path_answers_it_is_the_full_commands_answer(served: Served, line: Any) -> None:
    argv, where = line
    quick, full = _both(served, argv, where)
    if quick is not None:
        assert quick == full, argv
