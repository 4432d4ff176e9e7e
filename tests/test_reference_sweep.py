"""The sweep's episodes against an independent reference (``benchmarks/bench_reference.py``:
the analyzer, TF-IDF Rocchio, the lexical refiner, the users, the controls and the rounds
written from the docs in plain numpy, measured by pytrec_eval), on the first queries of
Cranfield and CACM replayed from their cassettes: every (config, user) of ``rocchio_sweep``,
every round, stage, mode and measure."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_reference import COVERED, Reference, reference, sweep_grid
from evidence_bench.protocol.episode import EpisodeResult
from tests.conftest import shared_episodes

QUERIES = 2
#: (grid config id, user, query id, episode)
Episodes = list[tuple[str, str, str, EpisodeResult]]


@pytest.fixture(scope="module", params=["cranfield", "cacm"])
def query_set(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def expected(query_set: str) -> Reference:
    return reference(QUERIES, query_set=query_set)


@pytest.fixture(scope="module")
def episodes(query_set: str, tmp_path_factory: pytest.TempPathFactory) -> Episodes:
    """The run's episodes of its first queries, their configs named as the grid's."""
    grid = {point: f"c{i:02d}" for i, point in enumerate(sweep_grid())}
    runs_dir = tmp_path_factory.mktemp("runs")
    found: Episodes = []
    overrides = ["+experiment=rocchio_sweep", f"query_set={query_set}", f"runs_dir={runs_dir}"]
    for _plan, replayed, engine, user, result in shared_episodes(overrides, queries=QUERIES):
        params = dict(engine.ranker_params)
        point = (float(params["alpha"]), float(params["beta"]), float(params["gamma"]))
        found.append((grid[point], user, replayed.query_id, result))
    return found


def test_the_reference_covers_every_episode(expected: Reference, episodes: Episodes) -> None:
    assert len(episodes) == QUERIES * len(sweep_grid()) * 2
    assert {key[:3] for key in expected.rankings} == {
        (config, user, query) for config, user, query, _ in episodes
    }


def test_rankings_are_the_references(expected: Reference, episodes: Episodes) -> None:
    compared = 0
    for config, user, query, result in episodes:
        for (round_, stage), ranking in result.rankings.items():
            if stage in COVERED:
                key = (config, user, query, round_, stage)
                assert ranking == expected.rankings[key], key
                compared += 1
    assert compared == len(expected.rankings)


def test_scores_are_the_references(expected: Reference, episodes: Episodes) -> None:
    """Every value as pytrec_eval gives it, to the last bit but nDCG@10's, which may differ
    in its last bit (trec_eval adds and divides its gains in another order); residual
    queries with nothing relevant left are left out by both."""
    found = {
        (config, user, query, round_, stage, mode, measure): value
        for config, user, query, result in episodes
        for round_, stage, mode, measure, value in result.scores
        if stage in COVERED
    }
    assert found.keys() == expected.scores.keys()
    differing = {
        key: (value, expected.scores[key])
        for key, value in found.items()
        if value != expected.scores[key]
        and (key[-1] != "nDCG@10" or abs(value - expected.scores[key]) > 1e-15 * abs(value))
    }
    assert not differing, sorted(differing.items())[:5]


def test_the_reference_imports_only_the_web_stand_ins() -> None:
    """Its own analyzer, ranker, refiner, users and protocol: of the package, only the
    collection reader and the Brave simulator, which answer the searches no cassette holds."""
    source = (Path(__file__).parents[1] / "benchmarks" / "bench_reference.py").read_text()
    imported = sorted(
        line.strip()
        for line in source.splitlines()
        if "evidence_bench" in line and "import" in line
    )
    assert imported == [
        "from evidence_bench.collections.beir import load_collection",
        "from evidence_bench.web.simulator import BraveSimulator",
    ]
