"""One precedence rule: argument > TASKCOST_* env > config file > default."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from taskcost.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("TASKCOST_DB", "TASKCOST_PORT", "TASKCOST_CONFIG", "TASKCOST_SQL_MAX_ROWS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults() -> None:
    s = load_settings()
    assert (str(s.db), s.port, s.host) == ("taskcost.duckdb", 4318, "127.0.0.1")


def test_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "taskcost.toml").write_text('port = 5000\ndb = "file.duckdb"\nsql_max_rows = 7\n')
    assert load_settings().port == 5000
    monkeypatch.setenv("TASKCOST_PORT", "6000")
    s = load_settings()
    assert (s.port, str(s.db), s.sql_max_rows) == (6000, "file.duckdb", 7)
    assert load_settings(port=7000).port == 7000
    assert load_settings(port=None).port == 6000  # None means "not given"


def test_config_file_named_by_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("port = 5111\n")
    monkeypatch.setenv("TASKCOST_CONFIG", str(other))
    assert load_settings().port == 5111
    monkeypatch.setenv("TASKCOST_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ValueError, match="not a file"):
        load_settings()


def test_bad_values_and_unknown_keys_are_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TASKCOST_PORT", "99999")
    with pytest.raises(ValidationError, match="port"):
        load_settings()
    monkeypatch.delenv("TASKCOST_PORT")
    (tmp_path / "taskcost.toml").write_text("prot = 1\n")
    with pytest.raises(ValidationError, match="prot"):
        load_settings()


def test_the_normalisers_defaults_are_the_settings_defaults() -> None:
    """One definition each: the task id attributes (the normaliser's) and the pricing attributes the normaliser
    carries (OTel's names, which pricing maps to the service tier)."""
    from taskcost.normalize import DEFAULT_RULES
    from taskcost.pricing import DEFAULT_PRICING_ATTRIBUTES

    s = Settings()
    assert tuple(s.task_id_attributes) == DEFAULT_RULES.task_id_attributes
    assert DEFAULT_RULES.pricing_attributes == tuple(DEFAULT_PRICING_ATTRIBUTES) == tuple(s.pricing_attributes)
