"""The run directory, written whole or not at all; the summary of a run's scores.

A run reserves ``runs/<experiment>/<run id>`` before anything is computed, writes into a
staging directory beside it and renames that over the reservation when complete, then
repoints ``latest`` (docs/reference/run-directory.rst).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from evidence_bench._lazy import module
from evidence_bench.collections.queryset import QuerySet
from evidence_bench.errors import ConfigurationError, DataError, WriteError
from evidence_bench.evaluation.comparisons import strings
from evidence_bench.evaluation.frozen import fixed_measures, frozen_prefix
from evidence_bench.evaluation.measures import Measure, parse_measure
from evidence_bench.evaluation.statistics import first_met, group_codes, summarize_codes
from evidence_bench.evaluation.trec import write_qrels, write_run
from evidence_bench.evidence import Evidence
from evidence_bench.runs.store import SUMMARY_COLUMNS, SUMMARY_KEYS

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = module("pandas")


__all__ = [
    "STALE_AFTER_S", "RunDirectory", "ScoreSummary", "frozen_flags", "new_run_id",
    "read_queries", "remove_stale", "score_summary", "summarize_scores", "with_fixed", "write_csv",
    "write_inputs", "write_json", "write_jsonl", "write_trec",
]  # fmt: skip


def new_run_id(config_text: str, now: datetime | None = None) -> str:
    """``<UTC time>-<config hash>``: sortable, and two configs never share an id."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{hashlib.sha256(config_text.encode()).hexdigest()[:6]}"


#: What a run leaves while it is written: ``.<run id>.<pid>.<random>.tmp``.
_STAGING = re.compile(r"^\.(?P<final>.+)\.(?P<pid>\d+)\.[^.]+\.tmp$")
#: Staging left by a killed run is removed by a later run once older than this.
STALE_AFTER_S = 24 * 3600


class RunDirectory:
    """A context manager yielding a staging directory: on success renamed to ``final``
    (reserved by :meth:`reserve` or on entry; ``<name>.2`` … if taken) and, with
    ``link_latest``, ``<parent>/latest`` repointed at it; on failure removed, an ``OSError``
    becoming one :class:`WriteError` naming the run and the file."""

    def __init__(self, parent: Path, name: str, *, link_latest: bool = True) -> None:
        self.parent = parent
        self.final = parent / name
        self.link_latest = link_latest
        self._tmp: Path | None = None
        self._reserved = False

    def reserve(self) -> RunDirectory:
        """Claim ``final`` (an empty directory created exclusively) and a staging directory
        beside it; fails at once when the parent is unwritable or ``latest`` no symlink."""
        if self._reserved:
            return self
        link = self.parent / "latest"
        if self.link_latest and link.exists() and not link.is_symlink():
            raise ConfigurationError(
                f"{link} is a real {'directory' if link.is_dir() else 'file'}, not the symlink "
                "to the newest run that evidence_bench keeps there; move it away"
            )
        try:
            self.parent.mkdir(parents=True, exist_ok=True)
            remove_stale(self.parent)
            base, suffix = self.final, 1
            while True:
                try:
                    self.final.mkdir()
                    break
                except FileExistsError:
                    suffix += 1
                    self.final = base.with_name(f"{base.name}.{suffix}")
            self._reserved = True
            self._tmp = Path(
                tempfile.mkdtemp(
                    dir=self.parent, prefix=f".{self.final.name}.{os.getpid()}.", suffix=".tmp"
                )
            )
        except OSError as exc:
            self.release()
            where = f" ({exc.filename})" if exc.filename not in (None, str(self.parent)) else ""
            raise WriteError(
                f"cannot write runs under {self.parent}: {exc.strerror or exc}{where} "
                "(check runs_dir)"
            ) from exc
        return self

    def release(self) -> None:
        """Remove the staging directory and the reservation of an unfinished run."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        if self._reserved:
            self._reserved = False
            with contextlib.suppress(OSError):
                self.final.rmdir()  # empty: the reservation only

    def __enter__(self) -> Path:
        self.reserve()
        assert self._tmp is not None
        return self._tmp

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        assert self._tmp is not None
        if kind is not None:
            file = _newest(self._tmp) if isinstance(error, OSError) else None
            self.release()
            if isinstance(error, OSError):
                reason = error.strerror or str(error) or type(error).__name__
                where = error.filename or file  # a failed write() names no file itself
                while_ = f" (writing {where})" if where else ""
                raise WriteError(
                    f"could not write the run {self.final}: {reason}{while_}; nothing was kept"
                ) from error
            return
        try:
            self._tmp.chmod(0o755)  # mkdtemp makes it owner-only; a run is no secret
            os.rename(self._tmp, self.final)  # over the empty reservation, atomically
        except OSError as exc:
            self.release()
            raise WriteError(
                f"could not move the run into {self.final}: {exc.strerror}; nothing was kept"
            ) from exc
        self._tmp, self._reserved = None, False
        if self.link_latest:
            link = self.parent / "latest"
            staged = self.parent / f".latest.{os.getpid()}.tmp"
            try:
                if staged.is_symlink() or staged.exists():
                    staged.unlink()
                staged.symlink_to(self.final.name)
                os.replace(staged, link)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    staged.unlink()
                raise WriteError(
                    f"the run is complete in {self.final}, but {link} could not point at it: "
                    f"{exc.strerror}"
                ) from exc


def remove_stale(parent: Path, *, now: float | None = None) -> list[Path]:
    """Remove what killed runs left in ``parent`` over a day ago (staging directories of
    processes gone, their empty reservations, staged ``latest`` links); returns them."""
    removed: list[Path] = []
    cutoff = (time.time() if now is None else now) - STALE_AFTER_S
    for path in parent.glob(".*.tmp"):
        try:
            if path.lstat().st_mtime > cutoff:
                continue
        except OSError:
            continue
        match = _STAGING.match(path.name)
        if match and _running(int(match["pid"])):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            if match:
                with contextlib.suppress(OSError):
                    (parent / match["final"]).rmdir()  # only ever succeeds when empty
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(path)
    return removed


def _newest(directory: Path) -> str | None:
    """The name of the file last written in ``directory`` (the one a write failed on)."""
    try:
        files = [p for p in directory.rglob("*") if p.is_file()]
        newest = max(files, key=lambda p: p.stat().st_mtime_ns, default=None)
    except OSError:
        return None
    return str(newest.relative_to(directory)) if newest else None


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


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


def write_inputs(directory: Path, documents: Mapping[str, Evidence], query_set: QuerySet) -> None:
    """``documents.jsonl`` (each result shown, by canonical URL: its doc_id in the
    collection, else the URL), and the query set's ``qrels.csv`` and ``queries.csv``."""
    doc_id = query_set.collection.doc_id_for
    write_jsonl(
        directory / "documents.jsonl",
        (
            {"doc_id": doc_id(key) or key, "url": e.url, "title": e.title, "snippet": e.snippet}
            for key, e in documents.items()
        ),
    )
    write_rows(
        directory / "qrels.csv",
        ["query_id", "doc_id", "relevance"],
        (
            (qid, doc_id(key) or key, grade)
            for qid in query_set.queries
            for key, grade in query_set.qrels[qid].items()
        ),
    )
    write_rows(directory / "queries.csv", ["query_id", "query"], query_set.queries.items())


def read_queries(path: Path) -> dict[str, str]:
    """A run's ``queries.csv`` (:func:`write_inputs`): each query id's query, in its order;
    a file missing, unreadable or of other columns is a :class:`DataError` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found (is this a run directory?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from exc
    rows = csv.reader(io.StringIO(text, newline=""))
    if next(rows, None) != ["query_id", "query"]:
        raise DataError(f"{path}: expected the columns query_id, query")
    return {row[0]: row[1] for row in rows if row}


def summarize_scores(
    per_query: pd.DataFrame,
    feedback: pd.DataFrame | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
) -> pd.DataFrame:
    """Mean, sample std and Student-t 95% CI per config, policy, round, stage, mode, measure.

    ``fixed`` is True for a frozen cell whose measure cannot change for any of its queries
    (:func:`~evidence_bench.evaluation.frozen.fixed_in_frozen`, from ``feedback``'s ranks
    and the ``qrels`` keyed by URL), else False; a row missing a key is a :class:`DataError`.
    :func:`score_summary` and :func:`frozen_flags`, which need nothing of each other,
    combined by :func:`with_fixed`.
    """
    flags = frozen_flags(per_query, feedback, qrels) if feedback is not None and qrels else None
    return with_fixed(score_summary(per_query), flags)


@dataclass(frozen=True)
class ScoreSummary:
    """:func:`summarize_scores`' statistics, before its ``fixed`` column."""

    #: the summary's rows, one per cell in the order first met, without ``fixed``
    summary: pd.DataFrame
    #: each frozen row's cell (its row in ``summary``), the rows as :func:`frozen_flags`
    #: gives them
    frozen_cells: npt.NDArray[np.intp]


def score_summary(per_query: pd.DataFrame) -> ScoreSummary:
    """The statistics of :func:`summarize_scores`, without ``fixed``."""
    coded = _categories(per_query)
    cell = group_codes(coded, SUMMARY_KEYS)
    if cell is None:
        raise DataError(f"per_query: a row has no value for one of {', '.join(SUMMARY_KEYS)}")
    code, first = first_met(cell)  # groups in the order first met
    del cell
    return ScoreSummary(_summarized(per_query, code, first), code[_frozen_rows(coded)])


def with_fixed(
    found: ScoreSummary, flags: tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]] | None
) -> pd.DataFrame:
    """:func:`summarize_scores`' table from its statistics and :func:`frozen_flags` (None:
    no feedback or qrels, so no cell is fixed)."""
    summary = found.summary.copy()
    summary["fixed"] = False
    if flags is not None:
        # a cell is fixed when it has frozen rows and none of them is not fixed
        _, flag = flags
        where = found.frozen_cells
        frozen = np.bincount(where, minlength=len(summary)) > 0
        unfixed = np.bincount(where, weights=~flag, minlength=len(summary)) > 0
        summary["fixed"] = frozen & ~unfixed
    return summary[SUMMARY_COLUMNS]


def _frozen_rows(per_query: pd.DataFrame) -> npt.NDArray[np.intp]:
    """The positions of ``per_query``'s frozen rows (its ``eval_mode`` a categorical)."""
    mode = per_query["eval_mode"]
    is_frozen = np.append(np.asarray(mode.cat.categories == "frozen", dtype=bool), False)
    return np.flatnonzero(is_frozen[mode.cat.codes.to_numpy()])


def _categories(per_query: pd.DataFrame) -> pd.DataFrame:
    """``per_query`` with each text key a categorical, as a run's own tables have them."""
    text = [
        key
        for key in ("config_id", "policy", "query_id", "stage", "eval_mode", "measure")
        if not isinstance(per_query[key].dtype, pd.CategoricalDtype)
    ]
    if not text:
        return per_query
    return per_query.assign(**{key: per_query[key].astype("category") for key in text})


def _summarized(
    per_query: pd.DataFrame, code: npt.NDArray[np.intp], first: npt.NDArray[np.intp]
) -> pd.DataFrame:
    """The statistics of ``per_query`` by :data:`SUMMARY_KEYS`, grouped by ``code`` (one per
    row, numbered as first met; ``first``: each group's first row, whose keys it takes)."""
    stats = summarize_codes(code, per_query["value"].to_numpy(np.float64), len(first))
    del stats["first"]  # == first
    summary = per_query.iloc[first][SUMMARY_KEYS].reset_index(drop=True)
    for name, column in stats.items():
        summary[name] = column
    return summary


def _codes(column: pd.Series) -> tuple[npt.NDArray[np.intp], list[str]]:
    """Each row's code, and each code's value as :func:`strings` gives it (missing: "nan")."""
    codes, names = pd.factorize(column, use_na_sentinel=False)
    return codes.astype(np.intp, copy=False), [str(name) for name in names]


@dataclass(frozen=True)
class _Shown:
    """The feedback by (config, policy, query) group, each group's rows by round (in their
    order within a round)."""

    #: each column's codes and names (config_id, policy, query_id, url), in feedback order
    parts: list[tuple[npt.NDArray[np.intp], list[str]]]
    #: each group's first row; the rows ordered by group, and each row's group in that order
    starts: npt.NDArray[np.intp]
    order: npt.NDArray[np.intp]
    grouped: npt.NDArray[np.intp]
    #: in that order: each row's url code, round and rank
    urls: npt.NDArray[np.intp]
    rounds: npt.NDArray[np.int64]
    ranks: npt.NDArray[np.int64]


def _shown(feedback: pd.DataFrame) -> _Shown:
    parts = [_codes(feedback[c]) for c in ("config_id", "policy", "query_id", "url")]
    group = np.zeros(len(feedback), dtype=np.int64)
    for codes, names in parts[:3]:
        group = group * max(len(names), 1) + codes
    group, starts = first_met(group)
    rounds = feedback["round"].to_numpy(np.int64)
    order = np.lexsort((rounds, group))  # stable: an episode's pins are then a slice
    return _Shown(
        parts,
        starts,
        order,
        group[order],
        parts[3][0][order],
        rounds[order],
        feedback["rank"].to_numpy(np.int64)[order],
    )


def frozen_flags(
    per_query: pd.DataFrame, feedback: pd.DataFrame, qrels: Mapping[str, Mapping[str, int]]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    """Each frozen row of ``per_query`` (its position) and whether its measure is fixed in
    its episode, whose pins are its feedback of rounds up to its own, for every episode
    at once (:mod:`~evidence_bench.evaluation.frozen`'s rules, by array).

    With an episode's pins at distinct positions, its frozen prefix is the pins at 1..p:
    sorted by position, the i-th is in it exactly when its position is i. An episode whose
    group shows a document or a position twice is judged by ``fixed_measures``.
    """
    per_query = _categories(per_query)
    keys = [per_query[c] for c in ("config_id", "policy", "query_id")]
    column = per_query["measure"]
    rows = _frozen_rows(per_query)
    if not len(rows):
        return rows, np.zeros(0, dtype=bool)
    # each frozen row's episode (config, policy, query, round), numbered as first met
    episode = np.zeros(len(rows), dtype=np.int64)
    for key in (*keys, column):
        codes = key.cat.codes.to_numpy()[rows]
        if codes.min() < 0:
            raise DataError(f"per_query: a frozen row has no {key.name}")
        if key is not column:
            episode = episode * max(len(key.cat.categories), 1) + codes
    round_codes, round_values = pd.factorize(per_query["round"].to_numpy()[rows])
    episode = episode * max(len(round_values), 1) + round_codes
    del round_codes
    episode, first = first_met(episode)
    shown = _shown(feedback)
    heads = per_query.iloc[rows[first]][["config_id", "policy", "query_id", "round"]]
    query_ids, begin, end = _pinned_slices(
        heads, shown.parts, shown.starts, shown.grouped, shown.rounds
    )
    measure_codes = column.cat.codes.to_numpy()[rows]
    used = pd.unique(measure_codes)  # in the order first met
    names = [str(name) for name in column.cat.categories[used]]
    measures = [parse_measure(name) for name in names]
    place = np.full(len(column.cat.categories), -1, dtype=np.intp)
    place[used] = np.arange(len(used))
    flags = _judged(shown, heads["query_id"], query_ids, begin, end, measures, qrels)
    return rows, flags[episode, place[measure_codes]]


def _judged(
    shown: _Shown,
    query_column: pd.Series,
    query_ids: list[str],
    begin: npt.NDArray[np.intp],
    end: npt.NDArray[np.intp],
    measures: Sequence[Measure],
    qrels: Mapping[str, Mapping[str, int]],
) -> npt.NDArray[np.bool_]:
    """Per episode (its query, and the slice ``begin:end`` of ``shown``'s rows that pins it)
    and measure: whether the measure is fixed; see :func:`frozen_flags`."""
    episodes = len(begin)
    length = end - begin
    total = int(length.sum())
    episode = np.repeat(np.arange(episodes), length)
    at = np.repeat(begin - (np.cumsum(length) - length), length) + np.arange(total)
    url_names = shown.parts[3][1]
    # each feedback row's grade in its query's qrels (unjudged: 0), by distinct (query, url)
    query_of = shown.parts[2][0][shown.order]
    query_names = shown.parts[2][1]
    width = max(len(url_names), 1)
    pair, pairs = pd.factorize(query_of.astype(np.int64) * width + shown.urls)
    known = [
        qrels.get(query_names[p // width], {}).get(url_names[p % width], 0)
        for p in np.asarray(pairs).tolist()
    ]
    grade = np.asarray(known)[pair] if known else np.zeros(0, dtype=np.int64)
    # groups holding a document or a position twice: their episodes judged one by one
    twice = np.zeros(len(shown.starts), dtype=bool)
    for values in (shown.urls, shown.ranks):
        order = np.lexsort((values, shown.grouped))
        group, value = shown.grouped[order], values[order]
        same = (group[1:] == group[:-1]) & (value[1:] == value[:-1])
        twice[group[1:][same]] = True
    alone = np.zeros(episodes, dtype=bool)
    pinned_somewhere = np.flatnonzero(length > 0)
    alone[pinned_somewhere] = twice[shown.grouped[begin[pinned_somewhere]]]
    # the frozen prefix: each episode's pins at positions >= 1 by position; the i-th is in it
    # when its position is i
    kept = np.flatnonzero((shown.ranks[at] >= 1) & ~alone[episode])
    order = np.lexsort((shown.ranks[at[kept]], episode[kept]))
    mine, rank, held_grade = (
        episode[kept][order],
        shown.ranks[at[kept]][order],
        grade[at[kept]][order],
    )
    position = np.arange(len(mine)) - np.searchsorted(mine, np.arange(episodes))[mine] + 1
    prefix = rank == position
    p = np.bincount(mine[prefix], minlength=episodes)
    # each query's documents that can score, per relevance level, and those in the prefix
    names = query_column.cat.categories.astype(str).tolist()
    of_query = query_column.cat.codes.to_numpy()
    flags = np.zeros((episodes, len(measures)), dtype=bool)
    for m, measure in enumerate(measures):
        rel = measure.rel
        relevant = np.array(
            [sum(1 for g in qrels.get(name, {}).values() if g >= rel) for name in names],
            dtype=np.int64,
        )[of_query]
        held = np.bincount(mine[prefix & (held_grade >= rel)], minlength=episodes)
        fixed = held == relevant
        if measure.name == "RR":
            fixed |= held > 0
        if measure.cutoff is not None:
            fixed |= measure.cutoff <= p
        flags[:, m] = fixed
    for e in np.flatnonzero(alone).tolist():
        # a document examined twice keeps its last rank, as a dict of the rows keeps it
        start, stop = int(begin[e]), int(end[e])
        pinned = [url_names[u] for u in shown.urls[start:stop].tolist()]
        pins = dict(zip(pinned, shown.ranks[start:stop].tolist(), strict=True))
        prefix_keys = frozen_prefix(pins)
        own = {key: position for position, key in enumerate(prefix_keys, start=1)}
        flags[e] = fixed_measures(measures, own, qrels.get(query_ids[e], {}))
    return flags


def _pinned_slices(
    heads: pd.DataFrame,
    parts: Sequence[tuple[npt.NDArray[np.intp], list[str]]],
    starts: npt.NDArray[np.intp],
    grouped: npt.NDArray[np.intp],
    rounds: npt.NDArray[np.int64],
) -> tuple[list[str], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Each episode's (``heads``: config_id, policy, query_id, round) query id and the slice
    of the feedback's rows (sorted by group, ``grouped``, then round) that pins it: its
    group's rows of rounds up to its own, none for an episode without feedback."""
    columns = [heads[c] for c in ("config_id", "policy", "query_id")]
    # each key's value -> its feedback code (by the same strings the dict of keys used)
    group = np.zeros(len(heads), dtype=np.int64)
    valid = np.ones(len(heads), dtype=bool)
    for column, (_, names) in zip(columns, parts, strict=False):
        coded = {name: code for code, name in enumerate(names)}
        known = np.array(
            [coded.get(str(v), -1) for v in column.cat.categories.tolist()]
            + [coded.get("nan", -1)],
            dtype=np.int64,
        )
        codes = known[column.cat.codes.to_numpy()]  # a missing value (code -1): str's "nan"
        valid &= codes >= 0
        group = group * max(len(names), 1) + np.maximum(codes, 0)
    whole = np.zeros(len(starts), dtype=np.int64)  # each feedback group's own key
    for codes, names in parts[:3]:
        whole = whole * max(len(names), 1) + codes[starts]
    found = pd.Index(whole).get_indexer(pd.Index(group)) if len(whole) else np.full(len(group), -1)
    valid &= found >= 0
    mine = np.where(valid, found, 0)
    low = int(rounds.min()) if len(rounds) else 0
    span = (int(rounds.max()) - low + 2) if len(rounds) else 2
    # rows ordered by (group, round): one sorted key; an episode's rows end where its own
    # (group, round) key is passed
    keyed = grouped.astype(np.int64) * span + (rounds - low + 1)
    own = heads["round"].to_numpy(np.int64)
    wanted = mine * span + np.clip(own - low + 1, 0, span - 1)
    begin = np.searchsorted(keyed, mine * span, side="left")
    end = np.searchsorted(keyed, wanted, side="right")
    begin, end = np.where(valid, begin, 0), np.where(valid, end, 0)
    query_ids = strings(columns[2]).tolist()
    return query_ids, begin, end


def write_trec(
    directory: Path,
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[tuple[str, str, int, str], Mapping[str, Sequence[str]]],
) -> None:
    """``qrels.txt`` and one gzipped run file per (config, policy, round, stage), full mode:
    documents named by canonical URL, scores strictly decreasing, so trec_eval ranks
    exactly as evaluated."""
    directory.mkdir()
    write_qrels(directory / "qrels.txt", qrels)
    for (config_id, policy, round_, stage), run in rankings.items():
        name = f"{config_id}.{policy}.r{round_}.{stage}"
        write_run(directory / f"{name}.run.gz", run, tag=name)
