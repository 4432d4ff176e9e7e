"""A run's results as columns: built once in memory, written once as Parquet.

A sweep's rows repeat a few keys millions of times, and most of its episodes share what
they showed and marked (round 1 of every config with the same ranker kind), so the run
directory keeps (README.md, "The run directory"):

- ``scores.parquet``: ``per_query.csv``'s rows (:data:`PER_QUERY_COLUMNS`), in its order;
  the keys dictionary-encoded;
- ``summary.parquet``: ``summary.csv``'s rows;
- ``feedback.parquet``: each distinct set of one round's examined documents once
  (``marks``, ``doc_id``, ``label``, ``url``, ``rank``);
- ``episodes.parquet``: one row per (config_id, policy, query_id, round), in the run's
  order: the query, the round's record but for its rankings (``detail``, JSON; a repeated one
  is stored once, dictionary-encoded), its mark set (``marks``) and the rankings it showed
  (``before``, ``after_rerank``, ``after_expand``: ids in ``rankings.parquet``);
- ``rankings.parquet``: each distinct ranking once (``ranking``, ``items``);
- ``runs.parquet``: the TREC runs (full mode) as (config_id, policy, round, stage,
  query_id) -> ``ranking``, and ``trec_qrels.parquet`` their qrels, keyed by URL.

``python -m evidence_bench export RUN_DIR --format csv|trec`` writes the interchange files
from them (:mod:`evidence_bench.experiment.export`): ``per_query.csv``, ``summary.csv``,
``feedback.csv`` and ``episodes.jsonl`` as runs wrote them before, and ``trec/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from evidence_bench.errors import DataError
from evidence_bench.experiment.rundir import FEEDBACK_COLUMNS, PER_QUERY_COLUMNS

if TYPE_CHECKING:
    from evidence_bench.experiment.runner import QueryOutput

__all__ = [
    "EPISODE_KEYS",
    "RUN_KEYS",
    "STORED_DIGITS",
    "TABLES",
    "RunTables",
    "TableBuilder",
    "as_stored",
    "episode_records",
    "feedback_frame",
    "read_table",
    "read_tables",
    "trec_qrels",
    "trec_runs",
    "write_table",
    "write_tables",
]

EPISODE_KEYS = ["config_id", "policy", "query_id", "round"]
RUN_KEYS = ["config_id", "policy", "round", "stage", "query_id"]
#: The episode lists that are stored as ranking ids.
_LISTS = ("before", "after_rerank", "after_expand")
#: The tables a run directory holds: name -> the columns a reader needs.
TABLES: dict[str, tuple[str, ...]] = {
    "scores": tuple(PER_QUERY_COLUMNS),
    "summary": ("config_id", "policy", "round", "stage", "eval_mode", "measure", "n", "mean"),
    "feedback": ("marks", "doc_id", "label", "url", "rank"),
    "episodes": (*EPISODE_KEYS, "query", "detail", "marks", *_LISTS),
    "rankings": ("ranking", "items"),
    "runs": (*RUN_KEYS, "ranking"),
    "trec_qrels": ("query_id", "url", "relevance"),
}
_CATEGORIES = ("config_id", "policy", "query_id", "stage", "eval_mode", "measure", "label")


@dataclass(frozen=True)
class RunTables:
    """One run's results, the frames its files hold (see the module's docstring)."""

    scores: pd.DataFrame
    feedback: pd.DataFrame
    episodes: pd.DataFrame
    rankings: Sequence[Sequence[str]]
    runs: pd.DataFrame
    trec_qrels: pd.DataFrame
    summary: pd.DataFrame | None = None


def _categorical(columns: Mapping[str, Sequence[Any]], ints: Mapping[str, str]) -> pd.DataFrame:
    """A frame whose text keys are categories (dictionary-encoded in Parquet)."""
    data: dict[str, Any] = {}
    for name, values in columns.items():
        if name in ints:
            data[name] = pd.array(list(values), dtype=ints[name])  # type: ignore[call-overload]
        elif name in _CATEGORIES or name in ("query", "detail"):
            data[name] = pd.Categorical(values)
        else:
            data[name] = values
    return pd.DataFrame(data, columns=list(columns))


class TableBuilder:
    """Collects :class:`QueryOutput`\\ s in run order into :class:`RunTables`, each
    distinct mark set and ranking once."""

    def __init__(self, doc_id: Any = None) -> None:
        self._doc_id = doc_id
        self._scores: list[list[Any]] = [[] for _ in PER_QUERY_COLUMNS]
        self._feedback: list[tuple[Any, ...]] = []
        self._mark_ids: dict[tuple[tuple[Any, ...], ...], int] = {}
        self._marks: list[list[Any]] = [[] for _ in TABLES["feedback"]]
        self._ranking_ids: dict[tuple[str, ...], int] = {}
        self._rankings: list[tuple[str, ...]] = []
        self._episodes: list[list[Any]] = [[] for _ in TABLES["episodes"]]
        self._runs: list[list[Any]] = [[] for _ in TABLES["runs"]]

    def _ranking(self, items: Sequence[str] | None) -> int | None:
        if items is None:
            return None
        key = tuple(items)
        found = self._ranking_ids.get(key)
        if found is None:
            found = self._ranking_ids[key] = len(self._rankings)
            self._rankings.append(key)
        return found

    def _mark_set(self, rows: Sequence[tuple[Any, ...]]) -> int:
        key = tuple((r[4], r[5], r[6], r[7]) for r in rows)
        found = self._mark_ids.get(key)
        if found is None:
            found = self._mark_ids[key] = len(self._mark_ids)
            for row in key:
                for column, value in zip(self._marks, (found, *row), strict=True):
                    column.append(value)
        return found

    def add(self, out: QueryOutput) -> None:
        """One query's rows (outputs come in query order)."""
        for column, score in zip(self._scores, zip(*out.scores, strict=True), strict=True):
            column.extend(score)
        self._feedback.extend(out.feedback)
        marks: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in out.feedback:
            marks.setdefault((row[0], row[1], row[2], int(row[3])), []).append(row)
        for episode in out.episodes:
            cid, policy, qid = episode["config_id"], episode["policy"], episode["query_id"]
            rounds = episode.get("rounds") or []
            # an episode without rounds keeps a row (round 0, no detail) to be listed at all
            for record in rounds or [None]:
                round_ = 0 if record is None else int(record["round"])
                rows = marks.pop((cid, policy, qid, round_), [])
                detail = None
                lists: list[int | None] = [None, None, None]
                if record is not None:
                    rest = {k: v for k, v in record.items() if k not in (*_LISTS, "round")}
                    detail = json.dumps(rest, ensure_ascii=False, sort_keys=True)
                    lists = [self._ranking(record.get(k)) for k in _LISTS]
                entry: list[Any] = [cid, policy, qid, round_, episode.get("query", ""), detail]
                entry += [self._mark_set(rows), *lists]
                for column, value in zip(self._episodes, entry, strict=True):
                    column.append(value)
        if marks:
            cid, policy, qid, round_ = next(iter(marks))
            raise DataError(
                f"query {qid!r}: feedback for config {cid}, policy {policy}, round {round_} "
                "belongs to no episode round"
            )
        for (cid, policy, round_, stage), keys in out.rankings.items():
            run: list[Any] = [cid, policy, round_, stage, out.query_id, self._ranking(keys)]
            for column, value in zip(self._runs, run, strict=True):
                column.append(value)

    def feedback(self) -> pd.DataFrame:
        """Every examined document in run order (:data:`FEEDBACK_COLUMNS`)."""
        return pd.DataFrame(self._feedback, columns=FEEDBACK_COLUMNS)

    def tables(self, qrels: Mapping[str, Mapping[str, int]]) -> RunTables:
        """The tables, without the summary (computed from ``scores``: set it with
        :func:`dataclasses.replace`). ``qrels``: query_id -> URL -> grade, as TREC's."""
        scores = _categorical(
            dict(zip(PER_QUERY_COLUMNS, self._scores, strict=True)),
            {"round": "int16", "value": "float64"},
        )
        marks = _categorical(
            dict(zip(TABLES["feedback"], self._marks, strict=True)),
            {"marks": "int32", "rank": "int32"},
        )
        ids = {"round": "int16", "marks": "int32", **dict.fromkeys(_LISTS, "Int32")}
        episodes = _categorical(dict(zip(TABLES["episodes"], self._episodes, strict=True)), ids)
        runs = _categorical(
            dict(zip(TABLES["runs"], self._runs, strict=True)),
            {"round": "int16", "ranking": "int32"},
        )
        trec_qrels = _categorical(
            {
                "query_id": [q for q, grades in qrels.items() for _ in grades],
                "url": [u for grades in qrels.values() for u in grades],
                "relevance": [int(g) for grades in qrels.values() for g in grades.values()],
            },
            {"relevance": "int16"},
        )
        return RunTables(scores, marks, episodes, self._rankings, runs, trec_qrels)


#: Significant digits of a stored per-query value (a shard's: all of them).
STORED_DIGITS = 10


def as_stored(scores: pd.DataFrame, *, exact: bool = False) -> pd.DataFrame:
    """``scores`` with each value as a run stores it: to :data:`STORED_DIGITS` significant
    digits, the value ``per_query.csv`` always held and the report, the gate and the
    tuning have always read (the summary is computed from the exact values first); or
    ``exact`` (a shard's, so its gathered summary is the unsharded run's)."""
    if exact or scores.empty:
        return scores
    values = scores["value"].to_numpy(dtype=float)
    # each distinct value rounded once, correctly (as printf's %.10g), then mapped back
    distinct, where = np.unique(values, return_inverse=True)
    rounded = np.array([float(f"{v:.{STORED_DIGITS}g}") for v in distinct.tolist()])
    out = scores.copy()
    out["value"] = rounded[where.reshape(-1)] if len(rounded) else values
    return out


def write_table(path: Path, frame: pd.DataFrame) -> None:
    """``frame`` as Parquet (zstd; text keys dictionary-encoded, each distinct value once)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(
        table,
        path,
        compression="zstd",
        use_dictionary=True,
        # a large dictionary (a sweep's distinct episode details) stays one dictionary
        dictionary_pagesize_limit=64 << 20,
        row_group_size=1 << 22,
    )


def write_tables(directory: Path, tables: RunTables) -> None:
    """Every table of ``tables`` into ``directory`` (a run's staging directory)."""
    if tables.summary is not None:
        write_table(directory / "summary.parquet", tables.summary)
    write_table(directory / "scores.parquet", tables.scores)
    write_table(directory / "feedback.parquet", tables.feedback)
    write_table(directory / "episodes.parquet", tables.episodes)
    rankings = pa.table(
        {
            "ranking": pa.array(range(len(tables.rankings)), pa.int32()),
            "items": pa.array([list(r) for r in tables.rankings], pa.list_(pa.string())),
        }
    )
    pq.write_table(rankings, directory / "rankings.parquet", compression="zstd")
    write_table(directory / "runs.parquet", tables.runs)
    write_table(directory / "trec_qrels.parquet", tables.trec_qrels)


def read_table(run_dir: Path, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``<name>.parquet`` of ``run_dir``; a missing, unreadable or incomplete one is a
    :class:`DataError` naming it."""
    path = run_dir / f"{name}.parquet"
    if not path.is_file():
        old = run_dir / ("per_query.csv" if name == "scores" else f"{name}.csv")
        hint = (
            f" (a run from before evidence_bench wrote Parquet: {old.name}; run it again)"
            if old.is_file() or (run_dir / "episodes.jsonl").is_file()
            else " (is this a run directory?)"
        )
        raise DataError(f"{path}: file not found{hint}")
    try:
        table = pq.read_table(path, columns=list(columns) if columns is not None else None)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: cannot be read as Parquet: {exc}") from exc
    frame: pd.DataFrame = table.to_pandas()
    missing = [c for c in (columns or TABLES.get(name, ())) if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    return frame


class _Rankings(Sequence[Sequence[str]]):
    """``rankings.parquet``'s lists, each turned into Python only when asked for (the
    report details a few configurations' episodes of tens of thousands)."""

    def __init__(self, items: pa.ChunkedArray) -> None:
        self._items = items.combine_chunks() if items.num_chunks != 1 else items.chunk(0)
        self._cache: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> list[str]:  # type: ignore[override]
        found = self._cache.get(index)
        if found is None:
            found = self._cache[index] = self._items[index].as_py()
        return found


def _rankings(run_dir: Path) -> Sequence[Sequence[str]]:
    path = run_dir / "rankings.parquet"
    if not path.is_file():
        read_table(run_dir, "rankings")  # the one-line error
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: cannot be read as Parquet: {exc}") from exc
    if (
        table.column_names[:2] != ["ranking", "items"]
        or not (table["ranking"].to_numpy() == np.arange(table.num_rows)).all()
    ):
        raise DataError(f"{path}: expected the columns ranking (0..n-1) and items")
    return _Rankings(table["items"])


def read_tables(run_dir: Path, only: Sequence[str] | None = None) -> RunTables:
    """The tables of a run directory written by :func:`write_tables`; ``only``: just these
    (the others empty)."""

    def table(name: str) -> pd.DataFrame:
        if only is not None and name not in only:
            return pd.DataFrame(columns=list(TABLES[name]))
        return read_table(run_dir, name)

    wanted = only is None or "rankings" in only
    return RunTables(
        scores=table("scores"),
        feedback=table("feedback"),
        episodes=table("episodes"),
        rankings=_rankings(run_dir) if wanted else [],
        runs=table("runs"),
        trec_qrels=table("trec_qrels"),
        summary=table("summary"),
    )


def _groups(tables: RunTables) -> dict[int, list[tuple[Any, ...]]]:
    """mark set id -> its (doc_id, label, url, rank) rows."""
    marks = tables.feedback
    sets: dict[int, list[tuple[Any, ...]]] = {}
    for mark_id, doc_id, label, url, rank in zip(
        *(marks[c].tolist() for c in TABLES["feedback"]), strict=True
    ):
        sets.setdefault(int(mark_id), []).append((str(doc_id), str(label), str(url), int(rank)))
    return sets


def feedback_frame(tables: RunTables) -> Iterator[tuple[Any, ...]]:
    """Every examined document, in run order, as :data:`FEEDBACK_COLUMNS` rows."""
    sets = _groups(tables)
    episodes = tables.episodes
    for cid, policy, qid, round_, mark_id in zip(
        *(episodes[c].tolist() for c in (*EPISODE_KEYS, "marks")), strict=True
    ):
        for doc_id, label, url, rank in sets.get(int(mark_id), ()):
            yield (str(cid), str(policy), str(qid), int(round_), doc_id, label, url, rank)


def episode_records(
    tables: RunTables, episodes: pd.DataFrame | None = None
) -> Iterator[dict[str, Any]]:
    """The episodes (as ``episodes.jsonl`` held them), in run order; ``episodes``: some
    rows of ``tables.episodes`` only."""
    frame = tables.episodes if episodes is None else episodes
    rankings = tables.rankings
    current: dict[str, Any] | None = None
    columns = (*EPISODE_KEYS, "query", "detail", *_LISTS)
    for cid, policy, qid, round_, query, detail, *lists in zip(
        *(frame[c].tolist() for c in columns), strict=True
    ):
        key = (str(cid), str(policy), str(qid))
        if current is None or (current["config_id"], current["policy"], current["query_id"]) != key:
            if current is not None:
                yield current
            current = {
                "config_id": key[0],
                "policy": key[1],
                "query_id": key[2],
                "query": str(query),
                "rounds": [],
            }
        if detail is None or (isinstance(detail, float) and pd.isna(detail)):
            continue
        record: dict[str, Any] = json.loads(str(detail))
        record["round"] = int(round_)
        for name, ranking in zip(_LISTS, lists, strict=True):
            record[name] = None if pd.isna(ranking) else list(rankings[int(ranking)])
        current["rounds"].append(record)
    if current is not None:
        yield current


def trec_runs(tables: RunTables) -> dict[tuple[str, str, int, str], dict[str, list[str]]]:
    """(config_id, policy, round, stage) -> query_id -> ranking (URLs), in run order."""
    runs: dict[tuple[str, str, int, str], dict[str, list[str]]] = {}
    frame = tables.runs
    for cid, policy, round_, stage, qid, ranking in zip(
        *(frame[c].tolist() for c in TABLES["runs"]), strict=True
    ):
        run = runs.setdefault((str(cid), str(policy), int(round_), str(stage)), {})
        run[str(qid)] = list(tables.rankings[int(ranking)])
    return runs


def trec_qrels(tables: RunTables) -> dict[str, dict[str, int]]:
    """query_id -> URL -> relevance."""
    qrels: dict[str, dict[str, int]] = {}
    frame = tables.trec_qrels
    for qid, url, grade in zip(*(frame[c].tolist() for c in TABLES["trec_qrels"]), strict=True):
        qrels.setdefault(str(qid), {})[str(url)] = int(grade)
    return qrels
