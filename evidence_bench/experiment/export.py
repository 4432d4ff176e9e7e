"""``export``: a run's tables as the interchange files, on demand.

A run keeps its results as Parquet (:mod:`evidence_bench.experiment.store`). For tools that
read the classic formats, ``python -m evidence_bench export RUN_DIR --format csv|trec``
writes them:

- ``csv``: ``per_query.csv``, ``summary.csv``, ``feedback.csv`` and ``episodes.jsonl``,
  with the names, columns, rows and order runs wrote before Parquet (floats to 10
  significant digits; a shard's values exactly, its shortest repr), and beside them a copy
  of the run's ``configs.csv``, ``queries.csv`` and ``qrels.csv`` when ``--out`` is
  another directory;
- ``trec``: ``trec/qrels.txt`` and one gzipped 6-column run per (config, policy, round,
  stage), full mode, documents named by canonical URL, for trec_eval or ir_measures:
  ``trec_eval -m ndcg_cut.10 trec/qrels.txt <(gunzip -c trec/c00.oracle.r1.rerank.run.gz)``.

Everything is written into a staging directory beside the target and then renamed into
place, file by file (``trec/`` as a whole), so a failed export changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from evidence_bench.errors import ConfigurationError, DataError, WriteError
from evidence_bench.experiment.rundir import (
    FEEDBACK_COLUMNS,
    write_csv,
    write_jsonl,
    write_rows,
    write_trec,
)
from evidence_bench.experiment.store import (
    RunTables,
    episode_records,
    feedback_frame,
    read_tables,
    trec_qrels,
    trec_runs,
)

__all__ = ["ExportFormat", "export_run"]

#: Small files of the run itself, copied when exporting to another directory.
_COPIED = ("configs.csv", "queries.csv", "qrels.csv")


class ExportFormat(StrEnum):
    """What ``export`` writes."""

    CSV = "csv"
    TREC = "trec"

    @classmethod
    def parse(cls, value: str) -> ExportFormat:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(f.value for f in cls)
            raise ConfigurationError(f"--format {value!r}: valid formats are {valid}") from None


def export_run(run_dir: Path, format: str, out: Path | None = None) -> list[Path]:
    """Write the ``format`` files of ``run_dir`` into ``out`` (default: the run directory
    itself); returns what was written. A missing or damaged table is a :class:`DataError`
    naming it; nothing is written then."""
    kind = ExportFormat.parse(format)
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise DataError(f"{run_dir}: not a run directory (no manifest.json)")
    target = Path(out) if out is not None else run_dir
    if kind is ExportFormat.CSV:
        tables = read_tables(run_dir, ("scores", "summary", "feedback", "episodes", "rankings"))
    else:
        tables = read_tables(run_dir, ("runs", "rankings", "trec_qrels"))
    try:
        target.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target, prefix=".export.", suffix=".tmp"))
    except OSError as exc:
        raise WriteError(f"cannot write into {target}: {exc.strerror or exc}") from exc
    try:
        if kind is ExportFormat.CSV:
            names = _csv(run_dir, staging, tables, copy=target.resolve() != run_dir.resolve())
        else:
            write_trec(staging / "trec", trec_qrels(tables), trec_runs(tables))
            names = ["trec"]
        return [_place(staging / name, target / name) for name in names]
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise WriteError(
            f"could not export {run_dir} into {target}: {exc.strerror or exc}{where}; "
            "files already there are as they were"
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _csv(run_dir: Path, staging: Path, tables: RunTables, *, copy: bool) -> list[str]:
    assert tables.summary is not None
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{run_dir / 'manifest.json'}: not valid JSON: {exc}") from exc
    # a shard's values exactly, as it wrote them before Parquet (experiment/shards.py)
    exact = isinstance(manifest, dict) and "shard" in manifest
    write_csv(staging / "per_query.csv", tables.scores, exact=exact)
    write_csv(staging / "summary.csv", tables.summary)
    write_rows(staging / "feedback.csv", FEEDBACK_COLUMNS, feedback_frame(tables))
    write_jsonl(staging / "episodes.jsonl", episode_records(tables))
    names = ["per_query.csv", "summary.csv", "feedback.csv", "episodes.jsonl"]
    for name in _COPIED if copy else ():
        if (run_dir / name).is_file():
            shutil.copyfile(run_dir / name, staging / name)
            names.append(name)
    return names


def _place(staged: Path, final: Path) -> Path:
    """Rename ``staged`` over ``final``; a directory replaces the old one whole."""
    if staged.is_dir():
        old = None
        if final.exists():
            old = final.with_name(f".{final.name}.{os.getpid()}.old")
            os.rename(final, old)
        os.rename(staged, final)
        if old is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(old)
    else:
        staged.chmod(0o644)
        os.replace(staged, final)
    return final


def written(paths: Sequence[Path]) -> str:
    """What ``export`` prints: one path a line."""
    return "".join(f"exported: {p}\n" for p in paths)
