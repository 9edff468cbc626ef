"""Price data: the data bundled with genai-prices (the default), or a newer data file loaded offline.

``taskcost prices update --from FILE|URL`` validates a genai-prices ``data.json`` (the provider array the
library's own updater fetches) and keeps it in the prices directory (beside the database unless configured):

    <prices_dir>/data-<sha256[:12]>.json   the file, byte for byte as loaded (kept: old costs refer to it)
    <prices_dir>/current.json               which one is in use, where it came from, when, and its counts

Nothing here touches the network unless given a URL; nothing changes the library's global state.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from genai_prices import Usage
from genai_prices import types as gp
from genai_prices.data_snapshot import DataSnapshot

__all__ = [
    "DataFileError",
    "PriceData",
    "bundled_data",
    "check_providers",
    "current_data",
    "install_data",
    "load_data_file",
    "parse_data",
    "price_sets",
    "read_source",
    "reset_data",
]

LIBRARY = f"genai-prices {version('genai-prices')}"
CURRENT = "current.json"
MAX_DATA_BYTES = 64 * 1024 * 1024


class DataFileError(ValueError):
    """A price data file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class PriceData:
    """One set of API prices and its provenance."""

    snapshot: DataSnapshot
    label: str  # stored as each cost's price_source
    sha256: str | None = None  # None: the bundled data
    origin: str | None = None  # the file or URL it was loaded from
    installed_at: str | None = None
    providers: int = 0
    models: int = 0

    @property
    def bundled(self) -> bool:
        return self.sha256 is None


@functools.cache
def bundled_data() -> PriceData:
    from genai_prices.data import providers

    return PriceData(
        DataSnapshot(providers=providers, from_auto_update=False),
        LIBRARY,
        providers=len(providers),
        models=sum(len(p.models) for p in providers),
    )


def _label(sha256: str, installed_at: str | None) -> str:
    day = f", loaded {installed_at[:10]}" if installed_at else ""
    return f"{LIBRARY}, data {sha256[:12]}{day}"


def _loc(raw: Any, loc: tuple[Any, ...]) -> str:
    """A pydantic location in the provider array, with the provider and model ids where known."""
    parts: list[str] = []
    node = raw
    for step in loc:
        if isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node):
            node = node[step]
            ident = node.get("id") if isinstance(node, dict) else None
            parts.append(f"[{step}]" + (f"({ident})" if ident else ""))
        else:
            node = node.get(step) if isinstance(node, dict) else None
            parts.append(f".{step}")
    return "".join(parts).lstrip(".")


def parse_data(content: bytes, origin: str = "<data>") -> list[gp.Provider]:
    """Validate a genai-prices data file and return its providers, or raise DataFileError saying where.

    Checks: JSON, the library's provider schema, unique provider ids, and that every price of every model
    can actually price a call (the library validates a price set only when it is used).
    """
    from pydantic import ValidationError

    try:
        raw = json.loads(content)
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{origin}: not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{origin}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(raw, list) or not raw:
        raise DataFileError(f"{origin}: expected a non-empty JSON array of providers (genai-prices data.json)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            providers = gp._providers_from_raw(raw)
    except ValidationError as exc:
        first = exc.errors()[:5]
        detail = "; ".join(f"{_loc(raw, tuple(e['loc']))}: {e['msg']}" for e in first)
        more = f" (and {exc.error_count() - len(first)} more)" if exc.error_count() > len(first) else ""
        raise DataFileError(f"{origin}: not genai-prices data: {detail}{more}") from None
    except (TypeError, ValueError) as exc:
        raise DataFileError(f"{origin}: not genai-prices data: {exc}") from None
    problems = check_providers(providers)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise DataFileError(f"{origin}: unusable prices: " + "; ".join(problems[:5]) + more)
    return providers


def price_sets(model: gp.ModelInfo) -> list[gp.ModelPrice]:
    """Every set of rates a model can price with: each dated price, alone and with each variant applied."""
    standard = model.prices if isinstance(model.prices, list) else [gp.ConditionalPrice(prices=model.prices)]
    out = []
    for cp in standard:
        out.append(cp.prices)
        for variant in model.price_variants or ():
            merged = gp.ModelPrice(**{k: v for k, v in cp.prices.__dict__.items() if not k.startswith("_")})
            for key, value in variant.prices.__dict__.items():
                if value is not None and not key.startswith("_"):
                    object.__setattr__(merged, key, value)
            out.append(merged)
    return out


def check_providers(providers: list[gp.Provider]) -> list[str]:
    """Problems that make price data unusable: duplicate providers, rates that cannot price a call."""
    seen: set[str] = set()
    problems: list[str] = []
    probe = Usage(input_tokens=1000, output_tokens=1000)
    for p in providers:
        if p.id in seen:
            problems.append(f"provider {p.id!r} appears twice")
        seen.add(p.id)
        for m in p.models:
            for price in price_sets(m):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        price.calc_price(probe)
                except (ValueError, TypeError, KeyError) as exc:
                    problems.append(f"{p.id}/{m.id}: {exc}")
                    break
    return problems


def read_source(source: str, timeout_s: float = 30.0) -> bytes:
    """The bytes of a local file, a ``file://`` URL or an ``http(s)://`` URL (a mirror on your network)."""
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            with httpx.stream("GET", source, timeout=timeout_s, follow_redirects=True) as resp:
                if resp.status_code != 200:
                    raise DataFileError(f"{source}: HTTP {resp.status_code}")
                chunks, size = [], 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > MAX_DATA_BYTES:
                        raise DataFileError(f"{source}: larger than {MAX_DATA_BYTES} bytes")
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.HTTPError as exc:
            raise DataFileError(f"{source}: cannot fetch: {exc}") from None
    path = Path(source.removeprefix("file://"))
    try:
        if path.stat().st_size > MAX_DATA_BYTES:
            raise DataFileError(f"{path}: larger than {MAX_DATA_BYTES} bytes")
        return path.read_bytes()
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or exc}") from None


def load_data_file(path: Path, meta: dict[str, Any] | None = None) -> PriceData:
    content = path.read_bytes()
    sha = hashlib.sha256(content).hexdigest()
    if meta and meta.get("sha256") not in (None, sha):
        raise DataFileError(
            f"{path}: its sha256 {sha[:12]} is not the {str(meta['sha256'])[:12]} recorded in {CURRENT}"
        )
    providers = parse_data(content, str(path))
    meta = meta or {}
    return PriceData(
        DataSnapshot(providers=providers, from_auto_update=False),
        _label(sha, meta.get("installed_at")),
        sha256=sha,
        origin=meta.get("origin", str(path)),
        installed_at=meta.get("installed_at"),
        providers=len(providers),
        models=sum(len(p.models) for p in providers),
    )


def _write_atomic(path: Path, content: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        fh.write(content)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def install_data(source: str, prices_dir: Path) -> PriceData:
    """Load ``source`` (file or URL), validate it, keep it in ``prices_dir`` and make it the data in use."""
    content = read_source(source)
    providers = parse_data(content, source)
    sha = hashlib.sha256(content).hexdigest()
    prices_dir.mkdir(parents=True, exist_ok=True)
    name = f"data-{sha[:12]}.json"
    if not (prices_dir / name).exists():
        _write_atomic(prices_dir / name, content)
    installed_at = datetime.now(UTC).isoformat(timespec="seconds")
    meta = {
        "file": name,
        "sha256": sha,
        "origin": source,
        "installed_at": installed_at,
        "providers": len(providers),
        "models": sum(len(p.models) for p in providers),
        "library": LIBRARY,
    }
    _write_atomic(prices_dir / CURRENT, (json.dumps(meta, indent=2) + "\n").encode())
    return PriceData(
        DataSnapshot(providers=providers, from_auto_update=False),
        _label(sha, installed_at),
        sha256=sha,
        origin=source,
        installed_at=installed_at,
        providers=len(providers),
        models=sum(len(p.models) for p in providers),
    )


def reset_data(prices_dir: Path) -> bool:
    """Go back to the bundled data (the loaded files stay, for the record). True if something changed."""
    current = prices_dir / CURRENT
    if not current.exists():
        return False
    current.unlink()
    return True


def current_data(prices_dir: Path | None) -> PriceData:
    """The data in use for ``prices_dir``: the file ``current.json`` names, else the bundled data."""
    if prices_dir is None or not (prices_dir / CURRENT).is_file():
        return bundled_data()
    try:
        meta = json.loads((prices_dir / CURRENT).read_text())
        path = prices_dir / str(meta["file"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataFileError(f"{prices_dir / CURRENT}: unreadable ({exc}); run `taskcost prices reset`") from None
    if not path.is_file():
        raise DataFileError(f"{prices_dir / CURRENT} names {path.name}, which is missing; run `taskcost prices reset`")
    return load_data_file(path, meta)
