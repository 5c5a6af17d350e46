"""The gradebook: every result of an output folder in one SQLite database.

One row per submission (with the notebook's hash, the assignment's hashes, the grader's
version and the whole result as JSON) and one row per check. Each result is committed in its
own transaction as soon as it is graded, so a run killed at any point loses nothing already
graded and, keyed by submission id, never holds a result twice. A later run asks
:meth:`Gradebook.unchanged` whether a submission can be skipped: same notebook bytes, same
rubric and reference, same grader version and model settings.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader import __version__
from grader.reports.results import SubmissionResult, result_from_json, result_to_json

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    submission_id TEXT PRIMARY KEY,
    student TEXT,
    source TEXT NOT NULL,
    assignment TEXT,
    notebook_sha256 TEXT,
    assignment_sha256 TEXT,
    grader_version TEXT NOT NULL,
    settings_key TEXT NOT NULL,
    score REAL NOT NULL,
    max_score REAL NOT NULL,
    manual_points REAL NOT NULL,
    manual_max REAL NOT NULL,
    error TEXT,
    regrade INTEGER NOT NULL DEFAULT 0,
    duration_s REAL NOT NULL,
    graded_at TEXT NOT NULL,
    result_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS checks (
    submission_id TEXT NOT NULL REFERENCES submissions(submission_id) ON DELETE CASCADE,
    check_id TEXT NOT NULL,
    name TEXT NOT NULL,
    outcome TEXT NOT NULL,
    points REAL NOT NULL,
    score REAL NOT NULL,
    automatic INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (submission_id, check_id)
);
CREATE INDEX IF NOT EXISTS checks_by_check ON checks(check_id, outcome);
"""


@dataclass(frozen=True)
class Fingerprint:
    """What a stored result depends on besides the notebook: assignment files, grader, settings."""

    assignment_sha256: str
    grader_version: str
    settings_key: str


class Gradebook:
    """An SQLite gradebook file; safe to reopen after a crash (WAL journal, one transaction per result)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=FULL")
        self._connection.execute("PRAGMA foreign_keys=ON")
        self._connection.executescript(SCHEMA)
        with self._transaction() as cursor:
            cursor.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        """Close the database (everything is already committed)."""
        self._connection.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with closing(self._connection.cursor()) as cursor:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")

    # ---------------------------------------------------------------- writing

    def record(self, result: SubmissionResult, fingerprint: Fingerprint | None, regrade: bool = False) -> None:
        """Store one result (replacing an earlier one of the same submission), atomically.

        ``regrade`` marks a result that must not be reused (a grader failure, a dead worker).
        """
        provenance = result.provenance
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM submissions WHERE submission_id = ?", (result.submission_id,))
            cursor.execute(
                "INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    result.submission_id,
                    result.student,
                    result.source,
                    result.assignment,
                    provenance.get("notebook_sha256"),
                    fingerprint.assignment_sha256 if fingerprint else None,
                    fingerprint.grader_version if fingerprint else __version__,
                    fingerprint.settings_key if fingerprint else "",
                    result.score,
                    result.max_score,
                    result.manual_points,
                    result.manual_max,
                    result.error,
                    int(regrade or fingerprint is None),
                    result.duration_s,
                    dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    result_to_json(result),
                ),
            )
            cursor.executemany(
                "INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        result.submission_id,
                        check.check_id,
                        check.name,
                        check.outcome,
                        check.points,
                        check.score,
                        int(check.automatic),
                        check.message,
                    )
                    for check in result.checks
                ],
            )

    def set_meta(self, key: str, value: str) -> None:
        """Remember a value about the output folder (for example, what the reports were made from)."""
        with self._transaction() as cursor:
            cursor.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def delete_meta(self, key: str) -> None:
        """Forget a value remembered with :meth:`set_meta`."""
        with self._transaction() as cursor:
            cursor.execute("DELETE FROM meta WHERE key = ?", (key,))

    # ---------------------------------------------------------------- reading

    def meta(self, key: str) -> str | None:
        """A value remembered with :meth:`set_meta`."""
        row = self._connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def unchanged(
        self, submission_id: str, notebook_sha256: str | None, fingerprint_of: Callable[[str | None], Fingerprint | None]
    ) -> SubmissionResult | None:
        """The stored result if nothing it depends on changed; None if the submission must be graded.

        ``fingerprint_of(assignment)`` gives that assignment's fingerprint now (None if the course
        no longer has it); a result stored as ungradeable (no assignment) depends only on the
        notebook and the grader.
        """
        row = self._connection.execute(
            "SELECT notebook_sha256, assignment, assignment_sha256, grader_version, settings_key, regrade, result_json "
            "FROM submissions WHERE submission_id = ?",
            (submission_id,),
        ).fetchone()
        if row is None or notebook_sha256 is None or row[0] != notebook_sha256 or row[5]:
            return None
        fingerprint = fingerprint_of(row[1])
        if fingerprint is None or (row[2], row[3], row[4]) != (
            fingerprint.assignment_sha256,
            fingerprint.grader_version,
            fingerprint.settings_key,
        ):
            return None
        return result_from_json(row[6])

    def results(self) -> list[SubmissionResult]:
        """Every stored result, by submission id."""
        rows = self._connection.execute("SELECT result_json FROM submissions ORDER BY submission_id").fetchall()
        return [result_from_json(row[0]) for row in rows]

    def count(self) -> int:
        """How many submissions the gradebook holds."""
        return int(self._connection.execute("SELECT COUNT(*) FROM submissions").fetchone()[0])
