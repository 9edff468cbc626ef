"""Offline price data refresh: a genai-prices data file, validated, kept beside the database, used by new
prices (and picked up by a running pricer); the bundled data stays the default."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from taskcost.pricing import (
    DataFileError,
    PricingConfig,
    PricingSource,
    TokenUsage,
    bundled_data,
    current_data,
    install_data,
    price_call,
    reset_data,
)

M = Decimal(1_000_000)
DEC = datetime(2026, 12, 2, tzinfo=UTC)

# A data file in genai-prices' own format (the provider array of prices/new_data/v2/data.json), hand-written:
# gpt-4o at $3 / $12 with cached input $1.50 until 2026-12-01, then $2 / $8 / $1.
NEWER = [
    {
        "id": "openai",
        "name": "OpenAI",
        "api_pattern": "https://api\\.openai\\.com",
        "models": [
            {
                "id": "gpt-4o",
                "match": {"or": [{"equals": "gpt-4o"}, {"starts_with": "gpt-4o-2024"}]},
                "prices": [
                    {"prices": {"input_mtok": "3", "output_mtok": "12", "cache_read_mtok": "1.5"}},
                    {
                        "constraint": {"start_date": "2026-12-01"},
                        "prices": {"input_mtok": "2", "output_mtok": "8", "cache_read_mtok": "1"},
                    },
                ],
            }
        ],
    }
]


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_install_validates_keeps_and_uses_a_newer_file(tmp_path: Path) -> None:
    src = write(tmp_path / "data.json", NEWER)
    prices = tmp_path / "t.duckdb.prices"
    data = install_data(str(src), prices)
    assert (data.providers, data.models) == (1, 1)
    assert data.sha256 is not None and data.label.startswith(f"{bundled_data().label}, data {data.sha256[:12]}")
    assert (prices / f"data-{data.sha256[:12]}.json").read_bytes() == src.read_bytes()
    meta = json.loads((prices / "current.json").read_text())
    assert meta["origin"] == str(src) and meta["sha256"] == data.sha256
    loaded = current_data(prices)
    assert loaded.label == data.label
    u = TokenUsage(input_tokens=10_000, cache_read_tokens=6_000, output_tokens=500)
    nov = price_call("openai", "gpt-4o", u, datetime(2026, 11, 1, tzinfo=UTC), data=loaded)
    dec = price_call("openai", "gpt-4o", u, DEC, data=loaded)
    assert nov.cost_usd == (4_000 * 3 + 6_000 * Decimal("1.5") + 500 * 12) / M
    assert dec.cost_usd == (4_000 * 2 + 6_000 * 1 + 500 * 8) / M
    assert dec.source == data.label
    # a model the file does not know is unpriced, not $0
    assert price_call("anthropic", "claude-haiku-4-5", u, DEC, data=loaded).cost_usd is None
    assert reset_data(prices) and current_data(prices).bundled
    assert current_data(None).label == bundled_data().label


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON: .* at line 1, column 2"),
        ('{"providers": []}', "non-empty JSON array of providers"),
        (json.dumps([{"id": "x", "models": []}]), r"\[0\]\(x\).name: Field required"),
        (
            json.dumps(
                [{**NEWER[0], "models": [{"id": "m", "match": {"equals": "m"}, "prices": {"cache_read_mtok": "1"}}]}]
            ),
            "unusable prices: openai/m: Missing ancestor price",
        ),
        (json.dumps([NEWER[0], NEWER[0]]), "provider 'openai' appears twice"),
    ],
)
def test_bad_files_are_refused_and_nothing_changes(tmp_path: Path, content: str, message: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(content)
    prices = tmp_path / "prices"
    with pytest.raises(DataFileError, match=message):
        install_data(str(src), prices)
    assert not (prices / "current.json").exists()


def test_missing_source_and_missing_kept_file(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="cannot read"):
        install_data(str(tmp_path / "nope.json"), tmp_path / "prices")
    prices = tmp_path / "prices"
    install_data(str(write(tmp_path / "d.json", NEWER)), prices)
    for f in prices.glob("data-*.json"):
        f.unlink()
    with pytest.raises(DataFileError, match="missing; run `taskcost prices reset`"):
        current_data(prices)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    """A price mirror on the local network: a plain HTTP server on loopback."""
    write(tmp_path / "data.json", NEWER)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_install_from_a_url(tmp_path: Path, mirror: str) -> None:
    data = install_data(f"{mirror}/data.json", tmp_path / "prices")
    assert data.origin == f"{mirror}/data.json" and data.providers == 1
    with pytest.raises(DataFileError, match="HTTP 404"):
        install_data(f"{mirror}/missing.json", tmp_path / "prices")


def test_a_running_pricer_picks_up_new_data_and_keeps_the_old_on_error(tmp_path: Path) -> None:
    prices = tmp_path / "prices"
    source = PricingSource(PricingConfig(prices_dir=prices), check_interval_s=0)
    assert source.current().data.bundled
    install_data(str(write(tmp_path / "d.json", NEWER)), prices)
    assert source.current().data.providers == 1
    (prices / "current.json").write_text("{broken")
    assert source.current().data.providers == 1  # the previous prices stay in use
    assert source.error is not None and "unreadable" in source.error
    with pytest.raises(DataFileError):
        source.reload()
