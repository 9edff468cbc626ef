"""Re-pricing history: a book edit changes later calls at once and history on `reprice`, consistently,
page by page without blocking ingest, one re-price at a time; what changed is reported."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from taskcost.analytics import cost_coverage, task_summary
from taskcost.pricing import PricingSource
from taskcost.store import DuckDBStore, StoreUnavailableError
from tests.builders.pricing import call, costs, edit_book, followed_book, ingest, ns, tool

M = Decimal(1_000_000)
NOV20 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
DEC2 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
DEC3 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
GPT4O = {"input_tokens": 10_000, "cache_read": 6_000, "output_tokens": 500}
LIST = (4_000 * Decimal("2.5") + 6_000 * Decimal("1.25") + 500 * 10) / M  # gpt-4o: $0.0225

V1 = 'version = "v1"\n'
V2 = V1.replace("v1", "v2") + '\n[[discounts]]\nprovider = "openai"\npercent = "20"\neffective_from = 2026-12-01\n'


@pytest.fixture
def book(tmp_path: Path) -> Iterator[tuple[Path, PricingSource]]:
    """A price book file and the process pricer that follows it, as a server has."""
    path = tmp_path / "book.toml"
    with followed_book(path, V1) as source:
        yield path, source


def test_a_discount_changes_later_calls_only_and_reprice_updates_history(
    store: DuckDBStore, book: tuple[Path, PricingSource]
) -> None:
    path, source = book
    ingest(store, [call("nov", NOV20, **GPT4O), call("dec2", DEC2, **GPT4O)])
    assert costs(store) == {"nov": LIST, "dec2": LIST}
    total_before = task_summary(store).total_cost_usd
    assert total_before == 2 * LIST

    edit_book(path, V2)  # 20% off OpenAI from 2026-12-01
    ingest(store, [call("dec3", DEC3, **GPT4O)])
    assert costs(store) == {"nov": LIST, "dec2": LIST, "dec3": LIST * Decimal("0.8")}  # new calls at once

    report = store.reprice(source.current())
    after = costs(store)
    assert after == {"nov": LIST, "dec2": LIST * Decimal("0.8"), "dec3": LIST * Decimal("0.8")}  # before the date: kept
    assert (report.calls, report.changed, report.updated) == (3, 1, 2)  # nov: same cost, new book version
    assert report.before_usd == 3 * LIST - LIST * Decimal("0.2")
    assert report.after_usd == LIST + 2 * LIST * Decimal("0.8") == Decimal("0.0585")
    [m] = report.by_model
    assert (m.model, m.calls, m.before_usd, m.after_usd) == ("gpt-4o", 1, LIST, LIST * Decimal("0.8"))
    assert task_summary(store).total_cost_usd == report.after_usd
    versions = {r[0] for r in store.query("SELECT DISTINCT price_book_version FROM llm_calls").rows}
    assert len(versions) == 1 and versions.pop().startswith("v2 (")
    # the stored arithmetic shows the discount
    detail = store.query("SELECT price_detail FROM llm_calls WHERE span_id = 'dec2'").rows[0][0]
    assert '"percent":"20"' in detail and '"list_usd":"0.022500000000"' in detail
    # re-pricing again changes nothing
    again = store.reprice(source.current())
    assert (again.changed, again.updated, again.after_usd) == (0, 0, report.after_usd)


def test_dry_run_and_time_range(store: DuckDBStore, book: tuple[Path, PricingSource]) -> None:
    path, source = book
    ingest(store, [call("dec2", DEC2, **GPT4O), call("dec3", DEC3, **GPT4O)])
    edit_book(path, V2)
    dry = store.reprice(source.current(), dry_run=True)
    assert dry.changed == 2 and dry.after_usd == 2 * LIST * Decimal("0.8")
    assert costs(store) == {"dec2": LIST, "dec3": LIST}  # nothing changed
    ranged = store.reprice(source.current(), since_ns=ns(DEC3), until_ns=ns(DEC3 + timedelta(days=1)))
    assert ranged.calls == 1
    assert costs(store) == {"dec2": LIST, "dec3": LIST * Decimal("0.8")}


def test_a_custom_model_prices_what_was_missing(store: DuckDBStore, book: tuple[Path, PricingSource]) -> None:
    path, source = book
    ingest(
        store,
        [call("ft", DEC2, model="ft:gpt-4o-mini:acme:1", input_tokens=10_000, output_tokens=1_000), call("std", DEC2)],
        tools=[tool("t1", DEC2, "web_search"), tool("t2", DEC2, "web_search", Decimal("0.005"))],
    )
    cov = cost_coverage(store)
    assert (cov.calls, cov.priced_calls, cov.unpriced_input_tokens) == (2, 1, 10_000)
    assert "1 of 2 call attempts priced (50.0%)" in cov.sentence()
    assert cov.cost_usd == (1000 * Decimal("2.5") + 100 * 10) / M  # the unknown model is excluded, not $0
    edit_book(
        path,
        V1
        + '\n[[models]]\nmodel = "ft:gpt-4o-mini:acme:*"\ninput_mtok = "0.30"\noutput_mtok = "1.20"\n'
        + '\n[[tools]]\ntool = "web_search"\nusd_per_call = "0.01"\n',
    )
    report = store.reprice(source.current())
    assert (report.newly_priced, report.unpriced_after) == (1, 0)
    assert costs(store)["ft"] == (10_000 * Decimal("0.30") + 1_000 * Decimal("1.20")) / M
    assert cost_coverage(store).priced_calls == 2
    tools = dict(store.query("SELECT span_id, cost_usd FROM tool_calls").rows)
    assert tools == {"t1": Decimal("0.01"), "t2": Decimal("0.005")}  # the span's own cost wins
    assert (report.tool_calls, report.tools_changed) == (1, 1)


def test_ingest_goes_on_during_a_reprice_and_late_rows_are_caught_up(
    store: DuckDBStore, book: tuple[Path, PricingSource]
) -> None:
    path, source = book
    old = source.current()
    ingest(store, [call(f"c{i}", DEC2, **GPT4O) for i in range(30)])
    # a batch priced before the book changed, still on its way to the writer
    from taskcost.normalize import NormalizedBatch
    from taskcost.store import prepare_batch

    pairs = [call(f"late{i}", DEC2, **GPT4O) for i in range(3)]
    late = prepare_batch(
        NormalizedBatch(spans=[s for _, s in pairs], llm_calls=[c for c, _ in pairs]), time.time_ns(), pricer=old
    )
    edit_book(path, V2)
    new = source.current()
    committed: list[float] = []

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "calls" and not committed:
            # the writer commits while the re-price transaction is open: ingest is never blocked
            store.write(late, timeout=10)
            committed.append(time.monotonic())

    report = store.reprice(new, progress=progress, page=10)
    assert committed and report.calls == 30 and report.caught_up == 3
    assert set(costs(store).values()) == {LIST * Decimal("0.8")}


def test_reprice_with_no_pricing_attributes(store: DuckDBStore) -> None:
    from taskcost.pricing import Pricer

    ingest(store, [call("a", DEC2, **GPT4O)])
    report = store.reprice(Pricer(attributes=()))
    assert (report.calls, report.changed, report.after_usd) == (1, 0, LIST)


def test_a_second_reprice_while_one_runs_is_refused(store: DuckDBStore, book: tuple[Path, PricingSource]) -> None:
    path, source = book
    ingest(store, [call(f"c{i}", DEC2, **GPT4O) for i in range(4)])
    edit_book(path, V2)
    inside, release = threading.Event(), threading.Event()
    reports = []

    def hold(phase: str, done: int, total: int) -> None:
        inside.set()
        release.wait(10)

    first = threading.Thread(target=lambda: reports.append(store.reprice(source.current(), progress=hold, page=2)))
    first.start()
    try:
        assert inside.wait(10)
        with pytest.raises(StoreUnavailableError, match="already running"):
            store.reprice(source.current())
    finally:
        release.set()
        first.join(10)
    assert reports and reports[0].changed == 4
    assert store.reprice(source.current()).changed == 0  # and once it has finished, the next one runs
