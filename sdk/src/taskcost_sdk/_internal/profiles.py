"""Infra profiles: which infrastructure serves an endpoint, keyed by its base URL.

An agent may call a paid API and a self-hosted vLLM cluster. ``configure(infra_profiles={base_url: tags})``
(or the ``TASKCOST_INFRA_PROFILES`` JSON environment variable) maps each endpoint to its infra tags; every
auto-instrumented call to a URL under that base gets them as span attributes. The longest matching base
URL wins. Profiles are checked at configure() time (a bad tag raises there, never at call time).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from opentelemetry.util.types import AttributeValue

from . import names as n
from .values import coerce_infra

__all__ = ["EMPTY", "ENV_INFRA_PROFILES", "Endpoint", "Profile", "ProfileTable", "parse_profiles", "profiles_from_env"]


ENV_INFRA_PROFILES = "TASKCOST_INFRA_PROFILES"
_CACHE_SIZE = 256
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str
    host: str
    port: int | None
    path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url.strip())
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"not an http(s):// URL: {url!r}")
        port = parts.port if parts.port is not None else _DEFAULT_PORTS[parts.scheme]
        return cls(parts.scheme, parts.hostname.lower(), port, parts.path.rstrip("/"))

    def covers(self, other: Endpoint) -> bool:
        return (
            self.scheme == other.scheme
            and self.host == other.host
            and self.port == other.port
            and (not self.path or other.path == self.path or other.path.startswith(self.path + "/"))
        )

    def attributes(self) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {n.SERVER_ADDRESS: self.host}
        if self.port is not None:
            attributes[n.SERVER_PORT] = self.port
        return attributes


@dataclass(frozen=True, slots=True)
class Profile:
    endpoint: Endpoint
    provider: str | None
    attributes: Mapping[str, AttributeValue]


def parse_profiles(profiles: Mapping[str, Mapping[str, object]] | None, source: str) -> list[Profile]:
    """Check and convert profiles; raises ValueError/TypeError naming ``source`` on any invalid entry."""
    parsed: list[Profile] = []
    for url, tags in (profiles or {}).items():
        try:
            endpoint = Endpoint.parse(str(url))
            if not isinstance(tags, Mapping):
                raise TypeError(f"the tags of {url!r} must be a mapping, got {type(tags).__name__}")
            provider: str | None = None
            attributes: dict[str, AttributeValue] = {}
            for key, value in tags.items():
                if value is None:
                    continue
                if key == "provider":
                    provider = str(value).strip() or None
                    continue
                attributes[n.CALL_OVERRIDE_ATTRIBUTES.get(key, key)] = coerce_infra(key, value)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"taskcost_sdk: invalid infra profile in {source}: {exc}") from None
        parsed.append(Profile(endpoint, provider, attributes))
    # Longest base path first, so the most specific profile of a host wins.
    parsed.sort(key=lambda p: len(p.endpoint.path), reverse=True)
    return parsed


def profiles_from_env(env: Mapping[str, str]) -> list[Profile]:
    raw = env.get(ENV_INFRA_PROFILES, "").strip()
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"taskcost_sdk: {ENV_INFRA_PROFILES} must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"taskcost_sdk: {ENV_INFRA_PROFILES} must be a JSON object of base URL -> tags")
    return parse_profiles(value, ENV_INFRA_PROFILES)


class ProfileTable:
    """Looks up the tags for a request's base URL (cached per URL string)."""

    def __init__(self, profiles: list[Profile]) -> None:
        self._profiles = profiles
        self._cache: dict[str, tuple[str | None, dict[str, AttributeValue]]] = {}
        self._lock = threading.Lock()

    def lookup(self, url: str) -> tuple[str | None, dict[str, AttributeValue]]:
        """(provider override or None, span attributes: server address/port plus the profile's tags)."""
        found = self._cache.get(url)
        if found is not None:
            return found
        try:
            endpoint = Endpoint.parse(url)
        except ValueError:
            return None, {}
        provider: str | None = None
        attributes = endpoint.attributes()
        for profile in self._profiles:
            if profile.endpoint.covers(endpoint):
                provider = profile.provider
                attributes.update(profile.attributes)
                break
        with self._lock:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[url] = (provider, attributes)
        return provider, attributes


EMPTY = ProfileTable([])
