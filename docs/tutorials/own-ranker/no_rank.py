"""A ranker whose method is misnamed: the plan refuses it before any query runs."""

from collections.abc import Mapping, Sequence

from evidence_bench import Evidence, Label


class NoRank:
    name = "no_rank"

    def __init__(self, feedback_weight: float = 0.5) -> None:
        self.feedback_weight = feedback_weight

    def rerank(  # the protocol's method is rank
        self, query: str, candidates: Sequence[Evidence], feedback: Mapping[str, Label]
    ) -> list[Evidence]:
        return list(candidates)
