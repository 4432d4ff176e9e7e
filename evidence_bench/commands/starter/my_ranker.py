"""An example ranker: replace its ``rank`` with your own.

A ranker is any object with a ``name`` and a ``rank(query, candidates, feedback)`` method
(the protocol :class:`evidence_bench.Ranker`). ``rank`` returns every candidate exactly
once, in the new order, with ``rank`` renumbered 1..n; ties keep the candidates' order
(the search provider's), so rankings are deterministic. ``feedback`` maps a result's
canonical URL (``Evidence.key``) to the user's :class:`evidence_bench.Label`; it is empty
before the user has marked anything, and for the no-feedback control.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from evidence_bench import Evidence, Label

_PULL = (Label.MORE, Label.RELEVANT)
_PUSH = (Label.LESS, Label.IRRELEVANT)


class MyRanker:
    """Score = words shared with the query + ``feedback_weight`` x (words shared with the
    results the user pulled - words shared with those they pushed away)."""

    name = "my_ranker"

    def __init__(self, feedback_weight: float = 0.5) -> None:
        self.feedback_weight = feedback_weight

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Mapping[str, Label]
    ) -> list[Evidence]:
        asked = _words(query)
        pulled = {w for c in candidates if feedback.get(c.key) in _PULL for w in _words(c)}
        pushed = {w for c in candidates if feedback.get(c.key) in _PUSH for w in _words(c)}

        def score(candidate: Evidence) -> float:
            words = _words(candidate)
            shared = len(words & pulled) - len(words & pushed)
            return len(words & asked) + self.feedback_weight * shared

        scores = [score(candidate) for candidate in candidates]
        order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        return [candidates[i].with_rank(rank) for rank, i in enumerate(order, start=1)]


def _words(item: str | Evidence) -> set[str]:
    text = item if isinstance(item, str) else f"{item.title} {item.snippet}"
    return set(re.findall(r"[a-z0-9]+", text.lower()))
