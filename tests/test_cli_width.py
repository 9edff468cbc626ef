"""Tables a terminal can read: a table wider than the terminal is printed a record per row, never with its cells cut
to "$0.0…" (at 80 columns `changes` had 23 columns of "…", `cost --by model` cut its money)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from taskcost.cli._render import print_rows


def _printed(width: int, columns: list[str], rows: list[list[str]]) -> str:
    out = Console(file=io.StringIO(), width=width, color_system=None)
    print_rows(out, columns, rows, "title")
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize("width", [80, 120])
def test_a_wide_table_is_a_record_per_row_and_no_cell_is_cut(width: int) -> None:
    columns = [f"column_{i}_usd" for i in range(12)]
    rows = [[f"${i}.123456" for i in range(12)], [f"${i}.654321" for i in range(12)]]
    text = _printed(width, columns, rows)
    assert "…" not in text and "a record per row" in text
    assert all(len(line) <= width for line in text.splitlines())
    lines = [line.split() for line in text.splitlines()]
    for row in rows:  # each value whole, on its column's line
        assert all([column, value] in lines for column, value in zip(columns, row, strict=True))
    assert text.count("-- 1 --") == 1 and text.count("-- 2 --") == 1


@pytest.mark.parametrize("width", [80, 120])
def test_a_table_that_fits_stays_a_table(width: int) -> None:
    text = _printed(width, ["kind", "tasks"], [["triage", "137"], ["report", "26"]])
    assert "┃ kind" in text and "record per row" not in text and "…" not in text
