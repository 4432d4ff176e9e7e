"""Retrieval measures that reproduce trec_eval exactly: one ranking, or many at once with numpy.

Measures are named as in ir_measures (``nDCG@10``, ``P@5``, ``P(rel=2)@5``, ``R@20``, ``AP``,
``RR``) and map one-to-one onto trec_eval's (``ndcg_cut_10``, ``P_5``, ``recall_20``, ``map``,
``recip_rank``). ``tests/test_measures.py`` checks every family against pytrec_eval.

The measures for incomplete judgments (``Judged@k``, ``bpref``, ``nDCG'@k``:
:data:`INCOMPLETE_FAMILIES`, :mod:`evidence_bench.evaluation.incomplete`) tell a judged
irrelevant document from an unjudged one, which a grade matrix cannot: :func:`evaluate`
scores them, the runner's :func:`evaluate_grades` refuses them.

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

:func:`evaluate_many` scores many rankings of one query at once (every stage of a round) from
a grade matrix, one row per ranking: the same sums in the same order as :func:`evaluate`, so
the same floats, bit for bit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from evidence_bench.errors import ConfigurationError

__all__ = [
    "FAMILIES",
    "INCOMPLETE_FAMILIES",
    "Measure",
    "QueryJudgments",
    "evaluate",
    "evaluate_grades",
    "evaluate_many",
    "parse_measure",
    "prepare",
    "ranks_to_scores",
]

#: Measure families, with whether each takes a cutoff (required / optional / never).
FAMILIES: Mapping[str, str] = {
    "nDCG": "optional", "P": "required", "R": "required", "AP": "optional", "RR": "never",
}  # fmt: skip

#: Measures that need the judged set, not only the grades (Buckley & Voorhees 2004 for
#: bpref, Sakai 2007 for the condensed nDCG', ir_measures for Judged@k).
INCOMPLETE_FAMILIES: Mapping[str, str] = {
    "Judged": "required", "bpref": "never", "nDCG'": "optional",
}  # fmt: skip

_TREC_EVAL = {"nDCG": ("ndcg", "ndcg_cut"), "P": ("", "P"), "R": ("", "recall")}
_TREC_EVAL.update({"AP": ("map", "map_cut"), "RR": ("recip_rank", "")})
_TREC_EVAL["bpref"] = ("bpref", "")
_SYNTAX = re.compile(r"(?P<name>[A-Za-z]+'?)(?:\(rel=(?P<rel>\d+)\))?(?:@(?P<cutoff>\d+))?")
_VALID = (
    "nDCG@k, nDCG, P@k, R@k, AP, AP@k, RR, Judged@k, bpref, nDCG'@k; P, R, AP, RR and bpref "
    "take (rel=n), e.g. P(rel=2)@5"
)


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
        takes = FAMILIES.get(self.name) or INCOMPLETE_FAMILIES.get(self.name)
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
        if self.rel != 1 and self.name in ("nDCG", "nDCG'"):
            # trec_eval's nDCG uses the grades as gains and ignores the relevance level.
            raise ConfigurationError(f"{self.name} takes no rel= (its gains are the qrels grades)")
        if self.rel != 1 and self.name == "Judged":
            raise ConfigurationError("Judged takes no rel= (it counts every judged document)")
        rel = f"(rel={self.rel})" if self.rel != 1 else ""
        cutoff = f"@{self.cutoff}" if self.cutoff is not None else ""
        # Computed once: evaluate() keys its results by it in the runner's hot loop.
        object.__setattr__(self, "_key", f"{self.name}{rel}{cutoff}")

    def __str__(self) -> str:
        return self._key

    @property
    def incomplete(self) -> bool:
        """Whether the measure tells a judged irrelevant document from an unjudged one."""
        return self.name in INCOMPLETE_FAMILIES

    @property
    def trec_eval_name(self) -> str:
        """trec_eval's name (``ndcg_cut_10``); a ``rel`` other than 1 is its ``-l`` option.
        Judged@k and nDCG'@k are not trec_eval's (a ValueError)."""
        if self.name not in _TREC_EVAL:
            raise ValueError(f"{self} is not a trec_eval measure")
        uncut, cut = _TREC_EVAL[self.name]
        return uncut if self.cutoff is None else f"{cut}_{self.cutoff}"


def parse_measure(text: str) -> Measure:
    """A :class:`Measure` from its ir_measures name; the error lists the valid names."""
    match = _SYNTAX.fullmatch(text.strip())
    if match is None or (
        match["name"] not in FAMILIES and match["name"] not in INCOMPLETE_FAMILIES
    ):
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
    _positive: dict[str, int] | None = field(default=None, repr=False, compare=False)

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


_DISCOUNT_ARRAY: npt.NDArray[np.float64] = np.asarray(_DISCOUNT, dtype=np.float64)


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
        if measure.name in INCOMPLETE_FAMILIES:
            results[measure._key] = _incomplete(ranking, prepared, measure)
            continue
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


def evaluate_many(
    rankings: Sequence[Sequence[str]],
    judgments: Mapping[str, int] | QueryJudgments | Sequence[QueryJudgments],
    measures: Sequence[Measure],
) -> npt.NDArray[np.float64]:
    """Score many rankings of one query at once: row i holds :func:`evaluate` of
    ``rankings[i]``, one column per measure in ``measures``' order, the same floats.

    ``judgments``: one query's, or a sequence of one :class:`QueryJudgments` per ranking
    (an episode's full and residual judgments side by side). A document that appears twice
    in a ranking is a ValueError, as in :func:`evaluate`.

    The rankings become one grade matrix G (rankings × the longest length; unjudged
    documents, negative grades and the padding past a ranking's end are 0), and every
    measure is read from running sums along its rows (``numpy.cumsum`` adds in rank order,
    as :func:`evaluate` does; padding adds exactly 0, so a sum at depth k past a ranking's
    length is its sum at that length, trec_eval's cut at min(k, n)):

    * DCG@k = Σ_{i ≤ k} G_i / log2(i + 1) (Järvelin & Kekäläinen 2002), over the ideal
      DCG at k (over every relevant document when uncut);
    * with hits H_k = #{i ≤ k : G_i ≥ rel}: P@k = H_k / k, R@k = H_k / |rel|,
      AP@k = Σ_{i ≤ k, G_i ≥ rel} (H_i / i) / |rel|, RR = 1 / (first i with G_i ≥ rel).
    """
    count = len(rankings)
    if isinstance(judgments, QueryJudgments):
        distinct, which = [judgments], [0] * count
    elif isinstance(judgments, Mapping):
        distinct, which = [prepare(judgments)], [0] * count
    else:
        if len(judgments) != count:
            raise ValueError(f"{count} rankings but {len(judgments)} judgments")
        slot: dict[int, int] = {}
        distinct, which = [], []
        for prepared in judgments:
            if id(prepared) not in slot:
                slot[id(prepared)] = len(distinct)
                distinct.append(prepared)
            which.append(slot[id(prepared)])
    width = max((len(ranking) for ranking in rankings), default=0)
    positives = [_positive(prepared) for prepared in distinct]
    rows: list[int] = []
    columns: list[int] = []
    gains: list[int] = []
    for row, ranking in enumerate(rankings):
        present = set(ranking)
        if len(present) != len(ranking):
            _raise_duplicate(ranking)
        # Only documents with a positive grade change a sum; a query has few of them.
        positive = positives[which[row]]
        for doc in present.intersection(positive):
            rows.append(row)
            columns.append(ranking.index(doc))
            gains.append(positive[doc])
    grades = np.zeros((count, width), dtype=np.int64)
    grades[rows, columns] = gains
    return evaluate_grades(grades, distinct, np.asarray(which, dtype=np.intp), measures)


def evaluate_grades(
    grades: npt.NDArray[np.int64],
    judgments: Sequence[QueryJudgments],
    which: npt.NDArray[np.intp],
    measures: Sequence[Measure],
) -> npt.NDArray[np.float64]:
    """:func:`evaluate_many` from its grade matrix: row i of ``grades`` holds the grades of
    one ranking in rank order (unjudged documents, negative grades and the padding past its
    end 0; any width), judged by ``judgments[which[i]]`` (its ideal DCG and relevant counts:
    the qrels of the grades, or of what is left of them after some documents left both the
    ranking and the qrels, the residual mode). One row per ranking, one column per measure,
    the floats :func:`evaluate` gives (see :func:`evaluate_many` for the sums)."""
    incomplete = [str(m) for m in measures if m.name in INCOMPLETE_FAMILIES]
    if incomplete:
        raise ValueError(f"{', '.join(incomplete)}: a grade matrix cannot tell unjudged documents")
    count, width = grades.shape
    distinct = judgments
    of_row = which
    values = np.zeros((count, len(measures)), dtype=np.float64)
    if not count:
        return values
    dcg: npt.NDArray[np.float64] | None = None
    by_rel: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
    for column, measure in enumerate(measures):
        cutoff = measure.cutoff
        k = width if cutoff is None or cutoff > width else cutoff
        out = values[:, column]
        if measure.name == "nDCG":
            if dcg is None:
                dcg = _running(grades * _discount_array(width))
            best = np.asarray(
                [
                    j.ideal_dcg[-1]
                    if cutoff is None
                    else j.ideal_dcg[min(cutoff, len(j.ideal_dcg) - 1)]
                    for j in distinct
                ],
                dtype=np.float64,
            )[of_row]
            np.divide(dcg[:, k], best, out=out, where=best > 0.0)
            continue
        rel = measure.rel
        if rel not in by_rel:
            relevant = grades >= rel
            hits = np.zeros((count, width + 1), dtype=np.int64)
            np.cumsum(relevant, axis=1, out=hits[:, 1:])
            depth = np.arange(1, width + 1, dtype=np.int64)
            by_rel[rel] = hits, _running(relevant * (hits[:, 1:] / depth))
        hits, precisions = by_rel[rel]
        if measure.name == "P":
            np.divide(hits[:, k], cutoff or 1, out=out)
            continue
        num_rel = np.asarray([j.count_relevant(rel) for j in distinct], dtype=np.int64)[of_row]
        judged = num_rel > 0
        if measure.name == "R":
            np.divide(hits[:, k], num_rel, out=out, where=judged)
        elif measure.name == "AP":
            np.divide(precisions[:, k], num_rel, out=out, where=judged)
        else:  # RR: the hits reach 1 at the first relevant document's rank
            first = np.argmax(hits >= 1, axis=1)
            np.divide(1.0, first, out=out, where=judged & (hits[:, width] > 0))
    return values


def _positive(prepared: QueryJudgments) -> Mapping[str, int]:
    """The judgments with a positive grade (computed once per :class:`QueryJudgments`)."""
    positive = prepared._positive
    if positive is None:
        positive = {doc: grade for doc, grade in prepared.grades.items() if grade > 0}
        object.__setattr__(prepared, "_positive", positive)
    return positive


def _discount_array(width: int) -> npt.NDArray[np.float64]:
    """1 / log2(rank + 1) for ranks 1..width, from the same table :func:`evaluate` uses."""
    global _DISCOUNT_ARRAY
    table = _DISCOUNT_ARRAY
    if len(table) < width:
        table = np.asarray(_discounts(width), dtype=np.float64)
        table.flags.writeable = False
        _DISCOUNT_ARRAY = table
    return table[:width]


def _running(terms: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Running sums along each row at depth 0..width (a leading column of zeros)."""
    sums = np.zeros((terms.shape[0], terms.shape[1] + 1), dtype=np.float64)
    np.cumsum(terms, axis=1, out=sums[:, 1:])
    return sums


def _incomplete(ranking: Sequence[str], judgments: QueryJudgments, measure: Measure) -> float:
    """One incomplete-judgment measure of one ranking (:mod:`~evidence_bench.evaluation.
    incomplete`): ``nDCG'@k`` is nDCG@k of the condensed list."""
    from evidence_bench.evaluation.incomplete import bpref, condensed, judged_at

    grades = judgments.grades
    if measure.name == "Judged":
        assert measure.cutoff is not None  # Judged takes a cutoff (Measure checks it)
        return judged_at(ranking, grades, measure.cutoff)
    if measure.name == "bpref":
        return bpref(ranking, grades, measure.rel)
    plain = Measure("nDCG", measure.cutoff)
    return evaluate(condensed(ranking, grades), judgments, [plain])[str(plain)]


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
