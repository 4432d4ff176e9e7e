"""The episode protocol (:mod:`evidence_bench.experiment.episodes`) shares what a query's
episodes have in common without changing any: a query's episodes run together give exactly
what each (config, user) gives alone, a batch of one with a memo of its own (every score,
mark, ranking, round record and count), on real Cranfield and CACM queries replayed from
their cassettes and on toy lists with ties, skipped searches and no deep list. A part the
memo does not know to be pure is called for every step of every episode, as a session calls
it. (What each stage holds and scores is worked by hand in tests/test_frozen.py.)"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from evidence_bench.engine.base import Label
from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
from evidence_bench.engine.refiner import LexicalRefiner
from evidence_bench.engine.vector_rocchio import VectorRocchioRanker
from evidence_bench.evaluation.measures import parse_measure, prepare
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.episodes import PlannedEpisode, plan_episodes, run_episode
from evidence_bench.experiment.memo import QueryMemo
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.runner import (
    MemoProvider,
    query_output,
    replay_query,
    replay_worker,
)
from evidence_bench.protocol.episode import Judgments
from evidence_bench.users.policies import Mark, NoisyPolicy, OraclePolicy
from evidence_bench.web.cassettes import SkippedRequest
from tests.conftest import episode_alone, episode_as_run, parts_of, shared_episodes

RUNS = {
    "cranfield": [
        "+experiment=rocchio_sweep",
        "experiment.queries=3",
        "experiment.grid.beta=[0.25,1.0,8.0]",
        "experiment.grid.gamma=[0.0,1.0,4.0]",
    ],
    "cacm_term_rocchio": [
        "+experiment=rocchio_sweep",
        "query_set=cacm",
        "experiment.queries=3",
        "experiment.rounds=3",
        "refiner=term_rocchio",
        "experiment.grid.beta=[0.5,4.0]",
        "experiment.grid.gamma=[0.0,4.0]",
    ],
    "cranfield_users": ["+experiment=policy_compare", "experiment.queries=3"],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_planned_episodes_are_each_episode_alone(name: str, tmp_path: object) -> None:
    compared = 0
    for plan, replayed, engine, user_name, result in shared_episodes(
        [*RUNS[name], f"runs_dir={tmp_path}"]
    ):
        assert isinstance(result, PlannedEpisode)  # the plan, not its fallback
        parts, user = parts_of(plan, engine.config_id, user_name)
        alone = episode_as_run(plan, replayed, parts, user, user_name)
        assert result == alone, (replayed.query_id, engine.config_id, user_name)
        assert [m for r in result.round_marks for m in r] == alone.feedback
        compared += 1
    worker = replay_worker(plan)
    assert compared == 3 * len(worker.engines) * len(worker.users)


@pytest.mark.parametrize("name", ["cranfield", "cacm_term_rocchio"])
def test_a_planned_rounds_detail_is_its_record_as_json(name: str, tmp_path: object) -> None:
    """The rows a planned query sends hold each round's detail as the text ``json.dumps``
    gives (``episodes.jsonl``'s record but its round and lists, doc ids for keys, sorted
    keys): the planner's rows put it together from its parts, compared here with the record
    ``run_episode`` gives alone (term weights included, in the cacm run)."""
    plan = plan_run(compose([*RUNS[name], f"runs_dir={tmp_path}", "progress=false"])[0])
    worker = replay_worker(plan)
    doc_id = worker.query_set.collection.doc_id_for
    query_id = next(iter(worker.query_set.queries))
    with httpx.Client(transport=worker.store.transport(query_id)) as client:
        replayed = replay_query(worker, query_id, client)
        out = query_output(worker, replayed, worker.engines, plan)
        rounds, weighed = 0, False
        for pair, _, entries in out.rows.episodes:
            config_id, user_name = out.rows.pairs[pair]
            parts, user = parts_of(plan, config_id, user_name)
            alone = episode_as_run(plan, replayed, parts, user, user_name)
            for (round_, detail, *_), record in zip(entries, alone.rounds, strict=True):
                expected = {
                    key: value
                    for key, value in record.items()
                    if key not in ("round", "before", "after_rerank", "after_expand")
                }
                expected["marks"] = [
                    {"doc_id": doc_id(key) or key, "label": label} for key, label in record["marks"]
                ]
                assert round_ == record["round"]
                assert detail == json.dumps(expected, ensure_ascii=False, sort_keys=True)
                rounds += 1
                weighed |= "term_weights" in record
    assert rounds == len(out.rows.pairs) * plan.rounds
    assert weighed == (name == "cacm_term_rocchio")


def test_the_documents_are_listed_in_the_order_one_episode_after_another_asks(
    tmp_path: object,
) -> None:
    """``documents.jsonl`` lists each query's documents in the order first searched: the
    episodes run together leave the provider's answers in the order their episodes, run one
    after another, ask them."""
    cfg, _ = compose([*RUNS["cranfield"], f"runs_dir={tmp_path}", "progress=false"])
    plan = plan_run(cfg)
    worker = replay_worker(plan)
    query_id = next(iter(worker.query_set.queries))  # one whose order depends on it
    with httpx.Client(transport=worker.store.transport(query_id)) as client:
        replayed = replay_query(worker, query_id, client)
        together = list(query_output(worker, replayed, worker.engines, plan).documents)
    with httpx.Client(transport=worker.store.transport(query_id)) as client:
        replayed = replay_query(worker, query_id, client)
        for parts in worker.engines:
            for user_name, user in worker.users:
                episode_alone(
                    plan,
                    replayed,
                    parts,
                    user,
                    seed=plan.user_seed(user_name),
                    policy=plan.episode_policy(user_name),
                )
        alone = list(
            dict.fromkeys(item.key for answer in replayed.provider.answers() for item in answer)
        )
    assert together == alone
    assert len(together) > len(replayed.initial)


# --- toy lists ------------------------------------------------------------------------------


def _ev(n: int, title: str, snippet: str = "") -> Evidence:
    return Evidence(title=title, url=f"https://example.org/d{n}", snippet=snippet, rank=n)


#: Ties everywhere: documents 1 and 2 (and 5, 6) have the same text.
INITIAL = [
    _ev(1, "wing flow", "laminar"),
    _ev(2, "wing flow", "laminar"),
    _ev(3, "heat shock", "plate"),
    _ev(4, "boundary layer", "flow"),
    _ev(5, "plate", "plate"),
    _ev(6, "plate", "plate"),
]
MORE = [_ev(7, "wing heat", "laminar"), _ev(3, "heat shock", "plate"), _ev(8, "flow flow")]
GRADES = {"https://example.org/d1": 2, "https://example.org/d4": 1, "https://example.org/d7": 1}


class _Toy:
    """A provider: the query itself gets INITIAL (deeper: INITIAL + MORE), any refined
    query MORE, except refined queries holding ``skip``, which are skipped."""

    def __init__(self, skip: str | None = None) -> None:
        self.skip = skip

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        if query == "wing flow":
            return (INITIAL + MORE[:1] + [_ev(9, "flow")])[:limit]
        if self.skip is not None and self.skip in query:
            raise SkippedRequest(query)
        return MORE[:limit]


@pytest.mark.parametrize("skip", [None, "boundary", "laminar"])
@pytest.mark.parametrize("deep", [True, False, "short"])
def test_toy_lists_with_ties_and_skipped_searches(skip: str | None, deep: bool | str) -> None:
    measures = [parse_measure(m) for m in ("nDCG@3", "P@2", "AP", "RR", "R@4")]
    modes = ("full", "residual", "frozen")
    judgments = Judgments(GRADES, prepare(GRADES))
    toy = _Toy(skip)
    initial = toy.search("wing flow", limit=4)
    deeper = toy.search("wing flow", limit=20) if deep else None
    if deep == "short":  # shorter than some expansions (6 results), not others (4)
        deeper = toy.search("wing flow", limit=5)
    rankers = [
        (TfidfRocchioRanker(1.0, 0.0, 0.0), TfidfRocchioRanker(1.0, 0.0, 0.0)),
        (TfidfRocchioRanker(1.0, 4.0, 4.0), TfidfRocchioRanker(1.0, 0.0, 0.0)),
        (TfidfRocchioRanker(0.0, 1.0, 0.0), TfidfRocchioRanker(0.0, 0.0, 0.0)),
        (ProviderOrderRanker(), ProviderOrderRanker()),
    ]
    refiner = LexicalRefiner(max_terms=1)
    users = [("oracle", OraclePolicy(depth=2)), ("noisy", NoisyPolicy(depth=3, seed=5))]
    memo = QueryMemo("wing flow", measures)
    provider = MemoProvider(toy)
    planned = plan_episodes(
        memo=memo,
        query_id="q1",
        query="wing flow",
        initial=initial,
        deep=deeper,
        provider=provider,
        engines=[(memo.ranker(r), memo.ranker(c), memo.refiner(refiner)) for r, c in rankers],
        users=[(memo.user(name, user), 7, name) for name, user in users],
        judgments=judgments,
        modes=modes,
        rounds=3,
        depth=4,
    )
    alone = [
        run_episode(
            query_id="q1",
            query="wing flow",
            initial=initial,
            deep=deeper,
            provider=toy,
            ranker=ranker,
            control=control,
            refiner=refiner,
            user=user,
            judgments=judgments,
            measures=measures,
            modes=modes,
            rounds=3,
            depth=4,
            seed=7,
            policy=name,
        )
        for ranker, control in rankers
        for name, user in users
    ]
    assert planned.episodes == alone
    skipped = sum(result.skipped_expand for result in alone)
    assert (skipped > 0) == (skip is not None)
    # each episode asks one search a round, in episode order
    assert len(planned.searches) == 3 * len(alone)


class _Counted(TfidfRocchioRanker):
    """A TF-IDF Rocchio ranker of a type the memo does not know to be pure (a user's own):
    it counts its calls, by query and feedback."""

    calls: list[tuple[str, int]]

    def rank(self, query: str, candidates: Sequence[Evidence], feedback: Any) -> list[Evidence]:
        self.calls.append((query, len(feedback)))
        return super().rank(query, candidates, feedback)


def _counted(alpha: float, beta: float, gamma: float) -> _Counted:
    ranker = _Counted(alpha, beta, gamma)
    object.__setattr__(ranker, "calls", [])
    return ranker


def test_a_part_not_known_to_be_pure_is_called_for_every_step_of_every_episode() -> None:
    measures = [parse_measure("P@2"), parse_measure("AP")]
    users = [("oracle", OraclePolicy(depth=2)), ("noisy", NoisyPolicy(depth=3, seed=5))]
    common: dict[str, Any] = {
        "query_id": "q1",
        "initial": INITIAL[:4],
        "deep": _Toy().search("wing flow", limit=20),
        "judgments": Judgments(GRADES, prepare(GRADES)),
        "modes": ("full", "residual", "frozen"),
        "rounds": 2,
        "depth": 4,
    }

    def planned(query: str, ranker: TfidfRocchioRanker, control: TfidfRocchioRanker) -> Any:
        memo = QueryMemo(query, measures)
        return plan_episodes(
            memo=memo,
            query=query,
            provider=MemoProvider(_Toy()),
            engines=[(memo.ranker(ranker), memo.ranker(control), memo.refiner(LexicalRefiner()))],
            users=[(memo.user(name, user), 7, name) for name, user in users],
            **common,
        )

    ranker, control = _counted(1.0, 4.0, 1.0), _counted(1.0, 0.0, 0.0)
    called = planned("wing flow", ranker, control)
    pure = planned(
        "wing flow", TfidfRocchioRanker(1.0, 4.0, 1.0), TfidfRocchioRanker(1.0, 0.0, 0.0)
    )
    assert called.episodes == pure.episodes  # the same rankings, called or shared
    assert called.searches == pure.searches
    # Each episode: the session's first ranking; per round rerank, shuffled and the
    # expansion's ranking (the session's query, the user's labels; shuffled: as many).
    rounds = common["rounds"]
    assert len(ranker.calls) == len(users) * (1 + 3 * rounds)
    assert ranker.calls[0] == ("wing flow", 0)
    # the control: round 0's, then per round control and deep control
    assert len(control.calls) == len(users) * (1 + 2 * rounds)
    assert {feedback for _, feedback in control.calls} == {0}
    # a query the session strips: the session's ranker reads it stripped, the controls not
    ranker, control = _counted(1.0, 4.0, 1.0), _counted(1.0, 0.0, 0.0)
    stripped = planned(" wing flow", ranker, control)
    asked = [query for query, _ in ranker.calls]  # the shuffled control reads the query
    assert asked.count(" wing flow") == len(users) * rounds
    assert asked.count("wing flow") == len(users) * (1 + 2 * rounds)
    assert {query for query, _ in control.calls} == {" wing flow"}
    assert [e.rankings for e in stripped.episodes] == [e.rankings for e in pure.episodes]


def test_a_failure_is_the_first_failing_episodes_own() -> None:
    """A search that fails (not skipped) ends the query with its own error, not a fallback."""
    memo = QueryMemo("wing flow", [parse_measure("P@2")])
    with pytest.raises(RuntimeError, match="no answer"):
        plan_episodes(
            memo=memo,
            query_id="q1",
            query="wing flow",
            initial=INITIAL,
            deep=None,
            provider=MemoProvider(_Broken()),
            engines=[
                (
                    memo.ranker(TfidfRocchioRanker()),
                    memo.ranker(TfidfRocchioRanker()),
                    memo.refiner(LexicalRefiner()),
                )
            ],
            users=[(memo.user("oracle", OraclePolicy()), 0, "oracle")],
            judgments=Judgments(GRADES, prepare(GRADES)),
            modes=("full",),
            rounds=1,
            depth=4,
        )


class _Broken:
    def search(self, query: str, *, limit: int) -> Sequence[Evidence]:
        if query == "wing flow":
            return INITIAL[:limit]
        raise RuntimeError("no answer")


class _Unsure:
    """A user who examines the top 2 unexamined results each round and marks each UNSURE."""

    name = "unsure"
    expects = frozenset()

    def judge(self, *, displayed: Sequence[Evidence], examined: Any, **_: Any) -> list[Any]:
        fresh = [item.key for item in displayed if item.key not in examined][:2]
        return [Mark(key, Label.UNSURE) for key in fresh]


@pytest.mark.parametrize(
    ("user", "rounds", "unusable"), [(_Unsure(), 3, 3), (OraclePolicy(depth=2), 3, 0)]
)
def test_rounds_without_usable_feedback_are_counted_once_each(
    user: Any, rounds: int, unusable: int
) -> None:
    """Vector Rocchio refuses marks that are all UNSURE; the episode keeps the no-feedback
    order for rerank, expand and shuffled, and counts the round once: not once per ranking
    that fell back (3 a round), and not the shuffled control's."""
    measures = [parse_measure("P@2")]
    result = run_episode(
        query_id="q1",
        query="wing flow",
        initial=INITIAL[:4],
        deep=None,
        provider=_Toy(),
        ranker=VectorRocchioRanker(),
        control=VectorRocchioRanker(),
        refiner=LexicalRefiner(max_terms=1),
        user=user,
        judgments=Judgments(GRADES, prepare(GRADES)),
        measures=measures,
        modes=("full",),
        rounds=rounds,
        depth=4,
        seed=7,
        policy="p",
    )
    assert result.no_usable_feedback == unusable
    if unusable:
        for round_ in range(1, rounds + 1):  # what fell back is the control's order
            control = result.rankings[(round_, "control")]
            assert result.rankings[(round_, "rerank")] == control
            assert result.rankings[(round_, "shuffled")] == control


def _by_letters(*letters: str) -> list[Evidence]:
    return [
        Evidence(title=n, url=f"https://example.org/{n}", snippet="", rank=i)
        for i, n in enumerate(letters, start=1)
    ]


def _alone(ranker: Any, initial: list[Evidence], rounds: int = 0) -> Any:
    grades = {"https://example.org/a": 1, "https://example.org/c": 2}
    return run_episode(
        query_id="q",
        query="wing",
        initial=initial,
        deep=None,
        provider=_Toy(),
        ranker=ranker,
        control=ProviderOrderRanker(),
        refiner=LexicalRefiner(),
        user=OraclePolicy(depth=1),
        judgments=Judgments(grades, prepare(grades)),
        measures=[parse_measure("P@2"), parse_measure("RR")],
        modes=("full", "residual"),
        rounds=rounds,
        depth=3,
        seed=0,
        policy="oracle",
    )


def test_each_distinct_evaluation_is_one_row() -> None:
    # by hand: [b, a, c] against {a: 1, c: 2} has one relevant document in the top 2 (P@2
    # 1/2), the first at rank 2 (RR 1/2); round 0 scores initial and control (the same list)
    # in both modes (nothing examined yet): four scores, one row
    result = _alone(ProviderOrderRanker(), _by_letters("b", "a", "c"))
    assert result.scored == [
        (0, "initial", "full"), (0, "control", "full"),
        (0, "initial", "residual"), (0, "control", "residual"),
    ]  # fmt: skip
    (row,) = set(result.evaluations)
    assert result.values[row].tolist() == [0.5, 0.5]
    assert result.scores[0] == (0, "initial", "full", "P@2", 0.5)


class _Twice:
    """A ranker that lists its first candidate twice."""

    name = "twice"

    def rank(self, query: str, candidates: Sequence[Evidence], feedback: Any) -> list[Evidence]:
        return [*candidates, candidates[0]]


def test_a_ranking_that_lists_a_document_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="appears more than once"):
        _alone(_Twice(), _by_letters("b", "a", "c"), rounds=1)
