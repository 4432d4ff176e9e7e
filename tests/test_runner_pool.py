"""The runner's pool: its workers are forked after the parent built what every one of them
needs (the query set, the cassette store, the engines and the simulator's index), so they
share those pages instead of each building its own, and the parent lets go of them."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from evidence_bench.collections.beir import Collection
from evidence_bench.experiment import runner
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.web import simulator
from evidence_bench.web.bm25 import BM25Index
from evidence_bench.web.saved_index import collection_index


def test_workers_use_the_index_the_parent_built_before_forking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parent = os.getpid()
    built: list[int] = []

    def parent_only(collection: Collection) -> BM25Index:
        if os.getpid() != parent:  # a worker building (or loading) its own fails its query
            raise AssertionError("a worker built its own BM25 index")
        built.append(os.getpid())
        return collection_index(collection)

    monkeypatch.setattr(simulator, "collection_index", parent_only)
    simulator.forget_indexes()  # none kept from an earlier test of this process
    plan = plan_run(compose(["+experiment=ci", "experiment.queries=4"])[0])
    query_ids = list(runner.replay_worker(plan).query_set.queries)
    outputs = list(runner.execute(plan, query_ids, workers=2))
    assert [out.query_id for out in outputs] == query_ids
    requests = sum((out.requests for out in outputs), Counter[str]())
    assert requests["simulated"] > 0  # the workers did ask the simulator
    assert built == [parent]  # built once, in the parent
    # the parent replays nothing itself: what it built for the workers is theirs alone
    assert runner._WORKER is None
    assert not simulator._INDEXES


def test_a_single_process_lets_go_of_the_worker_once_its_episodes_are_done() -> None:
    """With ``workers=1`` the episodes run in the caller: their worker (cassettes, engines,
    users) and the simulator's index are dropped as a parent drops them after forking, not
    kept beside the run's tail."""
    simulator.forget_indexes()
    plan = plan_run(compose(["+experiment=ci", "experiment.queries=3"])[0])
    query_ids = list(runner.replay_worker(plan).query_set.queries)
    outputs = runner.execute(plan, query_ids, workers=1)
    first = next(outputs)
    assert runner._WORKER is not None  # in use while episodes remain
    assert simulator._INDEXES  # the misses of the first query were simulated from it
    rest = list(outputs)
    assert [out.query_id for out in [first, *rest]] == query_ids
    assert sum(out.requests["simulated"] for out in [first, *rest]) > 0
    assert runner._WORKER is None
    assert not simulator._INDEXES


def test_a_worker_sends_each_document_once_and_the_first_of_each_is_kept() -> None:
    """Each worker sends a document with the first of its queries that shows it; keeping the
    first of each key in query order gives the documents one process gives, in its order."""
    plan = plan_run(compose(["+experiment=ci", "experiment.queries=6"])[0])
    query_ids = list(runner.replay_worker(plan).query_set.queries)

    def merged(outputs: list[runner.QueryOutput]) -> dict[str, object]:
        documents: dict[str, object] = {}
        for out in outputs:
            for key, item in out.documents.items():
                documents.setdefault(key, item)
        return documents

    alone = list(runner.execute(plan, query_ids, workers=1))
    pooled = list(runner.execute(plan, query_ids, workers=2))
    assert list(merged(pooled).items()) == list(merged(alone).items())
    sent = sum(len(out.documents) for out in pooled)
    shown = sum(len(out.documents) for out in alone)
    assert len(merged(alone)) <= sent < shown  # the queries share documents: some not resent


@pytest.mark.parametrize(
    ("queries", "count", "sizes"),
    [
        (4, 2, [1, 1, 1, 1]),  # few queries: one a task
        (12, 2, [1] * 12),
        (20, 2, [3, 3, 2, *[1] * 12]),  # 3 queries a task, the last 2 x 2 x 3 one each
        (27, 3, [3, 3, 3, *[1] * 18]),
    ],
)
def test_the_workers_take_a_few_queries_a_task_then_one_at_the_end(
    queries: int, count: int, sizes: list[int]
) -> None:
    query_ids = [f"q{i}" for i in range(queries)]
    chunks = runner._chunks(query_ids, count)
    assert [len(chunk) for chunk in chunks] == sizes
    assert [query_id for chunk in chunks for query_id in chunk] == query_ids
