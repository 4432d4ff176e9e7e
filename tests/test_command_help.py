"""``run --help`` and ``record --help``: every experiment with its description without one
chosen, the chosen one's description and main knobs with one, and nothing heavy imported
for the list."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.fault_fixtures import cli

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "conf" / "experiment").glob("*.yaml"))


def _flat(text: str) -> str:
    return " ".join(text.split())


def _description(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["experiment"]["description"])


def _user_conf(root: Path) -> Path:
    """A user's ``conf/`` with one experiment that has a description and one that has not."""
    experiments = root / "conf" / "experiment"
    experiments.mkdir(parents=True)
    (experiments / "mine.yaml").write_text(
        "# @package _global_\n"
        "defaults:\n  - /policy@policies.oracle: oracle\n"
        "experiment:\n  name: mine\n  description: My own three queries.\n  queries: 3\n"
    )
    (experiments / "bare.yaml").write_text("# @package _global_\nexperiment:\n  name: bare\n")
    return root / "conf"


@pytest.mark.parametrize("command", ["run", "record"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_without_an_experiment_lists_every_shipped_one(command: str, flag: str) -> None:
    done = cli(command, flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m evidence_bench {command} +experiment=NAME")
    listed = _flat(done.stdout.split("experiments (", 1)[1])
    for path in SHIPPED:
        assert f" {path.stem} {_flat(_description(path))}" in listed, path.stem
    assert done.stderr == ""


def test_help_lists_a_users_own_experiments_from_the_working_directory(tmp_path: Path) -> None:
    _user_conf(tmp_path)
    done = cli("run", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = _flat(done.stdout.split("experiments (", 1)[1])
    assert listed.startswith("conf/experiment, ")  # the user's first, then the shipped
    assert " mine My own three queries." in listed
    assert " bare (no description: add experiment.description)" in listed
    for path in SHIPPED:
        assert f" {path.stem} {_flat(_description(path))}" in listed, path.stem
    top = cli("--help", cwd=tmp_path)
    assert " mine My own three queries." in _flat(top.stdout)


def test_help_lists_the_experiments_of_config_dir(tmp_path: Path) -> None:
    conf = _user_conf(tmp_path / "elsewhere")
    done = cli("record", "--config-dir", str(conf), "--help")
    assert done.returncode == 0, done.stderr
    assert " mine My own three queries." in _flat(done.stdout)


def test_help_of_a_missing_config_dir_is_one_line() -> None:
    done = cli("run", "--help", "--config-dir", "/nonexistent/conf")
    assert (done.returncode, done.stderr) == (
        2,
        "evidence_bench: --config-dir /nonexistent/conf: no such directory\n",
    )


def test_help_of_an_experiment_is_its_description_and_main_knobs() -> None:
    done = cli("run", "--help", "+experiment=smoke", "ranker.beta=2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "usage: python -m evidence_bench run +experiment=smoke [overrides]"
    assert _flat(f"smoke: {_description(ROOT / 'conf/experiment/smoke.yaml')}") in _flat(
        done.stdout
    )
    assert "(conf/experiment/smoke.yaml)" in lines
    knobs = {line.split()[0] for line in lines if line.startswith("  ") and "=" in line}
    # smoke.yaml's values, the override's, and the schema's defaults
    assert {"experiment.queries=5", "experiment.rounds=1", "ranker.beta=2.0"} <= knobs
    assert {"policies=[oracle]", "query_set.name=cranfield", "ranker.name=tfidf_rocchio"} <= knobs
    assert "  workers=0                     Worker processes (0: one per core)" in lines
    assert len(lines) <= 40
    assert "provider=simulator" not in knobs


def test_help_of_a_users_ranker_shows_its_target_and_its_own_keys() -> None:
    done = cli("run", "--help", "+experiment=smoke", "ranker._target_=mine.R", "+ranker.k1=1.2")
    assert done.returncode == 0, done.stderr
    knobs = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert "ranker._target_=mine.R" in knobs
    assert "passed to its _target_" in knobs["ranker.k1=1.2"]
    assert not any(knob.startswith("ranker.beta=") for knob in knobs)


def test_record_help_of_an_experiment_shows_what_record_takes() -> None:
    done = cli("record", "-h", "+experiment=ci", "--force")
    assert done.returncode == 0, done.stderr
    knobs = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")}
    assert {"provider=simulator", "record_deep=true", "experiment.queries=40"} <= knobs


def test_help_of_a_users_experiment_composes_it_from_the_working_directory(
    tmp_path: Path,
) -> None:
    _user_conf(tmp_path)
    done = cli("run", "--help", "+experiment=mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "mine: My own three queries." in done.stdout
    assert "(conf/experiment/mine.yaml)" in done.stdout
    assert "  experiment.queries=3 " in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["+experiment=smok"], "Could not find 'experiment/smok'"),
        (["+experiment=smoke", "ranker.bta=1"], "ranker.bta: unknown config key (valid: name,"),
        (["+experiment=smoke", "workers=abc"], "workers=abc: Value 'abc' of type"),
    ],
)
def test_help_of_an_experiment_that_does_not_compose_is_one_line(
    args: list[str], message: str
) -> None:
    done = cli("run", "--help", *args)
    assert done.returncode == 1
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""
