"""Query refinement by Rocchio in term space: the words the moved query vector weighs most.

Where :class:`~evidence_bench.engine.refiner.LexicalRefiner` scores the words of liked
results by tf-idf, this refiner builds the Rocchio query vector over raw term frequencies
and adds its heaviest new terms, so negative feedback lowers a term by degree instead of
vetoing it. The weights travel with the refined query for the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evidence_bench.engine.base import Feedback, RefinedQuery
from evidence_bench.engine.params import TIE_DIGITS, require_count, require_weights
from evidence_bench.engine.ranking import marked_positions
from evidence_bench.engine.refiner import document_text, fit_terms, positive_counts, surface_form
from evidence_bench.engine.text import Analyzer, lexicon, term_counts, tokenize
from evidence_bench.evidence import Evidence

__all__ = ["REPORTED_WEIGHTS", "TermRefinedQuery", "TermRocchioRefiner"]

#: How many (term, weight) pairs a :class:`TermRefinedQuery` keeps for the report.
REPORTED_WEIGHTS = 20


@dataclass(frozen=True, slots=True)
class TermRefinedQuery(RefinedQuery):
    """A refined query with the heaviest terms of its Rocchio vector, for the report.

    ``weights`` holds up to 20 (term, weight) pairs, heaviest first, ties alphabetical;
    query terms included, so the report shows what the query kept and what it gained.
    Terms are the analyzer's (stems by default); ``added_terms`` are the words sent.
    """

    weights: tuple[tuple[str, float], ...] = ()


def _counts(analyzer: Analyzer, text: str) -> dict[int, int]:
    """``text``'s raw term counts by term number (:func:`term_counts`)."""
    return dict(zip(*term_counts(analyzer, text).tolist(), strict=True))


def _mean(counters: Sequence[Mapping[int, int]]) -> dict[int, float]:
    total: Counter[int] = Counter()
    for counts in counters:
        total.update(counts)
    return {term: count / len(counters) for term, count in total.items()}


@dataclass(frozen=True)
class TermRocchioRefiner:
    """Appends the ``max_terms`` heaviest new terms of the Rocchio query vector.

    Over the analyzer's terms of each result's title, snippet and extra snippets, with raw
    term frequencies (Rocchio 1971; the positive-and-negative form of Salton & Buckley 1990):

        w(t) = freq_query(t) + beta * meanFreq_pull(t) - gamma * meanFreq_push(t)

    pull being the candidates marked MORE or RELEVANT and push those marked LESS or
    IRRELEVANT (UNSURE ignored). Negative weights are clamped to 0 and zero weights dropped
    (a negative term weight has no meaning in a query; IIR §9.1.1). Terms not already in the
    query are appended by weight, descending, ties alphabetically; a term that would take
    the query past Brave's limits (400 characters, 50 words) is skipped. Without a pull
    nothing new has a positive weight, and the query comes back unchanged.

    With a stemming analyzer the weights are over stems, and a stem is sent as its most
    frequent word in the pulled results (ties alphabetically), so Brave gets words.
    """

    max_terms: int = 4
    beta: float = 0.75
    gamma: float = 0.15
    analyzer: Analyzer = field(default=tokenize)

    def __post_init__(self) -> None:
        require_count("max_terms", self.max_terms)
        require_weights(self, "beta", "gamma")

    def effective_params(self) -> dict[str, Any]:
        """The settings that decide every refined query (the words sent).

        beta = 0 gives no new term a positive weight (w(t) = −gamma·meanFreq_push(t) ≤ 0),
        and max_terms = 0 adds none: either way the query comes back unchanged whatever the
        rest, so both are ``{max_terms: 0}``. Otherwise (beta, gamma) are kept as given. Query
        terms are never added, so only new terms decide the query, weighing
        beta·meanFreq_pull − gamma·meanFreq_push: a common factor on (beta, gamma) keeps
        their order in exact arithmetic but scales the weights, and the clamp and the ties
        are decided on weights rounded to 12 decimals, so near-equal ones could fall
        differently.
        """
        if self.max_terms == 0 or self.beta == 0:
            return {"max_terms": 0}
        return {
            "max_terms": self.max_terms,
            "beta": self.beta,
            "gamma": self.gamma,
            "analyzer": self.analyzer,
        }

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> TermRefinedQuery:
        """The query with the added words, those words in order, and the top 20 weights.

        Where :meth:`effective_params` says the query comes back unchanged (beta = 0 or
        max_terms = 0) it does, with no weights: refiners with equal effective params are
        one (the memo shares their refined queries), so nothing they return may differ."""
        if self.max_terms == 0 or self.beta == 0:
            return TermRefinedQuery(query=query, added_terms=(), weights=())
        weights = self.weights(query, candidates, feedback)
        reported = tuple(list(weights.items())[:REPORTED_WEIGHTS])
        excluded = set(self.analyzer(query))
        counted = positive_counts(self.analyzer, candidates, feedback)
        new = (surface_form(counted, term) for term in weights if term not in excluded)
        base = query.strip()
        terms = fit_terms(base, new, self.max_terms)
        if not terms:
            return TermRefinedQuery(query=query, added_terms=(), weights=reported)
        return TermRefinedQuery(
            query=f"{base} {' '.join(terms)}", added_terms=tuple(terms), weights=reported
        )

    def weights(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> dict[str, float]:
        """w(t) > 0 for every term, heaviest first, ties alphabetical (query terms too)."""
        marked = marked_positions([item.key for item in candidates], feedback)
        pull, push = (
            [_counts(self.analyzer, document_text(candidates[d])) for d in side] for side in marked
        )
        # Rocchio (1971): w(t) = q(t) + beta * mean(pull)(t) - gamma * mean(push)(t).
        weight = {term: float(count) for term, count in _counts(self.analyzer, query).items()}
        for counters, coefficient in ((pull, self.beta), (push, -self.gamma)):
            if not counters:
                continue
            for term, mean in _mean(counters).items():
                weight[term] = weight.get(term, 0.0) + coefficient * mean
        # Clamp and drop on the rounded weight: 0.75 * 0.2 - 0.15 * 1.0 is 2.8e-17, not 0.
        spelled = lexicon(self.analyzer).spelled
        kept = [(spelled[t], value) for t, value in weight.items() if round(value, TIE_DIGITS) > 0]
        kept.sort(key=lambda pair: (-round(pair[1], TIE_DIGITS), pair[0]))
        return dict(kept)
