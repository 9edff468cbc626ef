"""The bench's own code: its memory profile's steps (code in strings, which nothing else would notice rotting), how a
partial run keeps the other sections, and the conditions its ceilings are measured under."""

from __future__ import annotations

import pytest

from bench.memory import SERVER_STEPS, WORKER_STEPS, startup_steps


def test_every_startup_step_runs_and_the_server_carries_more_than_a_worker() -> None:
    worker, server = startup_steps()
    assert [label for label, _ in worker] == [label for label, _ in WORKER_STEPS]
    assert [label for label, _ in server] == [label for label, _ in SERVER_STEPS]
    worker_mb = sum(mb for _, mb in worker)
    server_mb = worker_mb + sum(mb for _, mb in server)
    assert 20 < worker_mb < server_mb
    # pyarrow and duckdb are real libraries: each adds memory when it is loaded
    added = dict(worker + server)
    assert added["pyarrow"] > 5 and added["duckdb"] > 5


def test_a_partial_run_keeps_the_other_sections_marked_with_the_run_that_measured_them() -> None:
    from bench.__main__ import _merged

    first = "# Benchmark results\n\nRun 1\n\n## Ingest\n\ni1\n\n## Queries\n\nq1"
    second = _merged(first, "# Benchmark results\n\nRun 2\n\n## Ingest\n\ni2")
    third = _merged(second, "# Benchmark results\n\nRun 3\n\n## Ingest\n\ni3")
    assert third == (
        "# Benchmark results\n\nRun 3\n\n## Ingest\n\ni3\n\n## Queries\n\n(Kept from the earlier run: Run 1)\n\nq1"
    )


def test_the_ceilings_run_as_a_decode_worker_collects_and_leave_the_process_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    import bench.ingest
    from bench.traffic import bodies
    from taskcost.collector._decoders import GC_THRESHOLD

    read_keys = bench.ingest._read_keys
    during: list[tuple[tuple[int, int, int], int]] = []

    def watched(req: object) -> None:
        during.append((gc.get_threshold(), gc.get_freeze_count()))
        read_keys(req)

    monkeypatch.setattr(bench.ingest, "_read_keys", watched)
    before = gc.get_threshold(), gc.get_freeze_count()
    figures = bench.ingest.ceilings(bodies(1_000), repeats=1)
    assert during and all(threshold == GC_THRESHOLD and frozen > 0 for threshold, frozen in during)
    assert gc.get_threshold() == before[0]  # the process is as it was (what was frozen before stays frozen)
    assert gc.get_freeze_count() == 0 if not before[1] else gc.get_freeze_count() >= before[1]

    held = [[] for _ in range(20_000)]  # objects this test keeps alive, frozen by another (here: the test)
    gc.freeze()  # another's frozen objects stay frozen (other frozen objects may die meanwhile: caches evict)
    try:
        bench.ingest.ceilings(bodies(500), repeats=1)
        assert gc.get_freeze_count() >= len(held) and gc.get_threshold() == before[0]
    finally:
        gc.unfreeze()
    # (figures only, no comparison of speeds: the suite's other processes share the cores)
    assert figures.keys_spans_per_s > 0 and figures.normalise_spans_per_s > 0 and figures.protobuf_keys_spans_per_s > 0
    assert figures.normalise_cpu_us_per_span > 0 and set(figures.steps) == {
        "decode",
        "normalise",
        "price and lay out",
        "Arrow tables",
    }


def test_the_writers_steps_add_up_to_its_commits_and_every_statement_has_a_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.writer
    from bench.traffic import bodies

    sample = bodies(3_000)
    seen: list[tuple[str, str]] = []
    group = bench.writer._group

    def watched(sql: str) -> str:
        seen.append((" ".join(sql.split())[:60], group(sql)))
        return group(sql)

    monkeypatch.setattr(bench.writer, "_group", watched)
    steps = bench.writer.writer_steps(sample, spans_per_commit=1_000)
    assert steps.spans == sum(b.spans for b in sample)
    assert steps.commits == len(range(0, steps.spans, 1_000))  # a commit per 1,000 spans (requests of 500)
    assert list(steps.us_per_span) == list(bench.writer.GROUPS)
    # the timed statements are most of the commits' time: what the cursor did not see (Arrow registered, Python
    # between statements) is the rest, and it is small; a writer that ran its SQL some other way would show here
    assert 0 <= steps.us_per_span[bench.writer._OUTSIDE] < 0.25 * steps.seconds / steps.spans * 1e6
    assert steps.us_per_span[bench.writer._INSERT] > 0 and steps.us_per_span[bench.writer._WAL] > 0
    # no commit of these few spans reached the checkpoint threshold: the rows are compressed into the file by the
    # checkpoint at the end, which counts (a running writer compresses every row it stores once)
    assert steps.checkpoints == 0 and steps.us_per_span[bench.writer._CHECKPOINT] > 0
    assert 100 < steps.wal_bytes_per_span < 100_000  # each span's rows went through the WAL
    # each kind of row went in as the insert group, and the other statements were ones the writer runs per commit
    inserted = {sql.split()[2] for sql, g in seen if g == bench.writer._INSERT}
    assert {"spans", "llm_call_rows", "task_rows"} <= inserted
    assert {g for _, g in seen} == {bench.writer._INSERT, bench.writer._DEDUPE, bench.writer._DERIVED}
