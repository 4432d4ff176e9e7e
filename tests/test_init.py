"""``evidence-bench init DIR``: the starter project, written whole into an empty directory
or not at all, and what it holds runs: the experiment composes and plans, ``MyRanker``
is a ranker, and the README's three commands run, gate and fail a worse ranker."""

from __future__ import annotations

import fnmatch
import importlib.util
import shlex
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from evidence_bench import Evidence, Label, Ranker
from evidence_bench.commands import main
from evidence_bench.commands.init import STARTER
from tests.fault_fixtures import cli

ROOT = Path(__file__).resolve().parents[1]
#: The files the starter project is (issue 26: these names are the interface)
FILES = {
    "conf/experiment/my_experiment.yaml",
    "my_ranker.py",
    "baselines/.gitkeep",
    ".github/workflows/evidence-gate.yml",
    "README.md",
}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    done = cli("init", "proj", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / "proj"


@pytest.fixture
def user_modules() -> Iterator[None]:
    """The project's modules are imported by name (``my_ranker``): forget them afterwards,
    so another test's project is imported afresh."""
    yield
    for name in ("my_ranker", "worse_ranker"):
        sys.modules.pop(name, None)


def test_init_writes_the_starter_files_into_a_new_directory(project: Path) -> None:
    assert set(STARTER) == FILES
    assert _tree(project) == FILES
    assert (project / "baselines").is_dir()


def test_init_writes_into_an_empty_directory_and_says_what_it_wrote(tmp_path: Path) -> None:
    done = cli("init", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert _tree(tmp_path) == FILES
    assert [line.removeprefix(f"init: wrote {tmp_path}/") for line in done.stdout.splitlines()][
        :-1
    ] == list(STARTER)
    assert done.stderr == ""


@pytest.mark.parametrize("existing", ["notes.txt", ".git/HEAD"])
def test_init_refuses_a_directory_that_is_not_empty(tmp_path: Path, existing: str) -> None:
    (tmp_path / existing).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / existing).write_text("mine\n")
    done = cli("init", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == (
        f"evidence_bench: init: {tmp_path} is not empty: init writes a starter project only "
        "into an empty or new directory\n"
    )
    assert _tree(tmp_path) == {existing}
    assert done.stdout == ""


def test_init_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "proj").write_text("")
    done = cli("init", str(tmp_path / "proj"))
    assert (done.returncode, done.stderr) == (
        1,
        f"evidence_bench: init: {tmp_path / 'proj'} is not a directory\n",
    )


def test_init_that_cannot_write_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = cli("init", str(tmp_path / "file" / "proj"))
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"evidence_bench: init: could not write the starter project into {tmp_path}/file/proj: "
    )
    assert done.stderr.endswith("; nothing was written\n")
    assert len(done.stderr.splitlines()) == 1
    assert _tree(tmp_path) == {"file"}


@pytest.mark.parametrize("args", [[], ["a", "b"], ["--force"]])
def test_init_without_one_directory_is_a_usage_error(args: list[str], tmp_path: Path) -> None:
    done = cli("init", *args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        2,
        "evidence_bench: usage: python -m evidence_bench init DIR\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_init_help_names_every_file(tmp_path: Path) -> None:
    done = cli("init", "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert all(name in done.stdout for name in FILES)
    assert list(tmp_path.iterdir()) == []


def test_the_wheel_ships_every_template() -> None:
    """pyproject.toml's package data covers the templates (setuptools globs them)."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["evidence_bench"]
    package = ROOT / "evidence_bench"
    for template in filter(None, STARTER.values()):
        relative = f"commands/starter/{template}"
        assert (package / relative).is_file()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_the_workflow_installs_this_version_runs_and_checks_with_junit(project: Path) -> None:
    workflow = yaml.safe_load((project / ".github/workflows/evidence-gate.yml").read_text())
    steps = [step.get("run", "") for step in workflow["jobs"]["gate"]["steps"]]
    assert f'python -m pip install "evidence_bench=={version("evidence_bench")}"' in steps
    assert "evidence-bench run +experiment=my_experiment progress=false" in steps
    (check,) = [step for step in steps if step.startswith("evidence-bench check")]
    assert shlex.split(check) == [
        "evidence-bench", "check", "runs/my_experiment/latest",
        "--baseline", "baselines/my_experiment.yaml", "--junit", "evidence-gate.xml",
    ]  # fmt: skip


def _candidates(*texts: str) -> list[Evidence]:
    return [
        Evidence(title=text, url=f"https://example.org/{n}", snippet="", rank=n)
        for n, text in enumerate(texts, start=1)
    ]


def test_my_ranker_is_a_ranker_and_ranks_as_its_docstring_says(
    project: Path, user_modules: None
) -> None:
    spec = importlib.util.spec_from_file_location("my_ranker", project / "my_ranker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ranker = module.MyRanker()
    assert isinstance(ranker, Ranker)
    candidates = _candidates("wing flow", "heat", "flow", "heat transfer")
    # shared query words: 2, 0, 1, 0; ties keep the provider's order
    ranked = ranker.rank("wing flow", candidates, {})
    assert [e.title for e in ranked] == ["wing flow", "flow", "heat", "heat transfer"]
    assert [e.rank for e in ranked] == [1, 2, 3, 4]
    # "heat transfer" marked relevant: + 0.5 x shared words with it: 2, 0.5, 1, 1.0
    ranked = ranker.rank("wing flow", candidates, {candidates[3].key: Label.RELEVANT})
    assert [e.title for e in ranked] == ["wing flow", "flow", "heat transfer", "heat"]
    # ... and "flow" pushed away: - 0.5 x shared with it: 1.5, 0, 0.5, 0
    ranked = ranker.rank("wing flow", candidates, {candidates[2].key: Label.IRRELEVANT})
    assert [e.title for e in ranked] == ["wing flow", "flow", "heat", "heat transfer"]


def test_my_experiment_composes_and_plans_the_users_ranker_and_the_default(
    project: Path, monkeypatch: pytest.MonkeyPatch, user_modules: None
) -> None:
    from evidence_bench.experiment.config import compose
    from evidence_bench.experiment.plan import plan_run

    monkeypatch.chdir(project)
    cfg, _text = compose(["+experiment=my_experiment"])
    assert cfg["ranker"] == {**cfg["ranker"], "_target_": "my_ranker.MyRanker"}
    assert sorted(cfg["policies"]) == ["noisy", "oracle"]
    assert cfg["query_set"]["name"] == "cranfield"
    plan = plan_run(cfg)
    labels = [engine.label for engine in plan.engines]
    assert labels == [
        "my_ranker.MyRanker feedback_weight=0.5",
        "tfidf_rocchio alpha=1 beta=0.75 gamma=0.15",
    ]


def _readme_commands(project: Path) -> list[list[str]]:
    """The commands of the README's ``sh`` block, as argument lists after the command name."""
    block = (project / "README.md").read_text().split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line, comments=True) for line in block.splitlines()]
    assert all(words[0] == "evidence-bench" for words in commands)
    return [words[1:] for words in commands]


def _main(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.slow
def test_the_readmes_three_commands_run_gate_and_fail_a_worse_ranker(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    user_modules: None,
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "argv", ["evidence-bench"])  # run sets it
    run, update, check = _readme_commands(project)
    assert run == ["run", "+experiment=my_experiment"]
    assert _main(*run, "progress=false") == 0
    assert (project / "runs/my_experiment/latest/report.html").is_file()
    assert _main(*update) == 0
    assert (project / "baselines/my_experiment.yaml").is_file()
    capsys.readouterr()
    assert _main(*check) == 0
    assert capsys.readouterr().out.startswith("PASS: ")

    (project / "worse_ranker.py").write_text(
        "class WorseRanker:\n"
        "    name = 'worse'\n"
        "    def rank(self, query, candidates, feedback):\n"
        "        return [c.with_rank(n) for n, c in enumerate(reversed(candidates), start=1)]\n"
    )
    worse = [*run, "progress=false", "report=false", "ranker._target_=worse_ranker.WorseRanker",
             "~ranker.feedback_weight"]  # fmt: skip
    assert _main(*worse) == 0
    capsys.readouterr()
    assert _main(*check, "--junit", "junit.xml") == 1
    assert capsys.readouterr().out.startswith("FAIL")
    suite = ET.parse(project / "junit.xml").getroot()
    failed = {
        case.get("classname", "").split(".")[0]
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    }
    assert failed == {"c00"}  # the user's ranker made worse; the default, c01, is unchanged


def test_init_without_the_package_installed_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No package metadata (a checkout on sys.path, never installed): the starter cannot pin
    a version, and says so in one line, not a traceback."""
    from importlib.metadata import PackageNotFoundError

    from evidence_bench import _resources

    def not_installed(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(_resources, "version", not_installed)
    with pytest.raises(SystemExit) as caught:
        main(["init", str(tmp_path / "proj")])
    err = capsys.readouterr().err
    assert caught.value.code == 1
    assert err.startswith("evidence_bench: init: evidence_bench is not installed")
    assert len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
