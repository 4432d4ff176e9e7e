"""A run's results as columns: built once in memory, written once as Parquet.

A sweep's rows repeat a few keys millions of times, and most of its episodes share what
they showed and marked, so each table stores a distinct mark set or ranking once and its
text keys dictionary-encoded: ``scores``, ``summary``, ``feedback``, ``episodes``,
``rankings``, ``runs`` and ``trec_qrels`` (:data:`TABLES`; docs/reference/run-directory.rst).
``export`` writes the interchange files from them (:mod:`evidence_bench.experiment.export`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from evidence_bench._lazy import module
from evidence_bench.errors import DataError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    pd = module("pandas")
    pa = module("pyarrow")
    pq = module("pyarrow.parquet")


#: The scores' long layout: one row per (config, user, query, round, stage, mode, measure).
PER_QUERY_COLUMNS = [
    "config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure", "value",
]  # fmt: skip
SUMMARY_KEYS = ["config_id", "policy", "round", "stage", "eval_mode", "measure"]
SUMMARY_COLUMNS = [*SUMMARY_KEYS, "n", "mean", "std", "ci_low", "ci_high", "fixed"]
#: doc_id as in the collection's qrels, url as in trec/ (its canonical URL), and the rank at
#: which the user saw it in the frozen list: what rebuilds the residual and frozen runs
FEEDBACK_COLUMNS = ["config_id", "policy", "query_id", "round", "doc_id", "label", "url", "rank"]

__all__ = [
    "EPISODE_KEYS",
    "FEEDBACK_COLUMNS",
    "PER_QUERY_COLUMNS",
    "RUN_KEYS",
    "STORED_DIGITS",
    "SUMMARY_COLUMNS",
    "SUMMARY_KEYS",
    "TABLES",
    "EpisodeRound",
    "MarkRow",
    "QueryRows",
    "QueryRowsBuilder",
    "RunTables",
    "TableBuilder",
    "TablesWriter",
    "as_stored",
    "episode_records",
    "feedback_frame",
    "query_rows",
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


#: One episode round as the builder stores it: (round, detail JSON, mark set, before,
#: after_rerank, after_expand); mark set and lists index the query's ``mark_sets`` and
#: ``rankings``. An episode without rounds: one (0, None, its mark set, None, None, None).
EpisodeRound = tuple[int, str | None, int, int | None, int | None, int | None]
#: One examined document of a mark set: (doc_id, label, url, rank).
MarkRow = tuple[str, str, str, int]
_Int = npt.NDArray[np.int32]


def _ints(values: Sequence[int], dtype: Any = np.int32) -> npt.NDArray[Any]:
    return np.array(values, dtype=dtype)


@dataclass
class QueryRows:
    """One query's rows for every engine config and user, as compactly as a worker sends
    them to the parent: each distinct mark set, ranking and evaluation once, the rest as
    integer columns (:class:`TableBuilder` turns them into the run's tables).

    ``values`` holds one row per distinct (ranking, judgments) the query's episodes scored,
    one column per measure of ``measures``; each scored (pair, round, stage, eval_mode) is
    one entry of the ``score_*`` columns, its values row ``score_evaluation``, which the
    scores table spreads over one row per measure. ``pair`` indexes ``pairs``, ``stage`` and
    ``mode`` index ``stages`` and ``modes``; rankings are numbered in the order of
    ``ranking_offsets``: ranking ``i`` is ``ranking_keys[ranking_items[offsets[i] :
    offsets[i + 1]]]``."""

    query_id: str
    #: the distinct (config_id, policy) of the query's episodes and runs
    pairs: list[tuple[str, str]] = field(default_factory=list)
    #: each episode in run order: its pair, its query and its rounds
    episodes: list[tuple[int, str, list[EpisodeRound]]] = field(default_factory=list)
    mark_sets: list[tuple[MarkRow, ...]] = field(default_factory=list)
    #: the distinct rankings: every key they hold once, and each as indexes of those keys
    ranking_keys: list[str] = field(default_factory=list)
    ranking_items: _Int = field(default_factory=lambda: _ints([]))
    ranking_offsets: npt.NDArray[np.int64] = field(default_factory=lambda: _ints([0], np.int64))
    stages: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    measures: tuple[str, ...] = ()
    values: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty((0, 0)))
    score_pair: _Int = field(default_factory=lambda: _ints([]))
    score_round: npt.NDArray[np.int16] = field(default_factory=lambda: _ints([], np.int16))
    score_stage: _Int = field(default_factory=lambda: _ints([]))
    score_mode: _Int = field(default_factory=lambda: _ints([]))
    score_evaluation: _Int = field(default_factory=lambda: _ints([]))
    #: the TREC runs (full mode): (pair, round, stage) -> ranking
    run_pair: _Int = field(default_factory=lambda: _ints([]))
    run_round: npt.NDArray[np.int16] = field(default_factory=lambda: _ints([], np.int16))
    run_stage: _Int = field(default_factory=lambda: _ints([]))
    run_ranking: _Int = field(default_factory=lambda: _ints([]))

    def score_rows(self) -> list[tuple[str, str, str, int, str, str, str, float]]:
        """The scores as :data:`PER_QUERY_COLUMNS` rows, in order."""
        rows = self.values[self.score_evaluation].tolist() if len(self.score_evaluation) else []
        qid, pairs, stages, modes = self.query_id, self.pairs, self.stages, self.modes
        return [
            (*pairs[p], qid, r, stages[s], modes[m], name, value)
            for p, r, s, m, row in zip(
                self.score_pair.tolist(),
                self.score_round.tolist(),
                self.score_stage.tolist(),
                self.score_mode.tolist(),
                rows,
                strict=True,
            )
            for name, value in zip(self.measures, row, strict=True)
        ]

    def feedback_rows(self) -> list[tuple[str, str, str, int, str, str, str, int]]:
        """Every examined document as :data:`FEEDBACK_COLUMNS` rows, in run order."""
        return [
            (*self.pairs[pair], self.query_id, round_, *mark)
            for pair, _query, rounds in self.episodes
            for round_, _detail, marks, *_ in rounds
            for mark in self.mark_sets[marks]
        ]


class QueryRowsBuilder:
    """Builds one query's :class:`QueryRows` (in a worker): episodes in run order, then
    :meth:`build`. Mark sets and rankings get ids in the order the run's tables number
    them (the episodes' lists, then the runs), so the parent numbers them in that order
    too."""

    def __init__(self, query_id: str) -> None:
        self.query_id = query_id
        self._pairs: dict[tuple[str, str], int] = {}
        self._mark_ids: dict[tuple[MarkRow, ...], int] = {}
        #: every key of a ranking, numbered as first met, and each distinct ranking (its
        #: keys' numbers, as bytes) -> its id; build() renumbers the keys
        self._keys: dict[str, int] = {}
        self._ranking_ids: dict[tuple[int, ...], int] = {}
        self._stages: dict[str, int] = {}
        self._modes: dict[str, int] = {}
        self._episodes: list[tuple[int, str, list[EpisodeRound]]] = []
        self._details: dict[str, str] = {}
        self._scored: dict[tuple[tuple[int, str, str], ...], tuple[list[int], ...]] = {}
        self._scores: tuple[list[int], list[int], list[int], list[int], list[int]] = (
            [], [], [], [], [],
        )  # fmt: skip
        self._runs: list[tuple[int, int, int, Sequence[str]]] = []

    def pair(self, config_id: str, policy: str) -> int:
        """The index of (config_id, policy)."""
        return self._pairs.setdefault((config_id, policy), len(self._pairs))

    def _stage(self, stage: str) -> int:
        return self._stages.setdefault(stage, len(self._stages))

    def ranking(self, items: Sequence[str] | None) -> int | None:
        """The id of an episode's ranking (``before``, ``after_rerank``, ``after_expand``)."""
        return None if items is None else self.coded_ranking(self.codes(items))

    def codes(self, keys: Sequence[str]) -> tuple[int, ...]:
        """The builder's numbers of ``keys`` (for :meth:`coded_ranking`), a new key numbered
        as it is met."""
        known = self._keys
        found: list[int | None] = list(map(known.get, keys))
        if None in found:
            for at, number in enumerate(found):
                if number is None:
                    found[at] = known.setdefault(keys[at], len(known))
        return tuple(found)  # type: ignore[arg-type]  # every None replaced

    def coded_ranking(self, codes: tuple[int, ...]) -> int:
        """The id of the ranking whose keys' numbers (:meth:`codes`) are ``codes``."""
        return self._ranking_ids.setdefault(codes, len(self._ranking_ids))

    def mark_set(self, rows: Sequence[MarkRow]) -> int:
        """The id of one round's examined documents."""
        return self._mark_ids.setdefault(tuple(rows), len(self._mark_ids))

    def episode(
        self,
        pair: int,
        query: str,
        rounds: Sequence[Mapping[str, Any]],
        marks: dict[int, list[MarkRow]],
    ) -> None:
        """One episode's round records (as ``episodes.jsonl`` holds them) and each round's
        examined documents (``marks``: round -> rows, popped)."""
        entries: list[EpisodeRound] = []
        if not rounds:  # an episode without rounds keeps a row (round 0, no detail)
            entries.append((0, None, self.mark_set(marks.pop(0, [])), None, None, None))
        for record in rounds:
            round_ = int(record["round"])
            detail = self.detail(record)
            before, rerank, expand = (self.ranking(record.get(k)) for k in _LISTS)
            mark_set = self.mark_set(marks.pop(round_, []))
            entries.append((round_, detail, mark_set, before, rerank, expand))
        self._episodes.append((pair, query, entries))

    def add_episode(self, pair: int, query: str, entries: Sequence[EpisodeRound]) -> None:
        """One episode as its rounds' entries, each made as :meth:`episode` makes it (with
        :meth:`detail`, :meth:`ranking` and :meth:`mark_set`, in that order per round): a
        caller that meets one round record in many episodes makes its entry once."""
        self._episodes.append((pair, query, list(entries)))

    def detail(self, record: Mapping[str, Any]) -> str:
        """A round record's ``detail``: the record but its round and rankings, as JSON (one
        str object per distinct text, pickled once)."""
        rest = {k: v for k, v in record.items() if k not in (*_LISTS, "round")}
        return self.detail_text(json.dumps(rest, ensure_ascii=False, sort_keys=True))

    def detail_text(self, text: str) -> str:
        """A detail given as its JSON text (one str object per distinct text)."""
        return self._details.setdefault(text, text)

    def scores(
        self, pair: int, scored: Sequence[tuple[int, str, str]], evaluations: Sequence[int]
    ) -> None:
        """An episode's scored (round, stage, eval_mode)s and their evaluation ids."""
        pairs, rounds, stages, modes, ids = self._scores
        key = tuple(scored)
        codes = self._scored.get(key)  # most episodes score the same sequence
        if codes is None:
            mode_of = self._modes
            for _, _, mode in scored:
                mode_of.setdefault(mode, len(mode_of))
            codes = self._scored[key] = (
                [round_ for round_, _, _ in scored],
                [self._stage(stage) for _, stage, _ in scored],
                [mode_of[mode] for _, _, mode in scored],
            )
        rounds.extend(codes[0])
        stages.extend(codes[1])
        modes.extend(codes[2])
        pairs.extend([pair] * len(scored))
        ids.extend(evaluations)

    def run(self, pair: int, round_: int, stage: str, keys: Sequence[str]) -> None:
        """A TREC run's ranking (numbered after every episode's lists)."""
        self._runs.append((pair, round_, self._stage(stage), keys))

    def build(self, measures: Sequence[str], values: npt.NDArray[np.float64]) -> QueryRows:
        """The rows; ``values``: the evaluations the scores' ids index, a column per
        measure."""
        # A ranking list met in many runs (the round-by-round episodes share them) is looked
        # up once; self._runs keeps each list alive, so its id names it.
        known: dict[int, int | None] = {}
        runs = []
        for p, r, s, keys in self._runs:
            found = known.get(id(keys), -1)
            if found == -1:
                found = known[id(keys)] = self.ranking(keys)
            runs.append((p, r, s, found))
        # the keys renumbered in the order the rankings, one after another, first hold them
        sizes = list(map(len, self._ranking_ids))
        coded = np.fromiter(chain.from_iterable(self._ranking_ids), np.int32, sum(sizes))
        names = list(self._keys)
        seen = np.maximum.accumulate(coded) if len(coded) else coded
        if len(coded) and coded[0] == 0 and (coded[1:] <= seen[:-1] + 1).all():
            # numbered as first met already (each ranking's keys numbered just before it
            # was): every key up to the largest, in order
            order = np.arange(int(seen[-1]) + 1, dtype=np.int32)
            items = coded.copy()
        else:
            distinct, first = np.unique(coded, return_index=True)
            order = distinct[np.argsort(first, kind="stable")]
            renumbered = np.empty(len(self._keys), dtype=np.int32)
            renumbered[order] = np.arange(len(order), dtype=np.int32)
            items = renumbered[coded]
        columns: list[Sequence[Any]] = list(zip(*runs, strict=True)) if runs else [()] * 4
        pairs, rounds, stages, modes, ids = self._scores
        return QueryRows(
            self.query_id,
            pairs=list(self._pairs),
            episodes=self._episodes,
            mark_sets=list(self._mark_ids),
            ranking_keys=[names[code] for code in order.tolist()],
            ranking_items=items,
            ranking_offsets=np.cumsum([0, *sizes], dtype=np.int64),
            stages=list(self._stages),
            modes=list(self._modes),
            measures=tuple(measures),
            values=values,
            score_pair=_ints(pairs),
            score_round=_ints(rounds, np.int16),
            score_stage=_ints(stages),
            score_mode=_ints(modes),
            score_evaluation=_ints(ids),
            run_pair=_ints(columns[0]),
            run_round=_ints(columns[1], np.int16),
            run_stage=_ints(columns[2]),
            run_ranking=_ints(columns[3]),
        )


def query_rows(
    query_id: str,
    scores: Sequence[Sequence[Any]],
    feedback: Sequence[Sequence[Any]],
    episodes: Sequence[Mapping[str, Any]],
    rankings: Mapping[tuple[str, str, int, str], Sequence[str]],
) -> QueryRows:
    """One query's :class:`QueryRows` from its rows: ``scores`` as :data:`PER_QUERY_COLUMNS`,
    ``feedback`` as :data:`FEEDBACK_COLUMNS`, ``episodes`` as ``episodes.jsonl`` holds them,
    ``rankings``: (config_id, policy, round, stage) -> the full mode's ranking. The scores
    of each (config_id, policy, round, stage, eval_mode) follow each other, each with the
    query's measures in one order (as every run writes them), else a :class:`DataError`."""
    builder = QueryRowsBuilder(query_id)
    marks: dict[tuple[Any, ...], list[MarkRow]] = {}
    for row in feedback:
        marks.setdefault((row[0], row[1], row[2], int(row[3])), []).append(
            (row[4], row[5], row[6], int(row[7]))
        )
    for episode in episodes:
        cid, policy, qid = episode["config_id"], episode["policy"], episode["query_id"]
        rounds = episode.get("rounds") or []
        mine = {
            r: marks.pop((cid, policy, qid, r))
            for r in [0, *(int(record["round"]) for record in rounds)]
            if (cid, policy, qid, r) in marks
        }
        builder.episode(builder.pair(cid, policy), episode.get("query", ""), rounds, mine)
        for r, rows in mine.items():  # a round's marks the episode did not hold
            marks[(cid, policy, qid, r)] = rows
    if marks:
        cid, policy, qid, round_ = next(iter(marks))
        raise DataError(
            f"query {qid!r}: feedback for config {cid}, policy {policy}, round {round_} "
            "belongs to no episode round"
        )
    names: list[str] = []  # the measures, as the first (config, policy, round, ...) has them
    groups: list[tuple[tuple[Any, ...], list[str], list[float]]] = []
    for cid, policy, _qid, round_, stage, mode, measure, value in scores:
        key = (str(cid), str(policy), int(round_), str(stage), str(mode))
        last = groups[-1] if groups else None
        if last is not None and last[0] == key and (len(groups) == 1 or len(last[1]) < len(names)):
            last[1].append(str(measure))
            last[2].append(float(value))
        else:
            groups.append((key, [str(measure)], [float(value)]))
        if len(groups) == 1:
            names = groups[0][1]
    for key, measures, _values in groups:
        if measures != names:
            raise DataError(
                f"query {query_id!r}: the scores of config {key[0]}, policy {key[1]}, round "
                f"{key[2]}, stage {key[3]}, eval_mode {key[4]} hold the measures "
                f"{', '.join(measures)}, not {', '.join(names)}"
            )
    for index, (key, _measures, _values) in enumerate(groups):
        builder.scores(builder.pair(key[0], key[1]), [key[2:]], [index])
    for (cid, policy, round_, stage), keys in rankings.items():
        builder.run(builder.pair(cid, policy), int(round_), stage, keys)
    matrix = np.array([g[2] for g in groups], dtype=np.float64).reshape(len(groups), len(names))
    return builder.build(names, matrix)


class _Levels:
    """Text values numbered in the order first seen."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, value: str) -> int:
        found = self._codes.get(value)
        if found is None:
            found = self._codes[value] = len(self.names)
            self.names.append(value)
        return found

    def codes(self, values: Sequence[str]) -> _Int:
        return _ints([self.code(value) for value in values])

    def categorical(
        self, parts: Sequence[npt.NDArray[Any]], repeats: npt.NDArray[np.int64] | None = None
    ) -> pd.Categorical[Any]:
        """The values coded ``parts`` (concatenated; each repeated ``repeats`` times) as
        ``pd.Categorical(values)`` gives them: the categories present, sorted, the codes in
        the smallest integer type that holds them."""
        codes = np.concatenate(parts) if parts else _ints([])
        names = self.names
        present = np.flatnonzero(np.bincount(codes, minlength=len(names)))
        ordered = sorted(present.tolist(), key=names.__getitem__)
        if not ordered:
            return pd.Categorical([])
        kind = next(t for t in (np.int8, np.int16, np.int32) if len(ordered) < np.iinfo(t).max)
        remap = np.full(len(names), -1, dtype=kind)
        remap[ordered] = np.arange(len(ordered))
        final = remap[codes] if repeats is None else np.repeat(remap[codes], repeats)
        return pd.Categorical.from_codes(final, categories=pd.Index([names[i] for i in ordered]))


class _CodedRankings(Sequence[Sequence[str]]):
    """A run's distinct rankings as codes of its keys (each ranking: its int32 codes as
    bytes), each turned into Python only when asked for."""

    def __init__(self, keys: Sequence[str], rankings: Sequence[bytes]) -> None:
        self._keys = keys
        self._codes = np.frombuffer(b"".join(rankings), dtype=np.int32)
        sizes = [len(r) // 4 for r in rankings]
        self._offsets = np.cumsum([0, *sizes], dtype=np.int64)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index: int) -> list[str]:  # type: ignore[override]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        start, end = self._offsets[index : index + 2].tolist()
        keys = self._keys
        return [keys[code] for code in self._codes[start:end].tolist()]

    def coded(self) -> tuple[Sequence[str], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """Every key once, the rankings' codes one after another, and where each starts
        (:class:`evidence_bench.evaluation.incomplete.CodedRankings`)."""
        return self._keys, self._codes, self._offsets

    def arrow(self) -> pa.ListArray:
        """The rankings as one Arrow list array of dictionary-encoded strings: each distinct
        key once (a sweep's 1.7 M items as strings are ~70 MB more at the run's peak)."""
        keys = pa.array(self._keys, pa.string())
        values = pa.DictionaryArray.from_arrays(pa.array(self._codes, pa.int32()), keys)
        return pa.ListArray.from_arrays(pa.array(self._offsets, pa.int32()), values)


def _taken(column: Sequence[Any], rows: npt.NDArray[np.int64], number: bool) -> Any:
    """``column``'s values at ``rows``: int64 for a ``number``, else a categorical whose
    categories are the values in the order first met."""
    if number:
        return np.array(column, dtype=np.int64)[rows]
    codes, names = pd.factorize(np.array(column, dtype=object))
    return pd.Categorical.from_codes(codes[rows], categories=pd.Index(names))


def _joined(parts: Sequence[npt.NDArray[Any]], dtype: Any) -> npt.NDArray[Any]:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.array([], dtype)


class TableBuilder:
    """Collects each query's :class:`QueryRows` in run order into :class:`RunTables`, each
    distinct mark set and ranking once.

    A query's rows arrive as columns (:class:`QueryRows`): its keys are numbered here,
    its mark sets and rankings looked up once each, and its scores spread into the long
    layout of :data:`PER_QUERY_COLUMNS` with numpy (one row per measure of each scored
    (config, policy, round, stage, eval_mode))."""

    def __init__(self) -> None:
        self._levels = {name: _Levels() for name in _CATEGORIES}
        #: per query: its scored keys' codes (one entry per (config, policy, round, stage,
        #: eval_mode), spread over its measures in tables()), measures and values
        self._scores: dict[str, list[npt.NDArray[Any]]] = {c: [] for c in PER_QUERY_COLUMNS}
        self._widths: list[npt.NDArray[np.int64]] = []
        self._mark_ids: dict[tuple[MarkRow, ...], int] = {}
        self._mark_starts: list[int] = []
        self._mark_sizes: list[int] = []
        self._marks: list[list[Any]] = [[] for _ in TABLES["feedback"]]
        #: each distinct ranking (its keys' codes, as bytes) -> its id
        self._ranking_ids: dict[bytes, int] = {}
        self._keys = _Levels()  # every key of a ranking
        self._episodes: list[list[Any]] = [[] for _ in TABLES["episodes"]]
        self._runs: dict[str, list[npt.NDArray[Any]]] = {c: [] for c in TABLES["runs"]}

    def _rankings(self, rows: QueryRows) -> list[int]:
        """The run's ids of the query's rankings (numbered in the order first seen)."""
        codes = self._keys.codes(rows.ranking_keys)[rows.ranking_items]
        # each ranking's bytes sliced from the query's: what codes[start:end].tobytes() gives
        data = codes.tobytes()
        offsets = (rows.ranking_offsets * codes.itemsize).tolist()
        ids = self._ranking_ids
        number = ids.setdefault
        return [number(data[start:end], len(ids)) for start, end in pairwise(offsets)]

    def _mark_set(self, key: tuple[MarkRow, ...]) -> int:
        found = self._mark_ids.get(key)
        if found is None:
            found = self._mark_ids[key] = len(self._mark_ids)
            marks = self._marks
            self._mark_starts.append(len(marks[0]))
            self._mark_sizes.append(len(key))
            marks[0].extend([found] * len(key))
            if key:  # a column at a time: (doc_id, label, url, rank) of each row
                for column, values in zip(marks[1:], zip(*key, strict=True), strict=True):
                    column.extend(values)
        return found

    def add(self, rows: QueryRows) -> None:
        """One query's rows (queries come in run order)."""
        levels = self._levels
        configs = levels["config_id"].codes([c for c, _ in rows.pairs])
        policies = levels["policy"].codes([p for _, p in rows.pairs])
        query = levels["query_id"].code(rows.query_id)
        stages = levels["stage"].codes(rows.stages)
        marks = [self._mark_set(key) for key in rows.mark_sets]
        rankings = self._rankings(rows)

        # the episodes' rounds a column at a time (each round: its episode's keys, then
        # its own fields, its mark set and lists mapped to the run's ids)
        owners = [(pair, text) for pair, text, rounds in rows.episodes for _ in rounds]
        entries = [entry for _, _, rounds in rows.episodes for entry in rounds]
        if entries:
            episodes = self._episodes
            pairs = rows.pairs
            episodes[0].extend([pairs[pair][0] for pair, _ in owners])
            episodes[1].extend([pairs[pair][1] for pair, _ in owners])
            episodes[2].extend([rows.query_id] * len(owners))
            episodes[4].extend([text for _, text in owners])
            number, detail, mark_set, before, rerank, expand = zip(*entries, strict=True)
            episodes[3].extend(number)
            episodes[5].extend(detail)
            episodes[6].extend([marks[m] for m in mark_set])
            for column, ids in zip(episodes[7:], (before, rerank, expand), strict=True):
                column.extend([None if r is None else rankings[r] for r in ids])

        count, width = len(rows.score_evaluation), len(rows.measures)
        if count and width:
            owner = rows.score_pair
            scores = self._scores
            scores["config_id"].append(configs[owner])
            scores["policy"].append(policies[owner])
            scores["query_id"].append(np.full(count, query, dtype=np.int32))
            scores["round"].append(rows.score_round)
            scores["stage"].append(stages[rows.score_stage])
            modes = levels["eval_mode"].codes(rows.modes)
            scores["eval_mode"].append(modes[rows.score_mode])
            measures = levels["measure"].codes(rows.measures).astype(np.int16)
            scores["measure"].append(np.tile(measures, count))
            scores["value"].append(rows.values[rows.score_evaluation].reshape(-1))
            self._widths.append(np.full(count, width, dtype=np.int64))
        if len(rows.run_pair):
            runs = self._runs
            runs["config_id"].append(configs[rows.run_pair])
            runs["policy"].append(policies[rows.run_pair])
            runs["round"].append(rows.run_round)
            runs["stage"].append(stages[rows.run_stage])
            runs["query_id"].append(np.full(len(rows.run_pair), query, dtype=np.int32))
            runs["ranking"].append(_ints(rankings)[rows.run_ranking])

    def feedback(self) -> pd.DataFrame:
        """Every examined document in run order (:data:`FEEDBACK_COLUMNS`)."""
        episodes = self._episodes
        sets = np.array(episodes[6], dtype=np.int64)
        sizes = np.array(self._mark_sizes, dtype=np.int64)[sets] if len(sets) else sets
        total = int(sizes.sum())
        if not total:
            return pd.DataFrame([], columns=FEEDBACK_COLUMNS)
        # each episode round's mark set, row by row: where its rows are in the marks table
        owner = np.repeat(np.arange(len(sets)), sizes)
        first = np.array(self._mark_starts, dtype=np.int64)[sets] - (np.cumsum(sizes) - sizes)
        where = np.arange(total) + np.repeat(first, sizes)
        # text as categories (in the order first met): a sweep's examined documents repeat a
        # few thousand distinct strings hundreds of thousands of times
        data: dict[str, Any] = {}
        for name, column in zip(FEEDBACK_COLUMNS[:4], episodes[:4], strict=True):
            data[name] = _taken(column, owner, name == "round")
        for name, column in zip(FEEDBACK_COLUMNS[4:], self._marks[1:], strict=True):
            data[name] = _taken(column, where, name == "rank")
        return pd.DataFrame(data, columns=FEEDBACK_COLUMNS, copy=False)

    def tables(self, qrels: Mapping[str, Mapping[str, int]]) -> RunTables:
        """The tables, without the summary (computed from ``scores``: set it with
        :func:`dataclasses.replace`). ``qrels``: query_id -> URL -> grade, as TREC's."""

        def frame(columns: Mapping[str, list[npt.NDArray[Any]]], ints: Mapping[str, Any]) -> Any:
            return pd.DataFrame(
                {
                    name: (
                        _joined(parts, ints[name])
                        if name in ints
                        else self._levels[name].categorical(parts)
                    )
                    for name, parts in columns.items()
                },
                columns=list(columns),
            )

        # the scores' keys, each spread over its query's measures (measure and value are)
        widths, parts, levels = _joined(self._widths, np.int64), self._scores, self._levels
        columns: dict[str, Any] = {
            name: levels[name].categorical(parts[name], widths)
            for name in ("config_id", "policy", "query_id", "stage", "eval_mode")
        }
        columns["round"] = np.repeat(_joined(parts["round"], np.int16), widths)
        columns["measure"] = levels["measure"].categorical(parts["measure"])
        columns["value"] = _joined(parts["value"], np.float64)
        scores = pd.DataFrame(columns, columns=PER_QUERY_COLUMNS, copy=False)
        marks = _categorical(
            dict(zip(TABLES["feedback"], self._marks, strict=True)),
            {"marks": "int32", "rank": "int32"},
        )
        ids = {"round": "int16", "marks": "int32", **dict.fromkeys(_LISTS, "Int32")}
        episodes = _categorical(dict(zip(TABLES["episodes"], self._episodes, strict=True)), ids)
        runs = frame(self._runs, {"round": np.int16, "ranking": np.int32})
        trec_qrels = _categorical(
            {
                "query_id": [q for q, grades in qrels.items() for _ in grades],
                "url": [u for grades in qrels.values() for u in grades],
                "relevance": [int(g) for grades in qrels.values() for g in grades.values()],
            },
            {"relevance": "int16"},
        )
        rankings = _CodedRankings(self._keys.names, list(self._ranking_ids))
        return RunTables(scores, marks, episodes, rankings, runs, trec_qrels)


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
    # each distinct value rounded once, correctly (as printf's %.10g), then mapped back;
    # found by hashing, not sorting (a signed zero: sorted, as ever, where -0 and 0 merge)
    if ((values == 0) & np.signbit(values)).any():
        distinct, where = np.unique(values, return_inverse=True)
    else:
        where, distinct = pd.factorize(values, use_na_sentinel=False)
    rounded = np.array([float(f"{v:.{STORED_DIGITS}g}") for v in distinct.tolist()])
    out = scores.copy(deep=False)  # the keys shared (copy-on-write), only value is new
    out["value"] = rounded[where.reshape(-1)] if len(rounded) else values
    return out


def write_table(path: Path, frame: pd.DataFrame) -> None:
    """``frame`` as Parquet (zstd; text keys dictionary-encoded, each distinct value once;
    min/max statistics for the numbers only)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(
        table,
        path,
        compression="zstd",
        use_dictionary=True,
        # a large dictionary (a sweep's distinct episode details) stays one dictionary
        dictionary_pagesize_limit=64 << 20,
        row_group_size=1 << 22,
        # a text key's min and max cost Arrow a pass over the dictionary's values per page
        # (half of writing a sweep's scores) and no reader of a run skips row groups
        write_statistics=[f.name for f in table.schema if not pa.types.is_dictionary(f.type)],
    )


def _write_rankings(path: Path, tables: RunTables) -> None:
    rankings = pa.table(
        {
            "ranking": pa.array(range(len(tables.rankings)), pa.int32()),
            "items": (
                tables.rankings.arrow()
                if isinstance(tables.rankings, _CodedRankings)
                else pa.array([list(r) for r in tables.rankings], pa.list_(pa.string()))
            ),
        }
    )
    # no Arrow schema stored: the dictionary-encoded items read back as list<string>, as
    # they always did (the Parquet column was dictionary-encoded either way)
    pq.write_table(rankings, path, compression="zstd", store_schema=False)


def write_tables(directory: Path, tables: RunTables) -> None:
    """Every table of ``tables`` into ``directory`` (a run's staging directory). An
    ``OSError`` that names no file (Arrow's) is given the one it was writing, so a run's
    :class:`~evidence_bench.errors.WriteError` names it whichever thread wrote it."""
    frames = {
        "summary": tables.summary,
        "scores": tables.scores,
        "feedback": tables.feedback,
        "episodes": tables.episodes,
        "rankings": None,  # (a list per ranking, not a frame)
        "runs": tables.runs,
        "trec_qrels": tables.trec_qrels,
    }
    for name, frame in frames.items():
        if frame is None and name != "rankings":
            continue
        path = directory / f"{name}.parquet"
        try:
            if frame is None:
                _write_rankings(path, tables)
            else:
                write_table(path, frame)
        except OSError as exc:
            if exc.filename is None and exc.strerror is not None:
                exc.filename = path.name  # (str(exc) then names it too; strerror is kept)
            raise


class TablesWriter:
    """``write(directory, tables)`` (:func:`write_tables`) in a thread, for a run's tail:
    Arrow encodes and compresses the Parquet pages with the GIL released, so the files are
    written on the other core while the calling thread goes on (a new run's report page:
    its context and HTML, pure Python). Nothing in the tail changes ``tables`` meanwhile
    (the frames are read, never written).

    A context manager. :meth:`start` starts the thread (at most once), :meth:`join` waits
    for it and raises what it raised, as if the tables had been written in the calling
    thread; on exit it is joined (started first if it was not): a run that leaves the
    block has every file in place, or fails with the one error. When the block itself
    raises, the thread is still waited for (its files are in the staging directory the run
    is about to remove) and its own error, if any, gives way to the block's.
    """

    def __init__(
        self,
        directory: Path,
        tables: RunTables,
        write: Callable[[Path, RunTables], None] = write_tables,
    ) -> None:
        self._directory, self._tables, self._write = directory, tables, write
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._write(self._directory, self._tables)
        except BaseException as exc:  # raised again in the calling thread, on exit
            self._error = exc

    def start(self) -> None:
        """Start writing (a second call does nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="write_tables", daemon=True)
            self._thread.start()

    def join(self) -> None:
        """Write the tables (in the thread, started if it was not) and wait until they are
        written; what the thread raised is raised here, once."""
        self.start()
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> TablesWriter:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None:
            self.join()
        elif self._thread is not None:
            self._thread.join()  # the block's error is the run's


#: What each column of a run's tables holds, by kind (:func:`_check_types`); a column not
#: named here is not checked.
_KINDS: dict[str, str] = {
    **dict.fromkeys((*_CATEGORIES, "doc_id", "url", "query", "detail"), "text"),
    **dict.fromkeys(("round", "marks", "rank", "ranking", "relevance", "n", *_LISTS), "integer"),
    **dict.fromkeys(("value", "mean", "std", "ci_low", "ci_high"), "number"),
    "fixed": "boolean",
    "items": "list of text",
}


def _kind_of(kind: str, type_: pa.DataType) -> bool:
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    if pa.types.is_null(type_):  # a column with no value in it (an empty table)
        return True
    if kind == "text":
        return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_))
    if kind == "integer":
        return bool(pa.types.is_integer(type_))
    if kind == "number":
        return bool(pa.types.is_integer(type_) or pa.types.is_floating(type_))
    if kind == "boolean":
        return bool(pa.types.is_boolean(type_))
    return bool(
        (pa.types.is_list(type_) or pa.types.is_large_list(type_))
        and _kind_of("text", type_.value_type)
    )


def _check_types(path: Path, schema: pa.Schema) -> None:
    """A :class:`DataError` naming the table and the first column whose type is not the
    kind :data:`_KINDS` says it holds (strings where numbers belong, say)."""
    for column in schema:
        kind = _KINDS.get(column.name)
        if kind is not None and not _kind_of(kind, column.type):
            raise DataError(
                f"{path}: column {column.name!r} holds {column.type}, expected {kind}; "
                "the table was not written by evidence_bench (run it again)"
            )


def _arrow_table(run_dir: Path, name: str, columns: Sequence[str] | None = None) -> pa.Table:
    """``<name>.parquet`` of ``run_dir`` as Arrow; a missing or unreadable one, or one with
    a column of the wrong type, is a :class:`DataError` naming it."""
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
    _check_types(path, table.schema)
    return table


def read_table(run_dir: Path, name: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``<name>.parquet`` of ``run_dir``; a missing, unreadable or incomplete one, or one
    with a column of the wrong type, is a :class:`DataError` naming it."""
    path = run_dir / f"{name}.parquet"
    frame: pd.DataFrame = _arrow_table(run_dir, name, columns).to_pandas()
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

    def coded(self) -> tuple[Sequence[str], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """Every key once, the rankings' codes one after another, and where each starts
        (:class:`evidence_bench.evaluation.incomplete.CodedRankings`)."""
        offsets = self._items.offsets.to_numpy().astype(np.int64)
        values = self._items.flatten()
        if not pa.types.is_dictionary(values.type):
            values = values.dictionary_encode()
        codes = values.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        return values.dictionary.to_pylist(), codes, offsets - offsets[0]


def _rankings(run_dir: Path) -> Sequence[Sequence[str]]:
    path = run_dir / "rankings.parquet"
    table = _arrow_table(run_dir, "rankings")
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
