"""SearchSession: marking by position and URL, reranking without search, one-call expansion."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from evidence_bench.engine.base import (
    Feedback,
    Label,
    Ranker,
    RefinedQuery,
    Refiner,
    SearchProvider,
)
from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
from evidence_bench.engine.session import Expansion, SearchSession
from evidence_bench.errors import FeedbackError, QueryError
from evidence_bench.evidence import Evidence


def _ev(path: str, title: str, snippet: str = "") -> Evidence:
    return Evidence(title=title, url=f"https://example.org/{path}", snippet=snippet)


class CountingProvider:
    """Answers from a fixed table (default: the first list) and records every call."""

    def __init__(self, *answers: list[Evidence]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        self.calls.append((query, limit))
        answer = self.answers[min(len(self.calls), len(self.answers)) - 1]
        return answer[:limit]


class ReversingRanker:
    """Records the queries it is given; ranks in reverse candidate order."""

    name = "reversing"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        self.queries.append(query)
        return ProviderOrderRanker().rank(query, list(reversed(candidates)), feedback)


class FixedRefiner:
    def __init__(self, terms: tuple[str, ...]) -> None:
        self.terms = terms
        self.seen: list[tuple[str, dict[str, Label]]] = []

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        self.seen.append((query, dict(feedback)))
        return RefinedQuery(f"{query} {' '.join(self.terms)}", self.terms)


FIRST = [
    _ev("a", "jaguar car dealer"),
    _ev("b", "jaguar cat habitat"),
    _ev("c", "jaguar car engine"),
    _ev("d", "cat fur savanna"),
]
SECOND = [
    _ev("b/?utm_source=news", "jaguar cat habitat again"),  # same page as b
    _ev("e", "jaguar cat prey"),
    _ev("c#reviews", "jaguar car engine"),  # same page as c
    _ev("f", "savanna cat hunting"),
]


def _session(
    ranker: Ranker | None = None, refiner: Refiner | None = None, limit: int = 10
) -> tuple[SearchSession, CountingProvider]:
    provider = CountingProvider(FIRST, SECOND)
    session = SearchSession("jaguar", provider, ranker=ranker, refiner=refiner, limit=limit)
    return session, provider


def test_start_searches_once_and_ranks_with_the_ranker() -> None:
    ranker = ReversingRanker()
    session, provider = _session(ranker=ranker, limit=7)
    assert provider.calls == [("jaguar", 7)]
    assert [item.url for item in session.candidates] == [item.url for item in FIRST]
    assert [item.rank for item in session.candidates] == [1, 2, 3, 4]
    assert [item.title for item in session.ranking] == [item.title for item in reversed(FIRST)]
    assert session.feedback == {}
    assert session.refined_queries == []
    assert isinstance(provider, SearchProvider)


def test_given_candidates_mean_no_search_and_are_deduplicated() -> None:
    provider = CountingProvider(FIRST)
    given = [*FIRST, _ev("a/", "duplicate of a")]
    session = SearchSession("jaguar", provider, candidates=given)
    assert provider.calls == []
    assert [item.key for item in session.candidates] == [item.key for item in FIRST]


def test_default_ranker_is_tfidf_rocchio() -> None:
    session, _ = _session()
    assert isinstance(session.ranker, TfidfRocchioRanker)


def test_invalid_query_is_refused_before_any_search() -> None:
    provider = CountingProvider(FIRST)
    with pytest.raises(QueryError):
        SearchSession("   ", provider)
    assert provider.calls == []


def test_mark_by_position_refers_to_the_list_as_displayed() -> None:
    session, _ = _session(ranker=ReversingRanker())
    keys = session.mark(Label.RELEVANT, 1, 3)
    assert keys == ["https://example.org/d", "https://example.org/b"]
    assert session.feedback == {
        "https://example.org/d": Label.RELEVANT,
        "https://example.org/b": Label.RELEVANT,
    }


def test_mark_by_url_is_canonicalized() -> None:
    session, _ = _session()
    keys = session.mark(Label.LESS, "HTTPS://Example.org/c/?utm_campaign=x#frag")
    assert keys == ["https://example.org/c"]
    assert session.feedback == {"https://example.org/c": Label.LESS}


def test_last_label_wins() -> None:
    session, _ = _session(ranker=ProviderOrderRanker())
    session.mark(Label.RELEVANT, 2)
    session.mark(Label.IRRELEVANT, "https://example.org/b")
    session.mark(Label.UNSURE, 1)
    assert session.feedback == {
        "https://example.org/b": Label.IRRELEVANT,
        "https://example.org/a": Label.UNSURE,
    }


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ((1, 12), "no result at position 12; the list has 4"),
        ((0,), "no result at position 0; the list has 4"),
        ((2, -1), "no result at position -1; the list has 4"),
        ((1, "https://example.org/zzz"), "no result with URL 'https://example.org/zzz'"),
        ((), "at least one position or URL"),
    ],
)
def test_a_bad_target_raises_and_nothing_is_applied(
    targets: tuple[int | str, ...], message: str
) -> None:
    session, _ = _session()
    session.mark(Label.MORE, 3)
    with pytest.raises(FeedbackError) as caught:
        session.mark(Label.LESS, *targets)
    assert message in str(caught.value)
    assert session.feedback == {session.ranking[2].key: Label.MORE}


def test_show_reranks_with_feedback_and_does_not_search() -> None:
    session, provider = _session()
    before = [item.key for item in session.ranking]
    session.mark(Label.RELEVANT, "https://example.org/d")
    # positions keep referring to the list as displayed until show() is called
    assert [item.key for item in session.ranking] == before
    shown = session.show()
    assert shown is session.ranking
    assert shown[0].key == "https://example.org/d"
    assert [item.rank for item in shown] == [1, 2, 3, 4]
    assert len(provider.calls) == 1
    expected = TfidfRocchioRanker().rank("jaguar", session.candidates, session.feedback)
    assert shown == expected


def test_expand_searches_once_merges_only_new_pages_and_keeps_feedback() -> None:
    ranker = ReversingRanker()
    refiner = FixedRefiner(("cat", "habitat"))
    session, provider = _session(ranker=ranker, refiner=refiner, limit=5)
    session.mark(Label.RELEVANT, "https://example.org/b")
    expansion = session.expand()

    assert isinstance(expansion, Expansion)
    assert provider.calls == [("jaguar", 5), ("jaguar cat habitat", 5)]
    assert refiner.seen == [("jaguar", {"https://example.org/b": Label.RELEVANT})]
    assert expansion.refined == RefinedQuery("jaguar cat habitat", ("cat", "habitat"))
    assert session.refined_queries == [expansion.refined]
    assert expansion.added == 2
    keys = [item.key for item in session.candidates]
    assert keys == [f"https://example.org/{path}" for path in "abcdef"]
    assert [item.rank for item in session.candidates] == [1, 2, 3, 4, 5, 6]
    # the held copy of b is kept, not the re-retrieved one
    assert session.candidates[1].title == "jaguar cat habitat"
    assert session.feedback == {"https://example.org/b": Label.RELEVANT}
    assert expansion.ranking is session.ranking
    assert [item.key for item in expansion.ranking] == list(reversed(keys))
    # rankers always get the original query
    assert ranker.queries == ["jaguar", "jaguar"]


def test_expand_with_default_refiner_uses_positive_feedback() -> None:
    session, provider = _session()
    session.mark(Label.MORE, "https://example.org/d")
    expansion = session.expand()
    assert expansion.refined.added_terms
    assert provider.calls[1][0] == expansion.refined.query
    assert provider.calls[1][0].startswith("jaguar ")
    assert len(provider.calls) == 2


def test_expand_adding_nothing_new() -> None:
    provider = CountingProvider(FIRST, FIRST)
    session = SearchSession("jaguar", provider)
    expansion = session.expand()
    assert expansion.added == 0
    assert expansion.refined == RefinedQuery("jaguar", ())
    assert len(session.candidates) == 4
    assert len(provider.calls) == 2


def test_positions_after_expand_refer_to_the_new_ranking() -> None:
    session, _ = _session(ranker=ReversingRanker(), refiner=FixedRefiner(("cat",)))
    session.expand()
    assert session.mark(Label.RELEVANT, 1) == ["https://example.org/f"]
    with pytest.raises(FeedbackError, match="the list has 6"):
        session.mark(Label.RELEVANT, 7)
