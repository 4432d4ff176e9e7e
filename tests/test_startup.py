"""Start-up: importing the package, and asking a command for its help, import only what they
need (the re-exports are lazy: evidence_bench/_lazy.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import evidence_bench
import evidence_bench.livefetch
import evidence_bench.web
from evidence_bench.commands.export import EXPORT_FORMATS
from evidence_bench.experiment.export import ExportFormat

ROOT = Path(__file__).resolve().parents[1]
#: What no command's help and no bare ``import evidence_bench`` needs.
HEAVY = ("httpx", "numpy", "pandas", "scipy", "matplotlib", "pyarrow", "trafilatura", "hydra")


def _imported(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -X importtime ARGS`` in the checkout; its output and the top-level
    packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done, names


def test_importing_the_package_imports_none_of_its_dependencies() -> None:
    done, names = _imported("-c", "import evidence_bench")
    assert done.returncode == 0, done.stderr[-500:]
    assert "evidence_bench" in names
    assert names.isdisjoint(HEAVY), sorted(names & set(HEAVY))


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["--help"], "usage: python -m evidence_bench COMMAND"),
        (["report", "--help"], "usage: python -m evidence_bench report RUN_DIR"),
        (["gather", "-h"], "usage: python -m evidence_bench gather SHARD_DIR..."),
        (["export", "--help"], "usage: python -m evidence_bench export"),
        (["serve", "--help"], "usage: python -m evidence_bench serve [collection=<name or path>]"),
        (["run", "--help"], "usage: python -m evidence_bench run +experiment=NAME"),
        (["record", "-h"], "usage: python -m evidence_bench record +experiment=NAME"),
    ],
)
def test_a_commands_help_answers_before_its_imports(command: list[str], usage: str) -> None:
    done, names = _imported("-m", "evidence_bench", *command)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.startswith(usage)
    assert names.isdisjoint(HEAVY), sorted(names & set(HEAVY))


def test_exports_formats_are_the_exporters() -> None:
    assert tuple(f.value for f in ExportFormat) == EXPORT_FORMATS


@pytest.mark.parametrize("package", [evidence_bench, evidence_bench.web, evidence_bench.livefetch])
def test_every_lazy_name_resolves_and_is_listed(package: object) -> None:
    names: list[str] = package.__all__  # type: ignore[attr-defined]
    for name in names:
        assert getattr(package, name) is not None, name
    assert set(names) <= set(dir(package))
    with pytest.raises(AttributeError, match="has no attribute 'Nonesuch'"):
        package.Nonesuch  # type: ignore[attr-defined]  # noqa: B018


def test_from_import_still_works() -> None:
    from evidence_bench import BraveProvider, LiveFetch, WriteError
    from evidence_bench.web import BraveSimulator

    assert LiveFetch.__module__ == "evidence_bench.livefetch.pipeline"
    assert BraveProvider.__module__ == "evidence_bench.web.brave"
    assert issubclass(WriteError, evidence_bench.EvidenceBenchError)
    assert BraveSimulator.__module__ == "evidence_bench.web.simulator"


def test_a_runs_episodes_load_no_table_or_statistics_library() -> None:
    """The run's parent imports its modules and plans before it forks its workers, and the
    workers replay episodes: neither needs pandas, pyarrow or scipy (~75 MB of resident
    memory in each of the three processes), nor trafilatura on snippets. They load with the
    tables, after the episodes."""
    code = (
        "import sys\n"
        "from evidence_bench.experiment import run, runner\n"
        "from evidence_bench.experiment.config import compose\n"
        "from evidence_bench.experiment.plan import plan_run\n"
        "plan = plan_run(compose(['+experiment=ci', 'experiment.queries=2'])[0])\n"
        "for query_id in runner.replay_worker(plan).query_set.queries:\n"
        "    assert runner._guarded(plan, query_id).episodes\n"
        "heavy = ('pandas', 'pyarrow', 'scipy', 'trafilatura')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.strip() == "[]"
