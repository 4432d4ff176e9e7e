"""Local rankers: the provider's order, and TF-IDF with Rocchio relevance feedback.

TF-IDF Rocchio has one scorer, in matrix form: a candidate set's tf-idf vectors are the
arrays of :class:`PoolMatrix` (:func:`pool_matrix`), and :func:`pool_scores` scores q' for
many (alpha, beta, gamma) rows at once. :func:`pool_orders_many` orders the candidates for
every row and feedback in one matrix product, exactly as sorting :func:`pool_scores`' scores
by their 12-digit rounding does (its docstring says why); :class:`TfidfRocchioRanker` is a
batch of one row.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence_bench.engine.base import POLARITY, Feedback
from evidence_bench.engine.params import TIE_DIGITS, require_weights, scale_free
from evidence_bench.engine.text import Analyzer, Lexicon, lexicon, term_counts, tokenize
from evidence_bench.evidence import Evidence, renumber

__all__ = [
    "PoolMatrix", "ProviderOrderRanker", "TfidfRocchioRanker", "marked_positions", "order_many",
    "pool_matrix", "pool_orders", "pool_orders_many", "pool_scores", "query_weights",
    "rocchio_weights", "weighted",
]  # fmt: skip

_Vector = dict[str, float]

# Two scores further apart than this never round to one 12-digit value (each moves by at
# most half of 1e-12), so only closer pairs need Python's round to order them.
_TIE_GAP = 1.5 * 10.0**-TIE_DIGITS
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


def _normalized(vector: _Vector) -> _Vector:
    norm = math.sqrt(sum(weight * weight for weight in vector.values()))
    if norm == 0.0:
        return {}
    return {term: weight / norm for term, weight in vector.items()}


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
        """The candidates sorted by :meth:`score` rounded to 12 digits, descending, ties in
        the candidates' order (:func:`pool_orders`); rank renumbered 1..n."""
        (order,) = pool_orders(*self._batch(query, candidates, feedback))
        return renumber([candidates[i] for i in order])

    def score(self, query: str, candidates: Sequence[Evidence], feedback: Feedback) -> list[float]:
        """cos(q', d) for each candidate, in the candidates' order (:func:`pool_scores`)."""
        scores: list[float] = pool_scores(*self._batch(query, candidates, feedback))[0].tolist()
        return scores

    def _batch(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> tuple[npt.NDArray[np.float64], _Vector, PoolMatrix, list[int], list[int]]:
        """This ranker as a batch of one row: the arguments of :func:`pool_scores`."""
        matrix = self.matrix(candidates)
        pull, push = marked_positions([item.key for item in candidates], feedback)
        weights = rocchio_weights([self])
        return weights, query_weights(self.analyzer, matrix, query), matrix, pull, push

    def matrix(self, candidates: Sequence[Evidence]) -> PoolMatrix:
        """The candidates' tf-idf arrays, idf over the candidates (:func:`pool_matrix`)."""
        return pool_matrix(self.analyzer, tuple(item.text for item in candidates))


@dataclass(frozen=True, slots=True)
class PoolMatrix:
    """A candidate set's L2-normalized tf-idf vectors as arrays, for :func:`pool_scores`:
    ``dense[d, c]`` is document d's weight of the term in column c (a column per term, in
    order of the terms' numbers in the analyzer's :func:`~evidence_bench.engine.text.lexicon`;
    the last column, padding, is 0.0), and ``idf[c]`` the term's idf. Which column holds a
    term decides no float: every sum runs over documents or over one document's own terms,
    in their order.

    The element arrays list every (document, term) pair, document by document and each
    document's terms in its vector's order (first occurrence); :attr:`terms` /
    :attr:`weights` and :attr:`counts` are built from them the first time they are read
    (the exact path and the refiner need them; most pools never do).
    """

    lexicon: Lexicon
    #: each column's term's number in :attr:`lexicon`, ascending
    numbers: npt.NDArray[np.intp]
    idf: npt.NDArray[np.float64]
    #: :attr:`dense` with a row of 0.0 below (a document that holds nothing)
    padded_dense: npt.NDArray[np.float64]
    #: per element: its document, its place among the document's terms, column, weight, tf
    owner: npt.NDArray[np.intp]
    slot: npt.NDArray[np.intp]
    column: npt.NDArray[np.intp]
    values: npt.NDArray[np.float64]
    tf: npt.NDArray[np.intp]
    #: how many terms each document has
    sizes: tuple[int, ...]
    _built: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def columns_of(self, terms: Iterable[str]) -> list[int]:
        """The column of each of ``terms`` (every one must be a candidate's term)."""
        known = self.lexicon.numbers
        wanted = np.array([known[term] for term in terms], dtype=np.intp)
        found = np.searchsorted(self.numbers, wanted)
        if len(wanted) and (
            found.max() >= len(self.numbers) or (self.numbers[found] != wanted).any()
        ):
            raise KeyError("a term that no candidate holds")
        columns: list[int] = found.tolist()
        return columns

    def query_columns(self, query_vector: Mapping[str, float]) -> list[int]:
        """:meth:`columns_of` the terms of ``query_vector``, remembered for the last one."""
        built = self._built.get("query")
        if built is None or built[0] is not query_vector:
            built = self._built["query"] = (query_vector, self.columns_of(query_vector))
        return built[1]

    @property
    def dense(self) -> npt.NDArray[np.float64]:
        """``dense[d, c]``: document d's weight of column c's term (0.0 where it has none)."""
        return self.padded_dense[:-1]

    def _padded(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        built = self._built.get("padded")
        if built is None:
            n, depth = len(self.sizes), max(self.sizes, default=0)
            terms = np.full((n, depth), len(self.numbers), dtype=np.intp)
            terms[self.owner, self.slot] = self.column
            weights = np.zeros((n, depth))
            weights[self.owner, self.slot] = self.values
            built = self._built["padded"] = (terms, weights)
        return built

    @property
    def terms(self) -> npt.NDArray[np.intp]:
        """``terms[d]``: document d's columns in its vector's order, padded with the column
        ``len(numbers)`` (always 0.0 in a query)."""
        return self._padded()[0]

    @property
    def weights(self) -> npt.NDArray[np.float64]:
        """``weights[d]``: document d's weights in its vector's order, padded with 0.0."""
        return self._padded()[1]

    @property
    def document_columns(self) -> tuple[list[int], ...]:
        """Each document's columns in its vector's order, unpadded."""
        built = self._built.get("documents")
        if built is None:
            listed = self.column.tolist()
            ends = itertools.accumulate(self.sizes)
            built = self._built["documents"] = tuple(
                listed[end - size : end] for end, size in zip(ends, self.sizes, strict=True)
            )
        return built

    @property
    def counts(self) -> npt.NDArray[np.float64]:
        """``counts[d, c]``: how often document d holds column c's term (its raw tf), as a
        float (integers: a sum of them is exact in any order, so by BLAS too)."""
        built = self._built.get("counts")
        if built is None:
            built = np.zeros((len(self.sizes), len(self.numbers)))
            built[self.owner, self.column] = self.tf
            self._built["counts"] = built
        return built


@lru_cache(maxsize=4096)
def _idf_table(n: int) -> npt.NDArray[np.float64]:
    """The smoothed idf ``ln((N + 1) / (df + 1)) + 1`` (by ``math.log``) of every df from 0
    to N = ``n``: a candidate set's idf values are looked up, not computed per term."""
    return np.array([math.log((n + 1) / (freq + 1)) + 1.0 for freq in range(n + 1)])


#: ``1 + ln(tf)`` by ``math.log`` for tf = 0, 1, ...: looked up, not computed per
#: (document, term); grown when a larger tf comes.
_SUBLINEAR = np.array([0.0, *(1.0 + math.log(tf) for tf in range(1, 256))])


def _sublinear(tf: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    global _SUBLINEAR
    top = int(tf.max())
    if top >= len(_SUBLINEAR):
        _SUBLINEAR = np.array([0.0, *(1.0 + math.log(t) for t in range(1, 2 * top))])
    return _SUBLINEAR[tf]


@lru_cache(maxsize=1024)
def pool_matrix(analyzer: Analyzer, texts: tuple[str, ...]) -> PoolMatrix:
    """The arrays of :class:`PoolMatrix` for ``texts``: idf over ``texts``
    (:func:`_idf_table`), then :func:`weighted`."""
    n = len(texts)
    terms = lexicon(analyzer)
    known = terms.texts
    parts: list[npt.NDArray[np.intp]] = []
    for text in texts:
        part = known.get(text)
        parts.append(term_counts(analyzer, text) if part is None else part)
    sizes = tuple(part.shape[1] for part in parts)
    total = sum(sizes)
    if not total:
        empty = np.zeros(0, dtype=np.intp)
        return PoolMatrix(
            terms, empty, np.zeros(0), np.zeros((n + 1, 1)), empty, empty, empty, np.zeros(0),
            empty, sizes,
        )  # fmt: skip
    flat = np.concatenate(parts, axis=1)
    # A term occurs once in a document's counts, so its number of elements is its df; the
    # columns are the terms held, by number (numbers are few: a bincount over them all).
    ids = flat[0]
    df = np.bincount(ids)
    numbers = np.flatnonzero(df)
    width = len(numbers)
    column_of = np.empty(len(df), dtype=np.intp)
    column_of[numbers] = np.arange(width)
    column = column_of[ids]
    lengths = np.array(sizes, dtype=np.intp)
    owner = np.repeat(np.arange(n), lengths)  # each element's document
    slot = np.arange(total) - (np.cumsum(lengths) - lengths)[owner]
    # Smoothed idf (scikit-learn's smooth_idf): ln((N + 1) / (df + 1)) + 1.
    idf = _idf_table(n)[df[numbers]]
    blank = np.zeros((n + 1, 1))
    unweighted = PoolMatrix(
        terms, numbers, idf, blank, owner, slot, column, np.zeros(0), flat[1], sizes
    )
    return weighted(unweighted, idf)


def weighted(matrix: PoolMatrix, idf: npt.NDArray[np.float64]) -> PoolMatrix:
    """``matrix``'s documents weighed with ``idf`` (one value per column): sublinear tf
    ``(1 + ln tf) * idf`` per (document, term), L2-normalized per document, the squares
    summed over its terms in order (cumsum adds left to right)."""
    if not len(matrix.tf):  # no candidate holds a term
        return replace(matrix, idf=idf)
    n, owner, slot, column = len(matrix.sizes), matrix.owner, matrix.slot, matrix.column
    raw = _sublinear(matrix.tf) * idf[column]
    squares = np.zeros((n, max(matrix.sizes)))
    squares[owner, slot] = raw * raw
    norm = np.sqrt(np.cumsum(squares, axis=1)[:, -1])
    values = raw / norm[owner]
    dense = np.zeros((n + 1, len(matrix.numbers) + 1))
    dense[owner, column] = values
    return replace(matrix, idf=idf, padded_dense=dense, values=values, _built={})


def rocchio_weights(rankers: Sequence[TfidfRocchioRanker]) -> npt.NDArray[np.float64]:
    """Each ranker's (alpha, beta, gamma), a row each."""
    return np.array([[r.alpha, r.beta, r.gamma] for r in rankers], dtype=float).reshape(-1, 3)


def query_weights(analyzer: Analyzer, matrix: PoolMatrix, query: str) -> _Vector:
    """The query's L2-normalized tf-idf vector in a candidate set's space: sublinear tf
    times the set's idf, over the query's terms that some candidate holds."""
    pairs = term_counts(analyzer, query)
    found = np.searchsorted(matrix.numbers, pairs[0])
    held = found < len(matrix.numbers)
    held[held] = matrix.numbers[found[held]] == pairs[0][held]
    spelled = matrix.lexicon.spelled
    return _normalized(
        {
            spelled[number]: (1.0 + math.log(tf)) * idf
            for number, tf, idf in zip(
                pairs[0][held].tolist(),
                pairs[1][held].tolist(),
                matrix.idf[found[held]].tolist(),
                strict=True,
            )
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
            polarity = POLARITY[label]
            if polarity > 0:
                pull.append(d)
            elif polarity < 0:
                push.append(d)
    return pull, push


def pool_scores(
    weights: npt.NDArray[np.float64],
    query_vector: _Vector,
    matrix: PoolMatrix,
    pull: list[int],
    push: list[int],
) -> npt.NDArray[np.float64]:
    """cos(q', d) of every candidate (a column) for each (alpha, beta, gamma) of ``weights``
    (a row); ``pull`` and ``push`` are the marked documents' positions.

    q' = alpha·q + beta·mean(pull) − gamma·mean(push) term by term (Rocchio 1971), clamped
    at 0 (Salton & Buckley 1990). The floats are summed in one fixed order, which defines
    the score to the last bit: each centroid over the marked documents in their order; the
    squared norm of q' over its terms as they first appear (q's, then each pulled
    document's, in its vector's order; a term clamped away adds 0.0); each document's dot
    product over its own terms in its vector's order.
    """
    rows, n = len(weights), matrix.dense.shape[0]
    query_columns = matrix.query_columns(query_vector)
    if not query_columns and not pull:  # q' has no positive weight in any row
        return np.zeros((rows, n))
    # Rocchio (1971): q' = alpha*q + beta*mean(pull) - gamma*mean(push), clamped at 0, a
    # column per term (the last: padding, always 0.0) and a ranker per row of the transposed
    # q'. An absent part adds 0.0 (or -0.0), which leaves a weight as it was or turns a -0.0
    # into the 0.0 the clamp gives anyway.
    q = np.zeros(matrix.dense.shape[1])
    q[query_columns] = list(query_vector.values())
    part = np.multiply.outer(q, weights[:, 0])
    if pull:
        part += np.multiply.outer(_centroid_part(matrix, pull), weights[:, 1])
    if push:
        part += np.multiply.outer(_centroid_part(matrix, push), -weights[:, 2])
    modified = np.where(part > 0.0, part, 0.0)
    # |q'|: the squares summed in the order the terms first appear: q's, then the pulled
    # documents' new ones in order. A term only the pushed documents hold is clamped to 0.0
    # and adds 0.0 wherever it falls, as does every other term.
    inserted = _inserted_columns(matrix, query_columns, pull)
    held = modified[inserted]
    terms, weights_of = matrix.terms, matrix.weights
    with np.errstate(over="ignore"):  # weights near 1e300 overflow to inf, as floats do
        norm = np.sqrt(_sum_down(held * held))
        # cos(q', d): each document's products summed over its own terms in its vector's
        # order (_sum_down runs down axis 0), over every ranker at once.
        products = weights_of.T[:, :, None] * modified[terms.T]
        sums = _sum_down(products).T
    scores = np.zeros((rows, n))
    np.divide(sums, norm[:, None], out=scores, where=(norm != 0.0)[:, None])
    return scores


def _inserted_columns(matrix: PoolMatrix, query_columns: list[int], pull: list[int]) -> list[int]:
    """The columns where q' can be positive, in the order their terms first appear: the
    query's, then each pulled document's new ones in its vector's order."""
    if not pull:
        return query_columns
    documents = matrix.document_columns
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
    fraction of the cost (:func:`pool_orders_many` of one feedback)."""
    return pool_orders_many(query_vector, matrix, [(weights, pull, push)])[0]


def pool_orders_many(
    query_vector: _Vector,
    matrix: PoolMatrix,
    groups: Sequence[tuple[npt.NDArray[np.float64], list[int], list[int]]],
) -> list[list[list[int]]]:
    """:func:`pool_orders` of each (weights, pull, push) of ``groups`` (one candidate set
    under several feedbacks), exactly, in one matrix product for them all: each row's order
    is read from scores computed by BLAS (summed in whatever order it adds), and only a row
    where that could differ from the exact order is scored exactly (:func:`pool_scores`,
    :func:`order_many`).

    Why the approximate order is the exact one where it is taken. q' is computed exactly as
    :func:`pool_scores` computes it: the same products, each column's centroid summed over
    the marked documents in their order (a document not marked adds 0.0, which changes no
    sum of non-negative terms), clamped at 0. Every product of a document weight and a q'
    weight is >= 0, so a dot product or a squared norm summed in any order is within
    ``k·u/(1 − k·u)`` of the exact value, relatively, for k terms and the unit roundoff u =
    2^-53 (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2: no
    cancellation without negative terms). With at most 10,000 terms, a score (a cosine, at
    most 1) is then within 4e-12 of the exact score, and a score is 0.0 exactly where the
    exact one is (a sum of products >= 0 is 0 only if each is; the weights are kept far from
    underflow). So where consecutive scores of the approximate order are more than 1e-10
    apart, the exact scores are more than 1e-12 apart in the same order, and their 12-digit
    roundings too; where both are 0.0, both orders keep the candidates' order. Any other row
    (a near tie, an exact tie of two equal texts) is scored exactly.
    """
    n = matrix.dense.shape[0]
    sizes = [len(weights) for weights, _, _ in groups]
    if not n or not sum(sizes):
        return [[[] for _ in range(size)] for size in sizes]
    stacked = np.concatenate([weights for weights, _, _ in groups]).reshape(-1, 3)
    # q' per row (a row per (feedback, ranker) here) on the only columns where it can be
    # positive: the query's and the pulled documents' terms (a term only pushed documents
    # hold is clamped to 0), as pool_scores computes it there.
    query_columns = matrix.query_columns(query_vector)
    pulled = np.zeros(n + 1, dtype=bool)
    for _, pull, _ in groups:
        pulled[pull] = True
    wanted = np.zeros(matrix.padded_dense.shape[1], dtype=bool)
    wanted[matrix.column[pulled[matrix.owner]]] = True
    wanted[query_columns] = False
    # the query's columns first, in its order (q's), then the pulled documents' others
    inserted = np.concatenate([np.array(query_columns, dtype=np.intp), np.flatnonzero(wanted)])
    # the bound is on the terms a product sums, the inserted columns (not the pool's width)
    if (
        len(inserted) > _SAFE_TERMS
        or max(matrix.sizes) > _SAFE_TERMS
        or not _safe_weights(stacked.tobytes())
    ):
        return [
            order_many(pool_scores(weights, query_vector, matrix, pull, push))
            for weights, pull, push in groups
        ]
    held = matrix.padded_dense[:, inserted]  # (documents and a row of 0.0, terms)
    q = np.zeros(len(inserted))
    q[: len(query_columns)] = list(query_vector.values())
    part = np.multiply.outer(stacked[:, 0], q)
    which = np.repeat(np.arange(len(groups)), sizes)  # each row's feedback
    for marked, coefficient in (
        ([pull for _, pull, _ in groups], stacked[:, 1]),
        ([push for _, _, push in groups], -stacked[:, 2]),
    ):
        if any(marked):
            part += coefficient[:, None] * _centroids(held, marked)[which]
    modified = np.maximum(part, 0.0, out=part)  # (rows, terms); -0.0 or 0.0, both zero
    norm = np.sqrt(np.einsum("rt,rt->r", modified, modified))
    norm[norm == 0.0] = 1.0  # q' is 0: every product is 0.0, and so is 0.0 / 1.0
    negated = _products(modified, held[:n]) / -norm[:, None]  # -score, (rows, documents)
    orders = np.argsort(negated, axis=1, kind="stable")
    # Each row's scores in order, highest first, and the gaps between consecutive ones
    # where the higher is not 0.0.
    ranked = np.sort(negated, axis=1)  # equal values are interchangeable
    unsafe = np.flatnonzero(
        ((np.diff(ranked, axis=1) < _SAFE_GAP) & (ranked[:, :-1] < 0.0)).any(axis=1)
    ).tolist()
    listed: list[list[int]] = orders.tolist()
    result = []
    start = 0
    for (weights, pull, push), size in zip(groups, sizes, strict=True):
        found = listed[start : start + size]
        redo = [row - start for row in unsafe if start <= row < start + size]
        if redo:
            exact = order_many(pool_scores(weights[redo], query_vector, matrix, pull, push))
            for row, order in zip(redo, exact, strict=True):
                found[row] = order
        result.append(found)
        start += size
    return result


def _centroids(held: npt.NDArray[np.float64], marked: list[list[int]]) -> npt.NDArray[np.float64]:
    """:func:`_centroid_part` of each list of documents (a row of zeros for an empty one) on
    the columns ``held`` holds (its last row: 0.0): each column summed over the documents
    in order, one document after another (the k-th of every list at once; a list already
    ended adds a row of 0.0, which changes no sum of non-negative terms), and divided by
    their number."""
    zero = len(held) - 1
    longest = max(map(len, marked))
    picks = np.array([[*documents, *[zero] * (longest - len(documents))] for documents in marked])
    rows = held[picks.T]  # (k-th document, list, column)
    total = rows[0].copy()
    for row in rows[1:]:
        total += row
    counts = np.array([len(documents) or 1 for documents in marked], dtype=float)
    centroids: npt.NDArray[np.float64] = total / counts[:, None]
    return centroids


def _products(
    left: npt.NDArray[np.float64], right: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``left @ right.T`` by blocks of rows small enough that BLAS runs each on one thread
    (OpenBLAS threads a product of more than 2^18 multiply-adds, and on these sizes its
    threads cost ~100x the product itself when the cores are busy)."""
    rows, inner = left.shape
    step = max(1, _PRODUCT_SIZE // max(1, inner * right.shape[0]))
    if rows <= step:
        product: npt.NDArray[np.float64] = left @ right.T
        return product
    return np.concatenate([left[i : i + step] @ right.T for i in range(0, rows, step)])


#: Multiply-adds per :func:`_products` block: OpenBLAS's GEMM runs one thread up to 2^18.
_PRODUCT_SIZE = 1 << 18


@lru_cache(maxsize=256)
def _safe_weights(packed: bytes) -> bool:
    """Whether every nonzero weight (packed float64 values) lies in ``_SAFE_WEIGHTS``."""
    low, high = _SAFE_WEIGHTS
    values = np.frombuffer(packed, dtype=np.float64)
    positive = values[values != 0.0]
    return bool(((positive >= low) & (positive <= high)).all())


def _centroid_part(matrix: PoolMatrix, rows: list[int]) -> npt.NDArray[np.float64]:
    """The centroid of the documents ``rows``, a column per term: each term summed in
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
    """Each row's candidate indices by score rounded to 12 digits, descending, ties by
    index.

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
        result[row] = sorted(range(len(values)), key=lambda i: (-round(values[i], TIE_DIGITS), i))
    return result
