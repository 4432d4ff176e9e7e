"""Boost-relevant: what the user asked for more of comes first, whatever the ranker said.

A wrapper rather than a ranker term, so it composes with any :class:`Ranker` and its effect
can be measured against the same ranker unwrapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evidence_bench.engine.base import Feedback, Ranker
from evidence_bench.engine.params import part_key
from evidence_bench.evidence import Evidence, renumber

__all__ = ["BoostRelevant"]


@dataclass
class BoostRelevant:
    """``inner``'s ranking, then a stable partition: results the user marked MORE or
    RELEVANT (by canonical URL) first, the rest after; each group keeps ``inner``'s order.

    Not frozen: :class:`Ranker` declares ``name`` a settable attribute, and a frozen
    dataclass field is read-only to mypy. Treat instances as immutable all the same.
    """

    inner: Ranker
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"{self.inner.name}+boost"

    def effective_params(self) -> dict[str, Any]:
        """The inner ranker's key: the partition depends only on its ranking and the marks."""
        return {"inner": part_key(self.inner)}

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """A permutation of ``candidates`` with rank renumbered 1..n."""
        ranked = self.inner.rank(query, candidates, feedback)
        if not feedback:
            ordered = ranked
        else:
            boosted: list[Evidence] = []
            rest: list[Evidence] = []
            for item in ranked:
                label = feedback.get(item.key)
                (boosted if label is not None and label.polarity > 0 else rest).append(item)
            ordered = boosted + rest
        return renumber(ordered)
