"""The lexical refiner: which terms it adds, in what order, and what it never adds."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_bench.engine.base import Label, Refiner
from evidence_bench.engine.refiner import (
    LexicalRefiner,
    _by_score,
    fit_terms,
    positive_counts,
    surface_form,
)
from evidence_bench.engine.text import Analyzer
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import MAX_QUERY_CHARS, MAX_QUERY_WORDS, Evidence, validate_query
from evidence_bench.experiment.memo import _Pool
from tests.test_ranking_batch import _feedbacks, _pools


def _ev(n: int, title: str, snippet: str = "", extra: tuple[str, ...] = ()) -> Evidence:
    return Evidence(
        title=title, url=f"https://example.org/{n}", snippet=snippet, extra_snippets=extra
    )


# Positive tf: battery 2, storage 1, grid 2, inverter 1. Negative tf: inverter 2, prices 1.
# df over N = 4: battery 1, storage 1, grid 3, inverter 2, prices 2.
_CANDIDATES = [
    _ev(0, "Battery storage", "battery <b>grid</b>"),
    _ev(1, "Grid inverter"),
    _ev(2, "Grid prices"),
    _ev(3, "Inverter", "inverter prices"),
]
_FEEDBACK = {
    _CANDIDATES[0].key: Label.RELEVANT,
    _CANDIDATES[1].key: Label.MORE,
    _CANDIDATES[3].key: Label.IRRELEVANT,
}


def _idf(df: int, n: int = 4) -> float:
    return math.log((n + 1) / (df + 1)) + 1


def test_terms_are_ordered_by_tfidf_and_irrelevant_tied_terms_dropped() -> None:
    refiner = LexicalRefiner(analyzer=Analyzer(stemmer=None))
    refined = refiner.refine("solar", _CANDIDATES, _FEEDBACK)
    # battery 2 * idf(1) > grid 2 * idf(3) > storage 1 * idf(1); inverter: 2 negative >= 1.
    assert refined.added_terms == ("battery", "grid", "storage")
    assert refined.query == "solar battery grid storage"
    scores = dict(refiner.term_scores("solar", _CANDIDATES, _FEEDBACK))
    assert scores == pytest.approx(
        {"battery": 2 * _idf(1), "grid": 2 * _idf(3), "storage": 1 * _idf(1)}
    )


def test_stemmed_terms_are_sent_as_their_most_frequent_word() -> None:
    refined = LexicalRefiner().refine("solar", _CANDIDATES, _FEEDBACK)
    # scored as stems (batteri, grid, storag), sent as the words the results used
    assert refined.added_terms == ("battery", "grid", "storage")


def test_a_term_more_frequent_in_positive_evidence_is_kept() -> None:
    feedback = {**_FEEDBACK, _CANDIDATES[2].key: Label.LESS}  # grid: positive 2, negative 1
    assert "grid" in LexicalRefiner().refine("solar", _CANDIDATES, feedback).added_terms


def test_a_term_as_frequent_in_negative_evidence_is_dropped() -> None:
    candidates = [_ev(0, "grid battery"), _ev(1, "grid")]
    feedback = {candidates[0].key: Label.RELEVANT, candidates[1].key: Label.IRRELEVANT}
    assert LexicalRefiner().refine("solar", candidates, feedback).added_terms == ("battery",)


def test_never_adds_a_query_term() -> None:
    refined = LexicalRefiner().refine("Battery GRID storage?", _CANDIDATES, _FEEDBACK)
    assert refined.added_terms == ()
    assert refined.query == "Battery GRID storage?"


def test_at_most_max_terms_with_alphabetical_tie_break() -> None:
    candidates = [_ev(0, "pear mango kiwi banana apple"), _ev(1, "unrelated")]
    feedback = {candidates[0].key: Label.RELEVANT}
    refined = LexicalRefiner().refine("fruit", candidates, feedback)
    assert refined.added_terms == ("apple", "banana", "kiwi", "mango")
    assert LexicalRefiner(max_terms=2).refine("fruit", candidates, feedback).added_terms == (
        "apple",
        "banana",
    )
    assert LexicalRefiner(max_terms=0).refine("fruit", candidates, feedback).query == "fruit"


def test_extra_snippets_are_read() -> None:
    candidates = [_ev(0, "title", "", ("photovoltaic cells",)), _ev(1, "other")]
    refined = LexicalRefiner().refine("title", candidates, {candidates[0].key: Label.MORE})
    assert refined.added_terms == ("cells", "photovoltaic")


@pytest.mark.parametrize(
    "feedback",
    [
        {},
        {_CANDIDATES[3].key: Label.IRRELEVANT},
        {_CANDIDATES[0].key: Label.UNSURE, _CANDIDATES[1].key: Label.LESS},
        {"https://elsewhere.example/": Label.RELEVANT},
    ],
)
def test_without_positive_feedback_the_query_is_unchanged(feedback: dict[str, Label]) -> None:
    refined = LexicalRefiner().refine("solar power", _CANDIDATES, feedback)
    assert refined.query == "solar power"
    assert refined.added_terms == ()


def test_feedback_matches_by_canonical_url() -> None:
    candidates = [
        *_CANDIDATES[:1],
        Evidence(title="Grid inverter", url="https://EXAMPLE.org/1/?utm_medium=mail", snippet=""),
        *_CANDIDATES[2:],
    ]
    feedback = {"https://example.org/1": Label.RELEVANT}
    # inverter 1 * idf(df 2) > grid 1 * idf(df 3)
    assert LexicalRefiner().refine("solar", candidates, feedback).added_terms == (
        "inverter",
        "grid",
    )


def test_terms_that_would_break_the_character_limit_are_skipped() -> None:
    candidates = [_ev(0, "photovoltaic photovoltaic cell"), _ev(1, "x")]
    feedback = {candidates[0].key: Label.RELEVANT}
    query = "q" * (MAX_QUERY_CHARS - 5)  # room for " cell" but not " photovoltaic"
    refined = LexicalRefiner().refine(query, candidates, feedback)
    assert refined.added_terms == ("cell",)
    assert len(refined.query) == MAX_QUERY_CHARS
    validate_query(refined.query)


def test_terms_that_would_break_the_word_limit_are_skipped() -> None:
    query = " ".join(f"w{n}" for n in range(MAX_QUERY_WORDS - 1))
    refined = LexicalRefiner().refine(query, _CANDIDATES, _FEEDBACK)
    assert refined.added_terms == ("battery",)
    assert len(refined.query.split()) == MAX_QUERY_WORDS


def test_surrounding_whitespace_does_not_count_against_the_limits() -> None:
    refined = LexicalRefiner().refine("  solar  ", _CANDIDATES, _FEEDBACK)
    assert refined.query == "solar battery grid storage"


def test_is_a_refiner_and_rejects_bad_max_terms() -> None:
    assert isinstance(LexicalRefiner(), Refiner)
    with pytest.raises(ConfigurationError, match="max_terms"):
        LexicalRefiner(max_terms=-1)


_WORDS = ["solar", "wind", "panel", "energy", "grid", "cost", "roof", "battery", "of"]
_text = st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join)


@given(
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    titles=st.lists(_text, max_size=8),
    labels=st.lists(st.sampled_from(list(Label)), max_size=8),
)
def test_refinement_invariants(query: str, titles: list[str], labels: list[Label]) -> None:
    candidates = [_ev(n, title) for n, title in enumerate(titles)]
    feedback = {item.key: label for item, label in zip(candidates, labels, strict=False)}
    refiner = LexicalRefiner()
    refined = refiner.refine(query, candidates, feedback)
    assert refined == refiner.refine(query, list(candidates), dict(feedback))
    assert len(refined.added_terms) <= 4
    assert not set(refined.added_terms) & set(query.split())
    assert len(set(refined.added_terms)) == len(refined.added_terms)
    expected = f"{query} {' '.join(refined.added_terms)}" if refined.added_terms else query
    assert refined.query == expected
    if not any(label.polarity > 0 for label in feedback.values()):
        assert refined.added_terms == ()


def test_counts_shared_between_calls_are_not_changed_by_a_merge() -> None:
    # Each text's counts are kept per process and summed across the marked results; a sum
    # must not leak into a text's own counts. Stem "flow": [0] says flows 2, flowing 1; [1]
    # says flowing 3. Together "flowing" (4 against 2); [0] alone, before and after, "flows".
    pool = [_ev(0, "flows flows flowing"), _ev(1, "flowing flowing flowing")]
    both = {pool[0].key: Label.RELEVANT, pool[1].key: Label.RELEVANT}
    alone = {pool[0].key: Label.RELEVANT}
    analyzer = Analyzer()
    assert surface_form(positive_counts(analyzer, pool, alone), "flow") == "flows"
    assert surface_form(positive_counts(analyzer, pool, both), "flow") == "flowing"
    assert surface_form(positive_counts(analyzer, pool, alone), "flow") == "flows"
    # tf of "flow" over the positive results: 3 for [0] alone, 6 for both, 3 again; idf over
    # N = 2 with df 2 is ln(3 / 3) + 1 = 1
    refiner = LexicalRefiner(analyzer=analyzer)
    assert refiner.term_scores("wing", pool, alone) == [("flow", 3.0)]
    assert refiner.term_scores("wing", pool, both) == [("flow", 6.0)]
    assert refiner.term_scores("wing", pool, alone) == [("flow", 3.0)]
    # a negative mark subtracts nothing from the cached counts either: "flow" 3 against 3
    against = {pool[0].key: Label.RELEVANT, pool[1].key: Label.IRRELEVANT}
    assert refiner.term_scores("wing", pool, against) == []
    assert refiner.term_scores("wing", pool, alone) == [("flow", 3.0)]


def _by_definition(
    refiner: LexicalRefiner, query: str, pool: list[Evidence], feedback: dict[str, Label]
) -> list[tuple[str, float]]:
    """The class docstring's scores, term by term with dicts: tf summed over the positive
    results, idf ln((N + 1) / (df + 1)) + 1 over the candidates, a term dropped where its
    negative tf is at least its positive tf, the query's own terms left out."""
    analyzer = refiner.analyzer
    counts = [Counter(analyzer(" ".join((e.title, e.snippet, *e.extra_snippets)))) for e in pool]
    df: Counter[str] = Counter()
    for counted in counts:
        df.update(counted.keys())
    positive: Counter[str] = Counter()
    negative: Counter[str] = Counter()
    for item, counted in zip(pool, counts, strict=True):
        label = feedback.get(item.key)
        if label is not None and label.polarity != 0:
            (positive if label.polarity > 0 else negative).update(counted)
    n = len(pool)
    scores = [
        (term, tf * (math.log((n + 1) / (df[term] + 1)) + 1))
        for term, tf in positive.items()
        if negative[term] < tf and term not in set(analyzer(query))
    ]
    return sorted(scores, key=lambda pair: (-round(pair[1], 12), pair[0]))


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_term_scores_and_words_on_real_result_lists(name: str) -> None:
    # The scores, to the last bit, and the words sent: each added term is its stem's most
    # frequent word in the positive results (surface_form), as
    # many as fit Brave's limits.
    checked = 0
    for analyzer in (Analyzer(), Analyzer(stemmer=None, stop_words=None)):
        refiner = LexicalRefiner(max_terms=6, analyzer=analyzer)
        for query, found, grades in _pools(name, 5):
            for depth in (10, len(found)):
                pool = found[:depth]
                for feedback in _feedbacks(pool, grades):
                    scores = refiner.term_scores(query, pool, feedback)
                    assert scores == _by_definition(refiner, query, pool, feedback)
                    counted = positive_counts(analyzer, pool, feedback)
                    sent = fit_terms(
                        query.strip(), [surface_form(counted, term) for term, _ in scores], 6
                    )
                    refined = refiner.refine(query, pool, feedback)
                    assert list(refined.added_terms) == sent
                    # the memo's path: its pool's arrays (shared with the ranker's space
                    # at one depth, its own at the other) and marks handed in
                    held = _Pool(objects=tuple(pool), content=0, keys=[i.key for i in pool])
                    if depth == 10:
                        held.space(analyzer, query)
                    matrix = held.refiner_matrix(analyzer)
                    assert matrix is not None  # no extra snippets in a shipped collection
                    assert refined == refiner.refine_counted(
                        query, pool, feedback, matrix, held.marked(feedback)
                    )
                    checked += bool(scores)
    assert checked > 20


def test_scores_that_round_alike_tie_alphabetically() -> None:
    # 0.1 + 0.2 is 0.30000000000000004: above 0.3 raw, equal to it at 12 digits, so "a"
    # comes first; scores further apart keep their order whatever the words.
    near = [("b", 0.1 + 0.2), ("a", 0.3), ("z", 2.0), ("c", 1e-3)]
    assert _by_score(near) == [("z", 2.0), ("a", 0.3), ("b", 0.1 + 0.2), ("c", 1e-3)]
    apart = [("b", 0.5), ("a", 0.25), ("d", 0.5)]
    assert _by_score(apart) == [("b", 0.5), ("d", 0.5), ("a", 0.25)]
    # large scores (1e-9 near a float's spacing there) go by the rounded key at once
    big = [("x", 1e6), ("y", 1e6 + 1e-10)]
    assert _by_score(big) == [("y", 1e6 + 1e-10), ("x", 1e6)]
    assert _by_score([]) == []
