"""Issue 14.4 and 14.9: concurrent runs into one runs_dir all succeed, what killed runs left
is cleaned up, and where a run goes is checked before anything is computed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evidence_bench.errors import ConfigurationError, WriteError
from evidence_bench.experiment import run as run_module
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.experiment.rundir import STALE_AFTER_S, RunDirectory, remove_stale
from tests.fault_fixtures import ROOT, smoke_args

DAY = STALE_AFTER_S


def test_three_identical_runs_at_once_all_succeed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "evidence_bench", *smoke_args(runs)]
    started = [
        subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    results = [process.communicate(timeout=300) for process in started]
    assert [process.returncode for process in started] == [0, 0, 0], [e for _, e in results]
    printed = sorted(out.strip().removeprefix("run: ") for out, _ in results)
    made = sorted(str(p) for p in (runs / "smoke").iterdir() if p.name != "latest")
    assert printed == made and len(set(made)) == 3  # three run ids, each a complete run
    for path in made:
        assert (Path(path) / "manifest.json").is_file()
    assert [p.name for p in (runs / "smoke").iterdir() if p.name.startswith(".")] == []
    assert str((runs / "smoke" / "latest").resolve()) in made


def test_a_taken_run_id_gets_the_next_suffix_even_mid_run(tmp_path: Path) -> None:
    """Two runs with one id, interleaved: each reserves its own directory before either
    has written anything, so neither fails when it moves into place."""
    first = RunDirectory(tmp_path, "20261201T000000Z-abcdef").reserve()
    second = RunDirectory(tmp_path, "20261201T000000Z-abcdef").reserve()
    assert (first.final.name, second.final.name) == (
        "20261201T000000Z-abcdef",
        "20261201T000000Z-abcdef.2",
    )
    with second as staging:
        (staging / "manifest.json").write_text("{}")
    with first as staging:
        (staging / "manifest.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "20261201T000000Z-abcdef",
        "20261201T000000Z-abcdef.2",
        "latest",
    ]
    assert (tmp_path / "latest").resolve() == first.final.resolve()


def test_a_failed_run_gives_back_its_reservation(tmp_path: Path) -> None:
    target = RunDirectory(tmp_path, "x").reserve()
    with pytest.raises(RuntimeError), target:
        raise RuntimeError("boom")
    target.release()
    assert list(tmp_path.iterdir()) == []


def _aged(path: Path, seconds: float) -> Path:
    moment = time.time() - seconds
    os.utime(path, (moment, moment), follow_symlinks=False)
    return path


def test_what_killed_runs_left_is_removed_once_a_day_old(tmp_path: Path) -> None:
    dead = 4_194_305  # above Linux's pid_max: no process has it
    old = tmp_path / f".20261101T000000Z-aaaaaa.{dead}.k3j4h5.tmp"
    old.mkdir()
    (old / "per_query.csv").write_text("partial")
    _aged(old, DAY + 60)
    reservation = _aged(_mkdir(tmp_path / "20261101T000000Z-aaaaaa"), DAY + 60)
    fresh = _mkdir(tmp_path / f".20261201T000000Z-bbbbbb.{dead}.a1b2c3.tmp")
    alive = _aged(_mkdir(tmp_path / f".20261101T000000Z-cccccc.{os.getppid()}.z9y8x7.tmp"), 2 * DAY)
    legacy = _aged(_mkdir(tmp_path / ".20261101T000000Z-dddddd.q1w2e3r4.tmp"), 2 * DAY)
    link = tmp_path / f".latest.{dead}.tmp"
    link.symlink_to("nowhere")
    _aged(link, 2 * DAY)
    complete = _aged(_mkdir(tmp_path / "20261101T000000Z-eeeeee"), 2 * DAY)
    (complete / "manifest.json").write_text("{}")

    removed = remove_stale(tmp_path)
    assert sorted(removed) == sorted([old, legacy, link])
    assert not reservation.exists()  # the empty directory the killed run had reserved
    assert fresh.exists() and alive.exists() and complete.exists()


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def test_a_run_cleans_up_stale_staging_when_it_starts(tmp_path: Path) -> None:
    experiment = tmp_path / "runs" / "smoke"
    experiment.mkdir(parents=True)
    stale = _aged(_mkdir(experiment / ".20261101T000000Z-aaaaaa.4194305.abcdef.tmp"), 2 * DAY)
    cfg, text = compose(smoke_args(tmp_path / "runs")[1:])
    outcome = perform_run(cfg, text)
    assert not stale.exists()
    assert sorted(p.name for p in experiment.iterdir()) == sorted(["latest", outcome.path.name])


def _no_computing(*args: object, **kwargs: object) -> None:
    raise AssertionError("computed a run that cannot be written")


@pytest.mark.parametrize(
    ("prepare", "error", "message"),
    [
        (lambda runs: (runs / "smoke" / "latest").mkdir(parents=True), ConfigurationError,
         "latest is a real directory"),
        (lambda runs: (runs / "smoke" / "latest").parent.mkdir(parents=True)
         or (runs / "smoke" / "latest").write_text("x"), ConfigurationError,
         "latest is a real file"),
        (lambda runs: runs.write_text("x"), WriteError, "cannot write runs under"),
    ],
    ids=["latest a directory", "latest a file", "runs_dir a file"],
)  # fmt: skip
def test_an_unwritable_destination_fails_before_computing(
    prepare: object,
    error: type[Exception],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = tmp_path / "runs"
    prepare(runs)  # type: ignore[operator]
    monkeypatch.setattr(run_module, "execute", _no_computing)
    cfg, text = compose(smoke_args(runs)[1:])
    with pytest.raises(error) as caught:
        perform_run(cfg, text)
    assert message in str(caught.value) and "\n" not in str(caught.value)
