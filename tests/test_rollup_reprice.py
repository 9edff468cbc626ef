"""Re-pricing keeps the task roll-up exact: the cost changes are appended to the roll-up's delta in the
re-price's own transaction (``tasks`` merges it), and the writer folds them in; ingest meanwhile goes on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from taskcost.analytics import task_summary
from taskcost.pricing import PricingSource
from taskcost.store import DuckDBStore
from tests.builders.pricing import edit_book, followed_book
from tests.builders.rollup import assert_exact, batch, llm, task_row, tool_row

V1 = 'version = "v1"\n'
V2 = (
    'version = "v2"\n'
    '\n[[discounts]]\nprovider = "openai"\npercent = "20"\neffective_from = 2026-12-01\n'
    '\n[[models]]\nmodel = "acme-ft-*"\ninput_mtok = "0.30"\noutput_mtok = "1.20"\n'
    '\n[[tools]]\ntool = "web_search"\nusd_per_call = "0.01"\n'
)


@pytest.fixture
def book(tmp_path: Path) -> Iterator[tuple[Path, PricingSource]]:
    """A price book file and the process pricer that follows it, as a server has."""
    path = tmp_path / "book.toml"
    with followed_book(path, V1) as source:
        yield path, source


def _history(store: DuckDBStore) -> None:
    """Tasks with priced, unpriced (a custom model not yet in the book), duplicate and retried calls, and tools."""
    store.write(
        batch(
            [
                llm("a1", task="t1", call_id="c1", response_id="r1", status="error"),
                llm("a2", task="t1", call_id="c1", attempt=2, response_id="r2"),
                llm("a3", task="t1", model="acme-ft-7"),
                tool_row("w1", task="t1"),
                tool_row("w2", task="t1", cost=Decimal("0.5")),
                task_row("root1", task="t1", minute=5),
            ],
            1,
        )
    )
    # a second report of r2 (a duplicate: repriced too, counted never), and a task of unpriced calls only
    store.write(batch([llm("a0", task="t1", response_id="r2"), llm("b1", task="t2", model="acme-ft-8")], 2))


def test_reprice_keeps_tasks_exact_and_the_writer_folds_the_adjustments(
    store: DuckDBStore, book: tuple[Path, PricingSource]
) -> None:
    path, source = book
    _history(store)
    before = assert_exact(store)
    edit_book(path, V2)
    report = store.reprice(source.current())
    assert report.changed == 5 and report.newly_priced == 2 and report.tools_changed == 1
    after = assert_exact(store)
    assert after != before
    summary = task_summary(store)
    costs = [r[0] for r in store.query("SELECT cost_usd FROM tasks").rows]
    assert summary.unpriced_calls == 0 and summary.total_cost_usd == sum(costs)
    # folded: nothing pending, the roll-up table itself is exact
    assert store.admin_query("SELECT count(*) FROM task_rollup_delta").rows == [(0,)]
    # re-pricing again changes nothing
    assert store.reprice(source.current()).changed == 0
    assert assert_exact(store) == after


def test_tasks_merge_the_adjustments_until_the_writer_folds_them(
    tmp_path: Path, book: tuple[Path, PricingSource]
) -> None:
    from taskcost.store import _reprice

    path, source = book
    with DuckDBStore.open(tmp_path / "f.duckdb", fold_rows=10**9) as store:
        _history(store)
        edit_book(path, V2)
        _reprice.reprice(store._con, source.current())  # the re-price alone, no fold by the writer afterwards
        adjustments = "SELECT count(*) FROM task_rollup_delta WHERE attempts = 0 AND tool_calls = 0"
        assert store.admin_query(adjustments).rows != [(0,)]
        merged = assert_exact(store)
        store.fold_rollups()
        assert store.admin_query("SELECT count(*) FROM task_rollup_delta").rows == [(0,)]
        assert assert_exact(store) == merged


def test_a_dry_run_changes_no_roll_up(store: DuckDBStore, book: tuple[Path, PricingSource]) -> None:
    path, source = book
    _history(store)
    before = assert_exact(store)
    delta = "SELECT * FROM task_rollup_delta ORDER BY ALL"
    delta_before = store.admin_query(delta).rows
    edit_book(path, V2)
    assert store.reprice(source.current(), dry_run=True).changed == 5
    assert assert_exact(store) == before
    assert store.admin_query(delta).rows == delta_before


def test_ingest_into_the_tasks_being_repriced_goes_on_and_stays_exact(
    store: DuckDBStore, book: tuple[Path, PricingSource]
) -> None:
    path, source = book
    _history(store)
    # priced with the old book, committed while the re-price runs, into the same tasks
    late = batch(
        [llm("l1", task="t1", call_id="c1", attempt=3), tool_row("w3", task="t2"), task_row("r2", task="t2")], 5
    )
    edit_book(path, V2)
    committed: list[int] = []

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "calls" and not committed:
            committed.append(store.write(late, timeout=10).spans)

    report = store.reprice(source.current(), progress=progress, page=2)
    assert committed == [3] and report.caught_up == 1
    assert_exact(store)
    unpriced = dict(store.query("SELECT task_id, unpriced_calls FROM tasks").rows)
    assert unpriced == {"t1": 0, "t2": 0}  # every call priced now, the late one too
    assert store.admin_query("SELECT count(*) FROM task_rollup_delta").rows == [(0,)]


def test_an_interrupted_reprice_leaves_exact_tasks_and_running_it_again_finishes(
    store: DuckDBStore, book: tuple[Path, PricingSource]
) -> None:
    path, source = book
    _history(store)
    edit_book(path, V2)

    def stop_after_the_first_page(phase: str, done: int, total: int) -> None:
        if phase == "calls" and 0 < done < total:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.reprice(source.current(), page=2, progress=stop_after_the_first_page)
    # the first page (2 calls) is committed with its tasks' adjustment: every task is still its calls' sum
    partial = assert_exact(store)
    books = store.admin_query("SELECT price_book_version FROM llm_call_rows").rows
    assert sorted(b[0].split()[0] for b in books) == ["v1", "v1", "v1", "v2", "v2"]
    # a re-price is one at a time, and nothing is left held by the interrupted one
    report = store.reprice(source.current(), page=2)
    assert report.updated == 3 and report.calls == 5
    finished = assert_exact(store)
    assert finished != partial
    assert store.reprice(source.current()).changed == 0


def test_a_reprice_of_many_pages_checkpoints_beside_a_busy_writer(
    store: DuckDBStore, book: tuple[Path, PricingSource], monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskcost.store import _reprice

    path, source = book
    store.write(batch([llm(f"h{i}", task=f"t{i % 4}") for i in range(24)], 1))
    edit_book(path, V2)
    monkeypatch.setattr(_reprice, "_CHECKPOINT_PAGES", 2)  # a CHECKPOINT tried every other page, mid-ingest
    stop, written = threading.Event(), []

    def ingest() -> None:  # the writer commits all along, into other tasks and into the ones being repriced
        i = 0
        while not stop.is_set():
            written.append(store.write(batch([llm(f"n{i}", task=f"t{i % 6}")], 10 + i), timeout=10).spans)
            i += 1

    during: list[int] = []

    def overlap(phase: str, done: int, total: int) -> None:  # after each page: let the writer commit meanwhile
        if phase == "calls" and done < total:
            before = len(written)
            deadline = time.monotonic() + 5
            while len(written) == before and time.monotonic() < deadline:
                time.sleep(0.005)
            during.append(len(written) - before)

    writer = threading.Thread(target=ingest)
    writer.start()
    try:
        report = store.reprice(source.current(), page=2, progress=overlap)
    finally:
        stop.set()
        writer.join(10)
    assert report.calls >= 24 and len(during) >= 10 and all(during), during  # commits between every two pages
    assert_exact(store)
    books = dict(store.admin_query("SELECT span_id, price_book_version FROM llm_call_rows").rows)
    assert all(books[f"h{i}"].startswith("v2") for i in range(24))
