"""Retrieval measures that reproduce trec_eval exactly, in pure Python for the runner's hot loop.

Measures are named as in ir_measures (``nDCG@10``, ``P@5``, ``P(rel=2)@5``, ``R@20``, ``AP``,
``RR``) and map one-to-one onto trec_eval's (``ndcg_cut_10``, ``P_5``, ``recall_20``, ``map``,
``recip_rank``). ``tests/test_measures.py`` checks every family against pytrec_eval.

trec_eval's conventions, kept here:

* a document is relevant when its grade is at least the relevance level (``rel``, default 1);
  unjudged documents have grade 0;
* ``P@k`` divides by ``k`` even when fewer than ``k`` documents were retrieved;
* ``R@k`` and ``AP`` divide by the number of relevant documents in the qrels, including those
  never retrieved;
* a query without relevant documents scores 0.0 on every measure. The experiment runner leaves
  such queries out of its means (see :attr:`QueryJudgments.num_relevant`); trec_eval would
  average their zeros in.

trec_eval ranks a run by score, descending, and breaks ties by docno, descending, whatever the
file's rank column says. :func:`ranks_to_scores` gives strictly decreasing scores so an exported
run is read back in exactly our order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evidence_bench.errors import ConfigurationError

__all__ = [
    "FAMILIES",
    "Measure",
    "QueryJudgments",
    "evaluate",
    "parse_measure",
    "prepare",
    "ranks_to_scores",
]

#: Measure families, with whether each takes a cutoff (required / optional / never).
FAMILIES: Mapping[str, str] = {
    "nDCG": "optional",
    "P": "required",
    "R": "required",
    "AP": "optional",
    "RR": "never",
}

_TREC_EVAL = {"nDCG": ("ndcg", "ndcg_cut"), "P": ("", "P"), "R": ("", "recall")}
_TREC_EVAL.update({"AP": ("map", "map_cut"), "RR": ("recip_rank", "")})
_SYNTAX = re.compile(r"(?P<name>[A-Za-z]+)(?:\(rel=(?P<rel>\d+)\))?(?:@(?P<cutoff>\d+))?")
_VALID = "nDCG@k, nDCG, P@k, R@k, AP, AP@k, RR; P, R, AP and RR take (rel=n), e.g. P(rel=2)@5"


@dataclass(frozen=True, slots=True)
class Measure:
    """One measure: a family, a cutoff ``k`` (``None`` for the whole ranking), a relevance level.

    ``str()`` gives the ir_measures name and :func:`parse_measure` reads it back.
    """

    name: str
    cutoff: int | None = None
    rel: int = 1
    _key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        takes = FAMILIES.get(self.name)
        if takes is None:
            raise ConfigurationError(f"unknown measure family {self.name!r} (valid: {_VALID})")
        if self.cutoff is None and takes == "required":
            raise ConfigurationError(f"measure {self.name} needs a cutoff, e.g. {self.name}@10")
        if self.cutoff is not None and takes == "never":
            raise ConfigurationError(f"measure {self.name} takes no cutoff (got @{self.cutoff})")
        if self.cutoff is not None and self.cutoff < 1:
            raise ConfigurationError(f"cutoff must be at least 1, got {self.name}@{self.cutoff}")
        if self.rel < 1:
            raise ConfigurationError(f"relevance level must be at least 1, got rel={self.rel}")
        if self.rel != 1 and self.name == "nDCG":
            # trec_eval's nDCG uses the grades as gains and ignores the relevance level.
            raise ConfigurationError("nDCG takes no rel= (its gains are the qrels grades)")
        rel = f"(rel={self.rel})" if self.rel != 1 else ""
        cutoff = f"@{self.cutoff}" if self.cutoff is not None else ""
        # Computed once: evaluate() keys its results by it in the runner's hot loop.
        object.__setattr__(self, "_key", f"{self.name}{rel}{cutoff}")

    def __str__(self) -> str:
        return self._key

    @property
    def trec_eval_name(self) -> str:
        """trec_eval's name (``ndcg_cut_10``); a ``rel`` other than 1 is its ``-l`` option."""
        uncut, cut = _TREC_EVAL[self.name]
        return uncut if self.cutoff is None else f"{cut}_{self.cutoff}"


def parse_measure(text: str) -> Measure:
    """A :class:`Measure` from its ir_measures name; the error lists the valid names."""
    match = _SYNTAX.fullmatch(text.strip())
    if match is None or match["name"] not in FAMILIES:
        raise ConfigurationError(f"unknown measure {text!r} (valid: {_VALID})")
    cutoff = int(match["cutoff"]) if match["cutoff"] is not None else None
    rel = int(match["rel"]) if match["rel"] is not None else 1
    return Measure(match["name"], cutoff, rel)


@dataclass(frozen=True, slots=True)
class QueryJudgments:
    """One query's qrels with what every evaluation of it reuses: counts and the ideal DCG."""

    grades: Mapping[str, int]
    #: Ideal DCG at depth i for i = 0 .. number of documents with grade > 0.
    ideal_dcg: tuple[float, ...]
    _num_relevant: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_relevant(self) -> int:
        """Documents with grade >= 1; a query with none is excluded from the runner's means."""
        return self.count_relevant(1)

    def count_relevant(self, rel: int) -> int:
        """Documents with grade >= ``rel`` in the qrels, retrieved or not (cached)."""
        count = self._num_relevant.get(rel)
        if count is None:
            count = sum(1 for grade in self.grades.values() if grade >= rel)
            self._num_relevant[rel] = count
        return count


#: 1 / log2(rank + 1) for rank 1, 2, ...; replaced whole (never mutated) when it grows, so
#: concurrent evaluations never see a half-built table.
_DISCOUNT: tuple[float, ...] = tuple(1.0 / math.log2(i + 2) for i in range(1024))


def _discounts(n: int) -> tuple[float, ...]:
    """The discount table, covering ranks 1..n at least."""
    global _DISCOUNT
    table = _DISCOUNT
    if len(table) < n:
        table = tuple(1.0 / math.log2(i + 2) for i in range(max(n, 2 * len(table))))
        _DISCOUNT = table
    return table


def prepare(judgments: Mapping[str, int]) -> QueryJudgments:
    """Precompute one query's relevant counts and ideal DCG for repeated :func:`evaluate`.

    The ideal ranking holds every judged document with grade > 0, by grade descending
    (trec_eval ``ndcg_cut``; Järvelin & Kekäläinen 2002).
    """
    gains = sorted((grade for grade in judgments.values() if grade > 0), reverse=True)
    discount = _discounts(len(gains))
    ideal = [0.0]
    for i, gain in enumerate(gains):
        ideal.append(ideal[-1] + gain * discount[i])
    return QueryJudgments(dict(judgments), tuple(ideal))


def evaluate(
    ranking: Sequence[str],
    judgments: Mapping[str, int] | QueryJudgments,
    measures: Sequence[Measure],
) -> dict[str, float]:
    """Score one query's ranking (doc keys, rank 1 first) as trec_eval would: ``{str(m): v}``.

    Pass a :class:`QueryJudgments` from :func:`prepare` when one query is evaluated many times.
    A document that appears twice is a ValueError (trec_eval refuses such runs too).
    """
    prepared = judgments if isinstance(judgments, QueryJudgments) else prepare(judgments)
    if len(set(ranking)) != len(ranking):
        _raise_duplicate(ranking)
    get = prepared.grades.get
    grades = [get(doc, 0) for doc in ranking]
    n = len(grades)
    results: dict[str, float] = {}
    by_rel: dict[int, tuple[list[int], list[float]]] = {}
    dcg: list[float] | None = None
    for measure in measures:
        cutoff = measure.cutoff
        k = n if cutoff is None or cutoff > n else cutoff
        if measure.name == "nDCG":
            if dcg is None:
                dcg = _cumulative_dcg(grades)
            ideal = prepared.ideal_dcg
            # Uncut nDCG is normalized by the ideal over all relevant documents.
            best = ideal[-1] if cutoff is None else ideal[min(cutoff, len(ideal) - 1)]
            value = dcg[k] / best if best > 0.0 else 0.0
        else:
            rel = measure.rel
            if rel not in by_rel:
                by_rel[rel] = _cumulative_hits(grades, rel)
            hits, precisions = by_rel[rel]
            num_rel = prepared.count_relevant(rel)
            if measure.name == "P":
                value = hits[k] / (cutoff or 1)  # P always has a cutoff
            elif num_rel == 0:
                value = 0.0
            elif measure.name == "R":
                value = hits[k] / num_rel
            elif measure.name == "AP":
                value = precisions[k] / num_rel
            else:  # RR
                value = 1.0 / hits.index(1) if hits[n] else 0.0
        results[measure._key] = value
    return results


def _raise_duplicate(ranking: Sequence[str]) -> None:
    seen: set[str] = set()
    for doc in ranking:
        if doc in seen:
            raise ValueError(f"document {doc!r} appears more than once in the ranking")
        seen.add(doc)


def _cumulative_dcg(grades: list[int]) -> list[float]:
    """DCG at depth 0..n with gain = grade (negative grades gain 0, as in trec_eval)."""
    discount = _discounts(len(grades))
    dcg = [0.0]
    total = 0.0
    for i, grade in enumerate(grades):
        if grade > 0:
            total += grade * discount[i]
        dcg.append(total)
    return dcg


def _cumulative_hits(grades: list[int], rel: int) -> tuple[list[int], list[float]]:
    """Relevant documents, and the sum of precision at each of them, at depth 0..n."""
    hits = [0]
    precisions = [0.0]
    count = 0
    total = 0.0
    for i, grade in enumerate(grades, start=1):
        if grade >= rel:
            count += 1
            total += count / i
        hits.append(count)
        precisions.append(total)
    return hits, precisions


def ranks_to_scores(n: int) -> list[float]:
    """Scores n, n-1, ..., 1 for a ranking of n documents.

    Strictly decreasing, so trec_eval's sort (score descending, ties by docno descending) keeps
    our order; integers are exact in a float and in their ``repr``.
    """
    return [float(n - i) for i in range(n)]
