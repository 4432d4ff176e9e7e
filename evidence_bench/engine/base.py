"""The seams of the engine: feedback labels and the ranker, refiner and provider protocols.

A ranker, a refiner or a provider is anything with the method below; the experiment runner
and the CLI depend on these protocols only, so a user can swap in their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from evidence_bench.evidence import Evidence

__all__ = ["POLARITY", "Feedback", "Label", "Ranker", "RefinedQuery", "Refiner", "SearchProvider"]


class Label(StrEnum):
    """A user's judgment of one result.

    MORE and RELEVANT pull the query towards a result, LESS and IRRELEVANT push it away;
    UNSURE is recorded (the user looked) and changes nothing.
    """

    MORE = "more"
    RELEVANT = "relevant"
    LESS = "less"
    IRRELEVANT = "irrelevant"
    UNSURE = "unsure"

    @property
    def polarity(self) -> int:
        """+1 for a pull, -1 for a push, 0 for UNSURE."""
        if self in (Label.MORE, Label.RELEVANT):
            return 1
        if self in (Label.LESS, Label.IRRELEVANT):
            return -1
        return 0


#: Each label's polarity, looked up: ``Label.polarity`` is a property, and rankers, refiners
#: and the memo read one per mark.
POLARITY = {label: label.polarity for label in Label}

#: Feedback keyed by canonical URL (see :func:`evidence_bench.evidence.canonical_url`).
Feedback = Mapping[str, Label]


@dataclass(frozen=True, slots=True)
class RefinedQuery:
    """A refined query and the terms that were added to the original, in order; ``limit``:
    how many results it asks for (None: as many as the session's first search)."""

    query: str
    added_terms: tuple[str, ...]
    limit: int | None = None


@runtime_checkable
class Ranker(Protocol):
    """Orders candidates for a query, given feedback keyed by canonical URL.

    Returns a permutation of ``candidates`` with ``rank`` renumbered 1..n in the new order.
    Ties must break by the candidates' order (the provider's rank), so rankings are
    deterministic. A ranker never invents or drops a candidate.
    """

    name: str

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]: ...


@runtime_checkable
class Refiner(Protocol):
    """Builds the query that ``expand`` sends, from the query, candidates and feedback."""

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery: ...


@runtime_checkable
class SearchProvider(Protocol):
    """Fetches normalized, deduplicated evidence for a query, in the provider's order."""

    def search(self, query: str, *, limit: int) -> list[Evidence]: ...
