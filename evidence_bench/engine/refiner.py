"""Query refinement from feedback: add the words that the results a user liked share.

The refined query is only for retrieval (``expand``); rankers keep scoring against the
original query, so a refinement can widen the candidate pool without drifting the ranking.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from evidence_bench.engine.base import POLARITY, Feedback, RefinedQuery, Refiner
from evidence_bench.engine.evidence_mode import EvidenceMode
from evidence_bench.engine.params import TIE_DIGITS, part_key, require_count
from evidence_bench.engine.ranking import PoolMatrix, marked_positions, pool_matrix
from evidence_bench.engine.text import Analyzer, lexicon, term_counts, tokenize
from evidence_bench.evidence import MAX_QUERY_CHARS, MAX_QUERY_WORDS, Evidence

__all__ = [
    "ExpansionDepth", "LexicalRefiner", "document_text", "fit_terms", "positive_counts",
    "surface_form",
]  # fmt: skip


def document_text(item: Evidence) -> str:
    """The text a refiner reads from a result: title, snippet and extra snippets."""
    return " ".join((item.title, item.snippet, *item.extra_snippets))


@dataclass(frozen=True)
class LexicalRefiner:
    """Appends up to ``max_terms`` terms from positively marked results to the query.

    * Candidate terms come from the title, snippet and extra snippets of results marked
      MORE or RELEVANT, minus every term of the query itself.
    * Each term scores tf x idf: tf summed over the positive results; idf over all
      candidates, ``ln((N + 1) / (df + 1)) + 1`` as in the ranker.
    * A term tied mainly to irrelevant evidence is dropped: its summed tf in results marked
      LESS or IRRELEVANT is at least its summed tf in the positive ones.
    * Terms are appended by score, descending, ties alphabetically; a term that would take
      the query past Brave's limits (400 characters, 50 words) is skipped.

    Without positive feedback nothing is added: the query comes back unchanged. Negative
    feedback alone says what to avoid, and Brave's ``q`` has no reliable way to exclude it.
    With a stemming analyzer terms are scored as stems but sent as words: each stem's most
    frequent surface form in the positive results (ties alphabetically).
    """

    max_terms: int = 4
    analyzer: Analyzer = field(default=tokenize)
    #: idf over this sample plus the candidates instead of the candidates alone
    #: (:class:`evidence_bench.engine.background.Background`), read as ``mode`` reads them
    background: Any = field(default=None, compare=False, repr=False)
    mode: EvidenceMode = EvidenceMode.SNIPPET

    def __post_init__(self) -> None:
        require_count("max_terms", self.max_terms)

    def effective_params(self) -> dict[str, Any]:
        """The settings that decide every refined query; ``max_terms = 0`` adds nothing
        whatever the analyzer, so it is all that is left then."""
        if self.max_terms == 0:
            return {"max_terms": 0}
        if self.background is not None:
            return {"max_terms": self.max_terms, "analyzer": self.analyzer, "idf": "background"}
        return {"max_terms": self.max_terms, "analyzer": self.analyzer}

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        """The query with the added terms, and those terms in the order they were added."""
        return self._refined(
            query, candidates, feedback, self.term_scores(query, candidates, feedback)
        )

    def refine_counted(
        self,
        query: str,
        candidates: Sequence[Evidence],
        feedback: Feedback,
        matrix: PoolMatrix,
        marked: tuple[list[int], list[int]],
    ) -> RefinedQuery:
        """:meth:`refine` where the caller has the candidates' :func:`pool_matrix` of their
        :func:`document_text` and their :func:`marked_positions` (without a background)."""
        pull, push = marked
        ranked = self._counted_scores(query, matrix, pull, push) if pull else []
        return self._refined(query, candidates, feedback, ranked)

    def _refined(
        self,
        query: str,
        candidates: Sequence[Evidence],
        feedback: Feedback,
        ranked: list[tuple[str, float]],
    ) -> RefinedQuery:
        base = query.strip()
        analyzer = self.analyzer
        # only the terms fit_terms reads need their word (a few of the scored ones)
        counted = positive_counts(analyzer, candidates, feedback) if ranked else []
        words = (surface_form(counted, term) for term, _ in ranked)
        terms = fit_terms(base, words, self.max_terms)
        if not terms:
            return RefinedQuery(query=query, added_terms=())
        return RefinedQuery(query=f"{base} {' '.join(terms)}", added_terms=tuple(terms))

    def term_scores(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[tuple[str, float]]:
        """Every eligible term with its tf-idf score, in the order :meth:`refine` adds them."""
        if self.background is not None:
            return self._background_scores(query, candidates, feedback)
        texts = tuple(document_text(item) for item in candidates)
        pull, push = marked_positions([item.key for item in candidates], feedback)
        if not pull:
            return []
        # The candidates' term counts as arrays (pool_matrix, shared with the ranker where
        # the texts are the same): tf summed over the pulled and the pushed results (sums
        # of integers, exact in any order), and the smoothed idf ln((N + 1) / (df + 1)) + 1
        # of the ranker (by math.log), as the refiner has always weighed them.
        return self._counted_scores(query, pool_matrix(self.analyzer, texts), pull, push)

    def _counted_scores(
        self, query: str, matrix: PoolMatrix, pull: list[int], push: list[int]
    ) -> list[tuple[str, float]]:
        marks = np.zeros((2, len(matrix.sizes)))
        marks[0, pull] = 1.0
        marks[1, push] = 1.0
        tf, against = marks @ matrix.counts
        columns = np.flatnonzero(tf > against)
        # tf x idf (tf a whole float: what Python's int * float converts the int to)
        scores = (tf[columns] * matrix.idf[columns]).tolist()
        spelled = matrix.lexicon.spelled
        excluded = _query_terms(self.analyzer, query)
        scored = [
            (term, score)
            for term, score in zip(
                [spelled[number] for number in matrix.numbers[columns].tolist()],
                scores,
                strict=True,
            )
            if term not in excluded
        ]
        return _by_score(scored)

    def _background_scores(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[tuple[str, float]]:
        """:meth:`term_scores` with the background sample's idf."""
        positive: dict[int, int] = {}
        negative: dict[int, int] = {}
        counted: list[tuple[str, list[int]]] = []
        for item in candidates:
            numbers, tf = term_counts(self.analyzer, document_text(item)).tolist()
            counted.append((item.key, numbers))
            label = feedback.get(item.key)
            if label is None or POLARITY[label] == 0:
                continue
            summed = positive if POLARITY[label] > 0 else negative
            for number, count in zip(numbers, tf, strict=True):
                summed[number] = summed.get(number, 0) + count
        frequencies = self.background.frequencies(self.analyzer, self.mode, document_text)
        idf = frequencies.idf(counted)
        spelled, excluded = lexicon(self.analyzer).spelled, _query_terms(self.analyzer, query)
        scored = [
            (spelled[number], tf * idf[number])
            for number, tf in positive.items()
            if spelled[number] not in excluded and negative.get(number, 0) < tf
        ]
        scored.sort(key=lambda pair: (-round(pair[1], TIE_DIGITS), pair[0]))
        return scored


@dataclass(frozen=True)
class ExpansionDepth:
    """``inner``'s refined query, asking for ``depth`` results instead of the session's
    first-search depth (``refiner.expand_depth``): two Brave pages, say, where the first
    search fetched one, so the expanded list reaches past the ~6 new results one page of
    the refined query brings."""

    inner: Refiner
    depth: int

    def __post_init__(self) -> None:
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"expand_depth must be at least 1, got {self.depth}")

    def effective_params(self) -> dict[str, Any]:
        """The inner refiner's key and the depth."""
        return {"inner": part_key(self.inner), "expand_depth": self.depth}

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        refined: RefinedQuery = self.inner.refine(query, candidates, feedback)
        return replace(refined, limit=self.depth)


def positive_counts(
    analyzer: Analyzer, candidates: Sequence[Evidence], feedback: Feedback
) -> list[dict[str, dict[str, int]]]:
    """:func:`_word_counts` of each positively marked result (none without a stemmer: a
    term is its own word): what :func:`surface_form` reads, since a refiner scores stems but
    must send words a search engine understands."""
    if analyzer.stemmer is None:
        return []
    return [
        _word_counts(analyzer, document_text(item))
        for item in candidates
        if (label := feedback.get(item.key)) is not None and POLARITY[label] > 0
    ]


@lru_cache(maxsize=1 << 10)
def _query_terms(analyzer: Analyzer, query: str) -> frozenset[str]:
    """The terms of ``query`` (what a refiner never adds)."""
    return frozenset(analyzer(query))


@lru_cache(maxsize=1 << 12)
def _word_counts(analyzer: Analyzer, text: str) -> dict[str, dict[str, int]]:
    """Each term of ``text`` with the words it came from, counted (not to be changed)."""
    seen: dict[str, Counter[str]] = {}
    for term, word in analyzer.words(text):
        seen.setdefault(term, Counter())[word] += 1
    return {term: dict(counts) for term, counts in seen.items()}


def _by_score(scored: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """``scored`` by score rounded to 12 digits, descending, ties alphabetically.

    Sorted first on the raw scores (tuples compare in C; no key function per term), which
    is that order wherever consecutive scores differ by more than the rounding can join
    (1e-9 is far above it for scores below 1e3); a list with a closer pair is sorted by the
    rounded key itself."""
    ranked = sorted((-score, term) for term, score in scored)
    for (high, _), (low, _) in itertools.pairwise(ranked):
        if 0.0 < low - high < _NEAR or abs(high) >= 1e3:
            return sorted(scored, key=lambda pair: (-round(pair[1], TIE_DIGITS), pair[0]))
    return [(term, -score) for score, term in ranked]


#: Scores closer than this are ordered by their 12-digit rounding (see :func:`_by_score`).
_NEAR = 1e-9


def surface_form(counted: Sequence[dict[str, dict[str, int]]], term: str) -> str:
    """``term``'s most frequent word in ``counted`` (:func:`positive_counts`), ties
    alphabetically; ``term`` itself where none holds it."""
    counts: dict[str, int] = {}
    for found in counted:
        words = found.get(term)
        if words:
            for word, count in words.items():
                counts[word] = counts.get(word, 0) + count
    if not counts:
        return term
    return min(counts.items(), key=lambda pair: (-pair[1], pair[0]))[0]


def fit_terms(query: str, ordered: Iterable[str], max_terms: int) -> list[str]:
    """Up to ``max_terms`` terms, skipping any that would break Brave's query limits."""
    chars = len(query)
    words = len(query.split())
    kept: list[str] = []
    for term in ordered:
        if len(kept) == max_terms:
            break
        if chars + 1 + len(term) > MAX_QUERY_CHARS or words + 1 > MAX_QUERY_WORDS:
            continue
        kept.append(term)
        chars += 1 + len(term)
        words += 1
    return kept
