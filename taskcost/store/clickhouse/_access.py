"""The second layer of the project boundary on a ClickHouse server: a reader user and row policies.

The first layer is the store's own query check (``_sandbox``: ClickHouse's parser and binder, ``readonly`` and limits
on every user query); it is the boundary everywhere, chDB included (chDB has no access management: CREATE USER and
CREATE ROW POLICY are refused there). On a server, when the connecting user may manage access, a read-write open also
creates, idempotently (every open runs the same statements; several collectors may run them at once):

* a user ``<db>_reader``, granted SELECT on the public views and on what they read (the internal views and the row
  tables: ClickHouse's normal views are ``SQL SECURITY INVOKER`` by default, so the reader needs SELECT on the
  sources too), and nothing else: no INSERT, no DDL, no other table (``api_keys`` stays unreadable to it);
* on every row table, a row policy for the reader, ``USING project = getSetting('SQL_taskcost_project')``, and one
  ``USING 1 TO ALL EXCEPT <db>_reader``, so every other user (the collectors' own among them) reads as before, also on
  a server where ``users_without_row_policies_can_read_rows`` is off. The policies come before the grants: the
  reader never holds SELECT on a table without its policy.

A project's user SQL then runs as that reader, on a client of its own (HTTP, no session: nothing set by one query
stays for the next), with the query check's settings plus ``SQL_taskcost_project`` = the project, and ``readonly=1``.
The server checks a request's settings together, before applying them, so the project and ``readonly`` are set by
the request itself and the query's own text cannot change either (a SETTINGS clause is refused under ``readonly=1``).
A query without the project setting fails (``getSetting`` of an unset setting is an error): it fails closed. The
server's own analytics (no project) run as before, on the connecting user.

The reader's password: ``reader_password`` in the dsn's query string when given; otherwise derived from the
connecting user's password and the database (an HMAC), so every collector with the same dsn derives the same one and
sets the same (each open sets it again: ``ALTER USER``). With neither (a connecting user without a password), the
reader is not set up: its password would be guessable.

Without access management (chDB; a user without the grants; a server that refuses a custom setting's prefix), the
store logs one warning and goes on with the query check alone; ``summary`` says which (``/readyz`` shows it).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from taskcost.store.clickhouse._sandbox import PUBLIC_RELATIONS
from taskcost.store.clickhouse._sandbox import _ident as ident
from taskcost.store.clickhouse._sandbox import _literal as literal
from taskcost.store.clickhouse._schema import TABLE_OF

__all__ = [
    "INTERNAL_VIEWS",
    "PROJECT_SETTING",
    "ROW_TABLES",
    "ReaderAccess",
    "drop_statements",
    "reader_name",
    "reader_password",
    "setup_statements",
]

log = logging.getLogger("taskcost.store")

PROJECT_SETTING = "SQL_taskcost_project"
"""The custom setting the row policies read (``SQL_`` is ClickHouse's default ``custom_settings_prefixes``)."""
INTERNAL_VIEWS = ("llm_call_counted", "engine_span_match")
"""Views the public views read (not queryable through the check; readable by the reader, through its policies)."""
ROW_TABLES = tuple(sorted(set(TABLE_OF.values())))
"""The tables that hold rows by project: each has the reader's row policy."""
_PROBE = f"SELECT getSetting({literal(PROJECT_SETTING)})"


def reader_name(database: str) -> str:
    return f"{database}_reader"


def reader_password(dsn: str, database: str) -> str | None:
    """The reader's password (the module's docstring says whence), or None when none can be had safely."""
    url = urlparse(dsn)
    given = parse_qs(url.query).get("reader_password")
    if given and given[0]:
        return given[0]
    secret = unquote(url.password or "")
    if not secret:
        return None
    user = unquote(url.username or "default")
    return hmac.new(secret.encode(), f"taskcost reader of {database} for {user}".encode(), hashlib.sha256).hexdigest()


def _policy(name: str, database: str, table: str, using: str, to: str) -> str:
    on = f"{ident(database)}.{ident(table)}"
    return f"CREATE ROW POLICY OR REPLACE {ident(name)} ON {on} FOR SELECT USING {using} TO {to}"


def setup_statements(database: str, password: str) -> list[str]:
    """The statements that set the reader up (each idempotent), in the order they run."""
    reader = ident(reader_name(database))
    hashed = hashlib.sha256(password.encode()).hexdigest()
    out = [
        f"CREATE USER IF NOT EXISTS {reader} IDENTIFIED WITH sha256_hash BY {literal(hashed)} "
        f"DEFAULT DATABASE {ident(database)}",
        f"ALTER USER {reader} IDENTIFIED WITH sha256_hash BY {literal(hashed)} DEFAULT DATABASE {ident(database)}",
    ]
    for table in ROW_TABLES:
        out.append(_policy("taskcost_all_rows", database, table, "1", f"ALL EXCEPT {reader}"))
        out.append(
            _policy("taskcost_project", database, table, f"project = getSetting({literal(PROJECT_SETTING)})", reader)
        )
    readable = (*PUBLIC_RELATIONS, *INTERNAL_VIEWS, *ROW_TABLES)
    out += [f"GRANT SELECT ON {ident(database)}.{ident(name)} TO {reader}" for name in readable]
    return out


def drop_statements(database: str) -> list[str]:
    """What undoes ``setup_statements`` (dropping the database leaves users and row policies in place)."""
    out = [f"DROP USER IF EXISTS {ident(reader_name(database))}"]
    for table in ROW_TABLES:
        for name in ("taskcost_project", "taskcost_all_rows"):
            out.append(f"DROP ROW POLICY IF EXISTS {ident(name)} ON {ident(database)}.{ident(table)}")
    return out


def _reader_client(dsn: str, database: str, password: str) -> Any:
    import clickhouse_connect

    url = urlparse(dsn)
    return clickhouse_connect.get_client(
        host=url.hostname or "localhost",
        port=url.port or 8123,
        username=reader_name(database),
        password=password,
        secure=url.scheme == "https",
        database=database,
        autogenerate_session_id=False,  # no session: nothing one query sets stays for the next
    )


@dataclass
class ReaderAccess:
    """How a project's user SQL reaches the server: as the reader (``client``), or, when ``client`` is None, as the
    connecting user with the query check alone (``reason`` says why)."""

    client: Any = None
    reader: str | None = None
    reason: str = ""
    _closer: Any = field(default=None, repr=False)

    @classmethod
    def off(cls, reason: str) -> ReaderAccess:
        return cls(reason=reason)

    @classmethod
    def open(cls, admin: Any, dsn: str, database: str, manage: bool) -> ReaderAccess:
        """Set the reader up (``manage``: a read-write open) and connect as it. Never raises: without access
        management the store goes on with the query check alone, and says why (one warning)."""
        if urlparse(dsn).scheme not in ("clickhouse", "http", "https"):
            return cls.off("not available on chDB (no access management): the query check alone holds the boundary")
        password = reader_password(dsn, database)
        if password is None:
            return cls._warn(
                "the connecting user has no password (a reader's password derived from it would be guessable) "
                "and the dsn gives no reader_password"
            )
        if manage:
            try:
                for statement in setup_statements(database, password):
                    admin.command(statement)
            except Exception as exc:
                return cls._warn(f"the server or the connecting user refused access management: {_first_line(exc)}")
        try:
            client = _reader_client(dsn, database, password)
        except Exception as exc:
            why = "it was never set up: open read-write once" if not manage else _first_line(exc)
            return cls._warn(f"cannot connect as {reader_name(database)} ({why})")
        try:
            got = client.query(_PROBE, settings={PROJECT_SETTING: "probe", "readonly": 1}).result_rows
            if [tuple(r) for r in got] != [("probe",)]:
                raise ValueError(f"the probe answered {got!r}")
        except Exception as exc:
            with contextlib.suppress(Exception):
                client.close()
            return cls._warn(f"the custom setting {PROJECT_SETTING} was refused: {_first_line(exc)}")
        access = cls(client=client, reader=reader_name(database))
        access._closer = weakref.finalize(access, _close, client)
        log.info("user SQL of a project runs as %s, under its row policies, besides the query check", access.reader)
        return access

    @classmethod
    def _warn(cls, why: str) -> ReaderAccess:
        log.warning(
            "ClickHouse row policies and reader not in use (%s); user SQL is held by the query check alone", why
        )
        return cls.off(why)

    @property
    def summary(self) -> dict[str, Any]:
        """For /readyz: whether project SQL runs as the reader under row policies, and why not."""
        if self.client is not None:
            return {"row_policies": True, "reader": self.reader, "project_setting": PROJECT_SETTING}
        return {"row_policies": False, "reason": self.reason}

    def query_arrow(self, admin: Any, sql: str, settings: dict[str, Any] | None, project: str | None) -> Any:
        """Run checked user SQL: a project's as the reader with its project setting, else as ``admin`` (unchanged)."""
        if self.client is None or project is None:
            return admin.query_arrow(sql, settings=settings)
        scoped = {k: v for k, v in (settings or {}).items() if k != "readonly"}
        return self.client.query_arrow(sql, settings={**scoped, PROJECT_SETTING: project, "readonly": 1})

    def close(self) -> None:
        if self._closer is not None:
            self._closer()


def _close(client: Any) -> None:
    with contextlib.suppress(Exception):
        client.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
