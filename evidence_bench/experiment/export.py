"""``export``: a run's Parquet tables as the interchange files, on demand.

``csv``: ``per_query.csv``, ``summary.csv``, ``feedback.csv`` and ``episodes.jsonl`` (and
the run's small CSVs when ``--out`` is elsewhere); ``trec``: ``trec/qrels.txt`` and one
gzipped run per (config, policy, round, stage). Files are staged and renamed into place,
so a failed export changes nothing, and nothing an export does not own is replaced.
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
from evidence_bench.experiment.rundir import write_csv, write_jsonl, write_rows, write_trec
from evidence_bench.runs.store import (
    FEEDBACK_COLUMNS,
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
        _check_places(staging, target, names)
        return _place_all(staging, target, names)
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


def _check_places(staging: Path, target: Path, names: Sequence[str]) -> None:
    """Refuse, before anything moves, to replace what an export does not own: a directory
    where it writes a file (or the reverse), or a ``trec/`` holding files it does not write."""
    for name in names:
        final, staged = target / name, staging / name
        if not final.exists():
            continue
        if final.is_dir() != staged.is_dir():
            kind = "a directory" if final.is_dir() else "a file"
            raise WriteError(f"cannot export into {target}: {final} is {kind}; move it away")
        if final.is_dir():
            foreign = sorted(
                p.name for p in final.iterdir() if p.name != "qrels.txt" and p.suffix != ".gz"
            )
            if foreign:
                raise WriteError(
                    f"cannot export into {target}: {final} holds files export does not write "
                    f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); move "
                    "them away or choose another --out"
                )


def _place_all(staging: Path, target: Path, names: Sequence[str]) -> list[Path]:
    """Rename each staged file (``trec/`` whole) over its place, the files it replaces kept
    in ``staging`` and put back should a later rename fail."""
    done: list[tuple[Path, Path | None]] = []
    try:
        for name in names:
            staged, final = staging / name, target / name
            backup = None
            if final.exists():
                backup = staging / f".replaced.{name}"
                os.rename(final, backup)
            try:
                if not staged.is_dir():
                    staged.chmod(0o644)
                os.rename(staged, final)
            except OSError:
                if backup is not None:
                    os.rename(backup, final)
                raise
            done.append((final, backup))
    except OSError:
        for final, backup in reversed(done):  # undone, newest first
            with contextlib.suppress(OSError):
                shutil.rmtree(final) if final.is_dir() else final.unlink()
                if backup is not None:
                    os.rename(backup, final)
        raise
    return [final for final, _ in done]


def written(paths: Sequence[Path]) -> str:
    """What ``export`` prints: one path a line."""
    return "".join(f"exported: {p}\n" for p in paths)
