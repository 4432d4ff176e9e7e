"""Benchmark: episodes per second of an experiment replayed from cassettes, and where the
time goes (replay, ranking, refining, evaluation, writing).

    python benchmarks/bench_run.py [+experiment=rocchio_sweep] [overrides...]

Two measurements: the whole ``run`` with every core (wall time, episodes/s), then a
profiled single-process pass over a sample of queries, split by engine part.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.queryset import load_query_set
from evidence_bench.experiment.run import perform_run
from evidence_bench.experiment.runner import execute, plan_run

PARTS = {
    "replay (cassette lookup)": ("cassettes.py", "answer"),
    "simulated misses": ("simulator.py", "handle"),
    "provider (parse + normalize)": ("brave.py", "search"),
    "ranking (TF-IDF + Rocchio)": ("ranking.py", "rank"),
    "refining (expand query)": ("refiner.py", "refine"),
    "user simulation": ("users.py", "judge"),
    "evaluation (measures)": ("measures.py", "evaluate"),
}


def main(argv: list[str]) -> None:
    overrides = argv or ["+experiment=rocchio_sweep"]
    with tempfile.TemporaryDirectory() as runs:
        cfg, text = compose([*overrides, f"runs_dir={runs}", "progress=false"])
        start = time.perf_counter()
        outcome = perform_run(cfg, text)
        wall = time.perf_counter() - start
        episodes = outcome.manifest["episodes"]
        size = sum(p.stat().st_size for p in Path(outcome.path).rglob("*") if p.is_file())
    print(f"experiment      {cfg['experiment']['name']} ({' '.join(overrides)})")
    print(f"queries         {outcome.manifest['queries']}")
    print(f"episodes        {episodes}")
    print(f"wall time       {wall:.1f} s (whole run incl. writing and report, all cores)")
    print(f"throughput      {episodes / wall:.0f} episodes/s")
    print(f"run directory   {size / 1e6:.1f} MB")
    print(f"replay          {outcome.manifest['replay']}")

    plan = plan_run(cfg)
    ids = list(load_query_set(plan.query_set, limit=plan.query_limit).queries)[:12]
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    list(execute(plan, ids, workers=1))
    profile.disable()
    single = time.perf_counter() - start
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    print(f"\nprofiled pass   {len(ids)} queries, one process, {single:.2f} s (profiler overhead)")
    for part, (file, function) in PARTS.items():
        seconds = sum(
            cumulative
            for (path, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.items()
            if path.endswith(file) and name == function
        )
        print(f"  {part:<30} {seconds:6.2f} s  {100 * seconds / single:5.1f} %")


if __name__ == "__main__":
    main(sys.argv[1:])
