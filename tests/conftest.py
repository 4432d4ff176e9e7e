"""Shared fixtures: a tiny BEIR collection that nobody here has seen before, and a run's
interchange files (``exported``)."""

from __future__ import annotations

import fcntl
import gc
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from evidence_bench.experiment.export import export_run

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler import LoadFileScheduling

    from evidence_bench.engine.base import Ranker, Refiner
    from evidence_bench.experiment.components import EngineConfig
    from evidence_bench.experiment.plan import RunPlan
    from evidence_bench.experiment.runner import ReplayedQuery
    from evidence_bench.protocol.episode import EpisodeResult
    from evidence_bench.users.policies import UserPolicy

TOPICS = {
    "wing": ["wing", "lift", "airfoil", "stall", "flap"],
    "heat": ["heat", "conduction", "thermal", "slab", "temperature"],
    "shock": ["shock", "wave", "supersonic", "mach", "pressure"],
    "boundary": ["boundary", "layer", "viscous", "laminar", "turbulent"],
}


def write_tiny_collection(root: Path, *, payload: str = "") -> Path:
    """12 documents a topic, 4 queries, graded judgments; deterministic."""
    root.mkdir(parents=True, exist_ok=True)
    docs, qrels = [], []
    names = list(TOPICS)
    for t, words in enumerate(TOPICS.values()):
        other = TOPICS[names[(t + 1) % len(names)]]
        for i in range(12):
            doc_id = f"{t * 12 + i + 1}"
            # The first documents of a topic are on topic; later ones drift to the next topic.
            on = words[: 5 - i // 3] if i < 9 else words[:1]
            off = other[: i // 2]
            text = " ".join([*on, *off, f"study{i}", "results", "measured"] * 3)
            title = f"{payload}{' '.join(on[:2])} {' '.join(off[:1])} report {doc_id}"
            docs.append({"_id": doc_id, "title": title, "text": text})
            if i < 6:
                qrels.append((str(t + 1), doc_id, 3 if i < 2 else (2 if i < 4 else 1)))
            elif i < 8:
                qrels.append((str(t + 1), doc_id, 0))
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [
        {"_id": str(t + 1), "text": f"{payload}{' '.join(words[:3])} experiments"}
        for t, words in enumerate(TOPICS.values())
    ]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (root / "qrels.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(autouse=True, scope="session")
def index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The simulator's saved indexes (evidence_bench.web.saved_index) in the session's
    temporary directory, never the user's cache; the commands the tests start inherit it."""
    from evidence_bench.web.saved_index import CACHE_ENV

    root = tmp_path_factory.mktemp("index-cache")
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(root)
    yield root
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


#: The test files that check what a run lets go of: they see the runner forget the
#: simulator's indexes after its episodes, as a user's process does (:func:`indexes_kept`).
FORGETS_INDEXES = ("test_runner_pool.py",)


@pytest.fixture(autouse=True)
def indexes_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """The simulator's indexes (BM25 and snippet words, kept by collection checksum:
    :func:`evidence_bench.web.simulator.prepare_index`) kept between the runs of a worker.

    A run builds them before its episodes and forgets them after (the runner's
    ``forget_indexes``), so each of the hundreds of runs the tests make over Cranfield,
    CACM or the tiny collection built the same snippet index again. An index is the same
    whenever it is built from the same files, so no result depends on which run built it;
    the files of ``FORGETS_INDEXES`` still see the runner forget them."""
    if request.path.name in FORGETS_INDEXES:
        yield
        return
    from evidence_bench.experiment import runner

    forget = runner.forget_indexes
    runner.forget_indexes = lambda: None
    try:
        yield
    finally:
        runner.forget_indexes = forget


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium (.ci/run installs it), for the tests that drive a real browser."""
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("chromium not installed: apt-get install chromium")
    return path


@pytest.fixture
def tiny_collection(tmp_path: Path) -> Path:
    return write_tiny_collection(tmp_path / "tiny")


def exported(run_dir: Path, *formats: str, out: Path | None = None) -> Path:
    """``run_dir`` (or ``out``) with the run's interchange files written into it, as
    ``python -m evidence_bench export RUN_DIR --format csv`` (and ``trec``) write them:
    ``per_query.csv``, ``summary.csv``, ``feedback.csv``, ``episodes.jsonl`` and ``trec/``."""
    for kind in formats or ("csv", "trec"):
        export_run(run_dir, kind, out)
    return run_dir if out is None else out


def shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, overrides: Sequence[str]
) -> Path:
    """The exported run directory (``csv``) of ``run`` with ``overrides``, made once per
    ``make test`` for every test file that asks for ``name``, whichever xdist worker it runs
    on: the first to ask runs it under a lock in the session's shared temporary directory,
    the others wait and read it. Treat it as read-only (render a report with ``out=``)."""
    from evidence_bench.experiment.config import compose
    from evidence_bench.experiment.run import perform_run

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-of-USER/pytest-N, shared by the session's workers
    done = root / f"shared-{name}.path"
    with (root / f"shared-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            cfg, text = compose([*overrides, f"runs_dir={root / f'shared-{name}'}"])
            path = exported(perform_run(cfg, text).path, "csv")
            done.write_text(str(path))
        return Path(done.read_text())


#: Cranfield's first 15 queries, four swept configs, two rounds, oracle and noisy users: under
#: residual evaluation the configs keep different queries in round 2 (each exhausted other
#: queries' relevant documents in round 1). Read by test_comparisons.py and test_report.py.
CRANFIELD15 = (
    "+experiment=ci",
    "experiment.queries=15",
    "+experiment.grid={beta:[0.25,1.5],gamma:[0.0,0.5]}",
    "workers=1",
    "report=false",
    "progress=false",
)

#: The test files that take longest (each runs whole experiments or many analyses), longest
#: first, by each file's summed test durations (wall time) in one ``make test`` (2026-12-07,
#: 14:48 UTC, under load). ``make test`` hands files to the workers in collection order
#: (``--dist loadfile --no-loadscope-reorder``; without the flag xdist 3.8 sorts them by
#: their number of tests, and a long file of few tests ran alone at the end); starting these
#: first keeps the last file to finish a short one, so no worker sits idle while another runs
#: a long file alone. The files of ``ONE_TEST_A_UNIT`` go out a test at a
#: time, so theirs is the place of their longest test. Any other file keeps its place after
#: them; a missing name only loses its head start.
LONGEST_FIRST = (
    "test_wheel.py",
    "test_faults_secrets.py",
    "test_experiment.py",
    "test_shards.py",
    "test_stored_analysis.py",
    "test_targets.py",
    "test_gathered_verdict.py",
    "test_doc_commands.py",
    "test_faults.py",
    "test_fixed_cells.py",
    "test_init.py",
    "test_gate_faults.py",
    "test_main.py",
    "test_tune.py",
    "test_report.py",
    "test_ranking_batch.py",
    "test_faults_cassettes.py",
    "test_aliases.py",
    "test_page_evidence.py",
    "test_simulator_answers.py",
    "test_labels.py",
    "test_validity.py",
    "test_web_guard.py",
    "test_faults_runs.py",
    "test_judge_loop.py",
    "test_attribution.py",
    "test_gate.py",
    "test_frozen.py",
    "test_clicks.py",
    "test_report_browser.py",
    "test_faults_controls.py",
    "test_command_help.py",
    "test_tables_writer.py",
    "test_episodes.py",
    "test_export.py",
    "test_text.py",
    "test_comparisons.py",
    "test_record_pages.py",
    "test_seeding.py",
)

#: Files whose tests share nothing but the session (no module or class fixture, no result
#: kept between tests; a page of the manual runs in a scratch copy of its own): under
#: ``--dist loadfile`` each of their tests is a unit of its own, so a long file is spread
#: over the workers instead of holding one while the others run out of files.
ONE_TEST_A_UNIT = ("test_doc_commands.py",)


def shared_episodes(
    overrides: Sequence[str], queries: int = 3
) -> Iterator[tuple[RunPlan, ReplayedQuery, EngineConfig, str, EpisodeResult]]:
    """The runner's episodes (``query_episodes``, sharing their steps) of the first
    ``queries`` queries of the run ``overrides`` compose, in plan order, each with its plan
    and replayed query (for :func:`episode_alone`); every (config, user) of a query comes
    in the plan's order, which this checks."""
    import httpx

    from evidence_bench.experiment.config import compose
    from evidence_bench.experiment.plan import plan_run
    from evidence_bench.experiment.runner import query_episodes, replay_query, replay_worker

    plan = plan_run(compose([*overrides, "progress=false", "workers=1"])[0])
    worker = replay_worker(plan)
    expected = [(e.config_id, u) for e, *_ in worker.engines for u, _ in worker.users]
    for query_id in list(worker.query_set.queries)[:queries]:
        with httpx.Client(transport=worker.store.transport(query_id)) as client:
            replayed = replay_query(worker, query_id, client)
            shared = query_episodes(
                worker.engines,
                worker.users,
                plan,
                query_id,
                replayed.query,
                replayed.judgments,
                replayed.provider,
                replayed.initial,
                replayed.deep,
            )
            for (engine, user_name, result), key in zip(shared, expected, strict=True):
                assert (engine.config_id, user_name) == key
                yield plan, replayed, engine, user_name, result


def parts_of(
    plan: RunPlan, config_id: str, user_name: str
) -> tuple[tuple[EngineConfig, Ranker, Ranker, Refiner], UserPolicy]:
    """The replay worker's engine parts of ``config_id`` and its user ``user_name``."""
    from evidence_bench.experiment.runner import replay_worker

    worker = replay_worker(plan)
    parts = next(p for p in worker.engines if p[0].config_id == config_id)
    return parts, dict(worker.users)[user_name]


def episode_alone(
    plan: RunPlan,
    replayed: ReplayedQuery,
    parts: tuple[EngineConfig, Ranker, Ranker, Refiner],
    user: UserPolicy,
    *,
    seed: int,
    policy: str,
) -> EpisodeResult:
    """``run_episode`` of one replayed query (:class:`~evidence_bench.experiment.runner.
    ReplayedQuery`) for one engine's (config, ranker, control, refiner) and one user, with no
    memo: the reference the runner's shared episodes are compared with."""
    from evidence_bench.experiment.episodes import run_episode

    _, ranker, control, refiner = parts
    return run_episode(
        query_id=replayed.query_id,
        query=replayed.query,
        initial=replayed.initial,
        deep=replayed.deep,
        provider=replayed.provider,
        ranker=ranker,
        control=control,
        refiner=refiner,
        user=user,
        judgments=replayed.judgments,
        measures=plan.measures,
        modes=plan.modes,
        rounds=plan.rounds,
        depth=plan.depth,
        seed=seed,
        policy=policy,
    )


def episode_as_run(
    plan: RunPlan,
    replayed: ReplayedQuery,
    parts: tuple[EngineConfig, Ranker, Ranker, Refiner],
    user: UserPolicy,
    user_name: str,
) -> EpisodeResult:
    """:func:`episode_alone` with the seed and policy label a run gives user ``user_name``
    (``plan.user_seed``, ``plan.episode_policy``)."""
    return episode_alone(
        plan,
        replayed,
        parts,
        user,
        seed=plan.user_seed(user_name),
        policy=plan.episode_policy(user_name),
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadFileScheduling | None:
    """Under ``--dist loadfile``: a file a unit, but a test a unit in ``ONE_TEST_A_UNIT``."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrTestScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if Path(path).name in ONE_TEST_A_UNIT else path

    return FileOrTestScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files in ``LONGEST_FIRST`` order, then the rest as collected; the tests within a file
    keep their order (a stable sort on the file alone)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Each test with what existed before it (modules, earlier fixtures: hundreds of
    thousands of objects in a worker late in the session) moved out of the cyclic garbage
    collector's view (``gc.freeze``), and back in after it (``gc.unfreeze``).

    A run in the test's process collects garbage in full three times (``release_memory``,
    between the steps of its tail); each full collection walked every object of the worker
    again, about a sixth of the CPU of the files that run experiments in their process.
    What a test makes is collected as before. No result depends on when garbage is
    collected."""
    gc.freeze()
    try:
        return (yield)
    finally:
        gc.unfreeze()
