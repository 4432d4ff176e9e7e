"""TREC run and qrels files: the formats trec_eval and pytrec_eval read.

A run line is ``query_id Q0 doc_id rank score tag`` and a qrels line ``query_id 0 doc_id
relevance``, fields separated by whitespace. Doc ids here are canonical URLs, which hold no
whitespace; an id that does is refused on write and on read, since it would shift the columns.

Writers replace the file atomically (:func:`~evidence_bench._atomic.write_atomic`), so a crash
never leaves a half-written run beside a complete report. A query with an empty ranking writes
no line, so it does not come back from :func:`read_run` (trec_eval does not see it either).
"""

from __future__ import annotations

import gzip
import io
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from evidence_bench._atomic import write_atomic
from evidence_bench.errors import DataError
from evidence_bench.evaluation.measures import ranks_to_scores

__all__ = ["read_qrels", "read_run", "write_qrels", "write_run"]

StrPath = str | os.PathLike[str]


def write_run(path: StrPath, run: Mapping[str, Sequence[str]], tag: str) -> None:
    """Write rankings (query_id -> doc ids, rank 1 first) as a 6-column TREC run.

    Scores come from :func:`ranks_to_scores`, strictly decreasing, so trec_eval's sort
    reproduces the order given here.
    """
    _check_token(tag, "run tag")

    def lines() -> Iterator[str]:
        for query_id, ranking in run.items():
            _check_token(query_id, "query_id")
            if len(set(ranking)) != len(ranking):
                raise DataError(f"query {query_id!r}: a doc_id appears twice in its ranking")
            scores = ranks_to_scores(len(ranking))
            for rank, doc_id in enumerate(ranking, start=1):
                _check_token(doc_id, f"doc_id of query {query_id!r}")
                yield f"{query_id} Q0 {doc_id} {rank} {scores[rank - 1]!r} {tag}\n"

    _write(Path(path), lines())


def write_qrels(path: StrPath, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write judgments (query_id -> doc_id -> relevance) as 4-column TREC qrels."""

    def lines() -> Iterator[str]:
        for query_id, judgments in qrels.items():
            _check_token(query_id, "query_id")
            for doc_id, relevance in judgments.items():
                _check_token(doc_id, f"doc_id of query {query_id!r}")
                yield f"{query_id} 0 {doc_id} {int(relevance)}\n"

    _write(Path(path), lines())


def read_run(path: StrPath) -> dict[str, dict[str, float]]:
    """Read a 6-column TREC run as query_id -> doc_id -> score (pytrec_eval's shape).

    The rank column is checked to be an integer but not used: trec_eval ranks by score.
    """
    run: dict[str, dict[str, float]] = {}
    for where, fields in _records(Path(path), 6, "query_id Q0 doc_id rank score tag"):
        query_id, _, doc_id, rank, score, _ = fields
        _parse_int(rank, "rank", where)
        value = _parse_float(score, where)
        scores = run.setdefault(query_id, {})
        if doc_id in scores:
            raise DataError(f"{where}: doc_id {doc_id!r} appears twice for query {query_id!r}")
        scores[doc_id] = value
    return run


def read_qrels(path: StrPath) -> dict[str, dict[str, int]]:
    """Read 4-column TREC qrels as query_id -> doc_id -> relevance."""
    qrels: dict[str, dict[str, int]] = {}
    for where, fields in _records(Path(path), 4, "query_id 0 doc_id relevance"):
        query_id, _, doc_id, relevance = fields
        grade = _parse_int(relevance, "relevance", where)
        judgments = qrels.setdefault(query_id, {})
        if doc_id in judgments:
            raise DataError(f"{where}: doc_id {doc_id!r} judged twice for query {query_id!r}")
        judgments[doc_id] = grade
    return qrels


def _records(path: Path, width: int, layout: str) -> Iterator[tuple[str, list[str]]]:
    """(``path:line``, fields) for each non-blank line, which must have ``width`` fields."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as file:
            for number, line in enumerate(file, start=1):
                fields = line.split()
                if not fields:
                    continue
                where = f"{path}:{number}"
                if len(fields) != width:
                    raise DataError(
                        f"{where}: expected {width} fields ({layout}), got {len(fields)}"
                    )
                yield where, fields
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from exc


def _parse_int(text: str, what: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DataError(f"{where}: {what} must be an integer, got {text!r}") from None


def _parse_float(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{where}: score must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise DataError(f"{where}: score must be finite, got {text!r}")
    return value


def _check_token(value: str, what: str) -> None:
    """A field must be non-empty and hold no whitespace, or the columns would shift."""
    if value.split() != [value]:
        raise DataError(f"{what} {value!r} is empty or holds whitespace; TREC files cannot hold it")


def _write(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` whole or not at all (:func:`~evidence_bench._atomic.write_atomic`).

    A ``.gz`` path is gzip-compressed, with no timestamp so equal runs give equal bytes.
    """
    data = "".join(lines).encode("utf-8")
    if path.suffix == ".gz":
        packed = io.BytesIO()
        with gzip.GzipFile(fileobj=packed, mode="wb", compresslevel=1, mtime=0) as file:
            file.write(data)
        data = packed.getvalue()
    write_atomic(path, data, parents=True)
