"""The intake spool (``spool=True``): a batch is acknowledged once fsynced to ``<db>.spool/``, committed behind it;
reads see what was acknowledged before them; a crash replays exactly what the database does not hold; a record cut
short is dropped, a damaged one kept aside, one the writer cannot commit set aside; nothing acknowledged is lost."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from bench.traffic import requests
from taskcost.normalize import normalize_request
from taskcost.store import DuckDBStore, PreparedBatch, prepare_batch
from taskcost.store._spool import Spool, Where, encode_payload, read_at, read_records, spool_dir

ROOT = Path(__file__).resolve().parents[1]


def _batches(spans: int, seed: int) -> list[PreparedBatch]:
    return [prepare_batch(normalize_request(r), 1) for r in requests(spans, seed=seed)]


def _count(store: DuckDBStore, view: str = "spans") -> int:
    return int(store.admin_query(f"SELECT count(*) FROM {view}").rows[0][0])


def test_acknowledged_batches_are_read_back_and_the_spool_is_gone_after_close(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    batches = _batches(3_000, seed=1)
    sent = sum(b.span_count for b in batches)
    with DuckDBStore.open(db, spool=True) as store:
        acks = [store.submit(b).result(30) for b in batches]
        assert sum(a.spans for a in acks) == sent
        assert list(spool_dir(db).glob("*.spool")), "acknowledged from the spool, not from a commit"
        # a read right after the acknowledgements sees every span (it waits for the commit)
        assert store.query("SELECT count(*) FROM llm_calls").rows[0][0] > 0
        assert _count(store) == sent
        assert store.admin_query("SELECT max(seq) FROM spool_commits").rows[0][0] == len(batches)
    assert not spool_dir(db).exists()
    with DuckDBStore.open(db, read_only=True) as store:
        assert _count(store) == sent


def test_same_rows_as_acknowledging_after_the_commit(tmp_path: Path) -> None:
    batches = _batches(2_000, seed=2)
    answers = []
    for spool in (False, True):
        with DuckDBStore.open(tmp_path / f"{spool}.duckdb", spool=spool) as store:
            for f in [store.submit(b) for b in batches]:
                f.result(30)
            answers.append(
                [
                    store.query(f"SELECT * FROM {v} ORDER BY ALL", max_rows=100_000).rows
                    for v in ("llm_calls", "tool_calls", "tasks")
                ]
            )
    assert answers[0] == answers[1]
    assert all(answers[0])


_CRASH = """
import os, sys
import taskcost.store._duckdb as d
from bench.traffic import requests
from taskcost.normalize import normalize_request
from taskcost.store import DuckDBStore, prepare_batch
d._SPOOL_LINGER_S = 60.0  # the writer waits for more: nothing is committed before the crash
store = DuckDBStore.open(sys.argv[1], spool=True, max_batch_spans=10**9)
futures = [store.submit(prepare_batch(normalize_request(r), 1)) for r in requests(4_000, seed=5)]
print(sum(f.result(30).spans for f in futures), flush=True)
os._exit(9)  # no close: as after kill -9
"""


@pytest.mark.parametrize("spool_after", [True, False])
def test_a_crash_after_acknowledgement_is_replayed_at_the_next_open(tmp_path: Path, spool_after: bool) -> None:
    db = tmp_path / "c.duckdb"
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASH), str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert out.returncode == 9, out.stderr
    acknowledged = int(out.stdout.strip())
    assert acknowledged > 3_000
    assert list(spool_dir(db).glob("*.spool"))
    # opened without the spool too, the store replays what a previous run left before it takes anything new
    with DuckDBStore.open(db, spool=spool_after) as store:
        assert _count(store) == acknowledged
        assert store.admin_query("SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM spans").rows[0][0] == 0
    assert not spool_dir(db).exists()
    with DuckDBStore.open(db, spool=True) as store:  # and nothing is replayed twice
        assert _count(store) == acknowledged


def _spool_two_records(tmp_path: Path) -> tuple[Path, Path, int]:
    """A database that committed nothing, and a spool with two records (as a crash would leave it)."""
    db = tmp_path / "r.duckdb"
    with DuckDBStore.open(db) as store:
        schemas = store.arrow_schemas
    spool = Spool(spool_dir(db))
    list(spool.recover(0))
    first, second = _batches(600, seed=4)[:2]
    tables = [
        {t: pa.Table.from_pydict(cols, schema=schemas[t]) for t, cols in b.columns.items() if cols["received_ns"]}
        for b in (first, second)
    ]
    spool.append([encode_payload(tables[0])])
    spool.append([encode_payload(tables[1])])
    spool.close_file()
    (segment,) = spool_dir(db).glob("*.spool")
    return db, segment, first.span_count


def test_replayed_records_wait_as_places_in_the_spool_and_are_read_back_to_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskcost.store import _writer

    db, _, first_spans = _spool_two_records(tmp_path)
    read_back: list[Where] = []

    def spy(where: Where) -> object:
        read_back.append(where)
        return read_at(where)

    monkeypatch.setattr(_writer, "read_at", spy)
    with DuckDBStore.open(db, spool=True) as store:
        assert _count(store) > first_spans  # both records committed
    # a backlog replayed at start is not held in memory: each record is read from its place just before its commit
    assert [w.seq for w in read_back] == [1, 2]
    assert read_back[0].offset == 0 and read_back[1].offset == read_back[0].size


def test_a_record_cut_short_is_dropped_and_those_before_it_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db, segment, first_spans = _spool_two_records(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 100])  # the second record's fsync never returned
    with caplog.at_level(logging.WARNING, "taskcost.store"), DuckDBStore.open(db, spool=True) as store:
        assert _count(store) == first_spans
    assert "incomplete, unacknowledged record" in caplog.text
    assert not spool_dir(db).exists()


def test_a_damaged_record_is_kept_aside_not_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db, segment, first_spans = _spool_two_records(tmp_path)
    data = bytearray(segment.read_bytes())
    data[-50] ^= 0xFF  # a flipped bit inside the second record's payload
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, "taskcost.store"), DuckDBStore.open(db, spool=True) as store:
        assert _count(store) == first_spans
    (aside,) = spool_dir(db).glob("*.damaged")
    assert aside.stat().st_size > 50 and "damaged record" in caplog.text


def test_a_record_the_writer_cannot_commit_is_set_aside_and_the_writer_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "f.duckdb"
    good = _batches(1_000, seed=6)
    with caplog.at_level(logging.ERROR, "taskcost.store"), DuckDBStore.open(db, spool=True) as store:
        spans = store.arrow_schemas["spans"]
        # typed as the table is, but NULL where DuckDB holds NOT NULL: only the commit can refuse it
        first = _batches(300, seed=7)[0].columns["spans"]
        bad_cols = {**first, "trace_id": [None] * len(first["trace_id"])}
        bad = PreparedBatch(
            columns={}, span_count=len(bad_cols["trace_id"]), tables={"spans": pa.Table.from_pydict(bad_cols, spans)}
        )
        ack = store.submit(bad).result(30)  # acknowledged: the spool holds it
        assert ack.spans == bad.span_count
        for f in [store.submit(b) for b in good]:
            f.result(30)
        assert _count(store) == sum(b.span_count for b in good)
        assert store.failed_batches == 1
    (kept,) = spool_dir(db).glob("*.rejected")
    records = list(read_records(kept))
    assert records[0].tables["spans"].num_rows == bad.span_count
    assert "not committable" in caplog.text


def test_a_decode_workers_streams_are_spooled_as_they_came(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from taskcost.collector._decoders import _ipc, _table

    appended: list[list[bytes | pa.Buffer]] = []
    real_append = Spool.append

    def spy(self: Spool, payloads: list[list[bytes | pa.Buffer]]) -> list[Where]:
        appended.extend(payloads)
        return real_append(self, payloads)

    monkeypatch.setattr(Spool, "append", spy)
    made = _batches(600, seed=5)[0]
    db = tmp_path / "w.duckdb"
    with DuckDBStore.open(db, spool=True) as store:
        schemas = store.arrow_schemas
        streams = {t: _ipc(cols, schemas[t]) for t, cols in made.columns.items() if cols["received_ns"]}
        tables = {t: _table(s) for t, s in streams.items()}
        assert all(tables[t].schema == schemas[t] for t in tables)
        store.submit(PreparedBatch(columns={}, span_count=made.span_count, tables=tables, streams=streams)).result(30)
        assert _count(store) == made.span_count
    (parts,) = appended
    assert [p for p in parts if isinstance(p, bytes) and p in streams.values()] == list(streams.values())
    assert not spool_dir(db).exists()


def test_spool_commits_keeps_one_row_from_one_start_to_the_next(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    for seed in (6, 7):
        with DuckDBStore.open(db, spool=True, max_batch_spans=500) as store:
            for f in [store.submit(b) for b in _batches(1_500, seed=seed)]:
                f.result(30)
            store.query("SELECT 1")  # every acknowledged record committed
            assert store.admin_query("SELECT count(*) FROM spool_commits").rows[0][0] > 1
    with DuckDBStore.open(db, spool=True) as store:
        (row,) = store.admin_query("SELECT count(*), max(seq) FROM spool_commits").rows
    assert row[0] == 1 and row[1] > 1


def test_a_record_is_read_back_where_it_was_appended_and_damage_is_caught(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "sp")
    list(spool.recover(0))
    tables = {t: pa.Table.from_pydict({"x": [1, 2, 3]}) for t in ("spans", "task_rows")}
    first, second = spool.append([encode_payload(tables), encode_payload({"spans": tables["spans"]})])
    assert (first.seq, second.seq) == (1, 2) and second.offset == first.offset + first.size
    assert read_at(second).tables["spans"].equals(tables["spans"])
    with open(first.path, "r+b") as f:  # a bit flipped on disk after the append
        f.seek(first.offset + first.size - 1)
        last = f.read(1)[0]
        f.seek(first.offset + first.size - 1)
        f.write(bytes([last ^ 0xFF]))
    with pytest.raises(ValueError, match="damaged"):
        read_at(first)
    spool.close(0)


def test_a_record_damaged_after_its_ack_is_kept_aside_and_the_writer_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # queued batches wait as places in the spool and are read back to be committed: damage in between is caught
    real_append = Spool.append
    damaged: list[Where] = []

    def append_then_damage(self: Spool, payloads: list[list[bytes | pa.Buffer]]) -> list[Where]:
        places = real_append(self, payloads)
        if not damaged:
            w = places[0]
            with open(w.path, "r+b") as f:
                f.seek(w.offset + w.size - 1)
                last = f.read(1)[0]
                f.seek(w.offset + w.size - 1)
                f.write(bytes([last ^ 0xFF]))
            damaged.append(w)
        return places

    monkeypatch.setattr(Spool, "append", append_then_damage)
    batches = _batches(2_000, seed=8)
    db = tmp_path / "d.duckdb"
    with DuckDBStore.open(db, spool=True) as store:
        for f in [store.submit(b) for b in batches]:
            f.result(30)
        stored = _count(store)
    (w,) = damaged
    assert w.seq == 1  # the first batch submitted
    assert stored == sum(b.span_count for b in batches) - batches[0].span_count
    kept = spool_dir(db) / f"{w.seq:016d}.rejected"
    assert kept.stat().st_size == w.size  # its bytes, as they were on disk


def test_spool_retry_commits_what_was_set_aside_and_keeps_what_still_fails(tmp_path: Path) -> None:
    """`taskcost spool retry`: a set-aside record whose cause is gone is committed and removed; one that cannot be
    read stays, with its error, and the exit code says so."""
    from taskcost.store._spool import set_aside
    from tests.conftest import run_cli

    db = tmp_path / "r.duckdb"
    (batch,) = _batches(300, seed=8)[:1]
    with DuckDBStore.open(db) as store:
        schemas = store.arrow_schemas
    tables = {
        name: pa.Table.from_pydict(cols, schemas[name]) for name, cols in batch.columns.items() if cols["received_ns"]
    }
    good = set_aside(spool_dir(db), 5, tables)
    junk = spool_dir(db) / f"{6:016d}.rejected"
    junk.write_bytes(b"TCS1 not a whole record")

    proc = run_cli("spool", "retry", "--db", str(db), check=False)
    assert proc.returncode == 1, proc.stderr
    assert "1 set-aside records committed, 1 kept" in proc.stdout
    assert f"{junk.name}: kept" in proc.stderr and f"{good.name}: committed, {batch.span_count} spans" in proc.stderr
    assert not good.exists() and junk.exists()
    with DuckDBStore.open(db) as store:
        assert _count(store) == batch.span_count
        assert _count(store, "llm_calls") == len(batch.columns["llm_call_rows"]["span_id"])

    junk.unlink()
    again = run_cli("spool", "retry", "--db", str(db))
    assert "0 set-aside records committed, 0 kept" in again.stdout
