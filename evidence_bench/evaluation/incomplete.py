"""Measures for incomplete judgments: what a ranking scores when some of it is unjudged.

A document is *judged* when the query's qrels hold it, whatever its grade (0 and negative
grades included); anything else is *unjudged*. The usual measures read an unjudged document
as irrelevant, which punishes a ranker for finding something the pool never held. These
three do not:

* ``Judged@k``: the fraction of the top k that is judged, over k even when fewer were
  retrieved (ir_measures' ``Judged``);
* ``bpref`` (Buckley & Voorhees, SIGIR 2004; trec_eval's ``bpref``, checked against
  pytrec_eval): with R relevant and N judged non-relevant documents,
  ``1/R · Σ_{relevant r retrieved} (1 − min(n_r, R) / min(N, R))``, n_r the judged
  non-relevant documents ranked above r; unjudged documents are skipped;
* ``nDCG'@k`` (Sakai, SIGIR 2007, the condensed list): nDCG@k of the ranking with its
  unjudged documents removed first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from evidence_bench._lazy import module
from evidence_bench.evaluation.statistics import first_met

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = module("pandas")


__all__ = ["CodedRankings", "bpref", "condensed", "judged_at", "judged_cells"]


def judged_at(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    """``Judged@k``: judged documents among the first ``k``, over ``k``."""
    return sum(1 for doc in ranking[:k] if doc in grades) / k


def bpref(ranking: Sequence[str], grades: Mapping[str, int], rel: int = 1) -> float:
    """trec_eval's ``bpref`` at relevance level ``rel`` (0.0 without a relevant document)."""
    relevant = sum(1 for grade in grades.values() if grade >= rel)
    nonrelevant = sum(1 for grade in grades.values() if 0 <= grade < rel)
    if relevant == 0:
        return 0.0
    total = 0.0
    above = 0  # judged non-relevant documents ranked so far
    for doc in ranking:
        grade = grades.get(doc)
        if grade is None or grade < 0:  # unjudged (trec_eval reads a negative grade so too)
            continue
        if grade >= rel:
            total += 1.0 - min(above, relevant) / min(nonrelevant, relevant) if above else 1.0
        else:
            above += 1
    return total / relevant


def condensed(ranking: Sequence[str], grades: Mapping[str, int]) -> list[str]:
    """The condensed list (Sakai 2007): ``ranking`` without its unjudged documents."""
    return [doc for doc in ranking if doc in grades]


def judged_cells(
    runs: pd.DataFrame,
    rankings: Sequence[Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    k: int = 10,
) -> dict[tuple[str, str, int, str], float]:
    """Mean ``Judged@k`` of each (config_id, policy, round, stage) of a run's TREC runs
    (``runs.parquet``: those keys, ``query_id`` and a ``ranking`` id into ``rankings``; full
    mode, keyed by canonical URL as ``qrels``), over the queries each ranked, the cells in
    the order first met. ``rankings`` with a ``coded()`` method (:class:`CodedRankings`)
    are read as codes, without turning each into Python."""
    if not len(runs):
        return {}
    keys, codes, offsets = _coded(rankings)
    # each distinct (ranking, query) pair once, and the first k of its ranking
    query, queries = pd.factorize(runs["query_id"].astype(str))
    ranking = runs["ranking"].to_numpy(np.int64)
    pair, pairs = pd.factorize(ranking * len(queries) + query)
    of_pair = np.asarray(pair, dtype=np.int64)
    ranked, asked = np.divmod(np.asarray(pairs, dtype=np.int64), len(queries))
    starts = offsets[ranked]
    heads = np.minimum(offsets[ranked + 1] - starts, k)
    owner = np.repeat(np.arange(len(pairs)), heads)
    first = np.cumsum(heads) - heads
    items = codes[starts[owner] + np.arange(len(owner)) - first[owner]].astype(np.int64)
    # which (query, key) the qrels judge, as one number each
    code_of = {key: code for code, key in enumerate(keys)}
    judged = [
        number * len(keys) + code_of[doc]
        for number, qid in enumerate(queries.tolist())
        for doc in qrels.get(qid, {})
        if doc in code_of
    ]
    hit = np.isin(asked[owner] * len(keys) + items, np.asarray(judged, dtype=np.int64))
    value = np.bincount(owner, weights=hit, minlength=len(pairs)) / k
    # summed per cell in row order, as the rows come
    groups = runs.groupby(list(_CELL), sort=False, observed=True, dropna=False)
    cell = np.asarray(groups.ngroup(), dtype=np.int64)  # numbered as first met
    names = runs.iloc[first_met(cell)[1]][list(_CELL)]
    return {
        (str(cid), str(policy), int(round_), str(stage)): total / count
        for (cid, policy, round_, stage), total, count in zip(
            names.itertuples(index=False, name=None),
            np.bincount(cell, weights=value[of_pair]).tolist(),
            np.bincount(cell).tolist(),
            strict=True,
        )
    }


_CELL = ("config_id", "policy", "round", "stage")


@runtime_checkable
class CodedRankings(Protocol):
    """Rankings stored as codes into one list of keys."""

    def coded(self) -> tuple[Sequence[str], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """Every key once, each ranking's keys as codes into them one after another, and
        where each ranking starts in those codes (one more offset than rankings)."""
        ...


def _coded(
    rankings: Sequence[Sequence[str]],
) -> tuple[Sequence[str], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """``rankings`` as :meth:`CodedRankings.coded` gives them."""
    if isinstance(rankings, CodedRankings):
        return rankings.coded()
    code_of: dict[str, int] = {}
    codes = [code_of.setdefault(key, len(code_of)) for r in rankings for key in r]
    offsets = np.cumsum([0, *(len(r) for r in rankings)], dtype=np.int64)
    return list(code_of), np.asarray(codes, dtype=np.int32), offsets
