"""The command registry (``evidence_bench.commands.COMMANDS``): what ``--help``, the error for
an unknown command, the console script and the dispatch read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evidence_bench.commands import COMMANDS, main
from evidence_bench.commands._hydra import _jobs

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "conf" / "experiment").glob("*.yaml"))


def _cli(*args: str, cwd: Path = ROOT, script: bool = False) -> subprocess.CompletedProcess[str]:
    command = (
        [str(Path(sys.executable).parent / "evidence-bench")]
        if script
        else [sys.executable, "-m", "evidence_bench"]
    )
    return subprocess.run(
        [*command, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _description(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["experiment"]["description"])


def _flat(text: str) -> str:
    """``text`` with its line wrapping undone."""
    return " ".join(text.split())


def test_every_command_names_a_handler_that_exists() -> None:
    assert len({command.name for command in COMMANDS}) == len(COMMANDS)
    for command in COMMANDS:
        assert callable(command.load()), command.name


@pytest.mark.parametrize("script", [False, True], ids=["python -m", "evidence-bench"])
def test_help_lists_every_command_and_every_shipped_experiment(script: bool) -> None:
    done = _cli("--help", script=script)
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert f"\n  {command.name} {command.arguments} " in done.stdout
        assert command.summary in done.stdout
    listed = _flat(done.stdout.split("experiments (", 1)[1])
    assert len(SHIPPED) == 8
    for path in SHIPPED:
        assert f" {path.stem} {_flat(_description(path))}" in listed, path.stem


def test_no_command_prints_the_usage_and_exits_2() -> None:
    done = _cli()
    assert done.returncode == 2
    assert done.stdout.startswith("usage: python -m evidence_bench COMMAND")


@pytest.mark.parametrize("script", [False, True], ids=["python -m", "evidence-bench"])
def test_an_unknown_command_is_one_line_naming_it_and_every_command(script: bool) -> None:
    done = _cli("dance", "--fast", script=script)
    assert done.returncode == 2
    names = ", ".join(command.name for command in COMMANDS)
    assert done.stderr == f"evidence_bench: unknown command 'dance'; commands: {names}\n"
    assert done.stdout == ""


def test_the_console_script_runs_a_command_as_python_m_does(tmp_path: Path) -> None:
    done = _cli("report", str(tmp_path / "missing"), script=True)
    assert done.returncode == 2
    assert done.stderr == f"evidence_bench: report: {tmp_path / 'missing'} is not a directory\n"


def test_a_handlers_exit_status_is_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:  # check: 2 when the run cannot be read
        main(["check", "/nonexistent/run", "--baseline", "baselines/ci.yaml"])
    assert caught.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "jobs"),
    [
        (["+experiment=smoke", "seed=1,2", "ranker.beta=0.5,1"], 4),
        (["+experiment=smoke", "query_set=cranfield,cacm", "seed=0", "seed=3,4"], 4),
        (["+experiment=smoke", "ranker.beta=range(1,4)", "--multirun", "~ranker.gamma"], 3),
        (["+experiment=smoke"], 1),
    ],
)
def test_a_multiruns_jobs_are_hydras_basic_sweepers(argv: list[str], jobs: int) -> None:
    """The jobs the pre-check composes, against Hydra's own sweeper (the reference)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([a for a in argv if a[:1] != "-"])
    expected = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    assert _jobs(argv) == expected
    assert len(expected) == jobs


def test_an_interval_sweep_is_left_to_hydra_to_refuse() -> None:
    assert _jobs(["+experiment=smoke", "ranker.beta=interval(0,1)"]) is None
