"""What `taskcost serve` says, or refuses, about authentication before it binds (the rule itself:
``taskcost.collector.AuthPolicy``, asked at every request)."""

from __future__ import annotations

from taskcost.settings import Settings

__all__ = ["auth_notes", "auth_refusal", "auth_summary"]


def auth_refusal(settings: Settings, keys_ever: bool, first_keys: bool) -> str | None:
    """Why the server must not start with these settings (None: it may)."""
    host = settings.host
    if not settings.listens_beyond_loopback():
        return None
    if settings.auth == "off":
        return (
            f"refusing to serve {host} with auth = off: authentication can be turned off on a loopback address only "
            f"(127.0.0.1, ::1, localhost). Drop auth = off (TASKCOST_AUTH, --auth): on {host} keys are required"
        )
    if settings.auth == "auto" and not (keys_ever or first_keys or settings.allow_unauthenticated):
        return (
            f"refusing to serve {host} without authentication: no API key exists. Create keys first "
            f"(taskcost keys create PROJECT --kind ingest --db {settings.db}), have the first start create them "
            "(--first-keys-project PROJECT, TASKCOST_FIRST_KEYS_PROJECT), start with --auth on (no key gets in "
            "until you create one through the server: taskcost keys create, with its admin token), or pass "
            "--allow-unauthenticated (no key needed until the first one is created)"
        )
    return None


def auth_notes(settings: Settings, keys_ever: bool, active: bool, required: bool) -> list[str]:
    """The warnings the log shows once at start."""
    notes = []
    if settings.auth == "off" and keys_ever:
        notes.append(
            "WARNING: AUTHENTICATION IS OFF (auth = off) although this database has API keys: they are ignored, and "
            "every caller that reaches this server reads every project's rows and sends spans without a key. Remove "
            "auth = off (TASKCOST_AUTH, taskcost.toml, --auth) to require the keys again"
        )
    elif required and not active:
        notes.append(
            "authentication is on and no active API key exists (every key was revoked, or none was created yet): "
            "every request but /healthz and /readyz is refused, except with the admin token. Get back in by "
            "creating a key: "
            f"taskcost keys create PROJECT --kind ingest|read --db {settings.db} (beside the running server)"
        )
    elif not required and settings.listens_beyond_loopback():
        notes.append(
            f"WARNING: serving {settings.host} without authentication (--allow-unauthenticated) until the first "
            "API key is created"
        )
    return notes


def auth_summary(settings: Settings, required: bool) -> str:
    """The start line's word on authentication: the rule, not a state read once (a key created while the server
    runs turns authentication on at once, with auth = auto)."""
    if settings.auth == "off":
        return "AUTHENTICATION OFF (auth = off)"
    if required:
        return "API keys required"
    return "no auth until the first API key is created: taskcost keys create PROJECT --kind ingest|read"
