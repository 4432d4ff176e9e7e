"""Measures for incomplete judgments: Judged@k, bpref (against pytrec_eval) and nDCG'@k
(Sakai's condensed list, worked by hand)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval

from evidence_bench.collections.beir import load_collection
from evidence_bench.errors import ConfigurationError
from evidence_bench.evaluation.incomplete import bpref, judged_at, judged_cells
from evidence_bench.evaluation.measures import (
    evaluate,
    evaluate_grades,
    evaluate_many,
    parse_measure,
    prepare,
)

ROOT = Path(__file__).resolve().parents[1]
JUDGED10, BPREF, NDCG3C = (parse_measure(n) for n in ("Judged@10", "bpref", "nDCG'@3"))


def trec_bpref(
    qrels: dict[str, dict[str, int]], run: dict[str, list[str]], rel: int = 1
) -> dict[str, float]:
    scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}, relevance_level=rel)
    found = evaluator.evaluate(scored)
    return {q: found.get(q, {"bpref": 0.0})["bpref"] for q in qrels}


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Judged@10", "Judged@10"),
        ("bpref", "bpref"),
        ("bpref(rel=2)", "bpref(rel=2)"),
        ("nDCG'@10", "nDCG'@10"),
        ("nDCG'", "nDCG'"),
    ],
)
def test_names_round_trip(name: str, key: str) -> None:
    assert str(parse_measure(name)) == key
    assert parse_measure(name).incomplete


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Judged", "needs a cutoff"),
        ("bpref@10", "takes no cutoff"),
        ("Judged(rel=2)@5", "Judged takes no rel="),
        ("nDCG'(rel=2)@5", "nDCG' takes no rel="),
        ("nDCG''@5", "unknown measure"),
    ],
)
def test_bad_names_say_why(name: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("'", "'")):
        parse_measure(name)


def test_judged_by_hand() -> None:
    grades = {"a": 2, "b": 0, "c": -1}
    # a, b, c judged (a negative grade is a judgment); x, y not; over k even past the end
    assert judged_at(["a", "x", "b", "y", "c"], grades, 4) == 2 / 4
    assert judged_at(["a", "x", "b", "y", "c"], grades, 10) == 3 / 10
    assert evaluate(["x", "a"], grades, [parse_measure("Judged@2")]) == {"Judged@2": 0.5}


def test_bpref_by_hand() -> None:
    # R = 2 relevant (r1, r2), N = 3 judged non-relevant (n1..n3), u unjudged (skipped)
    grades = {"r1": 1, "r2": 2, "n1": 0, "n2": 0, "n3": 0}
    # r1 after one n: 1 - 1/min(3, 2) = 0.5; r2 after two: 1 - 2/2 = 0 -> (0.5 + 0) / 2
    assert bpref(["u", "n1", "r1", "u2", "n2", "r2"], grades) == pytest.approx(0.25)
    assert bpref(["r1", "u", "r2"], grades) == 1.0
    assert bpref(["n1"], {"n1": 0}) == 0.0  # no relevant document


def test_bpref_agrees_with_pytrec_eval_on_random_runs() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(30)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(60):
        judged = rng.sample(docs, rng.randint(1, 20))
        qrels[str(q)] = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in judged}
        run[str(q)] = rng.sample(docs, rng.randint(0, 30))
    for rel in (1, 2):
        expected = trec_bpref(qrels, run, rel)
        for q, ranking in run.items():
            assert bpref(ranking, qrels[q], rel) == pytest.approx(expected[q], abs=1e-12), (q, rel)


def test_bpref_agrees_with_pytrec_eval_on_cranfield() -> None:
    collection = load_collection(ROOT / "collections" / "cranfield")
    rng = random.Random(3)
    ids = list(collection.documents)
    qrels = {q: dict(g) for q, g in list(collection.qrels.items())[:40]}
    run = {q: sorted(set(rng.sample(ids, 40)) | set(list(g)[:5])) for q, g in qrels.items()}
    expected = trec_bpref(qrels, run)
    for q, ranking in run.items():
        assert evaluate(ranking, qrels[q], [BPREF])["bpref"] == pytest.approx(
            expected[q], abs=1e-12
        )


def test_condensed_ndcg_by_hand() -> None:
    # ranking a(3) u1 b(0) u2 c(1): the condensed list is a, b, c
    grades = {"a": 3, "b": 0, "c": 1, "d": 2}
    dcg = 3 / math.log2(2) + 0 / math.log2(3) + 1 / math.log2(4)  # = 3.5
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    value = evaluate(["a", "u1", "b", "u2", "c"], grades, [NDCG3C])["nDCG'@3"]
    assert value == pytest.approx(dcg / ideal)
    assert value == pytest.approx(3.5 / (3.5 + 2 / math.log2(3)))
    # the plain nDCG@3 reads u1 and u2 as irrelevant and sees only a
    plain = evaluate(["a", "u1", "b", "u2", "c"], grades, [parse_measure("nDCG@3")])["nDCG@3"]
    assert plain == pytest.approx(3 / ideal)


def test_a_grade_matrix_refuses_them() -> None:
    with pytest.raises(ValueError, match="Judged@10"):
        evaluate_many([["a"]], {"a": 1}, [JUDGED10])
    import numpy as np

    with pytest.raises(ValueError, match="bpref"):
        evaluate_grades(
            np.zeros((1, 1), dtype=np.int64),
            [prepare({"a": 1})],
            np.zeros(1, dtype=np.intp),
            [BPREF],
        )


def test_the_old_measures_keep_their_values_beside_them() -> None:
    grades = {"a": 3, "b": 0, "c": 1}
    ranking = ["u", "a", "b", "c"]
    old = [parse_measure(n) for n in ("nDCG@3", "P@5", "AP", "RR")]
    alone = evaluate(ranking, grades, old)
    together = evaluate(ranking, grades, [*old, JUDGED10, BPREF, NDCG3C])
    assert {k: together[k] for k in alone} == alone


class _Coded:
    """Rankings held as codes, as a run's tables hold them (CodedRankings)."""

    def __init__(self, rankings: list[list[str]]) -> None:
        self.keys = sorted({key for ranking in rankings for key in ranking})
        self.rankings = rankings

    def coded(self) -> tuple[list[str], Any, Any]:
        import numpy as np

        codes = [self.keys.index(key) for ranking in self.rankings for key in ranking]
        offsets = np.cumsum([0, *(len(r) for r in self.rankings)])
        return self.keys, np.array(codes, dtype=np.int32), offsets.astype(np.int64)


@pytest.mark.parametrize("coded", [False, True])
def test_judged_cells_average_each_cells_queries(coded: bool) -> None:
    import pandas as pd

    rankings = [["a", "x", "b"], ["y", "c"], ["a", "b", "c"]]
    qrels = {"1": {"a": 1, "b": 0}, "2": {"c": 0}}
    runs = pd.DataFrame(
        {
            "config_id": pd.Categorical(["c1", "c1", "c0", "c0", "c0"]),
            "policy": ["oracle"] * 5,
            "round": [1, 1, 1, 1, 0],
            "stage": ["rerank"] * 5,
            "query_id": ["1", "2", "1", "2", "2"],
            "ranking": [0, 1, 2, 2, 0],
        }
    )
    found = judged_cells(runs, _Coded(rankings) if coded else rankings, qrels, k=2)
    # Judged@2: c1 round 1: q1 [a, x] 1/2, q2 [y, c] 1/2; c0 round 1: q1 [a, b] 2/2, q2 [a, b]
    # 0/2; c0 round 0: q2 [a, x] 0/2; the cells as the rows first name them
    assert list(found.items()) == [
        (("c1", "oracle", 1, "rerank"), 0.5),
        (("c0", "oracle", 1, "rerank"), 0.5),
        (("c0", "oracle", 0, "rerank"), 0.0),
    ]
    assert judged_cells(runs.iloc[:0], rankings, qrels) == {}
