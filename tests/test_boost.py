"""Boost-relevant: a stable partition of the inner ranking, marked MORE/RELEVANT first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine.base import Label, Ranker
from evidence_bench.engine.boost import BoostRelevant
from evidence_bench.engine.livefetch import LiveFetchRanker
from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
from evidence_bench.evidence import Evidence


def _ev(n: int, title: str = "") -> Evidence:
    return Evidence(title=title or f"doc {n}", url=f"https://example.org/doc/{n}", snippet="")


def _order(ranking: list[Evidence]) -> list[int]:
    return [int(item.url.rsplit("/", 1)[1]) for item in ranking]


def test_name_and_protocol() -> None:
    assert BoostRelevant(ProviderOrderRanker()).name == "provider_order+boost"
    assert BoostRelevant(TfidfRocchioRanker()).name == "tfidf_rocchio+boost"
    assert BoostRelevant(LiveFetchRanker()).name == "livefetch+boost"
    assert isinstance(BoostRelevant(ProviderOrderRanker()), Ranker)


def test_stable_partition_around_provider_order() -> None:
    candidates = [_ev(n) for n in range(6)]
    feedback = {
        candidates[4].key: Label.RELEVANT,
        candidates[1].key: Label.MORE,
        candidates[2].key: Label.LESS,
        candidates[3].key: Label.UNSURE,
        candidates[5].key: Label.IRRELEVANT,
    }
    ranking = BoostRelevant(ProviderOrderRanker()).rank("q", candidates, feedback)
    # MORE and RELEVANT (1, 4) first in provider order; the rest keep provider order.
    assert _order(ranking) == [1, 4, 0, 2, 3, 5]
    assert [item.rank for item in ranking] == [1, 2, 3, 4, 5, 6]


def test_without_feedback_the_inner_ranking_is_unchanged() -> None:
    candidates = [_ev(n) for n in (3, 1, 2)]
    assert _order(BoostRelevant(ProviderOrderRanker()).rank("q", candidates, {})) == [3, 1, 2]


def test_feedback_is_matched_by_canonical_url() -> None:
    candidates = [_ev(0)]
    feedback = {"https://example.org/doc/1": Label.MORE}
    tracked = Evidence("doc 1", "https://EXAMPLE.org/doc/1?utm_medium=x", "")
    ranking = BoostRelevant(ProviderOrderRanker()).rank("q", [candidates[0], tracked], feedback)
    assert [item.url for item in ranking] == [tracked.url, candidates[0].url]


def test_around_tfidf_rocchio() -> None:
    # Query "panels": only "solar panels" matches. Marking "hydro dams" relevant gives it a
    # positive Rocchio score too, but the boost puts it first whatever its score; "wind
    # turbines" shares no term with the query or the pull and stays last.
    candidates = [_ev(0, "wind turbines"), _ev(1, "solar panels"), _ev(2, "hydro dams")]
    feedback = {candidates[2].key: Label.RELEVANT}
    ranking = BoostRelevant(TfidfRocchioRanker()).rank("panels", candidates, feedback)
    assert _order(ranking) == [2, 1, 0]
    assert [item.rank for item in ranking] == [1, 2, 3]


def test_marked_results_keep_the_inner_rankers_order_among_themselves() -> None:
    # TF-IDF puts "solar panels" (matches the query) above "wind turbines" (matches
    # nothing); both are marked, so both are lifted and keep that order.
    candidates = [_ev(0, "wind turbines"), _ev(1, "hydro dams"), _ev(2, "solar panels")]
    feedback = {candidates[0].key: Label.MORE, candidates[2].key: Label.RELEVANT}
    ranking = BoostRelevant(TfidfRocchioRanker(beta=0.0)).rank("panels", candidates, feedback)
    assert _order(ranking) == [2, 0, 1]


_WORDS = ["solar", "panels", "wind", "turbines", "hydro", "grid"]


# No deadline: the first LiveFetch call loads the public suffix list (~1 s when this file
# is a worker's first, on a shared machine), as in test_aliases.py.
@settings(deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_WORDS), max_size=4).map(" ".join), max_size=10),
    st.data(),
    st.sampled_from([ProviderOrderRanker(), TfidfRocchioRanker(), LiveFetchRanker()]),
)
def test_boost_is_a_stable_partition_of_the_inner_ranking(
    titles: list[str], data: st.DataObject, inner: Ranker
) -> None:
    candidates = [
        Evidence(title=title, url=f"https://example.org/doc/{n}", snippet="", rank=n + 1)
        for n, title in enumerate(titles)
    ]
    keys = [item.key for item in candidates] or ["https://example.org/none"]
    feedback = data.draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(list(Label))))
    query = data.draw(st.sampled_from(_WORDS))
    inner_order = [item.url for item in inner.rank(query, candidates, feedback)]
    boosted = BoostRelevant(inner).rank(query, candidates, feedback)
    marked = {
        item.url for item in candidates if feedback.get(item.key) in (Label.MORE, Label.RELEVANT)
    }
    expected = [url for url in inner_order if url in marked] + [
        url for url in inner_order if url not in marked
    ]
    assert [item.url for item in boosted] == expected
    assert [item.rank for item in boosted] == list(range(1, len(candidates) + 1))
