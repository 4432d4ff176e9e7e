"""The package as another project installs it: the wheel, in a fresh venv, from an empty
directory, gating the user's own ranker in their CI.

Nothing is downloaded. The wheel is built from a copy of this checkout with the dev venv's
setuptools (``--no-build-isolation --no-index``) and installed with ``--no-deps --no-index``
into a venv made without pip; its dependencies are the dev venv's, seen through a ``.pth``
file that names the dev venv's site-packages. A plain path line does not run the ``.pth``
files of that directory, so the dev venv's editable install is not seen: the test checks
that ``evidence_bench`` imports from the fresh venv, and that each dependency the wheel
declares is installed at the version ``requirements.lock`` pins.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel is built from: the package and the data its ``_data/`` links point to
SOURCES = ("pyproject.toml", "README.md", "evidence_bench", "conf", "collections", "cassettes")

WORSE_RANKER = '''\
"""A change to MyRanker with a bug: it sorts the wrong way round (its parameters are
MyRanker's, so the experiment's ranker keys still apply)."""

from my_ranker import MyRanker


class WorseRanker(MyRanker):
    name = "worse_ranker"

    def rank(self, query, candidates, feedback):
        return super().rank(query, candidates, feedback)[::-1]
'''

LOCKED = """\
import sys
from importlib.metadata import distribution, version
from pathlib import Path

from packaging.requirements import Requirement

import evidence_bench

fresh = Path(sys.argv[1]).resolve()
assert Path(evidence_bench.__file__).resolve().is_relative_to(fresh), evidence_bench.__file__
dist = distribution("evidence_bench")
assert Path(str(dist.locate_file(""))).resolve().is_relative_to(fresh), dist
lock = {}
for line in Path(sys.argv[2]).read_text().splitlines():
    name, _, pinned = line.partition("==")
    if pinned:
        lock[name.strip().lower().replace("_", "-")] = pinned.split(";")[0].strip()
for text in dist.requires or []:
    requirement = Requirement(text)
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue
    name = requirement.name.lower().replace("_", "-")
    assert name in lock, f"{name} is not pinned in requirements.lock"
    assert version(name) == lock[name], (name, version(name), lock[name])
    assert requirement.specifier.contains(lock[name], prereleases=True), (text, lock[name])
print("ok")
"""

#: Where the installed package's Cranfield cassettes are
PACKAGED_CASSETTES = """\
from evidence_bench._resources import packaged

print(packaged("cassettes/cranfield"))
"""


def _run(
    argv: Sequence[str | Path], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}: {done.stdout}{done.stderr}"
    return done.stdout


def _wheel(tmp: Path, env: dict[str, str]) -> Path:
    """The wheel built from a copy of the checkout (a build writes ``build/`` beside it)."""
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name,
                source / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp / "dist"
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
              "--no-build-isolation", "--no-index", "-w", out, "."], source, env))  # fmt: skip
    (wheel,) = out.glob("evidence_bench-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path, env: dict[str, str]) -> Path:
    """A venv holding the wheel, its dependencies the dev venv's (through a ``.pth``)."""
    venv = tmp / "fresh"
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", venv], tmp, env))
    python = venv / "bin" / "python"
    _ok(_run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
              "--no-deps", "--no-index", "--no-compile", wheel], tmp, env))  # fmt: skip
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = Path(_ok(_run([python, "-c", where], tmp, env)).strip())
    (purelib / "dev_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


@pytest.mark.slow
def test_the_wheel_gates_a_users_ranker_from_an_empty_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    wheel = _wheel(tmp_path, env)
    venv = _fresh_venv(tmp_path, wheel, env)
    python, bench = venv / "bin" / "python", venv / "bin" / "evidence-bench"
    (tmp_path / "locked.py").write_text(LOCKED)
    checked = [python, tmp_path / "locked.py", venv, ROOT / "requirements.lock"]
    assert _ok(_run(checked, tmp_path, env)) == "ok\n"

    project = tmp_path / "project"
    project.mkdir()
    _ok(_run([bench, "init", project], project.parent, env))  # the starter project
    assert (project / "my_ranker.py").is_file()
    (project / "worse_ranker.py").write_text(WORSE_RANKER)
    run = [bench, "run", "+experiment=my_experiment", "progress=false"]
    runs = project / "runs" / "my_experiment"
    _ok(_run(run, project, env))
    assert (runs / "latest" / "report.html").is_file()  # rendered from the packaged templates
    check = [bench, "check", runs / "latest", "--baseline", "baselines/my_experiment.yaml"]
    _ok(_run([*check, "--update"], project, env))
    assert "PASS" in _ok(_run(check, project, env))

    _ok(_run([*run, "report=false", "ranker._target_=worse_ranker.WorseRanker"], project, env))
    failed = _run([*check, "--junit", "junit.xml"], project, env)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.startswith("FAIL: ")
    suite = ET.parse(project / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) > 0
    failures = [case.find("failure") for case in suite.iter("testcase")]
    message = next(f for f in failures if f is not None).get("message", "")
    assert message.startswith("nDCG@10 ") and "baseline" in message
    assert (runs / "latest").resolve().is_relative_to(project.resolve())  # not the package's

    # record from the wheel: under the project, never into the package's own cassettes
    packaged = Path(_ok(_run([python, "-c", PACKAGED_CASSETTES], project, env)).strip())
    assert packaged.is_relative_to(venv.resolve()) and (packaged / "@manifest.json").is_file()
    before = {p: p.read_bytes() for p in sorted(packaged.rglob("*")) if p.is_file()}
    record = [bench, "record", "+experiment=smoke", "progress=false"]
    done = _run([*record, "--force"], project, env)
    assert done.returncode == 1 and "installed package's cassettes" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    said = _ok(_run(record, project, env))  # record_deep=true: the deeper pages are new
    (recording,) = (project / "recordings" / "cranfield").iterdir()
    assert f"in recordings/cranfield/{recording.name};" in said.splitlines()[0]
    assert f"query_set.cassettes=recordings/cranfield/{recording.name}" in said
    assert {p: p.read_bytes() for p in sorted(packaged.rglob("*")) if p.is_file()} == before
    cassettes = f"query_set.cassettes=recordings/cranfield/{recording.name}"
    replay = [bench, "run", "+experiment=smoke", "progress=false", "report=false",
              "replay.on_miss=error", cassettes]  # fmt: skip
    _ok(_run(replay, project, env))
