"""``python -m evidence_bench``: commands, one-line errors, and Hydra's multirun."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evidence_bench.__main__ import main
from tests.fault_fixtures import main_in_process

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evidence_bench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_usage_lists_every_command() -> None:
    done = cli("--help")
    assert done.returncode == 0
    for command in ("run", "record", "serve", "report", "gather", "check"):
        assert f"  {command} " in done.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["dance"], 2, "unknown command 'dance'"),
        (["serve", "colection=cranfield"], 2, "serve: unexpected argument 'colection=cranfield'"),
        (["serve", "port=eighty"], 2, "serve: port='eighty' is not a whole number"),
        (["serve", "rate_limit=1.5"], 2, "serve: rate_limit='1.5' is not a whole number"),
        (["report", "/nonexistent/run"], 2, "report: /nonexistent/run is not a directory"),
        (["run", "+experiment=smoke", "ranker.name=bm42"], 1, "ranker.name='bm42' is not a known"),
        (["run"], 1, "no experiment chosen: add +experiment=NAME"),
        (
            ["run", "+experiment=smoke", "ranker.bta=0.5"],
            1,
            "ranker.bta: unknown config key (valid: name, _target_,",
        ),
        (["run", "+experiment=smoke", "workers=abc"], 1, "workers=abc: Value 'abc' of type"),
        (["run", "+experiment=smoke", "ranker=nope"], 1, "in 'ranker': livefetch, provider_order"),
        (["run", "+experiment=smok"], 1, "Could not find 'experiment/smok'"),
        (["record", "+experiment=smoke", "provider=pigeon"], 1, "provider='pigeon' is not valid"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(
    args: list[str],
    code: int,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``main`` in this process (the command line is tested in a fresh one below): any
    exception but the ``SystemExit`` of a handled error fails the test, as a traceback would."""
    monkeypatch.setattr(sys, "argv", ["evidence_bench", *args])  # run and record set it
    with pytest.raises(SystemExit) as caught:
        main(args)
    out, err = capsys.readouterr()
    assert caught.value.code == code
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert out == ""


def test_bad_input_on_the_command_line_is_one_line_and_a_non_zero_exit() -> None:
    done = cli("run", "+experiment=smoke", "ranker.bta=0.5")
    assert done.returncode == 1
    assert "ranker.bta: unknown config key (valid: name, _target_," in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ("experiment.queries=5,-1", "job 1 (experiment.queries=-1): experiment.queries=-1 "
         "must be between 1 and 1000000 (or null: all)"),
        ("ranker.beta=0.5,abc", "job 1 (ranker.beta=abc): Error merging override "
         "ranker.beta=abc: Value 'abc' of type 'str' could not be converted to Float"),
    ],
)  # fmt: skip
def test_a_multirun_checks_every_job_before_it_runs_one(
    tmp_path: Path, sweep: str, message: str
) -> None:
    """The second job's bad value is said at once, in one line naming the job, before the
    first job runs or Hydra makes its sweep directory."""
    done = cli("run", "+experiment=smoke", sweep, f"runs_dir={tmp_path}", "--multirun")
    assert done.returncode == 1
    assert done.stderr == f"evidence_bench: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_run_prints_its_summary_and_the_reports_path(tmp_path: Path) -> None:
    done = cli("run", "+experiment=smoke", f"runs_dir={tmp_path}", "progress=false")
    assert done.returncode == 0, done.stderr
    report = tmp_path / "smoke" / "latest" / "report.html"
    assert report.is_file()
    assert f"report: {tmp_path}/smoke/" in done.stdout
    assert "best:" in done.stdout


def test_a_multirun_ends_in_one_gathered_report(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``main`` in this process: Hydra's basic launcher runs the jobs in the process that
    gathers them, as on the command line (a multirun in real processes, joblib's, is
    test_shards.py's); what is tested is the command's answer and files."""
    done = main_in_process(
        "run", "--multirun", "+experiment=smoke", "ranker.beta=0.25,0.75",
        f"runs_dir={tmp_path}", "workers=1", "progress=false",
        capfd=capfd, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [sweep] = (tmp_path / "smoke").glob("multirun-*")
    jobs = sorted(str(p.relative_to(sweep)) for p in sweep.glob("*/run/manifest.json"))
    assert jobs == ["0/run/manifest.json", "1/run/manifest.json"]
    html = (sweep / "report.html").read_text()
    assert "beta=0.25" in html and "beta=0.75" in html
    assert f"report: {sweep / 'report.html'}" in done.stdout


def test_a_bug_in_serve_is_not_called_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ValueError from inside (a bug) is not turned into exit 2 'serve: ...'."""
    from evidence_bench.commands.serve import serve_command
    from evidence_bench.web import simulator

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug in the simulator")

    monkeypatch.setattr(simulator, "BraveSimulator", broken)
    with pytest.raises(ValueError, match="a bug in the simulator"):
        serve_command(["port=0"])
