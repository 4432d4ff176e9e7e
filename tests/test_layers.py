"""The layers contract (pyproject.toml, ``[tool.importlinter]``): it holds for the package,
and it fails on a copy of the package given one upward import or one import circle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = "from importlinter.cli import lint_imports_command as c; c()"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the package under ``root``, with the project's contract."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "evidence_bench",
        tmp_path / "evidence_bench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_package_keeps_its_layers() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_the_copy_is_what_is_linted(package_copy: Path) -> None:
    """The copy passes as it is: the failures below come from the one line added."""
    assert _lint(package_copy).returncode == 0


@pytest.mark.parametrize(
    ("module", "line", "message"),
    [
        # the web layer reaching up into the experiment (as web/record.py once did)
        (
            "web/bm25.py",
            "from evidence_bench.experiment import plan as _plan",
            "evidence_bench.web is not allowed to import evidence_bench.experiment",
        ),
        # the experiment reaching up into the report (as run.py once did)
        (
            "experiment/export.py",
            "from evidence_bench.report import page as _page",
            "evidence_bench.experiment is not allowed to import evidence_bench.report",
        ),
        # a lazy import counts as much as one at the top
        (
            "protocol/stages.py",
            "def _late() -> None:\n    from evidence_bench.experiment import memo  # noqa: F401",
            "evidence_bench.protocol is not allowed to import evidence_bench.experiment",
        ),
        # siblings of one layer importing each other (as report/page and render once did)
        (
            "report/numbers.py",
            "from evidence_bench.report import fresh as _fresh",
            "No cycles are allowed in evidence_bench.report",
        ),
    ],
)
def test_a_new_bad_import_fails(package_copy: Path, module: str, line: str, message: str) -> None:
    path = package_copy / "evidence_bench" / module
    path.write_text(path.read_text() + f"\n{line}\n")
    result = _lint(package_copy)
    assert result.returncode == 1
    assert message in " ".join(result.stdout.split())
