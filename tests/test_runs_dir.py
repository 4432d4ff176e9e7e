"""``runs_dir``: a relative one is the working directory's, and made when missing, as an
absolute one is (``runs_dir=data/runs`` failed 'no such file or directory')."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evidence_bench.experiment.run import runs_root


@pytest.mark.parametrize("given", ["data/runs", "./data/runs"])
def test_a_relative_runs_dir_is_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert runs_root({"runs_dir": given}) == tmp_path / "data" / "runs"
    assert runs_root({"runs_dir": str(tmp_path / "abs")}) == tmp_path / "abs"


def test_a_run_creates_a_missing_relative_runs_dir(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evidence_bench", "run", "+experiment=smoke",
         "runs_dir=data/runs", "progress=false", "report=false"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    latest = tmp_path / "data" / "runs" / "smoke" / "latest"
    assert (latest / "manifest.json").is_file()
