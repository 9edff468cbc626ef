"""Migrations 0007, 0008, 0014 and 0019: small additions to the tables (``_migrations`` lists every migration)."""

from __future__ import annotations

from taskcost.store._answers import OPEN_TASKS, open_tasks_sql

__all__ = ["ANSWER_OPEN_TASKS", "DEDUPE_WINDOW", "DROPPED_COUNTS", "SPOOL"]

SPOOL = """
CREATE TABLE spool_commits (seq BIGINT NOT NULL);
"""

# The dedupe keys without a PRIMARY KEY, in two generations (taskcost/store/_dedupe.py): DuckDB's ART index must
# fit in memory, and it held a key per span ever stored. The keys stored so far become the old generation.
DEDUPE_WINDOW = """
CREATE TABLE span_keys_old AS SELECT k FROM span_keys;
DROP TABLE span_keys;
CREATE TABLE span_keys (k UHUGEINT NOT NULL);
CREATE TABLE response_keys_old AS SELECT k FROM response_keys;
DROP TABLE response_keys;
CREATE TABLE response_keys (k UHUGEINT NOT NULL);
"""

# OTLP's dropped counts of a span: what the sender dropped plus what the intake limits dropped (docs/security.md)
DROPPED_COUNTS = """
ALTER TABLE spans ADD COLUMN IF NOT EXISTS dropped_attributes_count BIGINT DEFAULT 0;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS dropped_events_count BIGINT DEFAULT 0;
"""

# The tasks with an attempt without a response (taskcost/store/_answers.py): the writer reads the stored calls of
# these alone to resolve answered models
ANSWER_OPEN_TASKS = (
    f"CREATE TABLE {OPEN_TASKS} (project VARCHAR NOT NULL, task_id VARCHAR NOT NULL);\n" + open_tasks_sql()
)
