"""Benchmark: one command of two (or more) checkouts of the package, alternated, as a user
runs it: wall time, CPU time and peak memory, each checkout's median beside the first's.

    python benchmarks/bench_ab.py CHECKOUT... [--repeat N] [--run-dir DIR] [-- COMMAND...]
    (default command: run +experiment=rocchio_sweep workers=1)
    e.g. the report alone: ... --run-dir runs/rocchio_sweep/latest -- report RUN_DIR

Each CHECKOUT is a source tree of the package (a worktree, or ``git archive`` of a commit
unpacked): its ``python -m evidence_bench COMMAND`` runs in a fresh process with
``PYTHONPATH=CHECKOUT``, this interpreter and its installed dependencies, in a temporary
``runs_dir`` for ``run``. The checkouts take turns ``N`` times (default 5) after one
untimed warm-up each (bytecode, page cache), so a machine that slows meanwhile slows each
alike. ``--run-dir DIR``: each checkout gets its own copy of the run directory DIR, which
the word ``RUN_DIR`` in COMMAND names (a run's stored analysis is keyed by the package's
sources, so each checkout's warm-up stores its own and its timed runs reuse it). Per
checkout: the median wall and CPU time (user + system of the process tree, ``wait4``),
their range, and the highest peak resident memory (the process tree's summed
RSS, and PSS, which counts a page forked workers share once, sampled as ``bench_run.py``
samples them; the largest single process from ``wait4``).
The machine's load is printed before and after: compare checkouts only within one call.

How a removed trick is judged (issue 27): kept only where the checkout with it gains at
least 20% on one of these figures over the checkout without it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_run import MB, Measured, checked, measure


def _load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def _command(command: list[str], runs: Path, run_dir: Path | None) -> list[str]:
    extra = [f"runs_dir={runs}", "progress=false"] if command[:1] == ["run"] else []
    args = [str(run_dir) if arg == "RUN_DIR" and run_dir else arg for arg in command]
    return [sys.executable, "-m", "evidence_bench", *args, *extra]


def _once(checkout: Path, command: list[str], runs: Path, run_dir: Path | None) -> Measured:
    env = {"PYTHONPATH": str(checkout)}
    return checked(measure(_command(command, runs, run_dir), cwd=checkout, env=env))


def _row(name: str, done: list[Measured], first: list[Measured] | None) -> str:
    wall = statistics.median(d.wall for d in done)
    cpu = statistics.median(d.cpu for d in done)
    rss = max(d.peak_rss for d in done)
    single = max(d.max_single_rss for d in done)
    pss = max(d.peak_pss for d in done)
    text = (
        f"{name:<28} wall {wall:6.2f} s ({min(d.wall for d in done):.2f}-"
        f"{max(d.wall for d in done):.2f})  CPU {cpu:6.2f} s  "
        f"peak RSS {rss / MB:5.0f} MB (PSS {pss / MB:.0f} MB; largest process {single / MB:.0f} MB)"
    )
    if first is not None:
        base_wall = statistics.median(d.wall for d in first)
        base_cpu = statistics.median(d.cpu for d in first)
        base_rss = max(d.peak_rss for d in first)
        base_pss = max(d.peak_pss for d in first)
        text += (
            f"\n{'':<28} vs first: wall {100 * (wall / base_wall - 1):+.1f}%, "
            f"CPU {100 * (cpu / base_cpu - 1):+.1f}%, peak RSS {100 * (rss / base_rss - 1):+.1f}%, "
            f"PSS {100 * (pss / base_pss - 1):+.1f}%"
        )
    return text


def main(argv: list[str]) -> None:
    head, _, tail = (argv, None, []) if "--" not in argv else (
        argv[: argv.index("--")], None, argv[argv.index("--") + 1 :],
    )  # fmt: skip
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", type=Path, metavar="CHECKOUT")
    parser.add_argument("--repeat", type=int, default=5, metavar="N")
    parser.add_argument("--run-dir", type=Path, metavar="DIR")
    options = parser.parse_args(head)
    command = tail or ["run", "+experiment=rocchio_sweep", "workers=1"]
    checkouts = [path.resolve() for path in options.checkouts]
    for checkout in checkouts:
        if not (checkout / "evidence_bench" / "__init__.py").is_file():
            parser.error(f"{checkout} holds no evidence_bench package")
    print(f"command: python -m evidence_bench {' '.join(command)}")
    print(f"{os.cpu_count()} cores; load before: {_load()}")
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as work:
        runs = Path(work)
        copies: dict[Path, Path | None] = {checkout: None for checkout in checkouts}
        if options.run_dir is not None:
            for number, checkout in enumerate(checkouts):
                copies[checkout] = runs / f"run-dir-{number}"
                shutil.copytree(options.run_dir.resolve(), runs / f"run-dir-{number}")
        for checkout in checkouts:  # untimed: bytecode, page cache, a stored analysis
            _once(checkout, command, runs / "warm-up", copies[checkout])
        done: dict[Path, list[Measured]] = {checkout: [] for checkout in checkouts}
        for i in range(options.repeat):
            for checkout in checkouts:
                done[checkout].append(_once(checkout, command, runs / f"{i}", copies[checkout]))
    print(f"load after: {_load()}; medians of {options.repeat}, memory the highest peak")
    first = None
    for checkout in checkouts:
        print(_row(checkout.name, done[checkout], first))
        first = first or done[checkout]


if __name__ == "__main__":
    main(sys.argv[1:])
