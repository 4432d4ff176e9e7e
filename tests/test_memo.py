"""A query's episodes sharing one memo (the runner's path) give exactly what each episode
gives alone: every score, mark, ranking and round record, on real Cranfield and CACM
queries replayed from their cassettes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine.base import Label
from evidence_bench.engine.ranking import TfidfRocchioRanker, marked_positions
from evidence_bench.evaluation.measures import parse_measure
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.memo import QueryMemo, _Pool
from evidence_bench.experiment.runner import replay_worker
from tests.conftest import episode_alone, parts_of, shared_episodes

RUNS = {
    "cranfield": [
        "+experiment=rocchio_sweep",
        "experiment.queries=4",
        "experiment.grid.beta=[0.25,1.0,8.0]",
        "experiment.grid.gamma=[0.0,1.0,4.0]",
    ],
    "cacm": ["+experiment=ranker_compare", "experiment.queries=3", "query_set=cacm"],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_shared_steps_give_each_episode_what_it_gives_alone(name: str, tmp_path: object) -> None:
    compared = 0
    for plan, replayed, engine, user_name, result in shared_episodes(
        [*RUNS[name], f"runs_dir={tmp_path}"]
    ):
        parts, user = parts_of(plan, engine.config_id, user_name)
        alone = episode_alone(plan, replayed, parts, user, seed=plan.seed, policy=user_name)
        assert result == alone, (replayed.query_id, engine.config_id, user_name)
        compared += 1
    worker = replay_worker(plan)
    assert compared >= 3 * len(worker.engines) * len(worker.users)


def _ev(n: int, title: str, url: str | None = None) -> Evidence:
    return Evidence(title=title, url=url or f"https://example.org/doc/{n}", snippet="", rank=n + 1)


def test_rankings_are_shared_by_content_and_renumbered() -> None:
    memo = QueryMemo("wing", [parse_measure("P@10")])
    first = [_ev(0, "boundary layer"), _ev(1, "wing flutter"), _ev(2, "wing")]
    again = [item.with_rank(item.rank) for item in first]  # other objects, same content
    ranker = memo.ranker(TfidfRocchioRanker())
    control = memo.ranker(TfidfRocchioRanker(beta=0.0, gamma=0.0))
    ranked = ranker.rank("wing", first, {})
    assert [item.title for item in ranked] == ["wing", "wing flutter", "boundary layer"]
    assert [item.rank for item in ranked] == [1, 2, 3]
    assert ranker.rank("wing", again, {}) == ranked
    assert memo.pool(again) is memo.pool(first)
    # with marks, each answers as the ranker alone does
    marks = {first[2].key: Label.IRRELEVANT, first[0].key: Label.RELEVANT}
    for memoized, alone in (
        (ranker, TfidfRocchioRanker()),
        (control, TfidfRocchioRanker(beta=0.0, gamma=0.0)),
    ):
        assert memoized.rank("wing", first, marks) == alone.rank("wing", first, marks)
    # another URL is another document, even with the same text
    moved = [*first[:2], _ev(2, "wing", url="https://example.org/elsewhere")]
    assert memo.pool(moved) is not memo.pool(first)


def test_a_residual_is_prepared_once_per_examined_set() -> None:
    memo = QueryMemo("q", [parse_measure("P@2"), parse_measure("RR")])
    residual = memo.residual({"a": 1, "c": 2}, {"a"})
    assert residual.grades == {"c": 2}
    assert memo.residual({"a": 1, "c": 2}, {"a"}) is residual


_KEYS = st.sampled_from([f"https://example.org/{name}" for name in "abcdefgh"])


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(_KEYS, min_size=0, max_size=40),
    feedback=st.dictionaries(
        st.one_of(_KEYS, st.just("https://absent.example/")),
        st.sampled_from(list(Label)),
        max_size=6,
    ),
)
def test_pool_marked_is_marked_positions(keys: list[str], feedback: dict[str, Label]) -> None:
    """``_Pool.marked`` (found from the feedback's keys once the pool is four times larger)
    against the scan over every candidate it replaces, on repeated keys, UNSURE marks and
    keys the pool does not hold; asked twice, as the memo does, so the index is reused."""
    pool = _Pool(objects=(), content=0, keys=keys)
    expected = marked_positions(keys, feedback)
    assert pool.marked(feedback) == expected
    assert pool.marked(feedback) == expected


def test_pool_marked_by_hand() -> None:
    keys = ["a", "b", "a", "c", "d"]
    feedback = {"a": Label.RELEVANT, "d": Label.LESS, "c": Label.UNSURE, "z": Label.MORE}
    pool = _Pool(objects=(), content=0, keys=keys * 4)  # 20 keys: the indexed path
    assert pool.marked(feedback) == ([0, 2, 5, 7, 10, 12, 15, 17], [4, 9, 14, 19])
    assert _Pool(objects=(), content=0, keys=keys).marked(feedback) == ([0, 2], [4])
