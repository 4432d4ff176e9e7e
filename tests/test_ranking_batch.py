"""The TF-IDF Rocchio scorer (``pool_scores``, ``pool_orders_many``) against a textbook
Rocchio written here (Rocchio 1971; Salton & Buckley 1990), on the shipped collections'
real result lists, and on small hand-checked cases of ties."""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from evidence_bench.collections.beir import load_collection
from evidence_bench.engine import ranking
from evidence_bench.engine.base import Label
from evidence_bench.engine.ranking import (
    TfidfRocchioRanker,
    marked_positions,
    order_many,
    pool_matrix,
    pool_orders,
    pool_orders_many,
    pool_scores,
    query_weights,
    rocchio_weights,
)
from evidence_bench.engine.text import Analyzer
from evidence_bench.evidence import Evidence
from evidence_bench.web.brave import BraveProvider, RetryPolicy
from evidence_bench.web.cassettes import REPLAY_BASE_URL
from evidence_bench.web.simulator import BraveSimulator, SimulatorTransport

ROOT = Path(__file__).resolve().parents[1]

#: The sweep's grid and its edges: alpha = 0, beta = 0, gamma = 0, and a common factor.
WEIGHTS = [
    (alpha, beta, gamma)
    for alpha in (0.0, 1.0, 2.5)
    for beta in (0.0, 0.25, 4.0, 8.0)
    for gamma in (0.0, 0.15, 4.0)
]


def _ev(n: int, title: str, snippet: str = "") -> Evidence:
    return Evidence(title=title, url=f"https://example.org/doc/{n}", snippet=snippet, rank=n + 1)


@functools.cache
def _pools(name: str, count: int) -> list[tuple[str, list[Evidence], dict[str, int]]]:
    """The first ``count`` judged queries' result lists (depth 50) as a run sees them
    (searched once for each ``name`` and ``count``; read-only)."""
    collection = load_collection(ROOT / "collections" / name, name=name)
    client = httpx.Client(transport=SimulatorTransport(BraveSimulator(collection)))
    provider = BraveProvider(
        "test", base_url=REPLAY_BASE_URL, http_client=client, retry=RetryPolicy(attempts=1)
    )
    pools = []
    with client:
        for query_id in collection.judged_query_ids()[:count]:
            text = collection.queries[query_id].text
            found = provider.search(text, limit=50)
            grades = {
                item.key: collection.qrels[query_id].get(collection.doc_id_for(item.key) or "", 0)
                for item in found
            }
            pools.append((text, found, grades))
    return pools


def _feedbacks(found: list[Evidence], grades: dict[str, int]) -> list[dict[str, Label]]:
    """No marks; an oracle's marks on the top 10 (relevant MORE/RELEVANT, the rest
    IRRELEVANT); positives only; negatives only; UNSURE only; a mark on a key not held."""
    top = found[:10]
    oracle = {
        item.key: (
            Label.MORE
            if grades[item.key] >= 2
            else Label.RELEVANT
            if grades[item.key] > 0
            else Label.IRRELEVANT
        )
        for item in top
    }
    return [
        {},
        oracle,
        {k: v for k, v in oracle.items() if v.polarity > 0},
        {k: v for k, v in oracle.items() if v.polarity < 0},
        {item.key: Label.UNSURE for item in top[:3]},
        {"https://elsewhere.invalid/": Label.MORE, found[-1].key: Label.LESS},
        {item.key: Label.MORE for item in found[::7]},
    ]


def _unit(idf: Mapping[str, float], counted: Mapping[str, int]) -> dict[str, float]:
    """:func:`textbook`'s vector of term counts ``counted``: sublinear tf times ``idf``, its
    terms outside ``idf`` dropped, L2-normalized."""
    vector = {t: (1.0 + math.log(tf)) * idf[t] for t, tf in counted.items() if t in idf}
    norm = math.sqrt(sum(weight * weight for weight in vector.values()))
    return {t: weight / norm for t, weight in vector.items()} if norm else {}


@functools.cache
def _textbook_vectors(
    analyzer: Analyzer, texts: tuple[str, ...]
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """:func:`textbook`'s idf over the candidates ``texts`` and their vectors: what depends
    on the candidates alone, the same for every ranker and feedback (worked out once for
    each; read-only)."""
    counts = [Counter(analyzer(text)) for text in texts]
    df = Counter(term for counted in counts for term in counted)
    n = len(texts)
    idf = {term: math.log((n + 1) / (freq + 1)) + 1.0 for term, freq in df.items()}
    return idf, [_unit(idf, counted) for counted in counts]


def textbook(
    ranker: TfidfRocchioRanker,
    query: str,
    candidates: Sequence[Evidence],
    feedback: Mapping[str, Label],
) -> tuple[list[float], list[int]]:
    """cos(q', d) for each candidate and the candidates' order by it, written out plainly.

    Vectors: sublinear tf ``1 + ln tf`` times the smoothed idf ``ln((N + 1) / (df + 1)) + 1``
    over the candidates, L2-normalized; the query's terms outside the candidates are
    dropped. q' = alpha·q + beta·mean(pull) − gamma·mean(push) (Rocchio 1971; pull: MORE,
    RELEVANT; push: LESS, IRRELEVANT), its negative weights set to 0 (Salton & Buckley
    1990). The order: score rounded to 12 digits, descending, ties in the candidates' order.
    Each sum runs left to right over the terms in the order they first appear.
    """
    analyzer = ranker.analyzer
    n = len(candidates)
    idf, documents = _textbook_vectors(analyzer, tuple(item.text for item in candidates))
    query_unit = _unit(idf, Counter(analyzer(query)))
    modified = {t: ranker.alpha * weight for t, weight in query_unit.items()}
    for sign, coefficient in ((1, ranker.beta), (-1, -ranker.gamma)):
        marked = [
            document
            for item, document in zip(candidates, documents, strict=True)
            if item.key in feedback and feedback[item.key].polarity * sign > 0
        ]
        total: dict[str, float] = {}
        for document in marked:
            for t, weight in document.items():
                total[t] = total.get(t, 0.0) + weight
        for t, weight in total.items():
            modified[t] = modified.get(t, 0.0) + coefficient * (weight / len(marked))
    modified = {t: weight for t, weight in modified.items() if weight > 0.0}
    norm = math.sqrt(sum(weight * weight for weight in modified.values()))
    scores = [
        sum(weight * modified.get(t, 0.0) for t, weight in document.items()) / norm if norm else 0.0
        for document in documents
    ]
    order = sorted(range(n), key=lambda i: (-round(scores[i], 12), i))
    return scores, order


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_the_scorer_is_the_textbook_rocchio_on_real_result_lists(name: str) -> None:
    checked = 0
    for analyzer in (Analyzer(), Analyzer(stemmer=None, stop_words=None)):
        rankers = [TfidfRocchioRanker(a, b, g, analyzer=analyzer) for a, b, g in WEIGHTS]
        for query, found, grades in _pools(name, 6):
            for depth in (10, len(found)):
                pool = found[:depth]
                for feedback in _feedbacks(pool, grades):
                    for ranker in rankers:
                        scores, order = textbook(ranker, query, pool, feedback)
                        # the same floats, not merely close ones
                        assert ranker.score(query, pool, feedback) == scores
                        ranked = ranker.rank(query, pool, feedback)
                        assert [item.key for item in ranked] == [pool[i].key for i in order]
                        assert [item.rank for item in ranked] == list(range(1, len(pool) + 1))
                        checked += 1
    assert checked > 5_000


def _orders(
    rankers: list[TfidfRocchioRanker], query: str, pool: list[Evidence], feedback: dict[str, Label]
) -> tuple[list[list[int]], list[list[int]]]:
    """pool_orders' orders, and the textbook's, for the same inputs."""
    analyzer = rankers[0].analyzer
    matrix = pool_matrix(analyzer, tuple(item.text for item in pool))
    query_vector = query_weights(analyzer, matrix, query)
    pull, push = marked_positions([item.key for item in pool], feedback)
    weights = rocchio_weights(rankers)
    fast = pool_orders(weights, query_vector, matrix, pull, push)
    return fast, [textbook(ranker, query, pool, feedback)[1] for ranker in rankers]


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_pool_orders_are_the_textbook_orders_on_real_result_lists(name: str) -> None:
    checked = 0
    rankers = [TfidfRocchioRanker(a, b, g) for a, b, g in WEIGHTS]
    for query, found, grades in _pools(name, 6):
        for depth in (10, len(found)):
            pool = found[:depth]
            for feedback in _feedbacks(pool, grades):
                fast, exact = _orders(rankers, query, pool, feedback)
                assert fast == exact
                for ranker, order in zip(rankers, fast, strict=True):
                    ranked = ranker.rank(query, pool, feedback)
                    assert [pool[i].key for i in order] == [item.key for item in ranked]
                    checked += 1
    assert checked > 2_000


_WORDS = [
    "wing",
    "flutter",
    "boundary",
    "layer",
    "shock",
    "wave",
    "heat",
    "transfer",
    "supersonic",
    "flow",
]


def test_pool_orders_equal_the_textbook_orders_on_random_pools_with_ties() -> None:
    # Texts drawn from ten words, so many candidates share a text (an exact tie of two
    # positive scores) or nearly do; marks and weights at random, the grid's edges included.
    rng = np.random.default_rng(13)
    grid = [0.0, 0.15, 0.25, 0.75, 1.0, 2.5, 4.0, 8.0]
    labels = [Label.MORE, Label.RELEVANT, Label.LESS, Label.IRRELEVANT, Label.UNSURE]
    for case in range(400):
        size = int(rng.integers(1, 25))
        pool = [
            _ev(n, " ".join(rng.choice(_WORDS, size=int(rng.integers(1, 6))))) for n in range(size)
        ]
        marked = rng.choice(size, size=int(rng.integers(0, size + 1)), replace=False)
        feedback = {pool[int(d)].key: labels[int(rng.integers(len(labels)))] for d in marked}
        rankers = [
            TfidfRocchioRanker(*(float(w) for w in rng.choice(grid, size=3))) for _ in range(6)
        ]
        query = " ".join(rng.choice(_WORDS, size=int(rng.integers(1, 4))))
        fast, exact = _orders(rankers, query, pool, feedback)
        assert fast == exact, case


def test_pool_orders_score_exact_ties_exactly() -> None:
    # Documents 0, 2 and 3 share a text: their approximate scores are too close to order,
    # so the row is scored exactly, and they stay in the candidates' order after document 1.
    pool = [
        _ev(0, "wing flutter"),
        _ev(1, "wing wing"),
        _ev(2, "wing flutter"),
        _ev(3, "wing flutter"),
        _ev(4, "boundary layer"),
    ]
    rankers = [TfidfRocchioRanker(1.0, 0.0, 0.0), TfidfRocchioRanker(1.0, 0.75, 0.15)]
    fast, exact = _orders(rankers, "wing", pool, {pool[4].key: Label.IRRELEVANT})
    assert fast == exact == [[1, 0, 2, 3, 4], [1, 0, 2, 3, 4]]


def test_pool_orders_at_the_edges() -> None:
    pool = [_ev(n, title) for n, title in enumerate(["wing flutter", "boundary layer", "wing"])]
    ranker = TfidfRocchioRanker()
    # no query term among the candidates and no pull: the candidates' order
    assert _orders([ranker], "supersonic", pool, {})[0] == [[0, 1, 2]]
    # a pull alone, with alpha = 0: the pulled document first
    only_pull = TfidfRocchioRanker(0.0, 1.0, 0.0)
    assert _orders([only_pull], "supersonic", pool, {pool[1].key: Label.MORE})[0] == [[1, 0, 2]]
    # weights near underflow or overflow are scored exactly: |q'|² underflows to 0 or
    # overflows to inf, so every score is 0.0 and the order is the candidates', as rank's
    for extreme in (1e-300, 1e300):
        ranker = TfidfRocchioRanker(extreme, 1.0, 0.5)
        with np.errstate(over="ignore"):  # numpy warns where Python's floats do not
            fast, exact = _orders([ranker], "wing", pool, {})
        assert fast == exact == [[0, 1, 2]]
        assert ranker.rank("wing", pool, {}) == pool
    # candidates without a term, one of them pulled: every score 0, the candidates' order
    empty = [_ev(n, "", "the of a") for n in range(3)]
    fast, exact = _orders([TfidfRocchioRanker()], "wing", empty, {empty[1].key: Label.MORE})
    assert fast == exact == [[0, 1, 2]]
    # no rankers, no candidates
    ranker = TfidfRocchioRanker()
    matrix = pool_matrix(ranker.analyzer, ())
    assert pool_orders(rocchio_weights([ranker]), {}, matrix, [], []) == [[]]
    assert pool_orders(rocchio_weights([]), {}, matrix, [], []) == []


def test_exact_ties_keep_the_candidates_order() -> None:
    # Documents 0, 2 and 3 have the same text, so the same score: they stay in the
    # candidates' order (0, 2, 3), after document 1, which holds "wing" twice.
    pool = [
        _ev(0, "wing flutter"),
        _ev(1, "wing wing"),
        _ev(2, "wing flutter"),
        _ev(3, "wing flutter"),
        _ev(4, "boundary layer"),
    ]
    rankers = [TfidfRocchioRanker(1.0, 0.0, 0.0), TfidfRocchioRanker(1.0, 0.75, 0.15)]
    scores = np.array([ranker.score("wing", pool, {}) for ranker in rankers])
    # cos with q = (wing): tf-idf of "wing" over the document's norm; "boundary layer" 0.
    idf_wing = math.log(6 / 5) + 1.0
    idf_flutter = math.log(6 / 4) + 1.0
    flutter = idf_wing / math.hypot(idf_wing, idf_flutter)
    assert scores[0].tolist() == pytest.approx([flutter, 1.0, flutter, flutter, 0.0])
    assert order_many(scores) == [[1, 0, 2, 3, 4], [1, 0, 2, 3, 4]]


def test_scores_that_round_to_one_value_tie_by_the_candidates_order() -> None:
    # 0.3 and 0.1 + 0.2 differ in the last bit (0.30000000000000004) but are one value at
    # 12 digits: the rank rule orders them by index, not by the raw floats.
    scores = np.array([[0.3, 0.1 + 0.2, 0.5], [0.1 + 0.2, 0.3, 0.0]])
    assert scores[0, 1] > scores[0, 0]
    assert order_many(scores) == [[2, 0, 1], [0, 1, 2]]
    # 1e-12 apart is two values at 12 digits: the higher first.
    assert order_many(np.array([[0.25, 0.25 + 1e-12]])) == [[1, 0]]


def test_no_candidates_and_no_rankers() -> None:
    ranker = TfidfRocchioRanker()
    assert ranker.score("wing", [], {}) == []
    assert ranker.rank("wing", [], {}) == []
    matrix = pool_matrix(ranker.analyzer, ("wing",))
    assert pool_scores(rocchio_weights([]), {}, matrix, [], []).shape == (0, 1)
    assert order_many(np.zeros((1, 0))) == [[]]


def test_a_query_outside_the_candidates_vocabulary_keeps_their_order() -> None:
    pool = [_ev(n, title) for n, title in enumerate(["wing flutter", "boundary layer"])]
    rankers = [TfidfRocchioRanker(1.0, b, g) for b, g in itertools.product((0.0, 1.0), (0.0, 1.0))]
    feedback = {pool[1].key: Label.IRRELEVANT}
    assert [ranker.score("supersonic", pool, feedback) for ranker in rankers] == [[0.0, 0.0]] * 4
    assert [ranker.rank("supersonic", pool, feedback) for ranker in rankers] == [pool] * 4


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_pool_orders_many_orders_every_feedback_as_the_textbook(name: str) -> None:
    # One call for a candidate set under every feedback (each with its own rows) gives
    # what each feedback gives alone, and the textbook's order for each ranker.
    rankers = [TfidfRocchioRanker(a, b, g) for a, b, g in WEIGHTS]
    weights = rocchio_weights(rankers)
    checked = 0
    for query, found, grades in _pools(name, 4):
        for depth in (10, len(found)):
            pool = found[:depth]
            matrix = pool_matrix(rankers[0].analyzer, tuple(item.text for item in pool))
            query_vector = query_weights(rankers[0].analyzer, matrix, query)
            keys = [item.key for item in pool]
            feedbacks = _feedbacks(pool, grades)
            rows = [list(range(len(rankers)))[k % 3 :: 1 + k % 4] for k in range(len(feedbacks))]
            groups = [
                (weights[picked], *marked_positions(keys, feedback))
                for picked, feedback in zip(rows, feedbacks, strict=True)
            ]
            together = pool_orders_many(query_vector, matrix, groups)
            for (w, pull, push), orders, picked, feedback in zip(
                groups, together, rows, feedbacks, strict=True
            ):
                assert orders == pool_orders(w, query_vector, matrix, pull, push)
                for row, order in zip(picked, orders, strict=True):
                    assert order == textbook(rankers[row], query, pool, feedback)[1]
                    checked += 1
    assert checked > 500


def test_pool_orders_many_in_blocks_orders_as_in_one_product(monkeypatch: Any) -> None:
    # A product too large for one BLAS block is made block by block: the same orders.
    pool = [_ev(n, " ".join(_WORDS[n % 7 : n % 7 + 3]), _WORDS[n % 10]) for n in range(12)]
    rankers = [TfidfRocchioRanker(a, b, g) for a, b, g in WEIGHTS]
    matrix = pool_matrix(rankers[0].analyzer, tuple(item.text for item in pool))
    query_vector = query_weights(rankers[0].analyzer, matrix, "wing flow")
    groups = [(rocchio_weights(rankers), [1, 4], [2]), (rocchio_weights(rankers), [], [0])]
    whole = pool_orders_many(query_vector, matrix, groups)
    monkeypatch.setattr(ranking, "_PRODUCT_SIZE", 1)
    assert pool_orders_many(query_vector, matrix, groups) == whole
    for (w, pull, push), orders in zip(groups, whole, strict=True):
        assert orders == order_many(pool_scores(w, query_vector, matrix, pull, push))
