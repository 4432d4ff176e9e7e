"""Local rankers: the provider's order, and TF-IDF with Rocchio relevance feedback.

:class:`TfidfRocchioRanker` runs about 100k times in a parameter sweep on 20-60 candidates,
so vectors are plain ``dict[str, float]``, term counts are cached per text and idf and
document vectors per candidate set; no numpy or scikit-learn.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from evidence_bench.engine.base import Feedback
from evidence_bench.engine.params import require_weights, scale_free
from evidence_bench.engine.text import Analyzer, tokenize
from evidence_bench.evidence import Evidence, renumber

__all__ = ["ProviderOrderRanker", "TfidfRocchioRanker"]

_Vector = dict[str, float]

# Scores are rounded before sorting so that documents whose scores are equal in exact
# arithmetic, but differ in the last bits from summation order, still tie and keep the
# candidates' order.
_TIE_DIGITS = 12


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
