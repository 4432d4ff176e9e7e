"""Every shell command of README.md and docs/ runs, on a scratch copy, as the page says.

The convention (how a block is marked, how a sample is included) is in
docs/reference/development.rst, "Commands in the docs". Each page's runnable blocks run in
page order in one bash (:func:`doc_commands.page_script`), in a copy of the checkout's
files, with no Brave key and, where ``unshare`` can make one, in a network namespace of
its own (loopback only), so a command that reached for the web fails instead of
reaching it. ``slow`` blocks run with ``EVIDENCE_BENCH_DOC_SLOW=1`` (``make doctest-slow``,
which .ci/run calls); ``EVIDENCE_BENCH_WRITE_SAMPLES=1`` (``make samples``) writes the
samples instead of comparing them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from doc_commands import ROOT, Block, page_script, read_blocks

pytestmark = pytest.mark.slow

PAGES = read_blocks()
SLOW = os.environ.get("EVIDENCE_BENCH_DOC_SLOW") == "1"
WRITE_SAMPLES = os.environ.get("EVIDENCE_BENCH_WRITE_SAMPLES") == "1"
SAMPLES = ROOT / "docs" / "_samples"
#: NAME, RUN_DIR, SHARD_DIR...: a word for the reader to replace (not VALUE in key=VALUE,
#: not $VAR); [overrides]; a lone "..."
PLACEHOLDER = re.compile(
    r"(?<![=$\w])[A-Z][A-Z_]{2,}\b(?!=)|(?<![.\w])\[[a-z ]+\]|(?<!\S)\.\.\.(?!\S)"
)
#: a sample's first lines; longer output is cut, and "..." says so
SAMPLE_LINES = 16


def _blocks(*marks: str) -> list[Block]:
    return [b for blocks in PAGES.values() for b in blocks if set(marks) & set(b.marks)]


def _pages(runnable: set[str], needed: str | None = None) -> list[str]:
    """Pages with a block to run: every mark in ``runnable`` (and ``needed`` among them)."""
    return [
        page
        for page, blocks in PAGES.items()
        if any(b.runs_with(runnable) and (needed is None or needed in b.marks) for b in blocks)
    ]


@cache
def _isolation() -> tuple[str, ...]:
    """``unshare`` into a network namespace whose only interface is loopback, when allowed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    prefix = (
        unshare,
        "--net",
        "--map-root-user",
        "sh",
        "-c",
        'ip link set lo up && exec "$@"',
        "sh",
    )
    done = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    return prefix if done.returncode == 0 else ()


def scratch_copy(tmp_path: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore), as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    scratch = tmp_path / "checkout"
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_symlink() or source.is_file():
            target = scratch / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                target.symlink_to(os.readlink(source))
            else:
                shutil.copy2(source, target)
    (scratch / ".make-install.stamp").touch()  # make installs nothing: PYTHON is the venv's
    return scratch


def environment(scratch: Path) -> dict[str, str]:
    venv = Path(sys.executable).parent
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BRAVE_", "VIRTUAL_ENV", "PYTEST_", "MAKE", "MFLAGS"))
    }
    env.update(PATH=f"{venv}:{env.get('PATH', '/usr/bin:/bin')}", PYTHON=sys.executable)
    env.update(HOME=str(scratch.parent / "home"), COLUMNS="200")
    return env


def run_page(page: str, runnable: set[str], tmp_path: Path) -> Path:
    """Run the page's blocks; the scratch copy they ran in."""
    scratch = scratch_copy(tmp_path)
    script = page_script(PAGES[page], runnable)
    done = subprocess.run(
        [*_isolation(), "bash", "-c", script],
        cwd=scratch,
        env=environment(scratch),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1800,  # a slow page on a loaded machine (validity: 15 min at load 15)
        check=False,
    )
    if done.returncode != 0:
        where = re.findall(r"^@@ (\S+)$", done.stderr, re.M)
        block = where[-1] if where else page
        pytest.fail(
            f"{block}: a command failed (exit {done.returncode})\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
    return scratch


def normalized(text: str, scratch: Path) -> str:
    """What a sample shows: run ids, the scratch path and progress bars left out, cut."""
    text = text.replace(str(scratch) + "/", "").replace(str(scratch), ".")
    text = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "<run id>", text)
    lines = [line.rstrip() for line in text.splitlines()]
    if len(lines) > SAMPLE_LINES:
        lines = [*lines[:SAMPLE_LINES], "..."]
    return "\n".join(lines).strip("\n") + "\n"


#: overrides that leave an experiment's run as it is: a run with only these is its own
PLAIN_OVERRIDES = re.compile(r"progress=\w+")


def _experiment_run(overrides: object) -> str | None:
    """The experiment an ``[+experiment=NAME, ...]`` run is, with nothing else changed."""
    if not isinstance(overrides, list):
        return None
    rest = [o for o in overrides if not PLAIN_OVERRIDES.fullmatch(str(o))]
    match = re.fullmatch(r"\+experiment=(\w+)", str(rest[0])) if len(rest) == 1 else None
    return match.group(1) if match else None


def measured_runtimes(scratch: Path) -> dict[str, float]:
    """Each experiment the page ran as it is (``run +experiment=NAME``, no other override),
    its wall time: a run's manifest's ``wall_time_s``, a multirun's its jobs' summed (as the
    gathered report counts it); the newest run of an experiment counts."""
    found: dict[str, tuple[str, float]] = {}
    for manifest in scratch.glob("runs/*/*/manifest.json"):
        run = json.loads(manifest.read_text())
        name = _experiment_run(run.get("overrides"))
        if name and "wall_time_s" in run and not manifest.parent.is_symlink():
            found[name] = max(found.get(name, ("", 0.0)), (run["created"], run["wall_time_s"]))
    for sweep in scratch.glob("runs/*/multirun-*/multirun.yaml"):
        hydra = yaml.safe_load(sweep.read_text()).get("hydra", {})
        name = _experiment_run(hydra.get("overrides", {}).get("task"))
        jobs = [json.loads(m.read_text()) for m in sweep.parent.glob("*/run/manifest.json")]
        if name and jobs and all("wall_time_s" in job for job in jobs):
            newest = max(job["created"] for job in jobs)
            total = round(sum(job["wall_time_s"] for job in jobs), 3)
            found[name] = max(found.get(name, ("", 0.0)), (newest, total))
    return {name: seconds for name, (_, seconds) in found.items()}


def record_runtimes(scratch: Path) -> None:
    """Under ``make samples``: the wall time of each experiment the page ran as it is, for
    the manual's ``:runtime:`` role (docs/_ext/runtimes.py)."""
    if not WRITE_SAMPLES:
        return
    path = SAMPLES / "runtimes.json"
    measured = json.loads(path.read_text()) if path.exists() else {}
    for experiment, seconds in measured_runtimes(scratch).items():
        measured[experiment] = {"wall_time_s": seconds, "cpus": os.cpu_count()}
    SAMPLES.mkdir(exist_ok=True)
    path.write_text(json.dumps(dict(sorted(measured.items())), indent=2) + "\n")


def check_samples(page: str, runnable: set[str], scratch: Path) -> None:
    """The page's samples that ran, against docs/_samples (or written there)."""
    record_runtimes(scratch)
    for block in PAGES[page]:
        if "sample" not in block.marks or not block.runs_with(runnable):
            continue
        got = normalized((scratch / ".samples" / f"{block.name}.txt").read_text(), scratch)
        path = SAMPLES / f"{block.name}.txt"
        if WRITE_SAMPLES:
            SAMPLES.mkdir(exist_ok=True)
            path.write_text(got)
        elif not path.exists() or path.read_text() != got:
            pytest.fail(
                f"stale sample docs/_samples/{block.name}.txt ({block.where}): run make samples"
                f"\n--- the command printed\n{got}"
            )


def test_every_block_is_marked_as_the_convention_says() -> None:
    problems = [f"{b.where}: {p}" for blocks in PAGES.values() for b in blocks for p in b.problems]
    for block in (b for blocks in PAGES.values() for b in blocks):
        if "background" in block.marks and len(block.commands()) != 1:
            problems.append(f"{block.where}: a background block holds one command")
        for command in block.commands():
            bare = re.sub(r"\s+#.*$", "", command)  # a comment may say anything
            if PLACEHOLDER.search(bare) and not set(block.marks) & {"skip"}:
                problems.append(f"{block.where}: a placeholder in {bare!r}: use a text block")
    names = [b.name for b in _blocks("sample")]
    problems += [f"sample {n!r} named twice" for n in {n for n in names if names.count(n) > 1}]
    assert problems == []


@pytest.mark.parametrize("page", _pages({"background"}))
def test_the_page_runs(page: str, tmp_path: Path) -> None:
    scratch = run_page(page, {"background"}, tmp_path)
    check_samples(page, {"background"}, scratch)


@pytest.mark.skipif(not SLOW, reason="make doctest-slow (EVIDENCE_BENCH_DOC_SLOW=1)")
@pytest.mark.parametrize("page", _pages({"background", "slow"}, needed="slow"))
def test_the_page_runs_with_its_slow_commands(page: str, tmp_path: Path) -> None:
    scratch = run_page(page, {"background", "slow"}, tmp_path)
    check_samples(page, {"background", "slow"}, scratch)


@pytest.mark.parametrize(
    ("where", "marks", "command"),
    [
        (block.where, block.marks, command)
        for block in _blocks("needs-key", "needs-network")
        if "skip" not in block.marks
        for command in block.commands()
        if not command.startswith("export ")
    ],
)
def test_without_a_key_or_the_network_it_fails_in_one_line(
    where: str, marks: tuple[str, ...], command: str, tmp_path: Path
) -> None:
    if not _isolation():
        pytest.skip("no network namespace here (unshare --net): the command could reach out")
    scratch = scratch_copy(tmp_path)
    done = subprocess.run(
        [*_isolation(), "bash", "-c", command],
        cwd=scratch,
        env=environment(scratch),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode == 0 and "needs-network" in marks:
        # a report of what it could fetch: it must say that the network failed it
        assert "network" in done.stdout, f"{where}: {command} succeeded without the network"
        return
    assert done.returncode != 0, f"{where}: {command} succeeded without a key or network"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"{where}: {command} printed {len(lines)} lines:\n{done.stderr}"


def test_a_runtime_is_an_experiments_own_run_and_a_multiruns_jobs_summed(tmp_path: Path) -> None:
    def run(where: str, overrides: list[str], created: str, seconds: float) -> None:
        (tmp_path / where).mkdir(parents=True)
        manifest = {"overrides": overrides, "created": created, "wall_time_s": seconds}
        (tmp_path / where / "manifest.json").write_text(json.dumps(manifest))

    run("runs/smoke/a", ["+experiment=smoke"], "2026-12-07T05:00:00", 3.5)
    run("runs/smoke/b", ["+experiment=smoke", "progress=false"], "2026-12-07T05:01:00", 4.0)
    run("runs/smoke/c", ["+experiment=smoke", "query_set=cacm"], "2026-12-07T05:02:00", 9.0)
    run("runs/ci/a", ["+experiment=ci", "ranker.beta=0.25"], "2026-12-07T05:00:00", 9.0)
    (tmp_path / "runs/smoke/latest").symlink_to("c")
    sweep = tmp_path / "runs/validity/multirun-1"
    run("runs/validity/multirun-1/0/run", ["+experiment=validity", "query_set=cranfield"],
        "2026-12-07T05:03:00", 100.0)  # fmt: skip
    run("runs/validity/multirun-1/1/run", ["+experiment=validity", "query_set=cacm"],
        "2026-12-07T05:04:00", 50.5)  # fmt: skip
    task = "hydra:\n  overrides:\n    task:\n    - +experiment=validity\n"
    (sweep / "multirun.yaml").write_text(task)
    assert measured_runtimes(tmp_path) == {"smoke": 4.0, "validity": 150.5}
