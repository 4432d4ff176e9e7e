"""What the gate reads from a run directory, validated: every fault is one DataError line.

The gate must never pass on garbage, so nothing here is lenient: a NaN or non-numeric
``mean``, ``n`` or ``round``, a repeated cell, an empty file, a directory where a file
belongs, or JSON/YAML that does not parse names the file, the line and the column at fault.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.evaluation.measures import parse_measure
from evidence_bench.runs.data import reads_csv
from evidence_bench.runs.store import PER_QUERY_COLUMNS, SUMMARY_KEYS, read_table

__all__ = ["KEYS", "Cell", "CellFacts", "RunFacts", "describe", "read_run", "read_text"]

#: (config_id, policy, round, stage, eval_mode, measure): one summary row, one gate cell
Cell = tuple[str, str, int, str, str, str]
KEYS: tuple[str, ...] = tuple(SUMMARY_KEYS)
_TEXT_KEYS = ("config_id", "policy", "stage", "eval_mode", "measure")
_TRUE, _FALSE = frozenset({"true", "1"}), frozenset({"false", "0", ""})
#: The summary's means and the per-query values (10 significant digits): they agree far
#: closer than this, unless one of them was edited or cut short.
_AGREE = 1e-6


def describe(cell: Cell) -> str:
    """``config_id=c00, policy=oracle, ...``: how an error names a cell."""
    return ", ".join(f"{key}={value}" for key, value in zip(KEYS, cell, strict=True))


@dataclass(frozen=True, slots=True)
class CellFacts:
    """One summary.csv row: the number of queries behind the mean, the mean, and whether
    the cell cannot change in frozen mode (``fixed``, False when the column is absent)."""

    n: int
    mean: float
    fixed: bool


@dataclass(frozen=True, slots=True)
class RunFacts:
    """The parts of a run directory the gate compares, each validated on reading."""

    path: Path
    cells: Mapping[Cell, CellFacts]
    manifest: Mapping[str, Any]
    labels: Mapping[str, str]
    primary_measure: str
    per_query: pd.DataFrame

    @property
    def query_set(self) -> str:
        return str(self.manifest["query_set"])

    def values(self, cells: Sequence[Cell]) -> dict[Cell, dict[str, float]]:
        """Per-query values of ``cells`` from per_query.csv, checked against summary.csv:
        the same number of queries and the same mean, or the run files disagree."""
        wanted = set(cells)
        found: dict[Cell, dict[str, float]] = {cell: {} for cell in cells}
        frame = self.per_query
        for key, group in frame.groupby(list(KEYS), sort=False):
            cell = _cell(key)
            if cell in wanted:
                found[cell] = dict(zip(group["query_id"], group["value"], strict=True))
        as_csv = reads_csv(self.path)
        where = self.path / ("per_query.csv" if as_csv else "scores.parquet")
        summary = "summary.csv" if as_csv else "summary.parquet"
        for cell in cells:
            facts, values = self.cells[cell], found[cell]
            if len(values) != facts.n:
                raise DataError(
                    f"{where} holds {len(values)} values for ({describe(cell)}), "
                    f"{summary} says n={facts.n}: the run files disagree"
                )
            mean = math.fsum(values.values()) / len(values)
            if abs(mean - facts.mean) > _AGREE:
                raise DataError(
                    f"{where}: the mean of ({describe(cell)}) is {mean:.6f}, {summary} "
                    f"says {facts.mean:.6f}: the run files disagree"
                )
        return found


def read_run(run_dir: Path) -> RunFacts:
    """Read and validate the summary and per-query values (``summary.parquet`` and
    ``scores.parquet``, or ``summary.csv`` and ``per_query.csv``), manifest.json,
    configs.csv and config.yaml of ``run_dir``."""
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: not a run directory (no such directory)")
    parquet = not reads_csv(run_dir)
    cells = _summary(*_read(run_dir, "summary", parquet))
    manifest = _manifest(run_dir / "manifest.json")
    configs = _table(run_dir / "configs.csv", ("config_id", "label"), ("config_id",))
    labels = dict(zip(configs["config_id"], configs["label"], strict=True))
    return RunFacts(
        path=run_dir,
        cells=cells,
        manifest=manifest,
        labels=labels,
        primary_measure=_primary_measure(run_dir / "config.yaml"),
        per_query=_per_query(*_read(run_dir, "scores" if parquet else "per_query", parquet)),
    )


def _cell(key: Sequence[Any]) -> Cell:
    config_id, policy, round_, stage, mode, measure = key
    return (str(config_id), str(policy), int(round_), str(stage), str(mode), str(measure))


def _at(path: Path, line: object) -> str:
    """Where a field is: a CSV's line, a Parquet table's row (1 is the first)."""
    return f"{path} {'row' if path.suffix == '.parquet' else 'line'} {line}"


def _file(path: Path) -> Path:
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a file")
    if not path.is_file():
        raise DataError(f"{path.parent}: not a complete run directory (no {path.name})")
    return path


def read_text(path: Path) -> str:
    """The UTF-8 text of the file ``path``; else a DataError naming it."""
    try:
        return _file(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def _table(path: Path, required: Sequence[str], names: Sequence[str] = ()) -> pd.DataFrame:
    """Every field as text, nothing turned into NaN behind our back; the index is each
    row's line number in the file, so an error can name it. ``names`` must not be empty
    (numbers are checked by :func:`_numbers`, where empty is how pandas writes NaN)."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        header = next(reader, None)
        rows, lines = [], []
        for row in reader:
            if len(row) != len(header or ()):
                raise DataError(
                    f"{_at(path, reader.line_num)}: {len(row)} fields, the header has "
                    f"{len(header or ())}"
                )
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise DataError(f"{_at(path, reader.line_num)}: not readable as CSV ({exc})") from exc
    if not header:
        raise DataError(f"{path}: empty (no header, no rows)")
    repeated = [column for column in header if header.count(column) > 1]
    if repeated:
        raise DataError(f"{path}: the header names column {repeated[0]} twice")
    missing = [column for column in required if column not in header]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    if not rows:
        raise DataError(f"{path}: a header and no rows")
    frame = pd.DataFrame(rows, columns=header, index=lines, dtype=str)
    again = frame.index[(frame == pd.Series(header, index=header)).all(axis=1)]
    if len(again):
        raise DataError(f"{_at(path, again[0])}: repeats the header (a file written twice?)")
    return _named(frame, path, names)


def _named(frame: pd.DataFrame, path: Path, names: Sequence[str]) -> pd.DataFrame:
    """``frame``, once no field of the ``names`` columns is empty (an error names its line)."""
    for column in names:
        empty = frame.index[frame[column].str.strip() == ""]
        if len(empty):
            raise DataError(f"{_at(path, empty[0])}: {column} is empty")
    return frame


def _numbers(frame: pd.DataFrame, path: Path, column: str, *, whole: bool = False) -> pd.Series:
    """``column`` as finite floats (or non-negative whole numbers); the first bad field is
    an error that names its line. NaN is never a value: the gate cannot compare it."""
    raw = frame[column].str.strip()
    if whole:
        good = raw.str.fullmatch(r"[0-9]+")
        values = pd.to_numeric(raw.where(good, "0"))
    else:
        values = pd.to_numeric(raw, errors="coerce")
        good = values.notna() & values.abs().lt(math.inf)
    bad = frame.index[~good.astype(bool)]
    if len(bad):
        text = str(frame.at[bad[0], column])
        what = "a whole number" if whole else "a finite number"
        if text.strip().lower() in ("", "nan", "-nan", "+nan"):
            raise DataError(f"{_at(path, bad[0])}: {column} is NaN or empty, not {what}")
        raise DataError(f"{_at(path, bad[0])}: {column} {text!r} is not {what}")
    return values


def _flags(frame: pd.DataFrame, path: Path, column: str) -> pd.Series:
    if column not in frame.columns:
        return pd.Series(False, index=frame.index)
    raw = frame[column].str.strip().str.lower()
    bad = frame.index[~raw.isin(_TRUE | _FALSE)]
    if len(bad):
        text = frame.at[bad[0], column]
        raise DataError(f"{_at(path, bad[0])}: {column} {text!r} is not True or False")
    return raw.isin(_TRUE)


def _no_repeats(frame: pd.DataFrame, path: Path, keys: Sequence[str], what: str) -> None:
    repeated = frame.duplicated(list(keys), keep="first")
    if repeated.any():
        line = int(frame.index[repeated][0])
        row = frame.loc[line, list(keys)]
        first = frame.index[(frame[list(keys)] == row).all(axis=1)][0]
        named = ", ".join(f"{key}={row[key]}" for key in keys)
        raise DataError(f"{_at(path, line)}: repeats the {what} of line {first} ({named})")


_REQUIRED = {"summary": ((*KEYS, "n", "mean"), _TEXT_KEYS)}


def _read(run_dir: Path, name: str, parquet: bool) -> tuple[pd.DataFrame, Path]:
    """``name`` (summary, scores or per_query) as a frame of text, indexed by line (CSV)
    or row (Parquet), and its path (the CSV when ``parquet`` is false:
    :func:`~evidence_bench.runs.data.reads_csv`)."""
    required, names = _REQUIRED.get(name, (PER_QUERY_COLUMNS, (*_TEXT_KEYS, "query_id")))
    if not parquet:
        path = run_dir / f"{name}.csv"
        return _table(path, required, names), path
    path = _file(run_dir / f"{name}.parquet")
    table = read_table(run_dir, name, None)
    missing = [column for column in required if column not in table.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    if table.empty:
        raise DataError(f"{path}: no rows")
    frame = pd.DataFrame(
        {c: table[c].astype(str).to_numpy() for c in table.columns},
        index=range(1, len(table) + 1),
    )
    return _named(frame, path, names), path


def _summary(frame: pd.DataFrame, path: Path) -> dict[Cell, CellFacts]:
    rounds = _numbers(frame, path, "round", whole=True)
    counts = _numbers(frame, path, "n", whole=True)
    if (counts < 1).any():
        line = frame.index[counts < 1][0]
        raise DataError(f"{_at(path, line)}: n is 0; a mean needs at least one query")
    means = _numbers(frame, path, "mean")
    fixed = _flags(frame, path, "fixed")
    # only frozen evaluation pins what a measure reads: elsewhere a fixed cell is damage,
    # and would take a gated cell out of the gate
    unfrozen = frame.index[fixed.to_numpy() & (frame["eval_mode"] != "frozen").to_numpy()]
    if len(unfrozen):
        mode = str(frame.at[unfrozen[0], "eval_mode"])
        raise DataError(
            f"{_at(path, unfrozen[0])}: fixed is true in {mode} mode; only a frozen cell can be"
        )
    _no_repeats(frame, path, KEYS, "cell")
    # a column at a time, not a row's .loc per cell
    keys = zip(*(frame[key] for key in KEYS), strict=True)
    cells: dict[Cell, CellFacts] = {}
    for key, round_, count, mean, flag in zip(keys, rounds, counts, means, fixed, strict=True):
        config_id, policy, _round, stage, mode, measure = key
        cell = (config_id, policy, int(round_), stage, mode, measure)
        cells[cell] = CellFacts(int(count), float(mean), bool(flag))
    return cells


def _per_query(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    frame["round"] = _numbers(frame, path, "round", whole=True).astype(int)
    frame["value"] = _numbers(frame, path, "value").astype(float)
    _no_repeats(frame, path, (*KEYS, "query_id"), "value")
    return frame[[*KEYS, "query_id", "value"]]


def _manifest(path: Path) -> dict[str, Any]:
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a JSON object")
    if not isinstance(data.get("query_set"), str) or not data["query_set"]:
        raise DataError(f"{path}: no query_set (a string) to match the baseline against")
    return data


def _primary_measure(path: Path) -> str:
    """``eval.primary_measure`` of the run's resolved config (nDCG@10 if it names none)."""
    try:
        config = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not valid YAML ({exc.__class__.__name__})") from exc
    section = config.get("eval") if isinstance(config, dict) else None
    if config is not None and not isinstance(config, dict):
        raise DataError(f"{path}: not a YAML mapping")
    name = section.get("primary_measure", "nDCG@10") if isinstance(section, dict) else "nDCG@10"
    try:
        return str(parse_measure(str(name)))
    except ConfigurationError as exc:
        raise DataError(f"{path}: eval.primary_measure: {exc}") from exc
