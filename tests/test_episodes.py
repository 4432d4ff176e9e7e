"""A query's episodes planned round by round (:mod:`evidence_bench.experiment.episodes`) give
exactly what ``run_episode`` gives each (config, user) alone, with no memo: every score,
mark, ranking, round record and count, on real Cranfield and CACM queries replayed from
their cassettes and on toy lists with ties, skipped searches and no deep list. The
reference is the episode protocol itself (``run_episode``), not a copy of the planner."""

from __future__ import annotations

import contextlib
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
from evidence_bench.experiment import episodes as episodes_module
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.episodes import PlannedEpisode, PlannerWarning, plan_episodes
from evidence_bench.experiment.memo import QueryMemo
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.runner import (
    MemoProvider,
    query_output,
    replay_query,
    replay_worker,
)
from evidence_bench.protocol.episode import Judgments, run_episode
from evidence_bench.users.policies import Mark, NoisyPolicy, OraclePolicy
from evidence_bench.web.cassettes import SkippedRequest
from tests.conftest import episode_as_run, parts_of, shared_episodes

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


@pytest.mark.parametrize("plan_fails", [False, True])
def test_the_documents_are_listed_in_the_order_one_episode_after_another_asks(
    plan_fails: bool, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``documents.jsonl`` lists each query's documents in the order first searched: the
    planned episodes leave the provider's answers in the order the one-by-one path asks, and
    so does a plan that fails after its searches (the query is then run one by one)."""
    cfg, _ = compose([*RUNS["cranfield"], f"runs_dir={tmp_path}", "progress=false"])
    plan = plan_run(cfg)
    worker = replay_worker(plan)
    query_id = next(iter(worker.query_set.queries))  # one whose order depends on it
    orders = []
    for planned in (True, False):
        with httpx.Client(transport=worker.store.transport(query_id)) as client:
            replayed = replay_query(worker, query_id, client)
            if not planned:  # a provider the plan does not cover: episodes one by one
                replayed.provider = _Asking(replayed.provider)  # type: ignore[assignment]
            with monkeypatch.context() as patch, contextlib.ExitStack() as stack:
                if plan_fails:  # every search of both rounds asked, then a failure
                    patch.setattr(episodes_module._Planner, "_pattern", _fails_in_round_2)
                    if planned:  # the plan's own failure is said, not only slow
                        stack.enter_context(pytest.warns(PlannerWarning, match="planning step"))
                out = query_output(worker, replayed, worker.engines, plan)
        orders.append(list(out.documents))
    assert orders[0] == orders[1]
    assert len(orders[0]) > len(replayed.initial)


_PATTERN = episodes_module._Planner._pattern


def _fails_in_round_2(self: Any, round_: int, *rest: Any) -> Any:
    if round_ == 2:
        raise RuntimeError("a planning step that fails")
    return _PATTERN(self, round_, *rest)


class _Asking:
    """A provider that is not a MemoProvider (so the runner runs episodes one by one), with
    its answers."""

    def __init__(self, inner: MemoProvider) -> None:
        self.inner = inner

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        return self.inner.search(query, limit=limit)

    def answers(self) -> object:
        return self.inner.answers()


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
    assert planned is not None
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


def test_a_case_the_plan_does_not_cover_is_left_to_run_episode() -> None:
    memo = QueryMemo("wing flow", [parse_measure("P@2")])

    class Other(TfidfRocchioRanker):  # not a type the memo knows to be pure
        pass

    common = {
        "memo": memo,
        "query_id": "q1",
        "initial": INITIAL,
        "deep": None,
        "provider": MemoProvider(_Toy()),
        "users": [(memo.user("oracle", OraclePolicy()), 0, "oracle")],
        "judgments": Judgments(GRADES, prepare(GRADES)),
        "modes": ("full",),
        "rounds": 1,
        "depth": 4,
    }
    plain = (memo.ranker(TfidfRocchioRanker()), memo.ranker(TfidfRocchioRanker()))
    refiner = memo.refiner(LexicalRefiner())
    assert plan_episodes(query="wing flow", engines=[(*plain, refiner)], **common) is not None
    other = memo.ranker(Other())
    assert plan_episodes(query="wing flow", engines=[(other, plain[1], refiner)], **common) is None
    # a query the session would strip: the memo's rankers answer only its own query
    assert plan_episodes(query=" wing flow", engines=[(*plain, refiner)], **common) is None
    # a search that fails (not skipped) leaves the query to run_episode, which raises it
    broken: dict[str, object] = {**common, "provider": MemoProvider(_Broken())}
    with pytest.warns(PlannerWarning, match="RuntimeError: no answer"):
        assert plan_episodes(query="wing flow", engines=[(*plain, refiner)], **broken) is None


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
