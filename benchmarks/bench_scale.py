"""Benchmark: the figures issue 30 sets targets for, each beside its target.

    python benchmarks/bench_scale.py [--documents N] [--index-documents M] [--skip-index]
                                     [--keep DIR]

- ``record`` and then ``run`` of 50 queries (``+experiment=ci``, one round) over a
  synthetic collection of N documents (500,000 unless told; :mod:`synthetic`), each in a
  fresh process as a user types it: wall time, CPU time of the process tree (``wait4``),
  and the peak memory of the tree (sampled every 20 ms: bench_run's :class:`TreeSampler`).
  The run after the record finds the saved index (keyed by the collection's checksum) in
  its own cache directory (``EVIDENCE_BENCH_CACHE``), so the record pays for building it
  and the run loads it. The memory target is judged on the summed proportional set size
  (PSS): the forked workers share the parent's pages and the memory-mapped saved index,
  which the summed resident set (RSS) counts once per process, so PSS is what the machine
  must hold. The summed RSS and the largest single process are printed beside it;
- the simulator's index over M documents (1,000,000 unless told) built in this process:
  the bytes it holds per document (its arrays and its vocabulary), and the peak resident
  memory of building it, against 2 KB per document.

The collections are generated under a temporary directory (or ``--keep DIR``), from a
seed, never committed. The figures are wall times on a shared machine: the CPU time and
the peak memory are steadier.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_run import Table, checked, evidence_bench, measure
from synthetic import generate

GB = 1e9


def query_set(directory: Path, cassettes: Path) -> list[str]:
    return [
        "query_set=beir",
        "query_set.name=synthetic",
        f"query_set.path={directory}",
        f"query_set.cassettes={cassettes}",
    ]


def record_and_run(table: Table, documents: int, work: Path) -> None:
    """``record`` then ``run`` of 50 queries, one round, over ``documents`` documents."""
    started = time.perf_counter()
    corpus = generate(work / f"synthetic-{documents}", documents, queries=100, seed=0)
    print(f"generated {documents:,} documents in {time.perf_counter() - started:.0f} s: {corpus}")
    cassettes, runs, cache = work / "cassettes", work / "runs", work / "cache"
    shared = [
        "+experiment=ci", *query_set(corpus, cassettes), "experiment.rounds=1",
        "experiment.queries=50", "progress=false",
    ]  # fmt: skip
    env = {"EVIDENCE_BENCH_CACHE": str(cache)}
    record = checked(measure(evidence_bench("record", *shared), env=env))
    record_load = os.getloadavg()[0]
    run = checked(measure(evidence_bench("run", *shared, f"runs_dir={runs}"), env=env))
    run_load = os.getloadavg()[0]
    for name, done, load in (("record", record, record_load), ("run", run, run_load)):
        table.add(
            f"{name}, {documents:,} documents, 50 queries",
            f"{done.wall:.1f} s wall, {done.cpu:.1f} s CPU (load {load:.1f})",
            "<= 90 s",
            done.wall <= 90,
        )
        table.add(
            "  its peak memory (sum of PSS, the process tree)",
            f"{done.peak_pss / GB:.2f} GB",
            "<= 1.5 GB",
            done.peak_pss <= 1.5 * GB,
        )
        table.add(
            "  the sum of RSS; the largest single process",
            f"{done.peak_rss / GB:.2f} GB; {done.max_single_rss / GB:.2f} GB",
        )


def index_size(table: Table, documents: int, work: Path) -> None:
    """The simulator's index over ``documents`` documents, built in a child process."""
    corpus = generate(work / f"synthetic-{documents}", documents, queries=10, seed=1)
    script = (
        "import resource, sys\n"
        "from evidence_bench.collections.beir import load_collection\n"
        "from evidence_bench.web.saved_index import build_index\n"
        f"c = load_collection({str(corpus)!r})\n"
        "loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "index = build_index(c)\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(index.nbytes, loaded * 1024, peak * 1024)\n"
    )
    done = checked(
        measure([sys.executable, "-c", script], env={"EVIDENCE_BENCH_CACHE": str(work / "c2")})
    )
    held, loaded, peak = (int(x) for x in done.stdout.split()[-3:])
    table.add(
        f"index held, {documents:,} documents",
        f"{held / documents:,.0f} bytes a document ({held / GB:.2f} GB)",
        "<= 2 KB a document",
        held / documents <= 2048,
    )
    table.add(
        "  the collection loaded, then the index built: peak RSS",
        f"{loaded / GB:.2f} GB, then {peak / GB:.2f} GB ({done.cpu:.0f} s CPU)",
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=500_000)
    parser.add_argument("--index-documents", type=int, default=1_000_000)
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--keep", type=Path)
    options = parser.parse_args(argv)
    work = options.keep or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"python: {sys.executable}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")
    table = Table()
    try:
        record_and_run(table, options.documents, work)
        if not options.skip_index:
            index_size(table, options.index_documents, work)
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load afterwards {os.getloadavg()[0]:.1f}")
    print()
    table.print()


if __name__ == "__main__":
    main(sys.argv[1:])
