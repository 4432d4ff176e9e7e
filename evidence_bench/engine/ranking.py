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

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence_bench.engine.base import POLARITY, Feedback
from evidence_bench.engine.params import require_weights, scale_free
from evidence_bench.engine.text import Analyzer, Lexicon, lexicon, term_counts, tokenize
from evidence_bench.evidence import Evidence, renumber

__all__ = [
    "PoolMatrix",
    "ProviderOrderRanker",
    "TfidfRocchioRanker",
    "marked_positions",
    "order_many",
    "pool_matrix",
    "pool_orders",
    "pool_orders_many",
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
    :func:`score_many`: ``dense[d, c]`` is document d's weight of the term in column c (a
    column per term, in order of the terms' numbers in the analyzer's
    :func:`~evidence_bench.engine.text.lexicon`; the last column, padding, is 0.0), and
    ``idf[c]`` the term's idf. Which column holds a term decides no float: every sum runs
    over documents or over one document's own terms, in their order.

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
    """The smoothed idf ``ln((N + 1) / (df + 1)) + 1`` (by ``math.log``, as :func:`_index`)
    of every df from 0 to N = ``n``: a candidate set's idf values are looked up, not
    computed per term."""
    return np.array([math.log((n + 1) / (freq + 1)) + 1.0 for freq in range(n + 1)])


#: ``1 + ln(tf)`` by ``math.log`` (as :func:`_index`) for tf = 0, 1, ...: looked up, not
#: computed per (document, term); grown when a larger tf comes.
_SUBLINEAR = np.array([0.0, *(1.0 + math.log(tf) for tf in range(1, 256))])


def _sublinear(tf: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    global _SUBLINEAR
    top = int(tf.max())
    if top >= len(_SUBLINEAR):
        _SUBLINEAR = np.array([0.0, *(1.0 + math.log(t) for t in range(1, 2 * top))])
    return _SUBLINEAR[tf]


@lru_cache(maxsize=1024)
def pool_matrix(analyzer: Analyzer, texts: tuple[str, ...]) -> PoolMatrix:
    """The arrays of :class:`PoolMatrix` for ``texts``, every float as :func:`_index` computes
    it: idf by ``math.log`` per term, ``(1 + ln tf) * idf`` per (document, term), and each
    document's L2 norm summed over its terms in order (cumsum adds left to right, as
    Python's ``sum`` does) before the division."""
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
    # Smoothed idf (scikit-learn's smooth_idf): ln((N + 1) / (df + 1)) + 1.
    idf = _idf_table(n)[df[numbers]]
    # Sublinear tf times idf, then L2-normalized per document (_normalized).
    lengths = np.array(sizes, dtype=np.intp)
    owner = np.repeat(np.arange(n), lengths)  # each element's document
    slot = np.arange(total) - (np.cumsum(lengths) - lengths)[owner]
    tf = flat[1]
    raw = _sublinear(tf) * idf[column]
    squares = np.zeros((n, max(sizes)))
    squares[owner, slot] = raw * raw
    norm = np.sqrt(np.cumsum(squares, axis=1)[:, -1])
    values = raw / norm[owner]
    dense = np.zeros((n + 1, width + 1))
    dense[owner, column] = values
    return PoolMatrix(terms, numbers, idf, dense, owner, slot, column, values, tf, sizes)


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
    """:func:`score_many` on a candidate set's arrays; ``weights`` holds (alpha, beta,
    gamma) per row, ``pull`` and ``push`` the marked documents' positions."""
    rows, n = len(weights), matrix.dense.shape[0]
    query_columns = matrix.query_columns(query_vector)
    if not query_columns and not pull:  # q' has no positive weight in any row
        return np.zeros((rows, n))
    # Rocchio (1971): q' = alpha*q + beta*mean(pull) - gamma*mean(push), clamped at 0, a
    # column per term (the last: padding, always 0.0) and a ranker per row of the transposed
    # q'. A term's weight is the same sum as _rocchio's: an absent part adds 0.0 (or -0.0),
    # which leaves it as it was or turns a -0.0 into the 0.0 the clamp gives anyway.
    q = np.zeros(matrix.dense.shape[1])
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
    terms, weights_of = matrix.terms, matrix.weights
    products = weights_of.T[:, :, None] * modified[terms.T]
    sums = _sum_down(products).T
    scores = np.zeros((rows, n))
    np.divide(sums, norm[:, None], out=scores, where=(norm != 0.0)[:, None])
    return scores


def _inserted_columns(matrix: PoolMatrix, query_columns: list[int], pull: list[int]) -> list[int]:
    """The columns where q' can be positive, in the order ``_rocchio`` inserts their terms:
    the query's, then each pulled document's new ones in its vector's order."""
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
