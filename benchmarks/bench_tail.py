"""Benchmark: the parent's serial tail, what a run does after its last episode (issue 13).

    PYTHONPATH=. python benchmarks/bench_tail.py [--profile] [--stats F.prof]
        [--save F | --load F] [--runs DIR] [overrides...]
    (default: +experiment=rocchio_sweep experiment.queries=50)

One run in this process with ``workers=1`` (or the ``workers=`` given: the tail is the
parent's either way, and ``process_time`` counts the parent alone), timing
the CPU seconds from the moment ``execute`` hands over its last query's output to the end
of ``perform_run`` (the tables, the summary, writing the run directory, the analysis, its
storing, the report and the terminal table), and the peak resident memory before and after
it; with ``--profile``, each step's share from a profile of that stretch alone (the CPU
figure then includes the profiler's overhead; ``--stats`` also saves it for pstats).

``--save F`` pickles each query's output to ``F`` as the episodes yield it; ``--load F``
replays them instead of running the episodes, so the tail of a full sweep is timed in
seconds, on this checkout or another (``PYTHONPATH=/work/main``, same overrides);
``--runs DIR`` keeps the run directory under ``DIR`` (the same ``DIR`` for both, as it is
in ``config.yaml``), for ``cmp``. The tail is serial: it bounds how far two workers can
speed a run up. Compare with the code before a change in the same minute, on a machine
others share.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import pickle
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import evidence_bench.experiment.run as run_module
from evidence_bench.experiment.config import compose
from evidence_bench.report.fresh import new_run_report

#: The steps whose cumulative time is shown (function name as cProfile reports it).
STEPS = (
    "tables",
    "feedback",
    "summarize_scores",
    "as_stored",
    "_excluded",
    "label_summary",
    "write_tables",
    "new_run_report",
    "load_run",
    "analyze",
    "compare",
    "_randomization",
    "stage_values",
    "validity",
    "per_query_gains",
    "oracle_shares",
    "summary_table",
    "write_run_report",
    "report_context",
    "store_context",
    "write_report",
)


def main(argv: list[str]) -> None:
    profiled = "--profile" in argv or "--stats" in argv
    argv = [a for a in argv if a != "--profile"]
    given: dict[str, str] = {}
    for flag in ("--save", "--load", "--runs", "--stats"):
        if flag in argv:
            at = argv.index(flag)
            given[flag] = argv[at + 1]
            del argv[at : at + 2]
    save, load = given.get("--save"), given.get("--load")
    overrides = argv or ["+experiment=rocchio_sweep", "experiment.queries=50"]
    profile = cProfile.Profile()
    marks: dict[str, float] = {}
    execute = run_module.execute  # type: ignore[attr-defined]

    def replayed() -> Iterator[Any]:
        assert load is not None
        with open(load, "rb") as handle:
            while True:
                try:
                    yield pickle.load(handle)
                except EOFError:
                    return

    def recorded(outputs: Iterator[Any]) -> Iterator[Any]:
        assert save is not None
        with open(save, "wb") as handle:
            for out in outputs:
                pickle.dump(out, handle, protocol=pickle.HIGHEST_PROTOCOL)
                yield out

    def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
        outputs = replayed() if load else execute(*args, **kwargs)
        yield from recorded(outputs) if save else outputs
        marks["cpu"] = time.process_time()
        marks["wall"] = time.perf_counter()
        marks["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if profiled:
            profile.enable()

    run_module.execute = timed  # type: ignore[attr-defined]
    with (
        contextlib.nullcontext(given["--runs"])
        if "--runs" in given
        else (tempfile.TemporaryDirectory()) as runs
    ):
        # workers=1 unless given: the parent's clock (process_time) counts only its own CPU
        workers = [] if any(o.startswith("workers=") for o in overrides) else ["workers=1"]
        cfg, text = compose([*overrides, f"runs_dir={runs}", *workers, "progress=false"])
        run_module.perform_run(cfg, text, report=new_run_report)  # as `run` does
        profile.disable()
        cpu, wall = time.process_time() - marks["cpu"], time.perf_counter() - marks["wall"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"tail: {cpu:.2f} s CPU, {wall:.2f} s wall; peak RSS {marks['rss']:.0f} MB before it, "
          f"{peak:.0f} MB after")  # fmt: skip
    if not profiled:
        return
    stats = pstats.Stats(profile, stream=io.StringIO())
    if "--stats" in given:
        stats.dump_stats(given["--stats"])
    found: dict[str, float] = {}
    for (_, _, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if name in STEPS:
            found[name] = max(found.get(name, 0.0), cumulative)
    for name in STEPS:
        if name in found:
            print(f"  {name:<18} {found[name]:6.2f} s (profiled)")


if __name__ == "__main__":
    main(sys.argv[1:])
