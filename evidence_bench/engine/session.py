"""An interactive search: one retrieval, feedback marks, local reranking, explicit expansion.

The session searches once when it starts and again only when :meth:`SearchSession.expand`
is called, so marking and reranking are free and offline. Feedback is keyed by canonical URL,
so a mark follows the page across reranks and expansions. Rankers always score against the
original query; the refined query only retrieves more candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evidence_bench.engine.base import Label, Ranker, RefinedQuery, Refiner, SearchProvider
from evidence_bench.engine.ranking import TfidfRocchioRanker
from evidence_bench.engine.refiner import LexicalRefiner
from evidence_bench.errors import ConfigurationError, FeedbackError
from evidence_bench.evidence import Evidence, canonical_url, dedupe, validate_query

__all__ = ["Expansion", "SearchSession"]


@dataclass(frozen=True, slots=True)
class Expansion:
    """What one :meth:`SearchSession.expand` did: the query sent, how many new candidates
    it brought, and the ranking after merging them."""

    refined: RefinedQuery
    added: int
    ranking: list[Evidence]


class SearchSession:
    """Holds the candidates of one query and the user's feedback on them.

    ``candidates`` are in the provider's order (later expansions appended), deduplicated by
    canonical URL, ``rank`` = position. ``ranking`` is the list as last displayed, the one
    that positions in :meth:`mark` refer to. ``feedback`` maps canonical URL to the last
    label given. Pass ``candidates`` to start from known results without a search.
    """

    def __init__(
        self,
        query: str,
        provider: SearchProvider,
        *,
        ranker: Ranker | None = None,
        refiner: Refiner | None = None,
        limit: int = 10,
        candidates: Sequence[Evidence] | None = None,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"limit must be an integer >= 1, got {limit!r}")
        self.query: str = validate_query(query)
        self.provider = provider
        self.ranker: Ranker = ranker if ranker is not None else TfidfRocchioRanker()
        self.refiner: Refiner = refiner if refiner is not None else LexicalRefiner()
        self.limit = limit
        found = provider.search(self.query, limit=limit) if candidates is None else candidates
        self.candidates: list[Evidence] = dedupe(found)
        self._keys: tuple[list[Evidence], int, frozenset[str]] | None = None
        self.feedback: dict[str, Label] = {}
        self.refined_queries: list[RefinedQuery] = []
        self.ranking: list[Evidence] = self.ranker.rank(self.query, self.candidates, {})

    def mark(self, label: Label, *targets: int | str) -> list[str]:
        """Record ``label`` for each target; return their canonical URLs, in order.

        An ``int`` is a 1-based position in :attr:`ranking`; a ``str`` is a URL of a
        candidate (any spelling with the same canonical URL). Every target is checked before
        any is recorded, so a bad one leaves the feedback as it was.
        """
        if len(targets) == 1 and type(targets[0]) is str:  # one URL: the common case
            key = canonical_url(targets[0])
            if key in self._candidate_keys():
                self.feedback[key] = label
                return [key]
        if not targets:
            raise FeedbackError("nothing to mark: give at least one position or URL")
        keys = [self._resolve(target) for target in targets]
        for key in keys:
            self.feedback[key] = label
        return list(dict.fromkeys(keys))

    def show(self) -> list[Evidence]:
        """Rerank the current candidates with all feedback so far; no search."""
        self.ranking = self.ranker.rank(self.query, self.candidates, self.feedback)
        return self.ranking

    def expand(self) -> Expansion:
        """Search once with a refined query (as deep as it asks, else :attr:`limit`),
        append the results not yet held, rerank."""
        refined = self.refiner.refine(self.query, self.candidates, self.feedback)
        found = self.provider.search(refined.query, limit=refined.limit or self.limit)
        held = {item.key for item in self.candidates}
        new = [item for item in dedupe(found) if item.key not in held]
        self.candidates = dedupe([*self.candidates, *new])
        self.refined_queries.append(refined)
        return Expansion(refined=refined, added=len(new), ranking=self.show())

    def _candidate_keys(self) -> frozenset[str]:
        """The canonical URLs of :attr:`candidates`, rebuilt when the list is replaced or
        changes length (a session replaces it on expand)."""
        held = self.candidates
        cached = self._keys
        if cached is None or cached[0] is not held or cached[1] != len(held):
            cached = self._keys = (held, len(held), frozenset(item.key for item in held))
        return cached[2]

    def _resolve(self, target: int | str) -> str:
        if isinstance(target, bool):
            raise FeedbackError(f"not a position or URL: {target!r}")
        if isinstance(target, int):
            if not 1 <= target <= len(self.ranking):
                raise FeedbackError(
                    f"no result at position {target}; the list has {len(self.ranking)}"
                )
            return self.ranking[target - 1].key
        if isinstance(target, str):
            key = canonical_url(target)
            if key in self._candidate_keys():
                return key
            raise FeedbackError(
                f"no result with URL {target!r} among the {len(self.candidates)} candidates"
            )
        raise FeedbackError(f"not a position or URL: {target!r}")
