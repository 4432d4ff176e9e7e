"""The term-space Rocchio refiner: weights by hand, clamping, ties, Brave's limits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine.base import Label, RefinedQuery, Refiner
from evidence_bench.engine.term_rocchio import TermRefinedQuery, TermRocchioRefiner
from evidence_bench.engine.text import Analyzer, tokenize
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import MAX_QUERY_CHARS, MAX_QUERY_WORDS, Evidence


def _ev(n: int, title: str, snippet: str = "", extra: tuple[str, ...] = ()) -> Evidence:
    return Evidence(
        title=title,
        url=f"https://example.org/doc/{n}",
        snippet=snippet,
        rank=n + 1,
        extra_snippets=extra,
    )


# Query "wing lift"; terms per document (title + snippet + extra snippets):
#   d0 (RELEVANT):   wing 1, flap 3, stall 1
#   d1 (MORE):       lift 1, airfoil 2, stall 1   ("and", "the" are stop words)
#   d2 (IRRELEVANT): heat 2, slab 1, stall 1
# meanFreq_pull: wing .5, lift .5, flap 1.5, airfoil 1, stall 1; meanFreq_push: heat 2,
# slab 1, stall 1. With beta .75 and gamma .15:
#   wing = 1 + .75 * .5 = 1.375, lift = 1.375, flap = 1.125, airfoil = .75,
#   stall = .75 - .15 = .6, heat = -.3 and slab = -.15 (clamped, dropped).
_DOCS = [
    _ev(0, "wing flap", "flap and stall", extra=("flap",)),
    _ev(1, "lift airfoil", "the stall airfoil"),
    _ev(2, "heat slab", "stall heat"),
    _ev(3, "unmarked", "rudder rudder rudder"),
]
_FEEDBACK = {
    _DOCS[0].key: Label.RELEVANT,
    _DOCS[1].key: Label.MORE,
    _DOCS[2].key: Label.IRRELEVANT,
    _DOCS[3].key: Label.UNSURE,
}
_WEIGHTS = {"lift": 1.375, "wing": 1.375, "flap": 1.125, "airfoil": 0.75, "stall": 0.6}


def test_weights_by_hand() -> None:
    weights = TermRocchioRefiner().weights("wing lift", _DOCS, _FEEDBACK)
    assert weights == pytest.approx(_WEIGHTS)
    # Heaviest first; the tie between the query terms is broken alphabetically.
    assert list(weights) == ["lift", "wing", "flap", "airfoil", "stall"]


def test_refine_adds_the_heaviest_new_terms() -> None:
    refined = TermRocchioRefiner(max_terms=2).refine("wing lift", _DOCS, _FEEDBACK)
    assert refined.query == "wing lift flap airfoil"
    assert refined.added_terms == ("flap", "airfoil")
    assert dict(refined.weights) == pytest.approx(_WEIGHTS)
    assert [term for term, _ in refined.weights] == list(_WEIGHTS)


def test_max_terms_bounds_the_additions() -> None:
    refiner = TermRocchioRefiner(max_terms=10)
    assert refiner.refine("wing lift", _DOCS, _FEEDBACK).added_terms == (
        "flap",
        "airfoil",
        "stall",
    )
    unchanged = TermRocchioRefiner(max_terms=0).refine("wing lift", _DOCS, _FEEDBACK)
    assert unchanged.query == "wing lift"
    assert unchanged.added_terms == ()


@pytest.mark.parametrize(
    "refiners",
    [
        (TermRocchioRefiner(beta=0.0, gamma=0.15), TermRocchioRefiner(beta=0.0, gamma=4.0)),
        (TermRocchioRefiner(max_terms=0), TermRocchioRefiner(max_terms=0, beta=2.0)),
    ],
)
def test_refiners_with_equal_effective_params_refine_alike(
    refiners: tuple[TermRocchioRefiner, TermRocchioRefiner],
) -> None:
    """Both are ``{max_terms: 0}``, so the memo gives the second the first's refined query:
    each must return it, the reported weights included. For "heat", pushed by d2 (heat 2):
    beta = 0, gamma = 0.15 weighed it 1 - 0.15 * 2 = 0.7 where gamma = 4 clamped it, so
    the second config's record showed the first's weights."""
    a, b = refiners
    assert a.effective_params() == b.effective_params() == {"max_terms": 0}
    expected = TermRefinedQuery(query="heat", added_terms=(), weights=())
    assert a.refine("heat", _DOCS, _FEEDBACK) == expected
    assert b.refine("heat", _DOCS, _FEEDBACK) == expected


def test_beta_and_gamma_scale_the_centroids() -> None:
    # beta 1, gamma 1: stall = 1 - 1 = 0 (dropped); heat and slab negative (dropped).
    weights = TermRocchioRefiner(beta=1.0, gamma=1.0).weights("wing lift", _DOCS, _FEEDBACK)
    assert weights == pytest.approx({"wing": 1.5, "lift": 1.5, "flap": 1.5, "airfoil": 1.0})
    assert list(weights) == ["flap", "lift", "wing", "airfoil"]


def test_a_weight_that_cancels_in_floating_point_is_dropped() -> None:
    # "drag": pull mean 1/5 = 0.2, push mean 1: 0.75 * 0.2 - 0.15 * 1 is 2.8e-17 in floats.
    pull = [_ev(i, "lift", "drag" if i == 0 else "wing") for i in range(5)]
    push = _ev(9, "drag")
    feedback = {**{doc.key: Label.RELEVANT for doc in pull}, push.key: Label.IRRELEVANT}
    weights = TermRocchioRefiner().weights("lift", [*pull, push], feedback)
    assert "drag" not in weights
    assert weights == pytest.approx({"lift": 1.75, "wing": 0.6})


def test_new_terms_tie_alphabetically() -> None:
    docs = [_ev(0, "zeta alpha mu")]
    refined = TermRocchioRefiner(max_terms=2).refine("query", docs, {docs[0].key: Label.MORE})
    assert refined.added_terms == ("alpha", "mu")


def test_no_query_term_is_repeated_whatever_its_case_or_weight() -> None:
    docs = [_ev(0, "Wing WING wing", "Lift lift drag")]
    refined = TermRocchioRefiner().refine("Wing lift", docs, {docs[0].key: Label.RELEVANT})
    assert refined.added_terms == ("drag",)
    assert refined.query == "Wing lift drag"
    assert dict(refined.weights)["wing"] == pytest.approx(1 + 0.75 * 3)


def test_stems_are_weighed_and_words_are_sent() -> None:
    # Stems: gliders, glider -> "glider" (3: "gliders" twice, "glider" once); flows,
    # flowing -> "flow" (2, one each: the alphabetically first word is sent).
    docs = [_ev(0, "gliders glider gliders", "flows flowing")]
    refined = TermRocchioRefiner().refine("wing", docs, {docs[0].key: Label.MORE})
    assert refined.added_terms == ("gliders", "flowing")
    assert refined.query == "wing gliders flowing"
    assert dict(refined.weights) == pytest.approx({"wing": 1.0, "glider": 2.25, "flow": 1.5})
    # A word whose stem the query holds is not new: "flow" covers "flows" and "flowing".
    assert TermRocchioRefiner().refine("flow", docs, {docs[0].key: Label.MORE}).added_terms == (
        "gliders",
    )
    unstemmed = TermRocchioRefiner(analyzer=Analyzer(stemmer=None))
    assert unstemmed.refine("flow", docs, {docs[0].key: Label.MORE}).added_terms == (
        "gliders",
        "flowing",
        "flows",
        "glider",
    )


def test_without_pull_the_query_is_unchanged() -> None:
    for feedback in ({}, {_DOCS[2].key: Label.IRRELEVANT}, {_DOCS[0].key: Label.UNSURE}):
        refined = TermRocchioRefiner().refine("  wing lift ", _DOCS, feedback)
        assert refined.query == "  wing lift "
        assert refined.added_terms == ()
        assert dict(refined.weights) == {"lift": 1.0, "wing": 1.0}


def test_feedback_outside_the_candidates_is_ignored() -> None:
    feedback = {"https://example.org/doc/77": Label.RELEVANT}
    assert TermRocchioRefiner().refine("wing", _DOCS, feedback).added_terms == ()


def test_terms_that_break_braves_limits_are_skipped() -> None:
    long_query = "x" * (MAX_QUERY_CHARS - 4)  # room for " ab" (3) but not " abcdef" (7)
    docs = [_ev(0, "abcdef abcdef ab")]
    refined = TermRocchioRefiner().refine(long_query, docs, {docs[0].key: Label.MORE})
    assert refined.added_terms == ("ab",)
    assert len(refined.query) == MAX_QUERY_CHARS - 1

    many_words = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS - 1))
    docs = [_ev(0, "flap stall drag")]
    refined = TermRocchioRefiner().refine(many_words, docs, {docs[0].key: Label.MORE})
    assert refined.added_terms == ("drag",)
    assert len(refined.query.split()) == MAX_QUERY_WORDS


def test_weights_keep_the_top_twenty() -> None:
    words = [f"term{i:02d}" for i in range(30)]
    docs = [_ev(0, " ".join(words))]
    refined = TermRocchioRefiner().refine("wing", docs, {docs[0].key: Label.RELEVANT})
    assert len(refined.weights) == 20
    assert refined.weights[0] == ("wing", 1.0)
    assert [term for term, _ in refined.weights[1:]] == words[:19]


def test_refined_query_is_a_frozen_refined_query() -> None:
    refined = TermRocchioRefiner().refine("wing lift", _DOCS, _FEEDBACK)
    assert isinstance(refined, RefinedQuery)
    assert isinstance(refined, TermRefinedQuery)
    with pytest.raises(AttributeError):
        refined.weights = ()  # type: ignore[misc]
    assert hash(refined) == hash(TermRocchioRefiner().refine("wing lift", _DOCS, _FEEDBACK))


def test_refiner_satisfies_the_protocol() -> None:
    assert isinstance(TermRocchioRefiner(), Refiner)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"max_terms": -1}, "max_terms must be >= 0"),
        ({"max_terms": 2.0}, "max_terms must be an integer"),
        ({"max_terms": True}, "max_terms must be an integer"),
        ({"beta": -0.1}, "beta must be a finite number >= 0"),
        ({"gamma": float("inf")}, "gamma must be a finite number >= 0"),
    ],
)
def test_bad_parameters_are_configuration_errors(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        TermRocchioRefiner(**params)


_WORDS = ["wing", "lift", "flap", "stall", "heat", "drag", "the", "flows", "flowing", "gliders"]


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join), min_size=1, max_size=8
    ),
    labels=st.lists(st.sampled_from([None, *Label]), min_size=8, max_size=8),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    max_terms=st.integers(min_value=0, max_value=5),
)
def test_added_terms_are_new_positive_and_from_pulled_results(
    texts: list[str], labels: list[Label | None], query: str, max_terms: int
) -> None:
    docs = [_ev(i, text) for i, text in enumerate(texts)]
    feedback = {doc.key: label for doc, label in zip(docs, labels, strict=False) if label}
    refined = TermRocchioRefiner(max_terms=max_terms).refine(query, docs, feedback)
    weights = TermRocchioRefiner().weights(query, docs, feedback)
    pulled = {
        term
        for doc in docs
        if (label := feedback.get(doc.key)) is not None and label.polarity > 0
        for term in tokenize(doc.text)
    }
    stems = [tokenize(word)[0] for word in refined.added_terms]  # each word is one term
    assert len(refined.added_terms) <= max_terms
    assert len(set(stems)) == len(stems)
    assert not set(stems) & set(tokenize(query))
    assert set(stems) <= pulled
    assert all(value > 0 for value in weights.values())
    # The added terms are the heaviest new ones, in the order of the weights.
    new = [term for term in weights if term not in tokenize(query)]
    assert stems == new[: len(stems)]
    assert refined.query.split()[len(query.split()) :] == list(refined.added_terms)
