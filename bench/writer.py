"""The writer alone: where a commit's time goes. The sustained ingest run is limited by the single writer (its busy
share is near 1), so this replays what that run's writer did in one process without the load: the mix's spans
decoded, normalised, priced and laid out as Arrow tables (as a decode worker hands them over), committed through the
store's own writer in commits of the run's size, each SQL statement timed (wall time) and put in a group. A COMMIT
is DuckDB writing the transaction to its write-ahead log (WAL) and syncing it, or, once the WAL passed the store's
checkpoint threshold, a checkpoint (the WAL's rows compressed into the database file) instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pyarrow as pa

from bench.traffic import Body

__all__ = ["GROUPS", "WriterSteps", "writer_lines", "writer_steps"]

_WAL, _CHECKPOINT = "COMMIT: the WAL written and synced", "COMMIT: a checkpoint"
_INSERT, _DEDUPE = "the rows inserted (spans, calls, tools, tasks)", "dedupe keys (spans, responses)"
_DERIVED, _OUTSIDE = "roll-ups and derived rows (tasks, hours, engine matches, answers)", "outside SQL (Arrow, Python)"
GROUPS = (_WAL, _CHECKPOINT, _INSERT, _DEDUPE, _DERIVED, _OUTSIDE)
_ROW_TABLES = ("spans", "llm_call_rows", "tool_call_rows", "task_rows", "engine_span_rows", "llm_call_engine_rows")
_KEY_WORDS = ("span_keys", "response_keys", "_taskcost_new ", "_taskcost_seen_responses")


@dataclass
class WriterSteps:
    spans: int
    commits: int
    checkpoints: int
    seconds: float  # wall time in the writer's commits, and the checkpoint of what they left in the WAL
    us_per_span: dict[str, float]  # GROUPS' wall time per span stored
    wal_bytes_per_span: float  # what the commits that did not checkpoint wrote to the WAL

    @property
    def spans_per_s(self) -> float:
        """The rate one writer allows, alone."""
        return self.spans / self.seconds


def _group(sql: str) -> str:
    head = " ".join(sql.split())
    if any(head.startswith(f"INSERT INTO {t} BY NAME SELECT * FROM _taskcost_") for t in _ROW_TABLES):
        return _INSERT
    return _DEDUPE if any(w in head for w in _KEY_WORDS) else _DERIVED


class _Timed:
    """A cursor whose statements are timed into ``spent`` (the writer's code calls it as it calls DuckDB's)."""

    def __init__(self, cur: Any, spent: dict[str, float], wal: Path, on_commit: Callable[[int, bool], None]) -> None:
        self._cur, self._spent, self._wal, self._on_commit = cur, spent, wal, on_commit

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.strip() == "COMMIT":
            before = self._wal.stat().st_size if self._wal.exists() else 0
            t = time.perf_counter()
            out = self._cur.execute(sql, *args)
            took = time.perf_counter() - t
            after = self._wal.stat().st_size if self._wal.exists() else 0
            checkpointed = after < before or (after == 0 and before == 0)
            self._spent[_CHECKPOINT if checkpointed else _WAL] += took
            self._on_commit(after - before, checkpointed)
            return out
        t = time.perf_counter()
        out = self._cur.execute(sql, *args)
        self._spent[_group(sql)] += time.perf_counter() - t
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def writer_steps(sample: list[Body], spans_per_commit: int) -> WriterSteps:
    """Commit ``sample``'s spans through a fresh store's writer in commits of about ``spans_per_commit`` spans."""
    from bench.ingest import _plain
    from taskcost.collector._ingest import intake_from_settings
    from taskcost.settings import Settings
    from taskcost.store import DuckDBStore
    from taskcost.store._writer import TABLES

    intake = intake_from_settings(Settings())  # a decode worker's: the same settings' rules and prices

    spent = dict.fromkeys(GROUPS, 0.0)
    commits: list[tuple[int, bool]] = []
    with TemporaryDirectory() as tmp, DuckDBStore.open(Path(tmp) / "w.duckdb") as store:
        schemas, writer = store.arrow_schemas, store._writer
        assert writer is not None
        groups: list[list[dict[str, pa.Table]]] = [[]]
        in_group = 0
        for body in sample:
            protobuf = body.content_type == "application/x-protobuf"
            tables = intake.prepare(_plain(body), protobuf=protobuf, schemas=schemas).prepared.tables or {}
            if in_group >= spans_per_commit:
                groups.append([])
                in_group = 0
            groups[-1].append(tables)
            in_group += body.spans
        cur = _Timed(writer._con.cursor(), spent, Path(tmp) / "w.duckdb.wal", lambda b, c: commits.append((b, c)))
        sizes: list[int] = []
        total = 0.0
        for group in groups:  # the writer's thread waits idle on its queue meanwhile: nothing is submitted to it
            data = {}
            for table in TABLES:
                parts = [t[table] for t in group if t.get(table) is not None and t[table].num_rows]
                if parts:
                    data[table] = pa.concat_tables(parts)
            t = time.perf_counter()
            sizes.append(writer._store(cur, data, writer._fold_rows))  # type: ignore[arg-type]
            total += time.perf_counter() - t
        # the rows the last commits left in the WAL, checkpointed now: a running writer compresses every row into the
        # file once, and without this, how many commits happened to checkpoint would decide the figure
        t = time.perf_counter()
        writer._con.execute("CHECKPOINT")
        took = time.perf_counter() - t
        spent[_CHECKPOINT] += took
        total += took
    spans = sum(sizes)
    spent[_OUTSIDE] = total - sum(spent.values())
    logged = [(b, n) for (b, checkpointed), n in zip(commits, sizes, strict=True) if not checkpointed]
    logged_spans = sum(n for _, n in logged)
    return WriterSteps(
        spans=spans,
        commits=len(commits),
        checkpoints=sum(c for _, c in commits),
        seconds=total,
        us_per_span={g: s / spans * 1e6 for g, s in spent.items()},
        wal_bytes_per_span=sum(b for b, _ in logged) / logged_spans if logged_spans else float("nan"),
    )


def writer_lines(w: WriterSteps, busy_share: float) -> list[str]:
    """The markdown table of ``w`` for bench/RESULTS.md (``busy_share``: the median run's writer, for context)."""
    per_commit = w.spans / max(1, w.commits)
    return [
        f"The writer alone (see bench/writer.py): the same {w.spans:,} spans, prepared as the decode workers prepare"
        f" them, committed through the store's writer in one process without the load, {w.commits} commits of about"
        f" {per_commit:,.0f} spans (the median run's size); {w.checkpoints} of the commits checkpointed, and the rows"
        " still in the WAL at the end are checkpointed then (counted as a checkpoint: every row a running writer"
        " stores is compressed into the file once). Wall microseconds per span; in the median run the writer was"
        f" busy {busy_share:.0%} of the time.",
        "",
        "| the writer's step | wall us/span |",
        "|---|---|",
        *(f"| {group} | {us:.1f} |" for group, us in w.us_per_span.items()),
        f"| all of it: the rate one writer allows | {1e6 / w.spans_per_s:.1f}; {w.spans_per_s:,.0f} spans/s |",
        f"| WAL written by a commit that did not checkpoint, bytes/span | {w.wal_bytes_per_span:,.0f} |",
        "",
    ]
