"""Docs that tests keep true: settings, views and columns, the attribute contract, the README."""

from __future__ import annotations

import re
from pathlib import Path

from taskcost.normalize import _names
from taskcost.settings import Settings
from taskcost.store import VIEWS, DuckDBStore

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
ATTR_LITERAL = re.compile(r"""["'](taskcost\.[a-z0-9_]+(?:\.[a-z0-9_]+)*)["']""")


def _code_files() -> list[Path]:
    return [*sorted((REPO / "taskcost").rglob("*.py")), *sorted((REPO / "sdk" / "src").rglob("*.py"))]


def _module_prefixes() -> set[str]:
    """`taskcost.<x>` strings that are module or logger names, not attributes."""
    pkg = REPO / "taskcost"
    files = {"toml", "duckdb"}  # taskcost.toml, taskcost.duckdb: file names
    return files | {p.stem for p in pkg.iterdir() if p.suffix == ".py"} | {p.name for p in pkg.iterdir() if p.is_dir()}


RAW_ONLY = "## Emitted by the SDK, kept raw"


def documented_attributes(*, read_only: bool = False) -> set[str]:
    """taskcost.* names in docs/attributes.md; ``read_only``: only those the collector reads (not raw-only)."""
    text = (DOCS / "attributes.md").read_text()
    if read_only:
        text = text.split(RAW_ONLY)[0]
    return set(re.findall(r"`(taskcost\.[a-z0-9_.]+)`", text))


def test_every_taskcost_attribute_in_the_code_is_documented() -> None:
    modules = _module_prefixes()
    used: dict[str, Path] = {}
    for path in _code_files():
        for name in ATTR_LITERAL.findall(path.read_text()):
            if name.split(".")[1] not in modules:
                used.setdefault(name, path)
    assert used, "the scan found no taskcost.* attribute at all: the test is broken"
    missing = {n: str(p.relative_to(REPO)) for n, p in used.items() if n not in documented_attributes()}
    assert not missing, f"taskcost.* attributes used in code but not in docs/attributes.md: {missing}"


def test_every_documented_taskcost_attribute_is_read_by_the_collector() -> None:
    read = {v for k, v in vars(_names).items() if k.isupper() and isinstance(v, str) and v.startswith("taskcost.")}
    assert documented_attributes(read_only=True) == read


def test_every_setting_is_documented() -> None:
    doc = (DOCS / "configuration.md").read_text()
    for name in Settings.model_fields:
        assert f"| `{name}` | `TASKCOST_{name.upper()}` |" in doc, f"setting {name} is not in docs/configuration.md"


def _doc_views() -> dict[str, set[str]]:
    views: dict[str, set[str]] = {}
    current = None
    for line in (DOCS / "schema.md").read_text().splitlines():
        m = re.match(r"## `(\w+)` — ", line)
        if m:
            current = m.group(1)
            views[current] = set()
        elif line.startswith("## "):
            current = None
        elif current and line.startswith("| `"):
            first_cell = line.split("|")[1]
            views[current].update(re.findall(r"`(\w+)`", first_cell))
    return views


def test_every_view_and_column_is_documented(tmp_path: Path) -> None:
    documented = _doc_views()
    assert set(documented) == set(VIEWS)
    with DuckDBStore.open(tmp_path / "docs.duckdb") as st:
        for view in VIEWS:
            columns = {r[0] for r in st.query(f"DESCRIBE {view}").rows}
            assert columns == documented[view], f"{view}: code and docs/schema.md differ"


def test_raw_spans_columns_are_documented(tmp_path: Path) -> None:
    doc = (DOCS / "schema.md").read_text()
    section = doc[doc.index("## `spans`") :].split("\n## ")[0]
    with DuckDBStore.open(tmp_path / "docs.duckdb") as st:
        columns = {r[0] for r in st.query("DESCRIBE spans").rows}
    assert columns and all(f"`{c}`" in section for c in columns), columns


def test_readme_first_screen_has_the_two_commands() -> None:
    first_screen = "\n".join((REPO / "README.md").read_text().splitlines()[:40])
    assert "make run" in first_screen and "make test" in first_screen
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci


def test_every_analytics_question_and_option_is_documented() -> None:
    """docs/analytics.md has a section per question (its CLI command named in it) naming every option."""
    from taskcost.analytics import QUESTIONS, Filters

    text = (DOCS / "analytics.md").read_text()
    common = ("Asking", "Filters", "Money", "The answer")
    sections = [s for s in re.split(r"^## ", text, flags=re.M)[1:] if not s.startswith(common)]
    for name, q in QUESTIONS.items():
        section = next((s for s in sections if f"taskcost {name} " in s or f"taskcost {name}\n" in s), None)
        assert section is not None, f"docs/analytics.md has no section using `taskcost {name}`"
        for option in q.options.model_fields:
            flag = "--" + option.replace("_", "-")
            assert f"`{option}`" in section or flag in section, f"{name}: option {option} is not documented"
    for field in Filters.model_fields:
        assert f"`{field}`" in text, f"filter {field} is not in docs/analytics.md"
