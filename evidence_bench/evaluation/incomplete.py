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

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["bpref", "condensed", "judged_at", "judged_cells", "mean_judged"]


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


def mean_judged(
    runs: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    k: int,
    queries: Iterable[str] | None = None,
) -> float:
    """The mean ``Judged@k`` of one run (``query_id -> ranking``) over ``queries`` (default:
    the run's); a query the run lacks scores 0, as ir_measures' default value."""
    ids = list(runs if queries is None else queries)
    if not ids:
        return 0.0
    return sum(judged_at(runs.get(q, ()), qrels.get(q, {}), k) for q in ids) / len(ids)


def judged_cells(
    runs: pd.DataFrame,
    rankings: Sequence[Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    k: int = 10,
) -> dict[tuple[str, str, int, str], float]:
    """Mean ``Judged@k`` of each (config_id, policy, round, stage) of a run's TREC runs
    (``runs.parquet``: those keys, ``query_id`` and a ``ranking`` id into ``rankings``; full
    mode, keyed by canonical URL as ``qrels``), over the queries each ranked."""
    sums: dict[tuple[str, str, int, str], list[float]] = {}
    columns = ("config_id", "policy", "round", "stage", "query_id", "ranking")
    memo: dict[tuple[int, str], float] = {}
    for cid, policy, round_, stage, qid, ranking in zip(
        *(runs[c].tolist() for c in columns), strict=True
    ):
        at = (int(ranking), str(qid))
        value = memo.get(at)
        if value is None:
            value = memo[at] = judged_at(rankings[at[0]], qrels.get(at[1], {}), k)
        total = sums.setdefault((str(cid), str(policy), int(round_), str(stage)), [0.0, 0.0])
        total[0] += value
        total[1] += 1
    return {key: total / count for key, (total, count) in sums.items()}
