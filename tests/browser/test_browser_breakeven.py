"""The Breakeven page in a real browser: its answer, monthly costs and breakeven point are the CLI's (`taskcost
breakeven --format json` on a copy of the same demo database), and a what-if control ($ per GPU-hour, a GPU offer)
moves them to the CLI's answer for that option; on an empty store it says there is nothing to compare."""

from __future__ import annotations

import functools
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import choose, control, number, open_page, settle, shot
from tests.conftest import Server, run_cli


@pytest.fixture(scope="module")
def cli_db(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the served demo database for the CLI (DuckDB lets one process hold a file)."""
    db = tmp_path_factory.mktemp("breakeven-cli") / "demo.duckdb"
    shutil.copy(demo_db, db)
    return db


@functools.cache
def cli_breakeven(db: Path, *args: str) -> dict[str, Any]:
    """The CLI's answer (once per question: the database does not change)."""
    done = run_cli("breakeven", "--db", str(db), *args, "--format", "json")
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def money_shown(page: Any, card: str) -> Decimal:
    return Decimal(str(number(page.locator(f"#{card} .tc-money").inner_text())))


def breakeven_shown(page: Any) -> float | None:
    text = page.locator("#breakeven-point").inner_text().strip()
    return None if text == "never" else number(text)


def assert_page_is_the_cli(page: Any, doc: dict[str, Any]) -> None:
    s = doc["summary"]
    assert page.locator("#breakeven-verdict").inner_text().strip() == s["verdict"]
    for card, key in (
        ("breakeven-api", "api_monthly_usd"),
        ("breakeven-always-on", "rent_always_on_usd"),
        ("breakeven-autoscaled", "rent_autoscaled_usd"),
        ("breakeven-hybrid", "best_hybrid_usd"),
    ):
        assert money_shown(page, card) == Decimal(s[key]).quantize(Decimal("0.01")), card  # a month, to the cent
    want = s["breakeven_tokens_per_hour"]
    assert breakeven_shown(page) == (None if want is None else round(want))
    # every money figure carries its coverage: here, the calls with an API rate
    calls, excluded = s["calls"], s["excluded_calls"]
    assert f"{calls - excluded:,} of {calls:,} calls priced" in page.locator("#breakeven-api").inner_text()
    # the sensitivity table: the base case and the four others, as the CLI has them
    sens = doc["tables"]["sensitivity"]
    for i, raw in enumerate(sens["rows"]):
        r = dict(zip(sens["columns"], raw, strict=True))
        cells = page.locator(f"#breakeven-sensitivity-{i} td").all_inner_texts()
        assert cells[0] == r["case"]
        be = r["breakeven_tokens_per_hour"]
        assert cells[6] == ("never" if be is None else f"{be:,.0f}")
        assert number(cells[3]) == pytest.approx(float(r["rent_always_on_usd"]), abs=0.005)


def test_an_empty_store_shows_the_empty_state(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/breakeven")
    assert page.locator(".tc-empty").count() == 1
    assert page.locator("#breakeven-curve").count() == 0
    open_page(page, empty_server, "/breakeven?utilisation=7")  # a bad what-if value: a message, not a traceback
    assert "bad what-if value: utilisation" in page.locator(".tc-error").inner_text()


def test_the_answer_and_a_what_if_price_are_the_clis(page: Any, demo_server: Server, cli_db: Path) -> None:
    open_page(page, demo_server, "/breakeven")
    base = cli_breakeven(cli_db)
    assert_page_is_the_cli(page, base)
    # the plain answer, whichever it is for the demo's traffic at the default offer
    s, answer = base["summary"], page.locator("#breakeven-answer").inner_text()
    points = [
        s.get(k)
        for k in (
            "breakeven_tokens_per_hour",
            "breakeven_autoscaled_tokens_per_hour",
            "breakeven_hybrid_tokens_per_hour",
        )
    ]
    cheapest = min(Decimal(s[k]) for k in ("rent_always_on_usd", "rent_autoscaled_usd", "best_hybrid_usd"))
    if cheapest < Decimal(s["api_monthly_usd"]):
        assert answer.startswith("Renting is cheaper at today's volume")
    elif any(p is not None for p in points):
        first = min(float(p) for p in points if p is not None)
        assert answer.startswith(f"The API is cheaper: renting starts to pay at {first:,.0f} tokens/hour")
    else:
        assert answer.startswith("Renting never wins at these prices")

    usd = control(page, "usd_per_gpu_hour")
    usd.fill("2")
    usd.press("Enter")
    settle(page)
    assert "usd_per_gpu_hour=2" in page.url
    cheaper = cli_breakeven(cli_db, "--usd-per-gpu-hour", "2")
    assert cheaper["summary"]["breakeven_tokens_per_hour"] is not None  # the what-if moves the point onto the curve
    assert_page_is_the_cli(page, cheaper)
    marks = page.locator("#breakeven-curve .textpoint").evaluate_all("els => els.map(e => e.textContent)")
    assert any(f"{cheaper['summary']['breakeven_tokens_per_hour']:,.0f}/h" in m for m in marks), marks
    shot(page, "breakeven")

    page.reload()  # the URL is the state
    settle(page)
    assert_page_is_the_cli(page, cheaper)


def test_a_gpu_offer_prices_renting_at_its_rate(page: Any, demo_server: Server, cli_db: Path) -> None:
    open_page(page, demo_server, "/breakeven")
    choose(page, "gpu", "lambda-8x-a100-80gb-sxm")
    assert "gpu=lambda-8x-a100-80gb-sxm" in page.url
    doc = cli_breakeven(cli_db, "--gpu", "lambda-8x-a100-80gb-sxm")
    assert doc["summary"]["usd_per_gpu_hour"] == "1.79"
    assert_page_is_the_cli(page, doc)
    assert "$1.79/GPU-hour" in page.locator("#breakeven-assumptions").inner_text()
