"""Rocchio relevance feedback in an embedding space (LSA or a dense sentence model).

The TF-IDF ranker moves the query among terms; this one moves it among the embedder's
dimensions, where results that share no word can still be near each other. A sweep reranks
the same candidates under many feedback states, so the embedding of a candidate set is
cached per (embedder, texts); a rank call is then a few small numpy products.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from evidence_bench.engine.base import Feedback
from evidence_bench.engine.embedding import Embedder, LsaEmbedder, Matrix
from evidence_bench.engine.params import TIE_DIGITS, require_weights, scale_free
from evidence_bench.engine.ranking import marked_positions
from evidence_bench.errors import ConfigurationError, FeedbackError
from evidence_bench.evidence import Evidence, renumber

__all__ = ["VectorRocchioRanker"]


def _check(embedder: Embedder, texts: tuple[str, ...], matrix: Matrix) -> Matrix:
    if matrix.ndim != 2 or matrix.shape[0] != len(texts):
        raise ConfigurationError(
            f"embedder {embedder.name!r} returned shape {matrix.shape} for {len(texts)} texts; "
            "expected one row per text"
        )
    return matrix


@lru_cache(maxsize=512)
def _cached_embedding(embedder: Embedder, texts: tuple[str, ...]) -> Matrix:
    """Read-only: the cache hands the same array to every caller."""
    matrix = _check(embedder, texts, np.asarray(embedder.embed(texts), dtype=np.float64))
    matrix.flags.writeable = False
    return matrix


def _hashable(embedder: Embedder) -> bool:
    try:
        hash(embedder)
    except TypeError:
        return False
    return True


def _embedding(embedder: Embedder, texts: tuple[str, ...]) -> Matrix:
    if isinstance(embedder, Hashable) and _hashable(embedder):
        return _cached_embedding(embedder, texts)
    # An unhashable user embedder is asked every time.
    return _check(embedder, texts, np.asarray(embedder.embed(texts), dtype=np.float64))


@dataclass(frozen=True)
class VectorRocchioRanker:
    """Cosine between a Rocchio-moved query vector and the candidates' embeddings.

    The query and each candidate's title and snippet (:attr:`Evidence.text`) are embedded
    together, ``[query, *texts]``, so LSA builds one space for all of them. Feedback
    follows Rocchio (1971), "Relevance feedback in information retrieval", in that space:

        Q' = alpha * Q + beta * mean(d in pull) - gamma * mean(d in push),  then L2-normalized

    with pull the candidates marked MORE or RELEVANT, push those marked LESS or IRRELEVANT
    (UNSURE ignored), matched by canonical URL. Unlike term weights, embedding coordinates
    are signed, so Q' is not clamped at 0. Score is cos(Q', d); ties keep the candidates'
    order.

    Empty feedback ranks by cos(Q, d) (the initial ranking and the no-feedback control).
    Feedback in which no mark pulls or pushes a candidate (only UNSURE, or only URLs that
    are not candidates) raises :class:`FeedbackError` rather than pass for a rerank that
    changed nothing.
    """

    alpha: float = 1.0
    beta: float = 0.5
    gamma: float = 0.3
    embedder: Embedder = field(default_factory=LsaEmbedder)

    name = "vector_rocchio"

    def __post_init__(self) -> None:
        require_weights(self, "alpha", "beta", "gamma")
        if not isinstance(self.embedder, Embedder):
            raise ConfigurationError(
                f"embedder must have a name and an embed(texts) method, got {self.embedder!r}"
            )

    def effective_params(self) -> dict[str, Any]:
        """The settings that decide every ranking, (alpha, beta, gamma) in canonical form:
        rankers with equal effective params rank any candidates alike under any feedback.

        Q' is L2-normalized before the cosine, so a common factor c > 0 on (alpha, beta,
        gamma) changes neither Q'/|Q'| nor any score: the weights are divided by the first
        that is not 0 (:func:`scale_free`). Q' is not clamped, so unlike the TF-IDF ranker
        alpha = beta = 0 < gamma is a ranking of its own, (0, 0, 1): away from the pushed
        results. alpha = 0 < beta is (0, 1, gamma/beta); all three 0 is (0, 0, 0): Q' = 0,
        every score 0, the candidates' order.
        """
        alpha, beta, gamma = scale_free(self.alpha, self.beta, self.gamma)
        return {"alpha": alpha, "beta": beta, "gamma": gamma, "embedder": self.embedder}

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """The candidates sorted by :meth:`score`, descending; rank renumbered 1..n."""
        scores = np.round(self.score(query, candidates, feedback), TIE_DIGITS)
        order = np.argsort(-scores, kind="stable")
        return renumber(candidates[int(i)] for i in order)

    def score(self, query: str, candidates: Sequence[Evidence], feedback: Feedback) -> Matrix:
        """cos(Q', d) for each candidate, in the candidates' order."""
        vectors = _embedding(self.embedder, (query, *(item.text for item in candidates)))
        moved = self._rocchio(vectors[0], vectors[1:], candidates, feedback)
        documents: Matrix = vectors[1:]
        return documents @ moved

    def query_vector(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> Matrix:
        """Q', L2-normalized (all zeros where it vanishes), in the embedder's space."""
        vectors = _embedding(self.embedder, (query, *(item.text for item in candidates)))
        return self._rocchio(vectors[0], vectors[1:], candidates, feedback)

    def _rocchio(
        self,
        query_vector: Matrix,
        documents: Matrix,
        candidates: Sequence[Evidence],
        feedback: Feedback,
    ) -> Matrix:
        # Rocchio (1971): Q' = alpha*Q + beta*mean(pull) - gamma*mean(push), L2-normalized.
        moved: Matrix = self.alpha * query_vector
        if feedback:
            pull, push = marked_positions([item.key for item in candidates], feedback)
            if not pull and not push:
                raise FeedbackError(self._unusable(candidates, feedback))
            if pull:
                moved = moved + self.beta * documents[pull].mean(axis=0)
            if push:
                moved = moved - self.gamma * documents[push].mean(axis=0)
        norm = float(np.linalg.norm(moved))
        if norm == 0.0:
            return np.zeros_like(moved)
        return moved / norm

    def _unusable(self, candidates: Sequence[Evidence], feedback: Feedback) -> str:
        keys = {item.key for item in candidates}
        unsure = sum(1 for key in feedback if key in keys)
        elsewhere = len(feedback) - unsure
        return (
            f"{self.name}: no usable feedback ({len(feedback)} marks: {unsure} unsure, "
            f"{elsewhere} on URLs not among the {len(candidates)} candidates); mark a "
            "candidate more/relevant or less/irrelevant, or rank with empty feedback"
        )
