"""The analyzer and the local rankers: TF-IDF weights, Rocchio feedback, ties, invariants."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_bench.engine.base import Label, Ranker
from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
from evidence_bench.engine.text import STOP_WORDS, Analyzer, tokenize
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence


def _ev(n: int, title: str, snippet: str = "") -> Evidence:
    return Evidence(title=title, url=f"https://example.org/doc/{n}", snippet=snippet, rank=n + 1)


def _order(ranking: list[Evidence]) -> list[int]:
    return [int(item.url.rsplit("/", 1)[1]) for item in ranking]


# --- analyzer -------------------------------------------------------------------------------


def test_tokenize_lowercases_splits_and_drops_stop_words_and_single_characters() -> None:
    assert Analyzer(stemmer=None)("What is TF-IDF? A 2-step guide, in 2024 (v2)") == [
        "tf",
        "idf",
        "step",
        "guide",
        "2024",
        "v2",
    ]


def test_tokenize_keeps_repeats_and_non_ascii_letters() -> None:
    assert tokenize("Café café_au_lait") == ["café", "café", "au", "lait"]


def test_analyzer_options() -> None:
    keep_case = Analyzer(lowercase=False, stemmer=None)
    assert keep_case("The Rocchio method") == ["Rocchio", "method"]
    assert Analyzer(stop_words=None, stemmer=None)("what is it") == ["what", "is", "it"]
    assert Analyzer(min_length=4, stemmer=None)("tf idf cosine") == ["cosine"]


def test_the_default_analyzer_stems_with_snowball_english() -> None:
    # Snowball English (Porter 2): the inflections of one word meet in one term.
    assert tokenize("Heated wings; heating of a wing") == ["heat", "wing", "heat", "wing"]
    assert tokenize("aerodynamics aerodynamic") == ["aerodynam", "aerodynam"]
    assert Analyzer(stemmer="porter")("generalizations") == ["gener"]
    assert Analyzer(stemmer="english").words("heated wings") == [
        ("heat", "heated"),
        ("wing", "wings"),
    ]


def test_each_analyzer_keeps_its_own_terms_for_a_token() -> None:
    # Every analyzer remembers each token's term (or that it drops it) once per process; the
    # same tokens under other settings still get their own terms, in any order of calls.
    text = "The wings were heated; THE WINGS"
    analyzers = [
        (Analyzer(), ["wing", "heat", "wing"]),
        (Analyzer(stemmer=None), ["wings", "heated", "wings"]),
        (
            Analyzer(stop_words=None, stemmer=None),
            ["the", "wings", "were", "heated", "the", "wings"],
        ),
        (Analyzer(lowercase=False, stemmer=None), ["wings", "heated", "WINGS"]),
        (Analyzer(min_length=6, stemmer="porter"), ["heat"]),
    ]
    for _ in range(2):
        for analyzer, terms in analyzers:
            assert analyzer.terms(text) == tuple(terms)
            assert [term for term, _ in analyzer.words(text)] == terms
    # Snowball's stemmers do not fold case: without lowercasing, "WINGS" stays a term of its own
    assert Analyzer(lowercase=False).words("WINGS wings") == [("WINGS", "WINGS"), ("wing", "wings")]


def test_an_unknown_stemmer_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown stemmer 'klingon' \(valid: .*english"):
        Analyzer(stemmer="klingon")


def test_stop_words_cover_question_words_and_auxiliaries() -> None:
    assert {"what", "how", "the", "is", "of", "were", "they"} <= STOP_WORDS
    assert 80 <= len(STOP_WORDS) <= 150


# --- provider order -------------------------------------------------------------------------


def test_provider_order_keeps_order_and_renumbers() -> None:
    candidates = [_ev(5, "b"), _ev(2, "a"), _ev(9, "c")]
    ranking = ProviderOrderRanker().rank("a", candidates, {candidates[2].key: Label.MORE})
    assert _order(ranking) == [5, 2, 9]
    assert [item.rank for item in ranking] == [1, 2, 3]


def test_rankers_satisfy_the_protocol() -> None:
    assert isinstance(ProviderOrderRanker(), Ranker)
    assert isinstance(TfidfRocchioRanker(), Ranker)
    assert TfidfRocchioRanker().name == "tfidf_rocchio"
    assert ProviderOrderRanker().name == "provider_order"


# --- TF-IDF and Rocchio ---------------------------------------------------------------------

# Three documents; query "panels". df: solar 2, energy 1, panels 1, wind 1, turbines 1.
_SMALL = [_ev(0, "solar energy"), _ev(1, "solar panels"), _ev(2, "wind turbines")]
_IDF_DF1 = math.log(4 / 2) + 1  # ln((N + 1) / (df + 1)) + 1 with N = 3, df = 1
_IDF_DF2 = math.log(4 / 3) + 1  # df = 2


def test_score_without_feedback_matches_hand_computed_cosine() -> None:
    # q = (panels: 1); d1 = (solar: idf2, panels: idf1) / |d1|; cos = idf1 / |d1|.
    expected = _IDF_DF1 / math.sqrt(_IDF_DF2**2 + _IDF_DF1**2)
    scores = TfidfRocchioRanker().score("panels", _SMALL, {})
    assert scores == pytest.approx([0.0, expected, 0.0])


def test_score_with_relevant_feedback_matches_hand_computed_rocchio() -> None:
    # Mark d0 relevant, gamma = 0: q' = q + 0.75 * d0, with d0 = (solar: s, energy: e) / n
    # and d1 = (solar: s, panels: e) / n, where s = idf(df 2), e = idf(df 1), n = |d0| = |d1|.
    s, e = _IDF_DF2, _IDF_DF1
    n = math.sqrt(s**2 + e**2)
    q_norm = math.sqrt(1 + 0.75**2)  # q and d0 are orthogonal unit vectors
    d0_score = (0.75 * (s / n) ** 2 + 0.75 * (e / n) ** 2) / q_norm
    d1_score = (1 * e / n + 0.75 * (s / n) ** 2) / q_norm
    ranker = TfidfRocchioRanker(alpha=1.0, beta=0.75, gamma=0.0)
    scores = ranker.score("panels", _SMALL, {_SMALL[0].key: Label.RELEVANT})
    assert scores == pytest.approx([d0_score, d1_score, 0.0])


def test_sublinear_tf() -> None:
    # "kernel kernel" has tf 2 -> weight (1 + ln 2) * idf against "svm" with tf 1.
    docs = [_ev(0, "kernel kernel svm"), _ev(1, "other words")]
    idf = math.log(3 / 2) + 1
    tf_kernel = 1 + math.log(2)
    expected = tf_kernel * idf / math.sqrt((tf_kernel * idf) ** 2 + idf**2)
    assert TfidfRocchioRanker().score("kernel", docs, {})[0] == pytest.approx(expected)


# Query "jaguar cat". jaguar and cat both have df 3 and docs 1-4 have the same shape (one
# query term with df 3, one term with df 2, one with df 1), so they tie and keep provider
# order: 0, 1, 2, 3, 4.
_JAGUAR = [
    _ev(0, "jaguar cat"),
    _ev(1, "jaguar car dealer"),
    _ev(2, "jaguar car engine"),
    _ev(3, "cat fur habitat"),
    _ev(4, "cat fur savanna"),
]


def test_no_feedback_ties_keep_provider_order() -> None:
    ranking = TfidfRocchioRanker().rank("jaguar cat", _JAGUAR, {})
    assert _order(ranking) == [0, 1, 2, 3, 4]
    assert [item.rank for item in ranking] == [1, 2, 3, 4, 5]


def test_relevant_moves_the_document_and_its_neighbours_up() -> None:
    ranking = TfidfRocchioRanker().rank("jaguar cat", _JAGUAR, {_JAGUAR[4].key: Label.RELEVANT})
    order = _order(ranking)
    # The marked document rises from 5th above every document it tied with.
    assert order.index(4) < min(order.index(1), order.index(2), order.index(3))
    # Its neighbour (shares cat, fur) passes the car documents that tied with it.
    assert order.index(3) < order.index(1)
    assert order.index(3) < order.index(2)


def test_more_pulls_like_relevant() -> None:
    ranker = TfidfRocchioRanker()
    key = _JAGUAR[4].key
    assert ranker.score("jaguar cat", _JAGUAR, {key: Label.MORE}) == ranker.score(
        "jaguar cat", _JAGUAR, {key: Label.RELEVANT}
    )


@pytest.mark.parametrize("label", [Label.IRRELEVANT, Label.LESS])
def test_irrelevant_moves_the_document_and_its_neighbours_down(label: Label) -> None:
    # Pushing doc 1 lowers the weight of "jaguar" in q' (car and dealer clamp to 0), so the
    # jaguar-only documents fall below the cat-only ones they tied with.
    ranking = TfidfRocchioRanker().rank("jaguar cat", _JAGUAR, {_JAGUAR[1].key: label})
    assert _order(ranking) == [0, 3, 4, 1, 2]


def test_push_terms_not_in_the_query_are_clamped_to_zero() -> None:
    # Only a push, on a one-term query: q' = (1 - gamma * w) * jaguar and every other term
    # would be negative, so q' keeps q's direction and the scores do not change.
    ranker = TfidfRocchioRanker()
    before = ranker.score("jaguar", _JAGUAR, {})
    after = ranker.score("jaguar", _JAGUAR, {_JAGUAR[1].key: Label.IRRELEVANT})
    assert after == pytest.approx(before)


def test_unsure_changes_nothing() -> None:
    ranker = TfidfRocchioRanker()
    feedback = {item.key: Label.UNSURE for item in _JAGUAR[1:]}
    assert ranker.score("jaguar cat", _JAGUAR, feedback) == ranker.score("jaguar cat", _JAGUAR, {})
    assert ranker.rank("jaguar cat", _JAGUAR, feedback) == ranker.rank("jaguar cat", _JAGUAR, {})


def test_feedback_is_matched_by_canonical_url() -> None:
    candidates = [
        Evidence(title="jaguar cat", url="https://example.org/a", snippet=""),
        Evidence(
            title="cat fur savanna", url="https://EXAMPLE.org/b/?utm_source=x#top", snippet=""
        ),
        Evidence(title="jaguar car dealer", url="https://example.org/c", snippet=""),
    ]
    ranker = TfidfRocchioRanker()
    by_key = ranker.score("jaguar", candidates, {"https://example.org/b": Label.RELEVANT})
    assert by_key != ranker.score("jaguar", candidates, {})
    assert by_key == ranker.score("jaguar", candidates, {candidates[1].key: Label.RELEVANT})


def test_feedback_on_unknown_urls_is_ignored() -> None:
    ranker = TfidfRocchioRanker()
    feedback = {"https://elsewhere.example/x": Label.RELEVANT}
    assert ranker.score("jaguar cat", _JAGUAR, feedback) == ranker.score("jaguar cat", _JAGUAR, {})


def test_query_outside_the_vocabulary_keeps_provider_order() -> None:
    ranking = TfidfRocchioRanker().rank("zebra", list(reversed(_JAGUAR)), {})
    assert _order(ranking) == [4, 3, 2, 1, 0]
    assert TfidfRocchioRanker().score("zebra", _JAGUAR, {}) == [0.0] * 5


def test_identical_documents_tie_in_provider_order() -> None:
    same = [_ev(7, "solar panels"), _ev(3, "solar panels"), _ev(5, "wind")]
    assert _order(TfidfRocchioRanker().rank("solar", same, {})) == [7, 3, 5]


def test_empty_candidates() -> None:
    assert TfidfRocchioRanker().rank("solar", [], {}) == []


def test_snippet_counts_as_document_text() -> None:
    candidates = [_ev(0, "one", "nothing here"), _ev(1, "two", "solar panels on roofs")]
    assert _order(TfidfRocchioRanker().rank("solar", candidates, {})) == [1, 0]


@pytest.mark.parametrize("param", ["alpha", "beta", "gamma"])
@pytest.mark.parametrize("value", [-0.1, math.nan, math.inf])
def test_invalid_rocchio_weights_are_refused(param: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=param):
        weights: dict[str, Any] = {param: value}
        TfidfRocchioRanker(**weights)


# --- properties -----------------------------------------------------------------------------

_WORDS = ["solar", "wind", "panel", "energy", "grid", "cost", "roof", "battery", "the", "a"]
_texts = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=6).map(" ".join)


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[str, list[Evidence], dict[str, Label]]:
    titles = draw(st.lists(_texts, min_size=0, max_size=12))
    candidates = [_ev(n, title) for n, title in enumerate(titles)]
    keys = [item.key for item in candidates] + ["https://example.org/not-a-candidate"]
    feedback = draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(list(Label))))
    return draw(_texts), candidates, feedback


@given(
    _scenario(),
    st.floats(0, 2),
    st.floats(0, 2),
    st.floats(0, 2),
)
def test_ranking_is_a_deterministic_permutation(
    scenario: tuple[str, list[Evidence], dict[str, Label]],
    alpha: float,
    beta: float,
    gamma: float,
) -> None:
    query, candidates, feedback = scenario
    ranker = TfidfRocchioRanker(alpha=alpha, beta=beta, gamma=gamma)
    ranking = ranker.rank(query, candidates, feedback)
    assert sorted(_order(ranking)) == list(range(len(candidates)))
    assert [item.rank for item in ranking] == list(range(1, len(candidates) + 1))
    assert ranking == ranker.rank(query, list(candidates), dict(feedback))
    # Scores never increase down the list; equal scores keep the candidates' order.
    scores = ranker.score(query, candidates, feedback)
    ranked_scores = [scores[n] for n in _order(ranking)]
    for (n1, s1), (n2, s2) in zip(
        zip(_order(ranking), ranked_scores, strict=True),
        zip(_order(ranking)[1:], ranked_scores[1:], strict=True),
        strict=False,
    ):
        assert s1 >= s2 - 1e-9
        if s1 == s2:
            assert n1 < n2
    assert all(-1e-9 <= score <= 1 + 1e-9 for score in scores)
