"""The run directory: every file a run leaves, written whole or not at all.

A run is written into ``runs/<experiment>/.<run id>.tmp`` and renamed to
``runs/<experiment>/<run id>`` when complete; ``latest`` is then repointed with an atomic
symlink swap. An interrupted or failed run leaves ``latest`` where it was and removes its
temporary directory. The layout is described in README.md ("The run directory").
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evidence_bench.evaluation.statistics import summarize
from evidence_bench.evaluation.trec import write_qrels, write_run

__all__ = [
    "FEEDBACK_COLUMNS",
    "PER_QUERY_COLUMNS",
    "SUMMARY_COLUMNS",
    "RunDirectory",
    "new_run_id",
    "summarize_scores",
    "write_csv",
    "write_json",
    "write_jsonl",
    "write_trec",
]

PER_QUERY_COLUMNS = [
    "config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure", "value",
]  # fmt: skip
#: feedback.csv: doc_id as in the collection's qrels, url as in trec/ (its canonical URL), and
#: the rank at which the user saw it: what rebuilds the residual and frozen runs.
FEEDBACK_COLUMNS = ["config_id", "policy", "query_id", "round", "doc_id", "label", "url", "rank"]
SUMMARY_KEYS = ["config_id", "policy", "round", "stage", "eval_mode", "measure"]
SUMMARY_COLUMNS = [*SUMMARY_KEYS, "n", "mean", "std", "ci_low", "ci_high"]


def new_run_id(config_text: str, now: datetime | None = None) -> str:
    """``<UTC time>-<config hash>``: sortable, and two configs never share an id."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{hashlib.sha256(config_text.encode()).hexdigest()[:6]}"


class RunDirectory:
    """A context manager: yields a private temporary directory; on success renames it to
    ``final`` and, when ``link_latest``, repoints ``<parent>/latest`` at it; on failure
    removes it. ``final`` is chosen on entry (``<name>.2`` … if taken), so what the run
    writes about itself names the directory it will have."""

    def __init__(self, parent: Path, name: str, *, link_latest: bool = True) -> None:
        self.parent = parent
        self.final = parent / name
        self.link_latest = link_latest
        self._tmp: Path | None = None

    def __enter__(self) -> Path:
        self.parent.mkdir(parents=True, exist_ok=True)
        base, suffix = self.final, 1
        while self.final.exists():
            suffix += 1
            self.final = base.with_name(f"{base.name}.{suffix}")
        self._tmp = Path(
            tempfile.mkdtemp(dir=self.parent, prefix=f".{self.final.name}.", suffix=".tmp")
        )
        return self._tmp

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        assert self._tmp is not None
        if kind is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            return
        self._tmp.chmod(0o755)  # mkdtemp makes it owner-only; a run is no secret
        os.rename(self._tmp, self.final)
        if self.link_latest:
            link = self.parent / "latest"
            staged = self.parent / f".latest.{os.getpid()}.tmp"
            if staged.is_symlink() or staged.exists():
                staged.unlink()
            staged.symlink_to(self.final.name)
            os.replace(staged, link)


def write_csv(path: Path, frame: pd.DataFrame, *, exact: bool = False) -> None:
    """Floats to 10 significant digits, or ``exact``: each float's shortest repr, which
    reads back to the same float (a shard's values, summarized when it is gathered)."""
    float_format = None if exact else "%.10g"
    frame.to_csv(path, index=False, float_format=float_format, lineterminator="\n")


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def write_rows(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def summarize_scores(per_query: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std and Student-t 95% CI per config, policy, round, stage, mode, measure."""
    rows = []
    for key, values in per_query.groupby(SUMMARY_KEYS, sort=False)["value"]:
        s = summarize(values.to_numpy().tolist())
        rows.append((*key, s.n, s.mean, s.std, s.ci_low, s.ci_high))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def write_trec(
    directory: Path,
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[tuple[str, str, int, str], Mapping[str, Sequence[str]]],
) -> None:
    """``qrels.txt`` and one gzipped run file per (config, policy, round, stage), full mode.

    Documents are named by canonical URL; scores are strictly decreasing, so trec_eval
    ranks exactly as evaluated: ``trec_eval qrels.txt <(gunzip -c c00.oracle.r1.rerank.run.gz)``.
    Gzip keeps a 27-config sweep's runs at tens of MB, not hundreds. Residual and frozen
    values are these rankings with the examined documents (``feedback.csv``, with the rank
    at which each was seen) removed or pinned, each control cut to its feedback stage's
    length.
    """
    directory.mkdir()
    write_qrels(directory / "qrels.txt", qrels)
    for (config_id, policy, round_, stage), run in rankings.items():
        name = f"{config_id}.{policy}.r{round_}.{stage}"
        write_run(directory / f"{name}.run.gz", run, tag=name)
