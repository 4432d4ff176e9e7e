"""My ranker: results by the words they share with the query and, given feedback, with the
results the user marked relevant; the provider's order breaks ties."""

from collections.abc import Mapping, Sequence

from evidence_bench import Evidence, Label

PULL = (Label.MORE, Label.RELEVANT)


def _words(text: str) -> set[str]:
    return {word for word in text.lower().split() if len(word) > 3}


class MyRanker:
    """A :class:`evidence_bench.Ranker`: a ``name`` and ``rank(query, candidates, feedback)``,
    which returns the candidates reordered, none added or dropped."""

    name = "my_ranker"

    def __init__(self, feedback_weight: float = 0.5) -> None:
        self.feedback_weight = feedback_weight

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Mapping[str, Label]
    ) -> list[Evidence]:
        asked = _words(query)
        liked: set[str] = set()
        for item in candidates:
            if feedback.get(item.key) in PULL:
                liked |= _words(item.text)

        def score(item: Evidence) -> float:
            words = _words(item.text)
            return len(asked & words) + self.feedback_weight * len(liked & words)

        # sorted() is stable: equal scores keep the provider's order
        return sorted(candidates, key=score, reverse=True)
