"""Local rankers: the provider's order, and TF-IDF with Rocchio relevance feedback.

:class:`TfidfRocchioRanker` runs about 100k times in a parameter sweep on 20-60 candidates,
so vectors are plain ``dict[str, float]``, term counts are cached per text and idf and
document vectors per candidate set.

A sweep asks many rankers (one per (alpha, beta, gamma)) to order the same candidates under
the same feedback: :func:`score_many` scores them all at once with numpy, one row per
ranker, and :func:`order_many` sorts every row. Both give exactly what :meth:`score` and
:meth:`rank` give, to the last bit: each score is the same sequence of float operations in
the same order (numpy's ``cumsum`` adds left to right, as Python's ``sum`` does; an absent
term's product is 0.0, and adding 0.0 to a sum of non-negative terms changes nothing), and
the 12-digit tie rule is applied by Python's own ``round`` wherever two scores are close
enough for it to matter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence_bench.engine.base import Feedback, Label
from evidence_bench.engine.params import require_weights, scale_free
from evidence_bench.engine.text import Analyzer, tokenize
from evidence_bench.evidence import Evidence, renumber

__all__ = [
    "PoolMatrix",
    "ProviderOrderRanker",
    "TfidfRocchioRanker",
    "marked_positions",
    "order_many",
    "pool_matrix",
    "pool_orders",
    "pool_scores",
    "query_weights",
    "rocchio_weights",
    "score_many",
]

_Vector = dict[str, float]

# Scores are rounded before sorting so that documents whose scores are equal in exact
# arithmetic, but differ in the last bits from summation order, still tie and keep the
# candidates' order.
_TIE_DIGITS = 12
# Two scores further apart than this never round to one 12-digit value (each moves by at
# most half of 1e-12), so only closer pairs need Python's round to order them.
_TIE_GAP = 1.5 * 10.0**-_TIE_DIGITS
# pool_orders: an order read from approximate scores is taken only where consecutive scores
# are this far apart (see its docstring for why that makes it the exact order), ...
_SAFE_GAP = 1e-10
# ... for candidate sets of at most this many terms (or terms per document), and weights
# that stay far from overflow and from subnormal numbers.
_SAFE_TERMS = 10_000
_SAFE_WEIGHTS = (1e-100, 1e100)


@dataclass(frozen=True)
class ProviderOrderRanker:
    """The baseline: the candidates in the provider's order, feedback ignored."""

    name = "provider_order"

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        return renumber(candidates)

    def effective_params(self) -> dict[str, Any]:
        """None: every provider-order ranker ranks alike."""
        return {}


@lru_cache(maxsize=65536)
def _term_counts(analyzer: Analyzer, text: str) -> tuple[tuple[str, int], ...]:
    """Term frequencies of ``text``, first occurrence first; cached (a sweep reranks the
    same snippets many times)."""
    return tuple(Counter(analyzer(text)).items())


def _normalized(vector: _Vector) -> _Vector:
    norm = math.sqrt(sum(weight * weight for weight in vector.values()))
    if norm == 0.0:
        return {}
    return {term: weight / norm for term, weight in vector.items()}


def _centroid(vectors: Sequence[_Vector]) -> _Vector:
    total: _Vector = {}
    for vector in vectors:
        for term, weight in vector.items():
            total[term] = total.get(term, 0.0) + weight
    return {term: weight / len(vectors) for term, weight in total.items()}


@lru_cache(maxsize=1024)
def _index(
    analyzer: Analyzer, texts: tuple[str, ...]
) -> tuple[dict[str, float], tuple[_Vector, ...]]:
    """idf and L2-normalized tf-idf vectors of a candidate set; cached, because a sweep
    reranks the same candidates under many feedback states. Callers must not mutate them."""
    counts = [_term_counts(analyzer, text) for text in texts]
    # Smoothed idf (scikit-learn's smooth_idf): ln((N + 1) / (df + 1)) + 1.
    df: Counter[str] = Counter()
    for pairs in counts:
        df.update(term for term, _ in pairs)
    n = len(texts)
    idf = {term: math.log((n + 1) / (freq + 1)) + 1.0 for term, freq in df.items()}
    # Sublinear tf: 1 + ln(tf).
    documents = tuple(
        _normalized({term: (1.0 + math.log(tf)) * idf[term] for term, tf in pairs})
        for pairs in counts
    )
    return idf, documents


@dataclass(frozen=True)
class TfidfRocchioRanker:
    """Cosine similarity between a Rocchio-modified query and TF-IDF result vectors.

    Documents are the candidates' title and snippet (:attr:`Evidence.text`). Weights:

    * tf is sublinear, ``1 + ln(tf)`` (Salton & Buckley 1988; Manning, Raghavan & Schütze,
      *Introduction to IR* §6.4.1): a snippet that repeats a word five times is not five
      times as much about it;
    * idf is computed on the candidate set, smoothed as ``ln((N + 1) / (df + 1)) + 1`` (the
      scikit-learn ``smooth_idf`` form), so a term in every candidate keeps a small weight;
    * document and query vectors are L2-normalized. The query vector holds only terms that
      occur in some candidate (the space of the candidates); a query without such a term
      scores every candidate 0 and the ranking is the provider's order.

    Feedback follows Rocchio (1971), "Relevance feedback in information retrieval":

        q' = alpha * q + beta * mean(d in pull) - gamma * mean(d in push)

    where pull holds the candidates marked MORE or RELEVANT and push those marked LESS or
    IRRELEVANT (UNSURE is ignored), matched by canonical URL. Negative weights of q' are set
    to 0, as is standard practice (Salton & Buckley 1990; IIR §9.1.1): a negative term weight
    has no meaning in a query. Score is cos(q', d); ties keep the candidates' order.
    """

    alpha: float = 1.0
    beta: float = 0.75
    gamma: float = 0.15
    analyzer: Analyzer = field(default=tokenize)

    name = "tfidf_rocchio"

    def __post_init__(self) -> None:
        require_weights(self, "alpha", "beta", "gamma")

    def effective_params(self) -> dict[str, Any]:
        """The settings that decide every ranking, (alpha, beta, gamma) in canonical form:
        rankers with equal effective params rank any candidates alike under any feedback.

        The ranking is invariant to a common factor c > 0 on (alpha, beta, gamma): q' scales
        by c, the clamp at 0 keeps the same terms (c·w > 0 iff w > 0), and cos(c·q', d) =
        cos(q', d), so the scores themselves, not only their order, are unchanged (up to float
        rounding, far below the 12-digit tie rule). So only beta/alpha and gamma/alpha matter,
        and the weights are divided by alpha, or by beta where alpha = 0 (:func:`scale_free`).
        The no-feedback control (beta = gamma = 0) of equal configs is then equal too.

        Edge cases: alpha > 0 with beta = gamma = 0 is (1, 0, 0), the query alone. alpha = 0
        keeps its own form (0, 1, gamma/beta): without feedback q' is empty and the ranking is
        the candidates' order, unlike any alpha > 0. alpha = beta = 0 leaves q' =
        −gamma·mean(push), which has no positive weight and clamps to nothing whatever gamma,
        so every such ranker is (0, 0, 0): all scores 0, the candidates' order.
        """
        if self.alpha == 0 and self.beta == 0:
            alpha, beta, gamma = 0.0, 0.0, 0.0
        else:
            alpha, beta, gamma = scale_free(self.alpha, self.beta, self.gamma)
        return {"alpha": alpha, "beta": beta, "gamma": gamma, "analyzer": self.analyzer}

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """The candidates sorted by :meth:`score`, descending; rank renumbered 1..n."""
        scores = self.score(query, candidates, feedback)
        order = sorted(range(len(candidates)), key=lambda i: (-round(scores[i], _TIE_DIGITS), i))
        return renumber([candidates[i] for i in order])

    def score(self, query: str, candidates: Sequence[Evidence], feedback: Feedback) -> list[float]:
        """cos(q', d) for each candidate, in the candidates' order."""
        idf, documents = _index(self.analyzer, tuple(item.text for item in candidates))
        query_vector = _normalized(
            {
                term: (1.0 + math.log(tf)) * idf[term]
                for term, tf in _term_counts(self.analyzer, query)
                if term in idf
            }
        )
        modified = self._rocchio(query_vector, candidates, documents, feedback)
        norm = math.sqrt(sum(weight * weight for weight in modified.values()))
        if norm == 0.0:
            return [0.0] * len(candidates)
        lookup = modified.get
        return [
            sum(weight * lookup(term, 0.0) for term, weight in document.items()) / norm
            for document in documents
        ]

    def _rocchio(
        self,
        query_vector: _Vector,
        candidates: Sequence[Evidence],
        documents: Sequence[_Vector],
        feedback: Feedback,
    ) -> _Vector:
        # Rocchio (1971): q' = alpha*q + beta*mean(pull) - gamma*mean(push), clamped at 0.
        modified = {term: self.alpha * weight for term, weight in query_vector.items()}
        if not feedback:
            return modified
        pull: list[_Vector] = []
        push: list[_Vector] = []
        for item, document in zip(candidates, documents, strict=True):
            label = feedback.get(item.key)
            if label is None:
                continue
            if label.polarity > 0:
                pull.append(document)
            elif label.polarity < 0:
                push.append(document)
        for vectors, coefficient in ((pull, self.beta), (push, -self.gamma)):
            if not vectors or coefficient == 0:
                continue
            for term, weight in _centroid(vectors).items():
                modified[term] = modified.get(term, 0.0) + coefficient * weight
        return {term: weight for term, weight in modified.items() if weight > 0.0}


@dataclass(frozen=True, slots=True)
class PoolMatrix:
    """A candidate set's tf-idf vectors (those of :func:`_index`) as arrays, for
    :func:`score_many`: ``dense[d, c]`` is document d's weight of the term in column c
    (columns in order of first occurrence), and ``terms[d]`` / ``weights[d]`` list document
    d's columns and weights in its vector's order, padded with the column ``len(columns)``
    (always 0.0 in a query) and the weight 0.0."""

    idf: dict[str, float]
    columns: dict[str, int]
    dense: npt.NDArray[np.float64]
    terms: npt.NDArray[np.intp]
    weights: npt.NDArray[np.float64]
    #: ``terms`` and ``weights`` transposed (a document's k-th term in row k), contiguous
    terms_t: npt.NDArray[np.intp]
    weights_t: npt.NDArray[np.float64]
    #: each document's columns in its vector's order, unpadded (``terms[d]`` as a list)
    document_columns: tuple[list[int], ...] = ()


#: Every term an analyzer has met in this process, numbered in order of meeting: a
#: candidate set's columns are found by numpy over these numbers, not a dict per term.
_VOCABULARY: dict[Analyzer, dict[str, int]] = {}


_TermIds = tuple[npt.NDArray[np.intp], npt.NDArray[np.float64], tuple[str, ...]]

#: Per analyzer, :func:`_term_ids` of each text met (a text recurs in many candidate sets:
#: every expansion keeps the results before it); looked up per analyzer, then per text.
_TEXT_IDS: dict[Analyzer, dict[str, _TermIds]] = {}
#: Texts remembered per analyzer before its table starts again (bounds the memory).
_TEXTS_KEPT = 1 << 16


def _term_ids(analyzer: Analyzer, text: str) -> _TermIds:
    """``text``'s terms as :func:`_term_counts` gives them: their numbers in the analyzer's
    vocabulary, their sublinear tf ``1 + ln(tf)`` (by ``math.log``, as :func:`_index`), and
    the terms themselves."""
    pairs = _term_counts(analyzer, text)
    vocabulary = _VOCABULARY.setdefault(analyzer, {})
    spelled = _SPELLING.setdefault(analyzer, [])
    numbers = []
    for term, _ in pairs:
        number = vocabulary.get(term)
        if number is None:
            number = vocabulary[term] = len(spelled)
            spelled.append(term)
        numbers.append(number)
    ids = np.array(numbers, np.intp)
    sublinear = np.array([1.0 + math.log(tf) for _, tf in pairs], dtype=np.float64)
    return ids, sublinear, tuple(term for term, _ in pairs)


#: Each analyzer's vocabulary the other way: ``_SPELLING[a][_VOCABULARY[a][term]] == term``.
_SPELLING: dict[Analyzer, list[str]] = {}


@lru_cache(maxsize=4096)
def _idf_table(n: int) -> npt.NDArray[np.float64]:
    """The smoothed idf ``ln((N + 1) / (df + 1)) + 1`` (by ``math.log``, as :func:`_index`)
    of every df from 0 to N = ``n``: a candidate set's idf values are looked up, not
    computed per term."""
    return np.array([math.log((n + 1) / (freq + 1)) + 1.0 for freq in range(n + 1)])


@lru_cache(maxsize=1024)
def pool_matrix(analyzer: Analyzer, texts: tuple[str, ...]) -> PoolMatrix:
    """The arrays of :class:`PoolMatrix` for ``texts``, every float as :func:`_index` computes
    it: idf by ``math.log`` per term, ``(1 + ln tf) * idf`` per (document, term), and each
    document's L2 norm summed over its terms in order (cumsum adds left to right, as
    Python's ``sum`` does) before the division."""
    n = len(texts)
    known = _TEXT_IDS.get(analyzer)
    if known is None or len(known) > _TEXTS_KEPT:
        known = _TEXT_IDS[analyzer] = {}
    parts = []
    for text in texts:
        part = known.get(text)
        if part is None:
            part = known[text] = _term_ids(analyzer, text)
        parts.append(part)
    sizes = [len(part[2]) for part in parts]
    total = sum(sizes)
    if not total:
        nothing = np.zeros((n, 0), dtype=np.intp)
        return PoolMatrix(
            {}, {}, np.zeros((n, 1)), nothing, np.zeros((n, 0)), nothing.T.copy(),
            np.zeros((0, n)), tuple([] for _ in range(n)),
        )  # fmt: skip
    depth = max(sizes)
    ids = np.concatenate([part[0] for part in parts])
    sublinear = np.concatenate([part[1] for part in parts])
    # Columns in order of first occurrence, document by document, term by term: a stable
    # sort groups each term's elements, its first element first.
    perm = np.argsort(ids, kind="stable")
    starts = np.empty(total, dtype=bool)
    starts[0] = True
    np.not_equal(ids[perm[1:]], ids[perm[:-1]], out=starts[1:])
    heads = perm[starts]  # each term's first element, in the order of the terms' numbers
    order = np.argsort(heads)
    width = len(order)
    column_of = np.empty(width, dtype=np.intp)
    column_of[order] = np.arange(width)
    column = np.empty(total, dtype=np.intp)
    column[perm] = column_of[np.cumsum(starts) - 1]
    # Smoothed idf (scikit-learn's smooth_idf): ln((N + 1) / (df + 1)) + 1; a term occurs
    # once in a document's counts, so its number of elements is its df.
    idf_array = _idf_table(n)[np.bincount(column, minlength=width)]
    spelled = _SPELLING[analyzer]
    names = [spelled[number] for number in ids[heads[order]].tolist()]  # each column's term
    columns = dict(zip(names, range(width), strict=True))
    idf = dict(zip(names, idf_array.tolist(), strict=True))
    # Sublinear tf times idf, then L2-normalized per document (_normalized).
    lengths = np.array(sizes, dtype=np.intp)
    owner = np.repeat(np.arange(n), lengths)  # each element's document
    ends = np.cumsum(lengths)
    slot = np.arange(total) - (ends - lengths)[owner]
    raw = sublinear * idf_array[column]
    squares = np.zeros((n, depth))
    squares[owner, slot] = raw * raw
    norm = np.sqrt(np.cumsum(squares, axis=1)[:, -1])
    values = raw / norm[owner]
    dense = np.zeros((n, width + 1))
    dense[owner, column] = values
    terms = np.full((n, depth), width, dtype=np.intp)
    terms[owner, slot] = column
    weights = np.zeros((n, depth))
    weights[owner, slot] = values
    flat = column.tolist()
    return PoolMatrix(
        idf,
        columns,
        dense,
        terms,
        weights,
        np.ascontiguousarray(terms.T),
        np.ascontiguousarray(weights.T),
        tuple(flat[end - size : end] for end, size in zip(ends.tolist(), sizes, strict=True)),
    )


def score_many(
    rankers: Sequence[TfidfRocchioRanker],
    query: str,
    candidates: Sequence[Evidence],
    feedback: Feedback,
) -> npt.NDArray[np.float64]:
    """``rankers[i].score(query, candidates, feedback)`` as row i, bit for bit; every ranker
    must share one analyzer.

    Every float is computed as :meth:`TfidfRocchioRanker.score` computes it, in the same
    order: q' = alpha·q + beta·mean(pull) − gamma·mean(push) term by term (an absent part
    adds 0.0, which changes nothing), clamped at 0; its squared norm summed over the terms
    in the order :meth:`TfidfRocchioRanker._rocchio` inserts them (q's, then the pulled
    documents' new terms, then the pushed ones'; a term clamped away adds 0.0); and each
    document's dot product summed over its own vector's terms in order.
    """
    analyzers = {ranker.analyzer for ranker in rankers}
    if len(analyzers) > 1:
        raise ValueError("score_many: the rankers must share one analyzer")
    if not rankers or not candidates:
        return np.zeros((len(rankers), len(candidates)))
    analyzer = next(iter(analyzers))
    matrix = pool_matrix(analyzer, tuple(item.text for item in candidates))
    pull, push = marked_positions([item.key for item in candidates], feedback)
    return pool_scores(
        rocchio_weights(rankers), query_weights(analyzer, matrix, query), matrix, pull, push
    )


def rocchio_weights(rankers: Sequence[TfidfRocchioRanker]) -> npt.NDArray[np.float64]:
    """Each ranker's (alpha, beta, gamma), a row each."""
    return np.array([[r.alpha, r.beta, r.gamma] for r in rankers], dtype=float).reshape(-1, 3)


def query_weights(analyzer: Analyzer, matrix: PoolMatrix, query: str) -> _Vector:
    """The query's L2-normalized tf-idf vector in a candidate set's space, as
    :meth:`TfidfRocchioRanker.score` builds it."""
    idf = matrix.idf
    return _normalized(
        {
            term: (1.0 + math.log(tf)) * idf[term]
            for term, tf in _term_counts(analyzer, query)
            if term in idf
        }
    )


def marked_positions(keys: Sequence[str], feedback: Feedback) -> tuple[list[int], list[int]]:
    """The positions of the pulled (MORE, RELEVANT) and pushed (LESS, IRRELEVANT) keys."""
    pull: list[int] = []
    push: list[int] = []
    if feedback:
        for d, key in enumerate(keys):
            label = feedback.get(key)
            if label is None:
                continue
            polarity = _POLARITY[label]
            if polarity > 0:
                pull.append(d)
            elif polarity < 0:
                push.append(d)
    return pull, push


#: Each label's polarity, looked up (``Label.polarity`` is a property, read per mark).
_POLARITY = {label: label.polarity for label in Label}


def pool_scores(
    weights: npt.NDArray[np.float64],
    query_vector: _Vector,
    matrix: PoolMatrix,
    pull: list[int],
    push: list[int],
) -> npt.NDArray[np.float64]:
    """:func:`score_many` on a candidate set's arrays; ``weights`` holds (alpha, beta,
    gamma) per row, ``pull`` and ``push`` the marked documents' positions."""
    rows, n = len(weights), matrix.dense.shape[0]
    columns = matrix.columns
    query_columns = [columns[term] for term in query_vector]
    if not query_columns and not pull:  # q' has no positive weight in any row
        return np.zeros((rows, n))
    # Rocchio (1971): q' = alpha*q + beta*mean(pull) - gamma*mean(push), clamped at 0, a
    # column per term (the last: padding, always 0.0) and a ranker per row of the transposed
    # q'. A term's weight is the same sum as _rocchio's: an absent part adds 0.0 (or -0.0),
    # which leaves it as it was or turns a -0.0 into the 0.0 the clamp gives anyway.
    q = np.zeros(len(columns) + 1)
    q[query_columns] = list(query_vector.values())
    part = np.multiply.outer(q, weights[:, 0])
    if pull:
        part += np.multiply.outer(_centroid_part(matrix, pull), weights[:, 1])
    if push:
        part += np.multiply.outer(_centroid_part(matrix, push), -weights[:, 2])
    modified = np.where(part > 0.0, part, 0.0)
    # |q'|: the squares summed in the order _rocchio inserts the terms: q's, then the pulled
    # documents' new ones in order. A term only the pushed documents hold is clamped to 0.0
    # and adds 0.0 wherever it falls, as does every other term.
    inserted = _inserted_columns(matrix, query_columns, pull)
    held = modified[inserted]
    norm = np.sqrt(_sum_down(held * held))
    # cos(q', d): each document's products summed over its own terms in its vector's order
    # (_sum_down runs down axis 0), over every ranker at once.
    products = matrix.weights_t[:, :, None] * modified[matrix.terms_t]
    sums = _sum_down(products).T
    scores = np.zeros((rows, n))
    np.divide(sums, norm[:, None], out=scores, where=(norm != 0.0)[:, None])
    return scores


def _inserted_columns(matrix: PoolMatrix, query_columns: list[int], pull: list[int]) -> list[int]:
    """The columns where q' can be positive, in the order ``_rocchio`` inserts their terms:
    the query's, then each pulled document's new ones in its vector's order."""
    if not pull:
        return query_columns
    columns = matrix.columns
    documents = matrix.document_columns or [
        [c for c in row if c != len(columns)] for row in matrix.terms.tolist()
    ]
    order = dict.fromkeys(query_columns)
    for d in pull:
        order.update(dict.fromkeys(documents[d]))
    return list(order)


def pool_orders(
    weights: npt.NDArray[np.float64],
    query_vector: _Vector,
    matrix: PoolMatrix,
    pull: list[int],
    push: list[int],
) -> list[list[int]]:
    """``order_many(pool_scores(weights, query_vector, matrix, pull, push))``, exactly, at a
    fraction of the cost: each row's order is read from scores computed with a matrix
    product (summed in whatever order BLAS adds), and only a row where that could differ
    from the exact order is scored exactly (:func:`pool_scores`, :func:`order_many`).

    Why the approximate order is the exact one where it is taken. q' is computed exactly as
    :func:`pool_scores` computes it, on the only columns where it can be positive (the
    query's and the pulled documents' terms; a term only pushed documents hold is clamped to
    0). Every product of a document weight and a q' weight is >= 0, so a dot product or a
    squared norm summed in any order is within ``k·u/(1 − k·u)`` of the exact value,
    relatively, for k terms and the unit roundoff u = 2^-53 (Higham, *Accuracy and Stability
    of Numerical Algorithms*, 2nd ed., §4.2: no cancellation without negative terms). With
    at most 10,000 terms, a score (a cosine, at most 1) is then within 4e-12 of the exact
    score, and a score is 0.0 exactly where the exact one is (a sum of products >= 0 is 0
    only if each is; the weights are kept far from underflow). So where consecutive
    scores of the approximate order are more than 1e-10 apart, the exact scores are more
    than 1e-12 apart in the same order, and their 12-digit roundings too; where both are
    0.0, both orders keep the candidates' order. Any other row (a near tie, an exact tie of
    two equal texts) is scored exactly.
    """
    rows, n = len(weights), matrix.dense.shape[0]
    if not rows or not n:
        return [[] for _ in range(rows)]
    columns = matrix.columns
    query_columns = [columns[term] for term in query_vector]
    if not query_columns and not pull:  # q' has no positive weight in any row
        return [list(range(n)) for _ in range(rows)]
    inserted = _inserted_columns(matrix, query_columns, pull)
    if (
        len(inserted) > _SAFE_TERMS
        or matrix.terms.shape[1] > _SAFE_TERMS
        or not _safe_weights(weights.tobytes())
    ):
        return order_many(pool_scores(weights, query_vector, matrix, pull, push))
    # q' on the inserted columns, as pool_scores computes it there (a row per ranker here).
    held = matrix.dense[:, inserted]  # (documents, terms)
    q = np.zeros(len(inserted))
    q[: len(query_columns)] = list(query_vector.values())
    part = np.multiply.outer(weights[:, 0], q)
    if pull:
        part += np.multiply.outer(weights[:, 1], _centroid_of(held, pull))
    if push:
        part += np.multiply.outer(-weights[:, 2], _centroid_of(held, push))
    modified = np.maximum(part, 0.0, out=part)  # (rows, terms); -0.0 or 0.0, both zero
    norm = np.sqrt(np.einsum("rt,rt->r", modified, modified))
    norm[norm == 0.0] = 1.0  # q' is 0: every product is 0.0, and so is 0.0 / 1.0
    negated = (modified @ held.T) / -norm[:, None]  # -score, (rows, documents)
    result: list[list[int]] = np.argsort(negated, axis=1, kind="stable").tolist()
    # Each row's scores in order, highest first (equal values are interchangeable), and
    # the gaps between consecutive ones where the higher is not 0.0.
    ranked = np.sort(negated, axis=1)
    unsafe = (np.diff(ranked, axis=1) < _SAFE_GAP) & (ranked[:, :-1] < 0.0)
    if unsafe.any():
        redo = np.flatnonzero(unsafe.any(axis=1))
        exact = order_many(pool_scores(weights[redo], query_vector, matrix, pull, push))
        for row, found in zip(redo.tolist(), exact, strict=True):
            result[row] = found
    return result


@lru_cache(maxsize=256)
def _safe_weights(packed: bytes) -> bool:
    """Whether every nonzero weight (packed float64 values) lies in ``_SAFE_WEIGHTS``."""
    low, high = _SAFE_WEIGHTS
    values = np.frombuffer(packed, dtype=np.float64)
    positive = values[values != 0.0]
    return bool(((positive >= low) & (positive <= high)).all())


def _centroid_of(held: npt.NDArray[np.float64], rows: list[int]) -> npt.NDArray[np.float64]:
    """:func:`_centroid_part` on the columns ``held`` holds: the documents ``rows`` summed
    in order (cumsum adds left to right), divided by their number."""
    if len(rows) == 1:
        return held[rows[0]]  # type: ignore[no-any-return]  # x / 1 is x
    summed: npt.NDArray[np.float64] = np.cumsum(held[rows], axis=0)[-1] / len(rows)
    return summed


def _centroid_part(matrix: PoolMatrix, rows: list[int]) -> npt.NDArray[np.float64]:
    """:func:`_centroid` of the documents ``rows``, a column per term: each term summed in
    the documents' order (_sum_down; a document without the term adds 0.0) and divided by
    their number."""
    picked: npt.NDArray[np.float64] = matrix.dense[rows]
    if len(rows) == 1:
        return picked[0]  # type: ignore[no-any-return]  # x / 1 is x
    summed: npt.NDArray[np.float64] = _sum_down(picked) / len(rows)
    return summed


def _sum_down(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``values`` summed over axis 0, one row after another, as Python's ``sum`` adds (left
    to right; numpy's ``sum`` may add pairwise): by cumsum where the rows are many, by
    adding row after row where they are few and wide (cumsum down a short axis runs one
    slow loop per column)."""
    if not len(values):
        return np.zeros(values.shape[1:])
    if len(values) == 1 or values[0].size <= 4 * len(values):
        summed: npt.NDArray[np.float64] = np.cumsum(values, axis=0)[-1]
        return summed
    total: npt.NDArray[np.float64] = values[0].copy()
    for row in values[1:]:
        total += row
    return total


def order_many(scores: npt.NDArray[np.float64]) -> list[list[int]]:
    """Each row's candidate indices as :meth:`TfidfRocchioRanker.rank` orders them: score
    rounded to 12 digits, descending, ties by index.

    A stable sort of the raw scores gives that order except where two scores differ by less
    than the rounding can join; such a row is sorted with Python's ``round`` itself.
    """
    if scores.size == 0:
        return [[] for _ in range(scores.shape[0])]
    orders = np.argsort(-scores, axis=1, kind="stable")
    ranked = scores[np.arange(len(scores))[:, None], orders]
    gaps = ranked[:, :-1] - ranked[:, 1:]
    close = ((gaps > 0.0) & (gaps < _TIE_GAP)).any(axis=1)
    result: list[list[int]] = orders.tolist()
    for row in np.flatnonzero(close):
        values = scores[row].tolist()
        result[row] = sorted(range(len(values)), key=lambda i: (-round(values[i], _TIE_DIGITS), i))
    return result
