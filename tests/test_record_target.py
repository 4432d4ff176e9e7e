"""Where ``record`` writes: into a query set's cassettes only when they are empty or it is
told to (``force``), else into a new directory under the working directory; never into an
installed package; never half. Each test records from the simulator on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evidence_bench.errors import ConfigurationError, WriteError
from evidence_bench.experiment import record as record_module
from evidence_bench.experiment import record_target
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import RecordSummary, record
from evidence_bench.experiment.run import perform_run
from evidence_bench.web.cassette_manifest import MANIFEST_NAME
from tests.conftest import write_tiny_collection


def _overrides(collection: Path, cassettes: Path, runs: Path, *extra: str) -> list[str]:
    return [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={collection}", f"query_set.cassettes={cassettes}",
        f"runs_dir={runs}", "experiment.depth=10", "workers=1", "progress=false",
        "report=false", *extra,
    ]  # fmt: skip


def _record(collection: Path, cassettes: Path, *extra: str, **options: object) -> RecordSummary:
    cfg, _ = compose(_overrides(collection, cassettes, cassettes.parent / "runs", *extra))
    return record(plan_run(cfg), provider="simulator", **options)  # type: ignore[arg-type]


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too), by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _copy(cassettes: Path, to: Path) -> Path:
    """A copy of the ``cassettes`` directory at ``to``."""
    return Path(shutil.copytree(cassettes, to))


@pytest.fixture(scope="module")
def first_round(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny collection and its cassettes recorded for the first round only."""
    root = tmp_path_factory.mktemp("first_round")
    collection = write_tiny_collection(root / "tiny")
    summary = _record(collection, root / "cassettes", rounds=1, deep=False)
    assert summary.in_place and summary.directory == root / "cassettes"
    assert summary.changes.added and not summary.changes.changed  # all new: nothing to rewrite
    return collection, root / "cassettes"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, the process's for the test."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path / "work"


def test_a_recording_over_cassettes_goes_to_a_new_directory_and_says_how_to_replay(
    first_round: tuple[Path, Path], work: Path
) -> None:
    collection, cassettes = first_round
    before = _tree(cassettes.parent)
    summary = _record(collection, cassettes, rounds=0, deep=True)  # every round, deeper
    assert _tree(cassettes.parent) == before  # not a byte of the cassettes (or beside them)
    assert not summary.in_place and summary.source == cassettes
    directory = summary.directory
    assert directory.parent == work / "recordings" / "tiny"
    assert sorted(_tree(work)) == sorted(f"recordings/tiny/{directory.name}/{name}"
                                         for name in _tree(directory))  # fmt: skip
    # a complete cassette directory: what the old one held, and what this recording added
    assert set(_tree(directory)) == set(_tree(cassettes))
    assert summary.changes.changed and not summary.changes.added
    assert summary.changes.unchanged + len(summary.changes.changed) == len(_tree(cassettes))
    for name in summary.changes.changed:
        if name != MANIFEST_NAME:  # record mode new_episodes: it kept what was there
            old = json.loads((cassettes / name).read_text())["interactions"]
            new = json.loads((directory / name).read_text())["interactions"]
            assert new[: len(old)] == old and len(new) > len(old)
    text = summary.announce(["+experiment=ci", "record_rounds=0", "experiment.depth=10"])
    assert f"{cassettes} is left as it was" in text and "add --force" in text
    replay = "python -m evidence_bench run +experiment=ci experiment.depth=10 "
    assert f"{replay}query_set.cassettes=recordings/tiny/{directory.name}\n" in text
    # ... and that run replays every request from it, the second round's too
    cfg, config = compose(_overrides(collection, directory, work / "runs", "replay.on_miss=error"))
    run = perform_run(cfg, config)
    assert json.loads((run.path / "manifest.json").read_text())["replay"]["simulated"] == 0


def test_force_records_into_the_cassettes_themselves(
    first_round: tuple[Path, Path], tmp_path: Path, work: Path
) -> None:
    collection, original = first_round
    cassettes = _copy(original, tmp_path / "cassettes")
    before = _tree(cassettes)
    summary = _record(collection, cassettes, rounds=0, deep=True, force=True)
    assert summary.in_place and summary.directory == cassettes
    after = _tree(cassettes)
    assert sorted(after) == sorted(before)  # no staging left beside or inside
    assert sorted(tmp_path.iterdir()) == [cassettes, tmp_path / "work"]
    assert {n for n in after if after[n] != before[n]} == set(summary.changes.changed)
    assert MANIFEST_NAME in summary.changes.changed
    assert not list(work.iterdir())
    assert "(" in summary.announce().splitlines()[0] and "changed" in summary.announce()


def test_a_recording_that_adds_nothing_keeps_no_directory(
    first_round: tuple[Path, Path], work: Path
) -> None:
    collection, cassettes = first_round
    summary = _record(collection, cassettes, rounds=1, deep=False)
    assert not summary.changes and summary.directory == cassettes
    assert not (work / "recordings").exists()
    assert "nothing new" in summary.announce()


def test_a_failed_recording_leaves_the_cassettes_and_no_staging(
    first_round: tuple[Path, Path], tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection, original = first_round
    cassettes = _copy(original, tmp_path / "cassettes")
    before = _tree(tmp_path)

    def full_disk(*args: object, **kwargs: object) -> Path:
        raise WriteError(f"could not write {args[0]}: No space left on device")

    monkeypatch.setattr(record_module, "write_manifest", full_disk)
    for force in (True, False):
        with pytest.raises(WriteError):
            _record(collection, cassettes, rounds=0, deep=True, force=force)
        assert _tree(tmp_path) == before  # nothing changed, nothing staged, nothing new


def test_the_installed_package_s_cassettes_are_never_written(
    first_round: tuple[Path, Path], tmp_path: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel's cassettes live in site-packages: ``force`` there is refused in one line,
    and without it the recording goes under the working directory."""
    collection, original = first_round
    site = tmp_path / "site-packages"
    cassettes = _copy(original, site / "evidence_bench" / "_data" / "cassettes" / "tiny")
    monkeypatch.setattr(record_target, "installed_roots", lambda: [site.resolve()])
    before = _tree(site)
    with pytest.raises(ConfigurationError) as refused:
        _record(collection, cassettes, rounds=0, deep=True, force=True)
    assert str(refused.value).startswith(
        f"record --force would rewrite the installed package's cassettes in {cassettes}; "
    )
    assert "\n" not in str(refused.value)
    summary = _record(collection, cassettes, rounds=0, deep=True)
    assert summary.directory.is_relative_to(work / "recordings" / "tiny")
    assert _tree(site) == before


def test_recording_into_an_empty_directory_writes_there() -> None:
    assert record_target.destination(
        Path("/nonexistent/cassettes"), query_set="x", force=False
    ) == record_target.Destination(
        Path("/nonexistent/cassettes"), Path("/nonexistent/cassettes"), in_place=True
    )


def test_the_command_leaves_the_cassettes_and_says_what_force_would_change(
    first_round: tuple[Path, Path], tmp_path: Path, work: Path
) -> None:
    collection, original = first_round
    cassettes = _copy(original, tmp_path / "cassettes")
    before = _tree(cassettes)
    args = [*_overrides(collection, cassettes, tmp_path / "runs"), "record_rounds=0"]
    done = subprocess.run(
        [sys.executable, "-m", "evidence_bench", "record", *args],
        cwd=work, capture_output=True, text=True, check=False, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _tree(cassettes) == before
    (directory,) = (work / "recordings" / "tiny").iterdir()
    lines = done.stdout.splitlines()
    assert lines[0].startswith("recorded ")
    assert lines[0].endswith(f" for 4 queries in {directory.relative_to(work)}; manifest "
                             f"{directory.relative_to(work) / MANIFEST_NAME}")  # fmt: skip
    assert lines[1] == (
        f"{cassettes} is left as it was: the recording would change its files "
        "(5 changed); to record into it, add --force"
    )
    assert lines[2].startswith(
        "replay from the recording: python -m evidence_bench run +experiment=ci "
    )
    assert lines[2].endswith(f"query_set.cassettes={directory.relative_to(work)}")
    assert "record_rounds" not in lines[2] and str(cassettes) not in lines[2]
    assert done.stderr == ""  # no progress bar off a terminal
