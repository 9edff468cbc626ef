"""The quick path of a question command (``taskcost cost --url URL --format json``), in the standard library.

The full command starts in about 0.4 s (typer, the pydantic settings registry, the question models, httpx) before it
sends its request; a question at 1M calls answers in 0.03-0.15 s. This path sends the same request and prints the
same answer in a few milliseconds, and it only answers when it can do exactly what the full command would: the
question's name, then ``--name value`` (or ``--name=value``) options and the question's known flags, asked of a
server (``--url``, ``TASKCOST_URL``, the config file's ``url``, else the server that owns the database), which
answers 200. For anything else (help, an option it cannot read, one given twice, ``--db``, a file to open, an
https or proxied URL, an error from the server) it prints nothing and returns None: the full command runs and says
what is wrong. The server validates every value with the question's own models, so there is one parser of values;
tests/test_cli_quick.py runs both paths over generated command lines and requires the same output and exit code.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskcost._internal.exit_codes import canary_exit_code
from taskcost._internal.places import DEFAULT_DB, config_file, running_server
from taskcost.cli._render import Format, render

__all__ = ["EXIT_CODES", "FLAGS", "QUESTION_NAMES", "answer_quickly"]

# The registry's names, flags and exit codes, restated so that this path imports neither typer nor pydantic nor the
# analytics; tests/test_cli_quick.py fails when they differ from taskcost.analytics.QUESTIONS.
QUESTION_NAMES = ("cost", "per-token", "cache", "canary", "breakeven", "changes", "reconcile", "engines")
# options that take no value (booleans), by question ("": the filters, on every question): name -> default
FLAGS: dict[str, dict[str, bool]] = {
    "": {"golden": False},
    "cost": {"exact": False},
    "cache": {"exact": False, "misses": True},
}
EXIT_CODES: dict[str, Callable[[dict[str, Any]], int]] = {"canary": canary_exit_code}

_OWN = ("url", "key", "format", "table")  # the command's own options: not sent to the server
_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_TIMEOUT_S = 60.0  # as the full command's client


class _Decline(Exception):
    """The full command must answer this one."""


def answer_quickly(argv: list[str]) -> int | None:
    """Print the answer and return the exit code; or print nothing and return None (the full command runs)."""
    try:
        question, own, params = _parse(argv)
        fmt = Format(own.get("format", "table"))  # not a format: ValueError
        url, token = _server(own)
        doc = _ask(url, token, question, params)
        render(doc, fmt, own.get("table"))  # a RenderError is raised before anything is printed
    except (_Decline, OSError, ValueError):  # RenderError is a ValueError
        return None
    return EXIT_CODES[question](doc) if question in EXIT_CODES else 0


def _parse(argv: list[str]) -> tuple[str, dict[str, str], dict[str, str]]:
    """(question, the command's own options, the query parameters), as click would read them, or _Decline."""
    if not argv or argv[0] not in QUESTION_NAMES:
        raise _Decline
    question, flags = argv[0], {**FLAGS[""], **FLAGS.get(argv[0], {})}
    values: dict[str, str] = {}
    i = 1
    while i < len(argv):
        token = argv[i]
        if token == "-f":
            name, given, value = "format", False, ""
        elif token.startswith("--"):
            name, eq, value = token[2:].partition("=")
            given = bool(eq)
            if not _NAME.fullmatch(name) or name in ("help", "db", "store"):
                raise _Decline
        else:
            raise _Decline  # an argument, a short option (-fjson) or "-": the full command's to judge
        bare = name[3:] if name.startswith("no-") else name
        if bare in flags:
            if given or (name != bare and not flags[bare]):  # a flag takes no value; --no-x only when x is on
                raise _Decline
            name, value = bare, "false" if name != bare else "true"
        elif not given:
            if i + 1 >= len(argv):
                raise _Decline
            i += 1
            value = argv[i]  # as click: the next token is the value, whatever it looks like
        key = name.replace("-", "_")
        if key in values:
            raise _Decline  # given twice: click keeps the last; not worth guessing
        values[key] = value
        i += 1
    own = {k: values.pop(k) for k in _OWN if k in values}
    return question, own, values


def _settings(own: dict[str, str]) -> dict[str, str | None]:
    """``url``, ``key`` and ``db`` as the registry reads them (taskcost.settings): argument > ``TASKCOST_<NAME>`` >
    config file > not set. Anything the registry would refuse: _Decline (a broken file: ValueError)."""
    path = config_file()
    if "TASKCOST_CONFIG" in os.environ and not path.is_file():
        raise _Decline
    file: dict[str, Any] = {}
    if path.is_file():
        import tomllib

        file = tomllib.loads(path.read_text())
    out: dict[str, str | None] = {}
    for name in ("url", "key", "db"):
        env = [v for k, v in os.environ.items() if k.lower() == f"taskcost_{name}"]  # pydantic-settings ignores case
        if len(env) > 1:
            raise _Decline
        value = own[name] if name in own else env[0] if env else file.get(name)
        if value is not None and not isinstance(value, str):
            raise _Decline
        out[name] = value
    return out


def _server(own: dict[str, str]) -> tuple[str, str | None]:
    """The URL and token the full command would use (taskcost.cli._target.open_target); a file to open: _Decline."""
    settings = _settings(own)
    key = settings["key"]
    if settings["url"]:
        return settings["url"], key
    running = running_server(Path(settings["db"] or DEFAULT_DB))
    if running is None:
        raise _Decline
    return running["url"], key or running.get("admin_token")


def _ask(url: str, token: str | None, question: str, params: dict[str, str]) -> dict[str, Any]:
    if any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") for k in os.environ):
        raise _Decline  # httpx would go through the proxy
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment or "@" in parts.netloc:
        raise _Decline
    path = f"{parts.path}/api/analytics/{question}"
    if params:
        path += "?" + urllib.parse.urlencode(params)
    import http.client  # here: a command with no server to ask never pays for its import

    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=_TIMEOUT_S)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        resp = conn.getresponse()
        body = resp.read()
    except http.client.HTTPException:
        raise _Decline from None
    finally:
        conn.close()
    if resp.status != 200:
        raise _Decline
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise _Decline
    return doc
