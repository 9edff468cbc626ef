"""Where taskcost's files are, in the standard library only: the configuration file, the default database and the
file a running server leaves beside it. The settings registry (``taskcost.settings``) and the CLI's quick path
(``taskcost.cli._quick``, which must start in a few milliseconds) both read them from here."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "DEFAULT_DB",
    "config_file",
    "running_server",
    "server_info_path",
    "write_server_info",
]

DEFAULT_CONFIG_FILE = "taskcost.toml"
DEFAULT_DB = "taskcost.duckdb"


def config_file() -> Path:
    """The configuration file: the one ``TASKCOST_CONFIG`` names, else ``taskcost.toml`` in the working directory
    (the only place that reads the variable)."""
    return Path(os.environ.get("TASKCOST_CONFIG", DEFAULT_CONFIG_FILE))


def server_info_path(db: Path) -> Path:
    """The file a running server leaves beside its database: pid, URL and admin token (owner-only)."""
    return db.with_name(db.name + ".serve.json")


def write_server_info(db: Path, url: str, admin_token: str) -> Path:
    path = server_info_path(db)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"pid": os.getpid(), "url": url, "db": str(db.resolve()), "admin_token": admin_token}, fh)
    os.chmod(path, 0o600)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_server(db: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(server_info_path(db).read_text())
        alive = _pid_alive(int(info["pid"])) and isinstance(info["url"], str)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if alive else None
