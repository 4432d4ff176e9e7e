"""Measures: hand-computed values, the measure names, and agreement with pytrec_eval."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.collections.beir import load_collection
from evidence_bench.errors import ConfigurationError
from evidence_bench.evaluation.measures import (
    Measure,
    evaluate,
    evaluate_grades,
    evaluate_many,
    parse_measure,
    prepare,
    ranks_to_scores,
)
from evidence_bench.web.bm25 import BM25Index

NDCG3, P5, R5, AP, RR = (parse_measure(name) for name in ("nDCG@3", "P@5", "R@5", "AP", "RR"))

#: Every family, several cutoffs, cutoffs beyond the run's length and trec_eval's defaults.
COMPARED = [
    parse_measure(name)
    for name in (
        *("nDCG@1", "nDCG@5", "nDCG@10", "nDCG@20", "nDCG@100", "nDCG"),
        *("P@1", "P@5", "P@7", "P@10", "P@20", "P@100"),
        *("R@1", "R@5", "R@10", "R@20", "R@100", "AP", "AP@10", "AP@1000", "RR"),
    )
]


def trec_eval_scores(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    measures: list[Measure],
    relevance_level: int = 1,
) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values, keyed by our measure names."""
    names = {measure.trec_eval_name for measure in measures}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=relevance_level)
    scores = evaluator.evaluate(run)
    zeros = dict.fromkeys(names, 0.0)  # a query with an empty run may be left out
    return {
        query_id: {str(m): scores.get(query_id, zeros)[m.trec_eval_name] for m in measures}
        for query_id in qrels
    }


def scored(ranking: list[str]) -> dict[str, float]:
    """A ranking as the score map pytrec_eval reads, with the scores we export."""
    return dict(zip(ranking, ranks_to_scores(len(ranking)), strict=True))


def random_query(rng: random.Random, query_id: str) -> tuple[dict[str, int], list[str]]:
    """Graded qrels (0-4) over part of a pool of URLs, and a run of 0-60 docs from the pool."""
    pool = [f"https://example.org/{query_id}/{i}" for i in range(rng.randint(1, 90))]
    judged = rng.sample(pool, rng.randint(1, len(pool)))
    shape = rng.random()
    if shape < 0.1:  # nothing relevant
        qrels = dict.fromkeys(judged, 0)
    elif shape < 0.25:  # exactly one relevant document
        qrels = dict.fromkeys(judged, 0)
        qrels[rng.choice(judged)] = rng.randint(1, 4)
    else:
        qrels = {doc: rng.choice((0, 0, 0, 1, 1, 2, 3, 4)) for doc in judged}
    ranking = rng.sample(pool, rng.randint(0, min(60, len(pool))))  # holds unjudged docs
    return qrels, ranking


# --- hand-computed values ------------------------------------------------------------------


def test_ndcg_by_hand() -> None:
    # qrels a=3, b=2, c=0, d=1; ranking c, a, d (b, grade 2, never retrieved).
    # DCG@3  = 0/log2(2) + 3/log2(3) + 1/log2(4)            = 1.8928 + 0.5     = 2.3928
    # IDCG@3 = 3/log2(2) + 2/log2(3) + 1/log2(4)  (a, b, d) = 3 + 1.2619 + 0.5 = 4.7619
    # nDCG@3 = 2.3928 / 4.7619 = 0.50249
    qrels = {"a": 3, "b": 2, "c": 0, "d": 1}
    got = evaluate(["c", "a", "d"], qrels, [NDCG3])["nDCG@3"]
    expected = (3 / math.log2(3) + 1 / 2) / (3 + 2 / math.log2(3) + 1 / 2)
    assert got == pytest.approx(expected, abs=1e-12)
    assert got == pytest.approx(0.50249, abs=1e-5)


def test_ndcg_ideal_is_cut_at_k_not_at_run_length() -> None:
    # One doc retrieved, the best one: DCG@3 = 3; IDCG@3 = 3 + 2/log2(3) + 1/2, not 3.
    qrels = {"a": 3, "b": 2, "d": 1}
    got = evaluate(["a"], qrels, [NDCG3])["nDCG@3"]
    assert got == pytest.approx(3 / (3 + 2 / math.log2(3) + 0.5), abs=1e-12)


def test_precision_divides_by_k_even_when_fewer_retrieved() -> None:
    # 1 relevant among 2 retrieved; P@5 = 1/5, not 1/2.
    assert evaluate(["a", "x"], {"a": 1, "x": 0}, [P5]) == {"P@5": 0.2}


def test_recall_counts_relevant_never_retrieved() -> None:
    # 3 relevant in qrels (a, b, c), 1 retrieved in the top 5: R@5 = 1/3.
    qrels = {"a": 1, "b": 2, "c": 1, "z": 0}
    assert evaluate(["z", "a"], qrels, [R5])["R@5"] == pytest.approx(1 / 3)


def test_average_precision_by_hand() -> None:
    # Relevant at ranks 1 and 3 of 3 retrieved; 3 relevant in the qrels (c never retrieved).
    # AP = (1/1 + 2/3) / 3 = 0.5556
    qrels = {"a": 1, "b": 0, "d": 2, "c": 1}
    got = evaluate(["a", "b", "d"], qrels, [AP])["AP"]
    assert got == pytest.approx((1 + 2 / 3) / 3, abs=1e-12)


def test_reciprocal_rank_is_first_relevant() -> None:
    qrels = {"a": 0, "b": 0, "c": 2, "d": 1}
    assert evaluate(["a", "x", "c", "d"], qrels, [RR]) == {"RR": 1 / 3}
    assert evaluate(["a", "x"], qrels, [RR]) == {"RR": 0.0}


def test_relevance_level_raises_the_bar() -> None:
    # With rel=2 only c (grade 2) counts: P(rel=2)@5 = 1/5, RR(rel=2) = 1/2 (c at rank 2).
    qrels = {"a": 1, "c": 2}
    measures = [parse_measure("P(rel=2)@5"), parse_measure("RR(rel=2)"), P5]
    assert evaluate(["a", "c"], qrels, measures) == {
        "P(rel=2)@5": 0.2,
        "RR(rel=2)": 0.5,
        "P@5": 0.4,
    }


def test_query_without_relevant_documents_scores_zero() -> None:
    qrels = {"a": 0, "b": 0}
    prepared = prepare(qrels)
    assert prepared.num_relevant == 0
    assert set(evaluate(["a", "b", "x"], prepared, COMPARED).values()) == {0.0}


def test_empty_ranking_scores_zero() -> None:
    assert set(evaluate([], {"a": 1}, COMPARED).values()) == {0.0}


def test_duplicate_document_is_refused() -> None:
    with pytest.raises(ValueError, match="'b' appears more than once"):
        evaluate(["a", "b", "c", "b"], {"a": 1}, [P5])


def test_results_follow_the_requested_measures() -> None:
    measures = [parse_measure(name) for name in ("RR", "nDCG@10", "P@5")]
    assert list(evaluate(["a"], {"a": 1}, measures)) == ["RR", "nDCG@10", "P@5"]


def test_prepared_judgments_count_relevant_per_level() -> None:
    prepared = prepare({"a": 0, "b": 1, "c": 2, "d": 4, "e": -1})
    assert prepared.num_relevant == 3
    assert prepared.count_relevant(2) == 2
    assert prepared.count_relevant(5) == 0


def test_ranks_to_scores_strictly_decreasing() -> None:
    scores = ranks_to_scores(50)
    assert len(scores) == 50
    assert all(high > low for high, low in itertools.pairwise(scores))
    assert ranks_to_scores(0) == []


# --- names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family", "cutoff", "rel", "trec_eval_name"),
    [
        ("nDCG@10", "nDCG", 10, 1, "ndcg_cut_10"),
        ("nDCG", "nDCG", None, 1, "ndcg"),
        ("P@5", "P", 5, 1, "P_5"),
        ("P(rel=2)@5", "P", 5, 2, "P_5"),
        ("R@20", "R", 20, 1, "recall_20"),
        ("AP", "AP", None, 1, "map"),
        ("AP@100", "AP", 100, 1, "map_cut_100"),
        ("RR", "RR", None, 1, "recip_rank"),
        ("RR(rel=3)", "RR", None, 3, "recip_rank"),
    ],
)
def test_parse_measure_round_trips(
    name: str, family: str, cutoff: int | None, rel: int, trec_eval_name: str
) -> None:
    measure = parse_measure(name)
    assert measure == Measure(family, cutoff, rel)
    assert str(measure) == name
    assert parse_measure(str(measure)) == measure
    assert measure.trec_eval_name == trec_eval_name


def test_measures_are_hashable_and_compare_by_value() -> None:
    assert {parse_measure("P@5"), Measure("P", 5), Measure("P", 5, 1)} == {Measure("P", 5)}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ndcg@10", "unknown measure 'ndcg@10' (valid: nDCG@k"),
        ("MAP", "unknown measure 'MAP'"),
        ("P@", "unknown measure 'P@'"),
        ("P@five", "unknown measure"),
        ("", "unknown measure ''"),
        ("P", "P needs a cutoff, e.g. P@10"),
        ("R", "R needs a cutoff"),
        ("RR@10", "RR takes no cutoff"),
        ("P@0", "cutoff must be at least 1"),
        ("P(rel=0)@5", "relevance level must be at least 1"),
        ("nDCG(rel=2)@10", "nDCG takes no rel="),
    ],
)
def test_parse_measure_errors_say_what_is_valid(name: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace("?", r"\?")):
        parse_measure(name)


def test_unknown_family_lists_valid_families() -> None:
    with pytest.raises(ConfigurationError) as info:
        Measure("MRR", 10)
    for family in ("nDCG@k", "P@k", "R@k", "AP", "RR"):
        assert family in str(info.value)


# --- agreement with trec_eval --------------------------------------------------------------


def test_agrees_with_pytrec_eval_on_random_runs() -> None:
    rng = random.Random(20240607)
    qrels: dict[str, dict[str, int]] = {}
    rankings: dict[str, list[str]] = {}
    for i in range(400):
        query_id = f"q{i}"
        qrels[query_id], rankings[query_id] = random_query(rng, query_id)
    run = {query_id: scored(ranking) for query_id, ranking in rankings.items()}
    for level in (1, 2):
        measures = [m if m.name == "nDCG" else Measure(m.name, m.cutoff, level) for m in COMPARED]
        expected = trec_eval_scores(qrels, run, measures, relevance_level=level)
        for query_id, ranking in rankings.items():
            got = evaluate(ranking, prepare(qrels[query_id]), measures)
            assert got == pytest.approx(expected[query_id], abs=1e-12), query_id


def test_negative_grades_gain_nothing_as_in_trec_eval() -> None:
    qrels = {"q": {"a": -1, "b": 2, "c": 1, "d": -2}}
    ranking = ["d", "a", "b", "x", "c"]
    expected = trec_eval_scores(qrels, {"q": scored(ranking)}, COMPARED)["q"]
    assert evaluate(ranking, qrels["q"], COMPARED) == pytest.approx(expected, abs=1e-12)


def test_tied_scores_are_reordered_by_docno_descending() -> None:
    # trec_eval sorts by score, then docno descending: with tied scores, c.example ranks
    # first and the relevant a.example last. ranks_to_scores avoids ties, so our order holds.
    a, b, c = "https://a.example/", "https://b.example/", "https://c.example/"
    qrels = {"q": {a: 1, b: 0, c: 0}}
    ranking = [a, b, c]
    tied = trec_eval_scores(qrels, {"q": dict.fromkeys(ranking, 1.0)}, [RR])["q"]
    assert tied == {"RR": 1 / 3}
    assert evaluate([c, b, a], qrels["q"], [RR]) == tied
    strict = trec_eval_scores(qrels, {"q": scored(ranking)}, [RR])["q"]
    assert strict == evaluate(ranking, qrels["q"], [RR]) == {"RR": 1.0}


def test_tie_break_on_random_runs() -> None:
    rng = random.Random(7)
    qrels: dict[str, dict[str, int]] = {}
    rankings: dict[str, list[str]] = {}
    for i in range(100):
        query_id = f"q{i}"
        qrels[query_id], rankings[query_id] = random_query(rng, query_id)
    tied = {query_id: dict.fromkeys(ranking, 0.5) for query_id, ranking in rankings.items()}
    expected = trec_eval_scores(qrels, tied, COMPARED)
    for query_id, ranking in rankings.items():
        by_docno_descending = sorted(ranking, reverse=True)
        got = evaluate(by_docno_descending, qrels[query_id], COMPARED)
        assert got == pytest.approx(expected[query_id], abs=1e-12), query_id


# --- properties ----------------------------------------------------------------------------

POOL = [f"d{i}" for i in range(12)]
judgments_strategy = st.dictionaries(st.sampled_from(POOL), st.integers(0, 4), min_size=1)
ranking_strategy = st.lists(st.sampled_from([*POOL, "u0", "u1", "u2"]), unique=True, max_size=15)


@settings(max_examples=150, deadline=None)
@given(judgments=judgments_strategy, ranking=ranking_strategy)
def test_property_agrees_with_pytrec_eval(judgments: dict[str, int], ranking: list[str]) -> None:
    measures = [parse_measure(name) for name in ("nDCG@3", "nDCG", "P@5", "R@5", "AP", "RR")]
    expected = trec_eval_scores({"q": judgments}, {"q": scored(ranking)}, measures)["q"]
    assert evaluate(ranking, judgments, measures) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(judgments=judgments_strategy, ranking=ranking_strategy)
def test_property_values_in_unit_interval(judgments: dict[str, int], ranking: list[str]) -> None:
    values = evaluate(ranking, prepare(judgments), COMPARED)
    assert all(0.0 <= value <= 1.0 + 1e-12 for value in values.values())
    assert values == evaluate(ranking, judgments, COMPARED)  # prepared or not, same result


# --- many rankings at once (evaluate_many) -------------------------------------------------

COLLECTIONS = Path(__file__).resolve().parents[1] / "collections"


def test_batch_by_hand() -> None:
    # qrels a=3, b=2, c=0, d=1, e=-1: 3 relevant at rel=1 (a, b, d), 2 at rel=2 (a, b).
    # Row 0, [c, a, d]: DCG@3 = 3/log2(3) + 1/2, IDCG@3 = 3 + 2/log2(3) + 1/2; P@5 = 2/5;
    #   R@5 = 2/3 (a, d of a, b, d); AP = (1/2 + 2/3) / 3; RR = 1/2; P(rel=2)@5 = 1/5.
    # Row 1, [] (empty): every measure 0.
    # Row 2, [e, x, b, a, d]: the negative grade gains nothing; DCG@3 = 2/log2(4);
    #   P@5 = 3/5; R@5 = 1; AP = (1/3 + 2/4 + 3/5) / 3; RR = 1/3; P(rel=2)@5 = 2/5.
    # Row 3, [a]: shorter than the others (the padding adds nothing); nDCG@3 = 3 / IDCG@3.
    qrels = {"a": 3, "b": 2, "c": 0, "d": 1, "e": -1}
    measures = [NDCG3, P5, R5, AP, RR, parse_measure("P(rel=2)@5")]
    got = evaluate_many([["c", "a", "d"], [], ["e", "x", "b", "a", "d"], ["a"]], qrels, measures)
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    expected = [
        [(3 / math.log2(3) + 1 / 2) / ideal, 2 / 5, 2 / 3, (1 / 2 + 2 / 3) / 3, 1 / 2, 1 / 5],
        [0.0] * 6,
        [(2 / 2) / ideal, 3 / 5, 1.0, (1 / 3 + 2 / 4 + 3 / 5) / 3, 1 / 3, 2 / 5],
        [3 / ideal, 1 / 5, 1 / 3, 1 / 3, 1.0, 1 / 5],
    ]
    assert got.shape == (4, 6)
    for row, want in zip(got.tolist(), expected, strict=True):
        assert row == pytest.approx(want, abs=1e-12)


def test_batch_edges() -> None:
    assert evaluate_many([], {"a": 1}, COMPARED).shape == (0, len(COMPARED))
    assert set(evaluate_many([["a", "b"], []], {"a": 0}, COMPARED).ravel()) == {0.0}
    with pytest.raises(ValueError, match="'b' appears more than once"):
        evaluate_many([["a"], ["a", "b", "c", "b"]], {"a": 1}, [P5])
    with pytest.raises(ValueError, match="2 rankings but 1 judgments"):
        evaluate_many([["a"], ["b"]], [prepare({"a": 1})], [P5])


def test_batch_with_judgments_per_ranking() -> None:
    # The residual judgments of an episode beside its full ones: a (grade 2) examined and
    # removed. Full: [a, b] has RR 1, R@5 = 2/2; residual: [b] has RR 1, R@5 = 1/1, and
    # nDCG@3 = 1 (b is the only relevant document left); [c] scores 0 under both.
    full, residual = prepare({"a": 2, "b": 1}), prepare({"b": 1})
    got = evaluate_many([["a", "b"], ["b"], ["c"]], [full, residual, residual], [RR, R5, NDCG3])
    assert got.tolist() == [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    assert got[1].tolist() == list(evaluate(["b"], residual, [RR, R5, NDCG3]).values())


def test_grades_by_hand_with_padding_and_judgments_per_row() -> None:
    # The grade matrix evaluate_many builds, given directly (the planner builds it from key
    # codes): zeros pad a row past its ranking's end, at any width, and change nothing.
    # Row 0, grades [0, 3, 1] on qrels a=3, b=2, d=1 (the batch-by-hand test's [c, a, d]):
    #   nDCG@3 = (3/log2(3) + 1/2) / (3 + 2/log2(3) + 1/2), P@5 = 2/5, RR = 1/2.
    # Row 1, grades [1] on the residual qrels {d: 1} (a and b examined and removed):
    #   nDCG@3 = 1, P@5 = 1/5, RR = 1.
    full, residual = prepare({"a": 3, "b": 2, "d": 1}), prepare({"d": 1})
    grades = np.array([[0, 3, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]], dtype=np.int64)
    which = np.array([0, 1], dtype=np.intp)
    got = evaluate_grades(grades, [full, residual], which, [NDCG3, P5, RR])
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    assert got[0].tolist() == pytest.approx([(3 / math.log2(3) + 1 / 2) / ideal, 2 / 5, 1 / 2])
    assert got[1].tolist() == [1.0, 1 / 5, 1.0]
    narrow = evaluate_grades(grades[:, :3], [full, residual], which, [NDCG3, P5, RR])
    assert narrow.tolist() == got.tolist()  # bit for bit, whatever the padding
    assert got[0].tolist() == list(evaluate(["c", "a", "d"], full, [NDCG3, P5, RR]).values())
    assert evaluate_grades(grades[:0], [full], which[:0], [P5]).shape == (0, 1)


def test_batch_gives_evaluates_floats_exactly() -> None:
    # Bit for bit, not approximately: a run's stored numbers must not move.
    rng = random.Random(13)
    measures = [
        *COMPARED,
        *(parse_measure(name) for name in ("P(rel=2)@5", "R(rel=3)@10", "AP(rel=2)", "RR(rel=2)")),
    ]
    for i in range(300):
        qrels, _ = random_query(rng, f"q{i}")
        qrels.update({doc: -1 for doc in rng.sample(sorted(qrels), min(2, len(qrels)))})
        pool = [*qrels, "https://example.org/unjudged"]
        rankings = [rng.sample(pool, rng.randint(0, len(pool))) for _ in range(rng.randint(1, 6))]
        prepared = prepare(qrels)
        got = evaluate_many(rankings, prepared, measures).tolist()
        for ranking, row in zip(rankings, got, strict=True):
            assert dict(zip(map(str, measures), row, strict=True)) == evaluate(
                ranking, prepared, measures
            )


def test_batch_agrees_with_pytrec_eval_on_cranfield() -> None:
    # Real runs: BM25's top 100 of each judged Cranfield query, its reverse and its top 7,
    # scored together as one batch per query (as an episode scores its stages).
    collection = load_collection(COLLECTIONS / "cranfield")
    index = BM25Index({doc_id: doc.text for doc_id, doc in collection.documents.items()})
    qrels = {q: collection.qrels[q] for q in collection.judged_query_ids()}
    variants: dict[str, list[str]] = {}
    for query_id in qrels:
        top = [doc_id for doc_id, _ in index.search(collection.queries[query_id].text, 100)]
        variants[f"{query_id}.top"], variants[f"{query_id}.reverse"] = top, top[::-1]
        variants[f"{query_id}.short"] = top[:7]
    run = {name: scored(ranking) for name, ranking in variants.items()}
    kinds = ("top", "reverse", "short")
    expanded = {f"{q}.{kind}": grades for q, grades in qrels.items() for kind in kinds}
    for level in (1, 2):
        measures = [m if m.name == "nDCG" else Measure(m.name, m.cutoff, level) for m in COMPARED]
        expected = trec_eval_scores(expanded, run, measures, relevance_level=level)
        for query_id, grades in qrels.items():
            names = [f"{query_id}.{kind}" for kind in kinds]
            got = evaluate_many([variants[name] for name in names], grades, measures)
            for name, row in zip(names, got.tolist(), strict=True):
                values = dict(zip(map(str, measures), row, strict=True))
                assert values == pytest.approx(expected[name], abs=1e-12), name
