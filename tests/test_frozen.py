"""Frozen evaluation: full freezing across rounds, and the cells that cannot change.

Every expected list below is worked out by hand from the scripted rankings (the comments show
the steps), and expected measure values are pytrec_eval's on those lists. The one property
test compares two frozen rankings with each other, so it uses the package's trec_eval-exact
``evaluate`` (itself checked against pytrec_eval in test_measures.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Set
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine.base import Feedback, RefinedQuery
from evidence_bench.evaluation.frozen import fixed_in_frozen, frozen_prefix
from evidence_bench.evaluation.measures import (
    evaluate,
    parse_measure,
    prepare,
    ranks_to_scores,
)
from evidence_bench.evaluation.statistics import holm
from evidence_bench.evidence import Evidence
from evidence_bench.experiment import episodes
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.episodes import run_episode
from evidence_bench.experiment.run import perform_run
from evidence_bench.protocol.episode import EpisodeResult, Judgments, frozen_order
from evidence_bench.protocol.stages import PARTNERS
from evidence_bench.report import analyze, load_run, render_report, summary_table
from evidence_bench.runs.data import RunData
from evidence_bench.users.policies import Mark, OraclePolicy, UserPolicy
from tests.conftest import exported

TREC_NAMES = {
    "nDCG@10": "ndcg_cut_10",
    "P@2": "P_2",
    "P@3": "P_3",
    "P@4": "P_4",
    "P@10": "P_10",
    "R@5": "recall_5",
    "R@20": "recall_20",
    "AP": "map",
    "RR": "recip_rank",
}
A = [f"A{i}" for i in range(1, 11)]  # A1 .. A10, written out where it matters


# --- frozen_order, by hand ------------------------------------------------------------------


def test_the_issue_example_keeps_b1_and_b2_where_they_were_shown() -> None:
    # Round 1 showed A1..A10 at 1..10. Round 2's ranking has B1 at 3 and B2 at 5; what the
    # user sees holds A1..A10 in place, so B1 is shown at 11 and B2 at 12 (not B2 11, B1 12).
    pins = {key: rank for rank, key in enumerate(A, start=1)}
    round2 = ["A1", "A2", "B1", "A3", "B2", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "X1"]
    expected = ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "B1", "B2", "X1"]
    assert frozen_order(round2, pins) == expected
    # After round 2 (B1 at 11, B2 at 12), any later ranking keeps all twelve in place.
    pins |= {"B1": 11, "B2": 12}
    later = ["B2", "X1", "A3", "B1", "X2"]
    assert frozen_order(later, pins) == [*expected[:12], "X1", "X2"]


@pytest.mark.parametrize(
    ("ranking", "pinned", "expected"),
    [
        (["x", "y"], {}, ["x", "y"]),  # nothing examined: the ranking itself
        (["c", "b", "a", "d"], {"a": 1, "b": 2}, ["a", "b", "c", "d"]),
        # a pinned document the ranking does not hold keeps its position (it was shown there)
        (["c", "a", "d"], {"a": 1, "b": 2}, ["a", "b", "c", "d"]),
        (["d", "e"], {"a": 1, "b": 2, "c": 3}, ["a", "b", "c", "d", "e"]),
        # pins after a free position: the free one takes the ranking's first unpinned document
        (["c", "d", "e"], {"a": 1, "b": 4}, ["a", "c", "d", "b", "e"]),
        # too few documents to fill the gap before a pin: the pinned one moves up, no hole
        (["c"], {"a": 1, "b": 4}, ["a", "c", "b"]),
        ([], {"b": 2, "a": 1}, ["a", "b"]),
    ],
)
def test_frozen_order_by_hand(
    ranking: list[str], pinned: dict[str, int], expected: list[str]
) -> None:
    assert frozen_order(ranking, pinned) == expected


@pytest.mark.parametrize(
    ("pinned", "message"),
    [
        ({"a": 1, "b": 1}, "'a' and 'b' are both pinned at 1"),
        ({"a": 0}, "'a' is pinned at position 0; positions start at 1"),
    ],
)
def test_frozen_order_refuses_inconsistent_pins(pinned: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        frozen_order(["a", "b"], pinned)


# --- episodes, by hand ----------------------------------------------------------------------


def _evidence(name: str) -> Evidence:
    return Evidence(title=name, url=f"https://frozen.test/{name}", snippet="")


def _key(name: str) -> str:
    return _evidence(name).key


class Scripted:
    """A ranker that orders the candidates by a preference list chosen by how many labels the
    feedback holds (so each round can be scripted), the rest after them in candidate order."""

    name = "scripted"

    def __init__(self, orders: Mapping[int, Sequence[str]]) -> None:
        self.orders = orders

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        prefer = {_key(n): i for i, n in enumerate(self.orders.get(len(feedback), ()))}
        ordered = sorted(candidates, key=lambda item: prefer.get(item.key, len(prefer)))
        return [item.with_rank(rank) for rank, item in enumerate(ordered, start=1)]


class ScriptedRefiner:
    """Refines to ``q<number of labels>``, so the provider can answer each round."""

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        return RefinedQuery(f"q{len(feedback)}", ())


class ScriptedProvider:
    def __init__(self, results: Mapping[str, Sequence[str]]) -> None:
        self.results = results

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        return [_evidence(n) for n in self.results[query]][:limit]


class Watching:
    """A user policy that records each list it is shown, then judges as ``inner`` does."""

    def __init__(self, inner: UserPolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.shown: list[list[str]] = []

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        self.shown.append([item.title for item in displayed])
        return self.inner.judge(
            query_id=query_id,
            round=round,
            displayed=displayed,
            judgments=judgments,
            examined=examined,
        )


def _scripted_episode(
    monkeypatch: pytest.MonkeyPatch,
    *,
    initial: list[str],
    deep: list[str],
    grades: dict[str, int],
    orders: dict[int, list[str]],
    searches: dict[str, list[str]],
    depth: int,
    rounds: int,
    measures: Sequence[str],
) -> tuple[EpisodeResult, dict[tuple[int, str, str], list[str]], list[list[str]]]:
    """Run a real episode over scripted parts; also return each list the frozen mode reads,
    by (round, stage, mode): the stage's ranking with every document examined so far where
    it was shown (``frozen_order``), cut to its partner's length; and what the user was
    shown in each round (by document name)."""
    by_key = {_key(n): g for n, g in grades.items()}
    user = Watching(OraclePolicy(depth=depth, unjudged="skip"))  # the scripts count labels
    result = run_episode(
        query_id="q",
        query="scripted query",
        initial=[_evidence(n).with_rank(i) for i, n in enumerate(initial, 1)],
        deep=[_evidence(n).with_rank(i) for i, n in enumerate(deep, 1)],
        provider=ScriptedProvider(searches),
        ranker=Scripted(orders),
        control=Scripted({}),
        refiner=ScriptedRefiner(),
        user=user,
        judgments=Judgments(by_key, prepare(by_key)),
        measures=[parse_measure(m) for m in measures],
        modes=("full", "residual", "frozen"),
        rounds=rounds,
        depth=10,
        seed=0,
        policy="oracle",
    )
    evaluated: dict[tuple[int, str, str], list[str]] = {}
    for round_ in range(1, rounds + 1):
        pinned: dict[str, int] = {}
        for seen, key, _, rank in result.feedback:
            if seen <= round_:
                pinned.setdefault(key, rank)
        lists = {s: frozen_order(k, pinned) for (r, s), k in result.rankings.items() if r == round_}
        for stage, keys in lists.items():
            partner = PARTNERS.get(stage)
            cut = keys[: len(lists[partner])] if partner in lists else keys
            evaluated[(round_, stage, "frozen")] = [key.rsplit("/", 1)[1] for key in cut]
    return result, evaluated, user.shown


def _pytrec(
    ranking: list[str], grades: Mapping[str, int], measures: Sequence[str]
) -> dict[str, float]:
    qrels = {"q": {_key(n): g for n, g in grades.items()}}
    run = {"q": dict(zip([_key(n) for n in ranking], ranks_to_scores(len(ranking)), strict=True))}
    names = {TREC_NAMES[m] for m in measures}
    values = pytrec_eval.RelevanceEvaluator(qrels, names).evaluate(run)["q"]
    return {m: values[TREC_NAMES[m]] for m in measures}


def _check_values(
    result: EpisodeResult,
    expected: Mapping[tuple[int, str], list[str]],
    grades: Mapping[str, int],
    measures: Sequence[str],
) -> None:
    frozen = {(r, s, m): v for r, s, mode, m, v in result.scores if mode == "frozen"}
    for (round_, stage), ranking in expected.items():
        for measure, value in _pytrec(ranking, grades, measures).items():
            assert frozen[(round_, stage, measure)] == pytest.approx(value, abs=1e-12), (
                round_,
                stage,
                measure,
            )


def test_two_rounds_by_hand_the_issue_example(monkeypatch: pytest.MonkeyPatch) -> None:
    grades = {"A1": 1, "A2": 0, "A3": 2, "B1": 1, "B2": 1, "X2": 1, "C1": 2}
    initial = [*A, "X1", "X2"]
    # Round 1: a depth-10 oracle examines A1..A10 (A1 relevant, A2 irrelevant, A3 more, the
    # rest unjudged: seen), 3 labels. Expanding with q3 brings B1, B2; the ranking with 3
    # labels has B1 at 3 and B2 at 5 (the issue's round-2 list).
    issue = ["A1", "A2", "B1", "A3", "B2", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "X1", "X2"]
    orders = {3: issue, 6: ["C2", "X2", "B2", "C1", "A5", "B1", "X1"]}
    searches = {"q3": ["B1", "B2"], "q6": ["C1", "C2"]}
    measures = ("nDCG@10", "P@10", "R@20", "AP", "RR")
    result, evaluated, shown = _scripted_episode(
        monkeypatch, initial=initial, deep=[*initial, "D1", "D2", "D3", "D4"], grades=grades,
        orders=orders, searches=searches, depth=10, rounds=2, measures=measures,
    )  # fmt: skip
    # Round 2 shows A1..A10 where they were, then B1, B2, X1, X2 in the ranking's order:
    # B1 is shown at 11 and B2 at 12, and that is the rank feedback.csv records.
    round2 = ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "B1", "B2", "X1", "X2"]
    assert shown == [initial, round2]
    ranks = [(r, key.rsplit("/", 1)[1], label, rank) for r, key, label, rank in result.feedback]
    assert ranks == [
        (1, "A1", "relevant", 1), (1, "A2", "irrelevant", 2), (1, "A3", "more", 3),
        (1, "A4", "seen", 4), (1, "A5", "seen", 5), (1, "A6", "seen", 6), (1, "A7", "seen", 7),
        (1, "A8", "seen", 8), (1, "A9", "seen", 9), (1, "A10", "seen", 10),
        (2, "B1", "relevant", 11), (2, "B2", "relevant", 12), (2, "X1", "seen", 13),
        (2, "X2", "relevant", 14),
    ]  # fmt: skip
    expected = {
        # round 1: A1..A10 pinned; rerank's 3-label order over the 12 candidates is the issue
        # list without B1, B2, so frozen it is the initial order
        (1, "rerank"): [*A, "X1", "X2"],
        (1, "expand"): [*A, "B1", "B2", "X1", "X2"],
        (1, "deep_initial"): [*A, "X1", "X2", "D1", "D2"],  # deep[:14]
        # round 2: all 14 candidates examined, so the expected round-2 frozen list is round2
        (2, "rerank"): round2,
        (2, "control"): round2,
        (2, "initial"): round2,  # deep[:14] frozen: B1, B2 held at 11, 12 though absent
        # expand adds C1, C2: the free positions 15, 16 take them in the 6-label order
        (2, "expand"): [*round2, "C2", "C1"],
        (2, "deep_initial"): [*round2, "D1", "D2"],  # deep[:16] = initial + D1..D4 frozen
    }
    for (round_, stage), ranking in expected.items():
        assert evaluated[(round_, stage, "frozen")] == ranking, (round_, stage)
    _check_values(result, expected, grades, measures)


def test_three_rounds_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    grades = {"a": 0, "b": 1, "c": 2, "e": 1, "x": 1, "y": 0}  # d, f.., z, w unjudged
    orders = {
        2: ["d", "x", "c", "b", "a"],
        3: ["c", "y", "x", "a", "d", "b", "z"],
        5: ["z", "e", "y", "d", "c", "b", "x", "a"],
    }
    searches = {"q2": ["x", "a"], "q3": ["y", "z", "c"], "q5": ["e", "w"]}
    measures = ("nDCG@10", "P@2", "R@5", "AP", "RR")
    result, evaluated, shown = _scripted_episode(
        monkeypatch, initial=["a", "b", "c", "d"], deep=list("abcdefghi"), grades=grades,
        orders=orders, searches=searches, depth=2, rounds=3, measures=measures,
    )  # fmt: skip
    # Round 1 shows [a b c d]: a irrelevant at 1, b relevant at 2 (2 labels). Expanding
    # (q2) adds x; the 2-label order is [d x c b a]. Round 2 shows it with a, b held at 1, 2:
    # [a b d x c]; the user examines d (unjudged: seen) at 3 and x (relevant) at 4 (3 labels).
    # q3 adds y, z; the 3-label order is [c y x a d b z]; round 3 shows [a b d x c y z]: c
    # (more) at 5, y (irrelevant) at 6.
    assert shown == [list("abcd"), list("abdxc"), list("abdxcyz")]
    ranks = [(r, key.rsplit("/", 1)[1], label, rank) for r, key, label, rank in result.feedback]
    assert ranks == [
        (1, "a", "irrelevant", 1), (1, "b", "relevant", 2), (2, "d", "seen", 3),
        (2, "x", "relevant", 4), (3, "c", "more", 5), (3, "y", "irrelevant", 6),
    ]  # fmt: skip
    expected = {
        # round 1, a@1 b@2. rerank [d c b a] -> [a b d c]; control (the provider's order
        # over the candidates) and initial (deep[:4]) are [a b c d] already
        (1, "rerank"): list("abdc"),
        (1, "shuffled"): list("abdc"),  # as many labels: the same scripted order
        (1, "control"): list("abcd"),
        (1, "initial"): list("abcd"),
        (1, "expand"): list("abdxc"),  # [d x c b a] with a, b held
        (1, "deep_initial"): list("abcde"),  # deep[:5]
        (1, "deep_control"): list("abcde"),
        # round 2, + d@3 x@4. rerank [c x a d b] -> [a b d x c]; initial deep[:5] =
        # [a b c d e] -> [a b d x c e], x held at 4 though initial does not hold it, then
        # cut to rerank's length 5
        (2, "rerank"): list("abdxc"),
        (2, "shuffled"): list("abdxc"),
        (2, "control"): list("abdxc"),
        (2, "initial"): list("abdxc"),
        (2, "expand"): list("abdxcyz"),  # [c y x a d b z]
        (2, "deep_initial"): list("abdxcef"),  # deep[:7] -> [a b d x c e f g], cut to 7
        (2, "deep_control"): list("abdxcef"),
        # round 3, + c@5 y@6. rerank [z y d c b x a] -> [a b d x c y z]; initial deep[:7]
        # -> [a b d x c y e f g] cut to 7; expand (q5 adds e, w) [z e y d c b x a w]
        (3, "rerank"): list("abdxcyz"),
        (3, "shuffled"): list("abdxcyz"),
        (3, "control"): list("abdxcyz"),
        (3, "initial"): list("abdxcye"),
        (3, "expand"): list("abdxcyzew"),
        (3, "deep_initial"): list("abdxcyefg"),  # deep[:9] -> [a b d x c y e f g h i], cut 9
        (3, "deep_control"): list("abdxcyefg"),
    }
    frozen_lists = {(r, s): keys for (r, s, mode), keys in evaluated.items() if mode == "frozen"}
    assert {k: v for k, v in frozen_lists.items() if k[0] > 0} == expected
    _check_values(result, expected, grades, measures)
    # The full and residual modes still see the rankings themselves.
    rerank = [key.rsplit("/", 1)[1] for key in result.rankings[(3, "rerank")]]
    assert rerank == list("zydcbxa")
    examined = {key.rsplit("/", 1)[1] for _, key, _, _ in result.feedback}
    assert [name for name in rerank if name not in examined] == ["z"]


# --- the fixed-cell rule, by hand -----------------------------------------------------------

_PREFIX3 = {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize(
    ("measure", "pinned", "grades", "fixed"),
    [
        # the cutoff within the prefix 1..3: only ranks 1..k count
        ("P@3", _PREFIX3, {"b": 1, "d": 2, "e": 1}, True),
        ("nDCG@3", _PREFIX3, {"b": 1, "d": 2, "e": 1}, True),
        ("R@3", _PREFIX3, {"b": 1, "d": 2, "e": 1}, True),
        ("AP@3", _PREFIX3, {"b": 1, "d": 2, "e": 1}, True),
        ("P@4", _PREFIX3, {"b": 1, "d": 2, "e": 1}, False),  # d or e can take rank 4
        ("nDCG@10", _PREFIX3, {"b": 1, "d": 2, "e": 1}, False),
        ("AP", _PREFIX3, {"b": 1, "d": 2, "e": 1}, False),
        # RR: a relevant document in the prefix is the first one in every ranking
        ("RR", _PREFIX3, {"b": 1, "d": 2, "e": 1}, True),
        ("RR", _PREFIX3, {"a": 0, "d": 1}, False),  # the first relevant is after the prefix
        # every document that can score is in the prefix: nothing after it adds anything
        ("nDCG@10", _PREFIX3, {"b": 1, "c": 2, "z": 0}, True),
        ("nDCG", _PREFIX3, {"b": 1, "c": 2}, True),
        ("P@10", _PREFIX3, {"b": 1, "c": 2}, True),
        ("R@20", _PREFIX3, {"b": 1, "c": 2}, True),
        ("AP", _PREFIX3, {"b": 1, "c": 2}, True),
        # relevance levels: only grade >= rel can score
        ("P(rel=2)@10", _PREFIX3, {"b": 1, "c": 2, "d": 1}, True),
        ("P@10", _PREFIX3, {"b": 1, "c": 2, "d": 1}, False),
        ("RR(rel=2)", _PREFIX3, {"b": 1, "d": 2}, False),
        ("RR(rel=2)", _PREFIX3, {"b": 2, "d": 2}, True),
        # only the contiguous prefix counts: position 3 is free, so rank 4 moves
        ("P@2", {"a": 1, "b": 2, "c": 4}, {"c": 1, "d": 1}, True),
        ("P@3", {"a": 1, "b": 2, "c": 4}, {"c": 1, "d": 1}, False),
        ("RR", {"a": 1, "b": 2, "c": 4}, {"c": 1}, False),
        ("P@1", {"b": 2}, {"b": 1}, False),  # nothing at 1: no prefix at all
        ("nDCG@10", {}, {"b": 1}, False),  # round 0: nothing examined
    ],
)
def test_fixed_in_frozen_by_hand(
    measure: str, pinned: dict[str, int], grades: dict[str, int], fixed: bool
) -> None:
    assert fixed_in_frozen(parse_measure(measure), pinned, grades) is fixed


def test_frozen_prefix() -> None:
    assert frozen_prefix({"c": 3, "a": 1, "b": 2}) == ["a", "b", "c"]
    assert frozen_prefix({"a": 1, "b": 2, "c": 4}) == ["a", "b"]
    assert frozen_prefix({"b": 2}) == []
    assert frozen_prefix({}) == []


@pytest.mark.parametrize(
    ("measure", "pinned", "grades", "one", "other"),
    [  # each "not fixed" case above: two frozen rankings that score differently
        ("P@4", _PREFIX3, {"b": 1, "d": 2, "e": 1}, ["d"], ["f"]),
        ("nDCG@10", _PREFIX3, {"b": 1, "d": 2, "e": 1}, ["d", "e"], ["e", "d"]),
        ("AP", _PREFIX3, {"b": 1, "d": 2, "e": 1}, ["d", "e"], ["f", "d", "e"]),
        ("RR", _PREFIX3, {"a": 0, "d": 1}, ["d"], ["f", "d"]),
        ("P@10", _PREFIX3, {"b": 1, "c": 2, "d": 1}, ["d"], ["f"]),
        ("P@3", {"a": 1, "b": 2, "c": 4}, {"c": 1, "d": 1}, ["d"], ["f"]),
        ("RR", {"a": 1, "b": 2, "c": 4}, {"c": 1}, ["d"], []),  # c moves up from 4 to 3
    ],
)
def test_what_is_not_fixed_can_change(
    measure: str, pinned: dict[str, int], grades: dict[str, int], one: list[str], other: list[str]
) -> None:
    assert not fixed_in_frozen(parse_measure(measure), pinned, grades)
    first = _pytrec(frozen_order(one, pinned), grades, [measure])
    second = _pytrec(frozen_order(other, pinned), grades, [measure])
    assert first != second


@settings(max_examples=150, deadline=None)
@given(
    p=st.integers(0, 6),
    grades=st.lists(st.integers(-1, 3), min_size=10, max_size=10),
    orders=st.lists(st.permutations(range(10)), min_size=2, max_size=2),
    length=st.integers(0, 10),
)
def test_a_fixed_measure_has_one_value_in_every_frozen_ranking(
    p: int, grades: list[int], orders: list[list[int]], length: int
) -> None:
    """The rule is sound: wherever it says fixed, two frozen rankings built from any
    orders of the other documents (of any length) score alike."""
    docs = [f"d{i}" for i in range(10)]
    qrels = {doc: grade for doc, grade in zip(docs, grades, strict=True)}
    pinned = {doc: rank for rank, doc in enumerate(docs[:p], start=1)}
    rankings = [frozen_order([docs[i] for i in order[:length]], pinned) for order in orders]
    for name in ("nDCG@3", "nDCG@10", "P@2", "P@5", "R@4", "AP", "RR", "P(rel=2)@5"):
        measure = parse_measure(name)
        if fixed_in_frozen(measure, pinned, qrels):
            one, other = (evaluate(r, qrels, [measure])[name] for r in rankings)
            assert one == pytest.approx(other, abs=1e-12), name


# --- the shipped collections ----------------------------------------------------------------


def _run(runs_dir: Path, *extra: str) -> Path:
    cfg, text = compose(
        [
            "+experiment=policy_compare",  # all seven users, patient and budget among them
            "experiment.queries=8",
            "experiment.rounds=3",
            f"runs_dir={runs_dir}",
            "workers=1",
            "progress=false",
            "report=false",
            *extra,
        ]
    )
    return exported(perform_run(cfg, text).path)


@pytest.fixture(scope="module")
def cranfield_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first 8 Cranfield queries, every user, three rounds: as run, and with the user
    shown the unfrozen ranking (the protocol's ``frozen_order`` replaced by the ranking
    itself, the display before full freezing)."""
    frozen = _run(tmp_path_factory.mktemp("frozen"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(episodes, "frozen_order", lambda ranking, pinned: list(ranking))
        unfrozen = _run(tmp_path_factory.mktemp("unfrozen"))
    return frozen, unfrozen


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"query_id": str, "doc_id": str})


def test_the_frozen_display_changes_nothing_the_user_examines(
    cranfield_runs: tuple[Path, Path],
) -> None:
    """A user skips what they examined, so the frozen list and the unfrozen ranking yield the
    same new documents in the same order: same marks, same full and residual values."""
    frozen, unfrozen = cranfield_runs
    now, before = _csv(frozen / "per_query.csv"), _csv(unfrozen / "per_query.csv")
    users = {"oracle", "noisy", "positive_only", "negative_only", "patient", "budget", "random"}
    assert set(now["policy"]) == users
    assert set(now["round"]) == {0, 1, 2, 3}
    for mode in ("full", "residual"):
        mine = now[now.eval_mode == mode].reset_index(drop=True)
        theirs = before[before.eval_mode == mode].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, theirs)
    marks, old_marks = _csv(frozen / "feedback.csv"), _csv(unfrozen / "feedback.csv")
    pd.testing.assert_frame_equal(marks.drop(columns="rank"), old_marks.drop(columns="rank"))
    assert (marks["rank"] != old_marks["rank"]).any()  # what changes: where each was shown
    first = marks["round"] == 1
    assert (marks[first]["rank"] == old_marks[first]["rank"]).all()  # round 1: nothing held
    episodes = (frozen / "episodes.jsonl").read_text().splitlines()
    assert episodes == (unfrozen / "episodes.jsonl").read_text().splitlines()


def test_examined_documents_are_the_frozen_prefix(cranfield_runs: tuple[Path, Path]) -> None:
    marks = _csv(cranfield_runs[0] / "feedback.csv")
    for (policy, _query), shown in marks.groupby(["policy", "query_id"]):
        ranks = shown.sort_values(["round", "rank"])["rank"].tolist()
        assert ranks == list(range(1, len(ranks) + 1)), (policy, _query)  # 1..p, round by round
    tens = marks[marks.policy.isin(["oracle", "noisy", "random", "budget", "positive_only"])]
    by_round = tens.groupby("round")["rank"].agg(["min", "max"])
    # 20 results shown; every depth-10 user examines 10 a round: 1..10, 11..20, 21..30
    assert by_round.to_dict("index") == {
        1: {"min": 1, "max": 10}, 2: {"min": 11, "max": 20}, 3: {"min": 21, "max": 30}
    }  # fmt: skip


def test_summary_marks_the_cells_that_cannot_change(cranfield_runs: tuple[Path, Path]) -> None:
    run = cranfield_runs[0]
    summary = pd.read_csv(run / "summary.csv", dtype={"config_id": str})
    assert summary["fixed"].dtype == bool
    assert not summary[summary.eval_mode != "frozen"]["fixed"].any()
    assert not summary[summary["round"] == 0]["fixed"].any()
    keys = ["policy", "round", "stage", "measure"]
    frozen = summary[summary.eval_mode == "frozen"].set_index(keys)["fixed"]
    stages = set(summary["stage"])
    for policy in ("oracle", "noisy", "random", "budget", "positive_only", "negative_only"):
        for round_ in (1, 2, 3):
            for stage in stages:
                # depth 10: the prefix is 1..10 after round 1, 1..20 after round 2 ...
                assert frozen[(policy, round_, stage, "nDCG@10")], (policy, round_, stage)
                assert frozen[(policy, round_, stage, "P@10")], (policy, round_, stage)
                assert frozen[(policy, round_, stage, "R@20")] == (round_ >= 2)
    # The patient user stops after 3 non-relevant results in a row: a shorter prefix.
    marks = _csv(run / "feedback.csv")
    patient = marks[(marks.policy == "patient") & (marks["round"] == 1)]
    assert patient.groupby("query_id").size().min() < 10
    assert not frozen[("patient", 1, "rerank", "nDCG@10")]
    # RR is fixed where every query has a relevant document among those examined so far;
    # AP where every query's relevant documents have all been examined.
    qrels = _csv(run / "qrels.csv")
    relevant = qrels[qrels.relevance > 0].groupby("query_id")["doc_id"].agg(set)
    queries = sorted(set(_csv(run / "per_query.csv")["query_id"]))
    for (policy, round_), _ in frozen.groupby(level=["policy", "round"]):
        if round_ == 0:
            continue
        seen = marks[(marks.policy == policy) & (marks["round"] <= round_)]
        examined = seen.groupby("query_id")["doc_id"].agg(set)
        found = [bool(relevant[q] & examined.get(q, set())) for q in queries]
        complete = [relevant[q] <= examined.get(q, set()) for q in queries]
        assert frozen[(policy, round_, "rerank", "RR")] == all(found), (policy, round_)
        assert frozen[(policy, round_, "rerank", "AP")] == all(complete), (policy, round_)


def test_a_fixed_cell_has_one_value_per_query_in_every_stage(
    cranfield_runs: tuple[Path, Path],
) -> None:
    run = cranfield_runs[0]
    summary = pd.read_csv(run / "summary.csv", dtype={"config_id": str})
    per_query = _csv(run / "per_query.csv")
    frozen = per_query[per_query.eval_mode == "frozen"]
    keys = ["config_id", "policy", "round", "measure"]
    fixed = summary[summary["fixed"]][[*keys, "stage"]]
    assert len(fixed) > 100
    rows = frozen.merge(fixed, on=[*keys, "stage"])
    spread = rows.groupby([*keys, "query_id"])["value"].agg(lambda v: v.max() - v.min())
    assert (spread == 0).all()
    # and where the rule does not fix a cell, frozen mode can show a change
    cells = summary[~summary["fixed"]][[*keys, "stage", "eval_mode"]]
    loose = frozen.merge(cells, on=[*keys, "stage", "eval_mode"])
    loose = loose[loose["round"] > 0]
    assert (loose.groupby([*keys, "query_id"])["value"].agg(lambda v: v.max() - v.min()) > 0).any()


def _frozen_primary(data: RunData, policies: Sequence[str]) -> RunData:
    """``data`` led by the frozen mode, for ``policies`` only (fewer charts to draw)."""
    per_query = data.per_query[data.per_query["policy"].isin(policies)]
    per_query = per_query.assign(policy=per_query["policy"].cat.remove_unused_categories())
    return dataclasses.replace(
        data,
        settings=dataclasses.replace(data.settings, primary_mode="frozen"),
        per_query=per_query,
        policies=tuple(policies),
        fixed=data.fixed[data.fixed["policy"].isin(policies)],
    )


def test_the_report_says_cannot_change_in_frozen_mode(
    cranfield_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    data = _frozen_primary(load_run(cranfield_runs[0]), ["oracle", "patient"])
    analysis = analyze(data, trials=200)
    s = analysis.summary
    fixed = s[s["fixed"]]
    patient = fixed[(fixed["policy"] == "patient") & (fixed["round"] == 1)]
    assert "nDCG@10" not in set(patient["measure"])  # the patient user may stop before 10
    assert set(fixed["measure"]) >= {"nDCG@10", "P@10", "R@20"}
    columns = ["gain", "p_t", "p_rand", "p_holm", "delta", "p_rand_before", "judgment_gain"]
    assert fixed[columns].isna().all().all()  # no gain of 0, no test
    assert fixed["n"].eq(8).all()
    assert fixed[["before", "control", "feedback"]].nunique(axis=1).eq(1).all()
    assert s[~s["fixed"]]["p_rand"].notna().all()
    assert analysis.best is not None and analysis.best.rows["fixed"].eq(False).all()
    # With the oracle alone, the leading measure cannot change anywhere: the verdict says so.
    alone = analyze(_frozen_primary(load_run(cranfield_runs[0]), ["oracle"]), trials=200)
    html = render_report(alone, out=tmp_path / "alone.html").read_text()
    rows = alone.summary[alone.summary["fixed"]]
    assert html.count(">cannot change in frozen mode</td>") == len(rows) > 0
    assert "Not answerable at frozen evaluation: nDCG@10 cannot change in frozen mode." in html
    assert "nDCG@10 cannot change in frozen mode" in summary_table(alone)


def test_fixed_cells_leave_the_holm_families(tmp_path: Path) -> None:
    from report_fixtures import write_run_dir

    run = write_run_dir(tmp_path, n_queries=8)
    summary = pd.read_csv(run / "summary.csv", dtype={"config_id": str})
    assert load_run(run).fixed.empty  # a run from before frozen cells were marked
    cell = (
        (summary.config_id == "c01") & (summary.policy == "oracle") & (summary["round"] == 1)
        & (summary.stage == "rerank") & (summary.eval_mode == "frozen")
        & (summary.measure == "nDCG@10")
    )  # fmt: skip
    summary["fixed"] = cell
    summary.to_csv(run / "summary.csv", index=False)
    data = load_run(run)
    s = analyze(_frozen_primary(data, data.policies), trials=500).summary
    mine = (s.measure == "nDCG@10") & (s.policy == "oracle") & (s["round"] == 1)
    family = s[mine & (s.stage == "rerank")].set_index("config_id")
    assert family.loc["c01", "fixed"] and pd.isna(family.loc["c01", "p_holm"])
    others = family[~family["fixed"]]
    assert len(others) == len(family) - 1 >= 2
    assert others["p_holm"].tolist() == pytest.approx(holm(others["p_rand"].tolist()))
