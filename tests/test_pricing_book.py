"""The price book: validated with errors that give the line and the field; discounts, custom models,
overrides, fees and tool prices, each with effective dates, applied to later calls only."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from taskcost.pricing import (
    ConfigFileError,
    PriceBook,
    Pricer,
    PricingSource,
    TokenUsage,
    load_price_book,
)
from taskcost.settings import load_settings

M = Decimal(1_000_000)
NOV = datetime(2026, 11, 20, tzinfo=UTC)
DEC = datetime(2026, 12, 2, tzinfo=UTC)
GPT4O = TokenUsage(input_tokens=10_000, cache_read_tokens=6_000, output_tokens=500)
GPT4O_LIST = (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25") + 500 * 10) / M  # $0.0225


def book(**table: object) -> PriceBook:
    return PriceBook.model_validate(table)


def test_errors_name_the_file_the_line_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "book.toml"
    path.write_text(
        'version = "2026-q4"\n'  # 1
        "\n"
        "[[discounts]]\n"  # 3
        'provider = "openai"\n'
        'percent = "15"\n'
        "\n"
        "[[discounts]]\n"  # 7
        'model = "claude-*"\n'
        "percent = 150\n"  # 9: above 100
        "\n"
        "[[models]]\n"  # 11: no output_mtok
        'model = "ft:*"\n'
        'input_mtok = "0.3"\n'
        "percnt = 5\n"  # 14: a typo
    )
    with pytest.raises(ConfigFileError) as caught:
        load_price_book(path)
    problems = caught.value.problems
    assert str(path) in str(caught.value)
    assert any(p.startswith("line 9, discounts[1].percent:") and "100" in p for p in problems), problems
    assert any(p.startswith("line 11, models[0].output_mtok: Field required") for p in problems), problems
    assert any(p.startswith("line 14, models[0].percnt: Extra inputs are not permitted") for p in problems), problems


def test_toml_syntax_errors_say_where(tmp_path: Path) -> None:
    path = tmp_path / "book.toml"
    path.write_text("[[discounts]]\npercent = = 3\n")
    with pytest.raises(ConfigFileError, match="line 2"):
        load_price_book(path)


def test_rule_level_errors_point_at_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "book.toml"
    path.write_text(
        '[[overrides]]\nmodel = "gpt-4o"\ninput_mtok = "2"\n\n'  # 1-4
        '[[discounts]]\npercent = "5"\n\n'  # 5-7
        '[[discounts]]\nprovider = "openai"\npercent = "5"\neffective_from = 2026-12-01\neffective_to = 2026-11-01\n'
    )
    with pytest.raises(ConfigFileError) as caught:
        load_price_book(path)
    text = str(caught.value)
    assert "line 5, discounts[0]: a discount needs a provider or a model" in text
    assert "line 8, discounts[1]: effective_to must be after effective_from" in text


def test_an_inline_price_book_in_taskcost_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TASKCOST_CONFIG", raising=False)
    (tmp_path / "taskcost.toml").write_text(
        'port = 5000\n\n[price_book]\nversion = "v1"\n\n[[price_book.discounts]]\nprovider = "openai"\npercent = "-3"\n'
    )
    with pytest.raises(ValidationError, match=r"taskcost.toml: line 8, discounts\[0\].percent"):
        load_settings()
    (tmp_path / "taskcost.toml").write_text(
        '[price_book]\nversion = "v1"\n\n[[price_book.discounts]]\nprovider = "openai"\npercent = "10"\n'
    )
    settings = load_settings()
    assert settings.price_book is not None and settings.price_book["version"] == "v1"
    (tmp_path / "b.toml").write_text('version = "v2"\n')
    with pytest.raises(ValidationError, match="not both"):
        load_settings(price_book_file=tmp_path / "b.toml")
    with pytest.raises(ValidationError, match="is not a file"):
        load_settings(price_book=None, clusters_file=tmp_path / "missing.toml")


def test_a_discount_changes_later_calls_only() -> None:
    pricer = Pricer(
        book=book(version="v1", discounts=[{"provider": "openai", "percent": "15", "effective_from": "2026-12-01"}])
    )
    before = pricer.price("openai", "gpt-4o", GPT4O, NOV)
    after = pricer.price("openai", "gpt-4o", GPT4O, DEC)
    assert before.cost_usd == GPT4O_LIST
    assert after.cost_usd == GPT4O_LIST * Decimal("0.85") == Decimal("0.019125")
    assert after.input_cost_usd == (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25")) * Decimal("0.85") / M
    assert after.detail is not None and after.detail["discount"]["percent"] == "15"
    assert before.book_version == after.book_version and after.book_version is not None
    assert after.book_version.startswith("v1 (")
    # not this provider: untouched
    claude = pricer.price("anthropic", "claude-haiku-4-5", TokenUsage(1000, 100), DEC)
    assert claude.cost_usd == (1000 * 1 + 100 * 5) / M


def test_the_last_matching_rule_wins_and_globs_match_models() -> None:
    pricer = Pricer(
        book=book(
            discounts=[
                {"provider": "openai", "percent": "10"},
                {"model": "GPT-4O*", "percent": "20", "name": "gpt-4o family"},
            ]
        )
    )
    p = pricer.price("openai", "gpt-4o-2024-08-06", GPT4O, DEC)
    assert p.cost_usd == GPT4O_LIST * Decimal("0.8")
    assert p.detail is not None and p.detail["discount"]["rule"] == "discounts[1] 'gpt-4o family'"
    other = pricer.price("openai", "gpt-4.1", TokenUsage(1_000_000, 0), DEC)
    assert other.cost_usd == Decimal(2) * Decimal("0.9")  # gpt-4.1 input $2/M, 10% off


def test_custom_models_overrides_fees_and_tools() -> None:
    pricer = Pricer(
        book=book(
            version="contract-7",
            models=[
                {"provider": "openai", "model": "ft:gpt-4o-mini:acme:*", "input_mtok": "0.30", "output_mtok": "1.20"}
            ],
            overrides=[{"provider": "anthropic", "model": "claude-haiku-4-5", "output_mtok": "4"}],
            fees=[{"provider": "openai", "usd_per_call": "0.0005", "effective_from": "2026-12-01"}],
            tools=[{"tool": "web_*", "usd_per_call": "0.01"}],
        )
    )
    ft = pricer.price("openai", "ft:gpt-4o-mini:acme:v3", TokenUsage(10_000, 1_000), DEC)
    assert ft.cost_usd == (10_000 * Decimal("0.30") + 1_000 * Decimal("1.20")) / M + Decimal("0.0005")
    assert ft.fee_usd == Decimal("0.0005") and ft.source is not None and ft.source.startswith("price book contract-7")
    assert ft.input_cost_usd + ft.output_cost_usd + ft.fee_usd == ft.cost_usd
    assert pricer.price("openai", "ft:gpt-4o-mini:acme:v3", TokenUsage(10_000, 1_000), NOV).fee_usd is None
    haiku = pricer.price("anthropic", "claude-haiku-4-5", TokenUsage(1000, 100), DEC)
    assert haiku.cost_usd == (1000 * 1 + 100 * 4) / M  # input from the data, output from the override
    assert haiku.detail is not None and haiku.detail["override"] == "overrides[0]"
    assert pricer.price_tool("web_search", DEC, None) == (
        Decimal("0.01"),
        "price book " + pricer.book_version + ": tools[0]",
    )
    assert pricer.price_tool("web_search", DEC, Decimal("0.02")) == (Decimal("0.02"), "span")
    assert pricer.price_tool("calculator", DEC, None) == (None, None)


def test_unknown_models_stay_unpriced_with_a_book() -> None:
    pricer = Pricer(book=book(version="v1", discounts=[{"provider": "openai", "percent": "10"}]))
    p = pricer.price("openai", "my-private-model", TokenUsage(100, 10), DEC)
    assert p.cost_usd is None and p.unpriced_reason is not None and "unknown to the price data" in p.unpriced_reason
    assert p.book_version is not None


def test_the_version_changes_with_the_content() -> None:
    a = book(version="v1", discounts=[{"provider": "openai", "percent": "10"}])
    b = book(version="v1", discounts=[{"provider": "openai", "percent": "11"}])
    assert a.label != b.label and a.label.startswith("v1 (")
    assert book().label.startswith("unversioned (")


def test_a_running_pricer_follows_edits_of_the_inline_book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TASKCOST_CONFIG", raising=False)
    monkeypatch.delenv("TASKCOST_PRICE_BOOK", raising=False)
    config = tmp_path / "taskcost.toml"
    config.write_text('[price_book]\nversion = "v1"\n')
    source = PricingSource(load_settings().pricing_config(), check_interval_s=0)
    first = source.current().book
    assert first is not None and first.version == "v1"
    config.write_text('[price_book]\nversion = "v2"\n\n[[price_book.discounts]]\nprovider = "openai"\npercent = "5"\n')
    later = time.time() + 5
    os.utime(config, (later, later))
    pricer = source.current()
    assert pricer.book is not None and pricer.book.version == "v2"
    assert pricer.price("openai", "gpt-4o", GPT4O, DEC).cost_usd == GPT4O_LIST * Decimal("0.95")
    # a book given as an argument is not replaced by the file's
    given = load_settings(price_book={"version": "arg"})
    book_given = given.pricing_config().build().book
    assert book_given is not None and book_given.version == "arg"
