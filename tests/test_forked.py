"""The tail's independent parts at once in forked processes: the same results, in order,
whatever the number of processes, and a failure reported as the serial run reports it."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from evidence_bench._forked import in_parallel
from evidence_bench.errors import DataError, WorkerError
from evidence_bench.report.render import report_context
from evidence_bench.report.tables import analyze
from evidence_bench.runs.data import load_run
from tests.conftest import CRANFIELD15, shared_run


def test_results_come_back_in_order_from_the_forked_processes() -> None:
    parent = os.getpid()
    seen = [10, 20, 30]  # the forked processes read this process' memory as it is
    tasks = [lambda at=at: (at, seen[at], os.getpid() == parent) for at in range(3)]
    assert in_parallel(tasks, processes=1) == [(0, 10, True), (1, 20, True), (2, 30, True)]
    assert in_parallel(tasks, processes=3) == [(0, 10, True), (1, 20, False), (2, 30, False)]
    # two processes for three tasks: the first here, the other two one after the other there
    assert in_parallel(tasks, processes=2) == [(0, 10, True), (1, 20, False), (2, 30, False)]


def _refused() -> None:
    raise DataError("per_query.csv: a row of a compared stage has no query_id")


def test_a_tasks_error_is_raised_as_it_was() -> None:
    with pytest.raises(DataError, match=r"^per_query\.csv: a row of a compared stage has no"):
        in_parallel([lambda: 1, _refused], processes=2)


def test_a_process_that_dies_is_named_not_waited_for() -> None:
    with pytest.raises(WorkerError, match=r"^a process of the run's tail stopped unexpectedly"):
        in_parallel([lambda: 1, lambda: os._exit(9)], processes=2)


@pytest.fixture(scope="module")
def cranfield15(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_run(tmp_path_factory, "cranfield15", CRANFIELD15)


def test_the_analysis_is_the_same_in_two_processes(cranfield15: Path) -> None:
    alone = analyze(load_run(cranfield15), trials=200)
    shared = analyze(load_run(cranfield15), trials=200, processes=2)
    for name in ("summary", "round0", "exclusions", "shares"):
        pd.testing.assert_frame_equal(getattr(shared, name), getattr(alone, name), obj=name)
    assert shared.judged == alone.judged and len(alone.judged) > 0
    assert (shared.trials, shared.seed, shared.family) == (alone.trials, alone.seed, alone.family)
    assert alone.validity is not None and shared.validity is not None
    (mine,), (theirs,) = shared.validity.groups, alone.validity.groups
    # (by repr: a tau of NaN, where no two settings differ, equals no other NaN)
    assert repr(mine.agreements) == repr(theirs.agreements) and len(mine.agreements) > 0
    assert repr(mine.robustness) == repr(theirs.robustness) and mine.robustness is not None
    for name in ("variance", "curve", "saturation"):
        pd.testing.assert_frame_equal(getattr(mine, name), getattr(theirs, name), obj=name)


def test_the_report_context_is_the_same_in_two_processes(cranfield15: Path) -> None:
    analysis = analyze(load_run(cranfield15), trials=200)
    alone = report_context(analysis)
    shared = report_context(analysis, processes=2)
    assert list(shared) == list(alone) and list(alone)[-1] == "verdict"
    assert alone["forest"] is not None and alone["episodes"]  # the best setting's part
    assert repr(shared) == repr(alone)  # (a NaN's repr equals another's)


def test_a_run_whose_tail_forks_writes_what_the_serial_tail_writes(
    tmp_path: Path, cranfield15: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence_bench.experiment import run
    from evidence_bench.experiment.config import compose
    from evidence_bench.runs.checksums import MANIFEST_KEY

    # any run's tables are large enough: the summary in a forked process, the rest here
    monkeypatch.setattr(run, "TAIL_FORK_ROWS", 0)
    cfg, text = compose([*CRANFIELD15, "workers=2", f"runs_dir={tmp_path}"])
    forked = run.perform_run(cfg, text).path
    alone = load_run(cranfield15)
    mine = load_run(forked)
    pd.testing.assert_frame_equal(mine.per_query, alone.per_query)
    pd.testing.assert_frame_equal(mine.fixed, alone.fixed)
    assert len(alone.fixed) > 0  # frozen cells' flags, computed beside the stored scores
    # the tables' checksums: summary.parquet and scores.parquet byte for byte
    for key in ("excluded", "labels", "episodes", MANIFEST_KEY):
        assert mine.manifest[key] == alone.manifest[key], key
