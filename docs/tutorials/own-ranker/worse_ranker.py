"""A change to MyRanker with a bug: it sorts the wrong way round."""

from collections.abc import Mapping, Sequence

from my_ranker import MyRanker

from evidence_bench import Evidence, Label


class WorseRanker(MyRanker):
    name = "worse_ranker"

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Mapping[str, Label]
    ) -> list[Evidence]:
        return super().rank(query, candidates, feedback)[::-1]
