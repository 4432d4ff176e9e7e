"""An assessor's judgments of a pool, kept on disk after every one.

``QRELS.tsv`` is BEIR's layout (``query-id<TAB>corpus-id<TAB>score`` under that header, as
``collections/*/qrels.tsv``), rewritten whole through :func:`~evidence_bench._atomic.write_atomic`
after each judgment and each undo, so a kill, Ctrl-C or a closed tab loses nothing and a
reader never sees half a file. Beside it, ``QRELS.tsv.log.jsonl`` gets one line per act
(``judge`` or ``undo``) with the assessor and the UTC time, appended and synced.
A ``QRELS.tsv`` that exists is read first (BEIR or TREC), its judgments kept: what it
judges is skipped, so an assessment resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from evidence_bench._atomic import write_atomic, write_error
from evidence_bench.collections.beir import read_judgments

__all__ = ["GRADES", "HEADER", "Judgments"]

#: The grades an assessor gives: not relevant, related, relevant, highly relevant.
GRADES = {0: "not relevant", 1: "related", 2: "relevant", 3: "highly relevant"}
HEADER = "query-id\tcorpus-id\tscore\n"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Judgments:
    """The judgments in ``path``, with this session's acts for undo (thread-safe)."""

    def __init__(self, path: Path, assessor: str, clock: Callable[[], str] = _now) -> None:
        self.path = path
        self.log = path.with_name(path.name + ".log.jsonl")
        self.assessor = assessor
        self._clock = clock
        self._lock = threading.Lock()
        self._grades: dict[tuple[str, str], int] = {}
        self._undo: list[tuple[tuple[str, str], int | None]] = []
        if path.exists():
            for qid, docs in read_judgments(path).items():
                for doc, grade in docs.items():
                    self._grades[qid, doc] = grade

    def grade(self, query_id: str, doc_id: str) -> int | None:
        return self._grades.get((query_id, doc_id))

    def judge(self, query_id: str, doc_id: str, grade: int) -> None:
        """Record ``grade`` for the pair, on disk before it returns."""
        if grade not in GRADES:
            raise ValueError(f"grade {grade} is not one of {sorted(GRADES)}")
        with self._lock:
            key = (query_id, doc_id)
            self._undo.append((key, self._grades.get(key)))
            self._grades[key] = grade
            self._save({"act": "judge", "query_id": query_id, "doc_id": doc_id, "grade": grade})

    def undo(self) -> tuple[str, str] | None:
        """Take back this session's last judgment (the pair it was for; None: nothing to undo)."""
        with self._lock:
            if not self._undo:
                return None
            key, before = self._undo.pop()
            if before is None:
                del self._grades[key]
            else:
                self._grades[key] = before
            self._save({"act": "undo", "query_id": key[0], "doc_id": key[1], "grade": before})
            return key

    def _save(self, act: dict[str, object]) -> None:
        rows = "".join(f"{q}\t{d}\t{g}\n" for (q, d), g in self._grades.items())
        write_atomic(self.path, HEADER + rows)
        line = json.dumps({"time": self._clock(), "assessor": self.assessor, **act}) + "\n"
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise write_error(self.log, exc) from exc
