"""Benchmark: episodes per second of an experiment replayed from cassettes, and where the
time goes (replay, ranking, refining, evaluation; the report).

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

from evidence_bench.collections.queryset import load_query_set
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.run import perform_run
from evidence_bench.experiment.runner import execute

#: Exclusive (self) time is summed by the file a function lives in, so parts never overlap.
PARTS = {
    "replay (vcrpy cassette lookup)": ("web/cassettes.py", "/vcr/"),
    "simulated misses (BM25, snippets)": ("web/simulator.py", "web/bm25.py"),
    "provider (httpx, parse, normalize)": ("web/brave.py", "evidence.py", "/httpx/",
                                           "/json/"),
    "ranking": ("engine/ranking.py", "engine/livefetch.py", "engine/vector_rocchio.py",
                "engine/embedding.py", "engine/boost.py"),
    "refining and analysis (stemming)": ("engine/refiner.py", "engine/term_rocchio.py",
                                         "engine/text.py", "/snowballstemmer/"),
    "user simulation": ("users/policies.py",),
    "evaluation (measures)": ("evaluation/measures.py",),
    "episode bookkeeping": ("protocol/episode.py", "experiment/runner.py", "engine/session.py"),
}  # fmt: skip


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
    total = sum(own for (_cc, _nc, own, _cum, _callers) in stats.values())
    print(f"\nprofiled pass   {len(ids)} queries, one process, {single:.2f} s (profiler overhead)")
    print("  self time by part (the rest: Python, pandas, the standard library)")
    counted = 0.0
    for part, places in PARTS.items():
        seconds = sum(
            own
            for (path, _line, _name), (_cc, _nc, own, _cum, _callers) in stats.items()
            if any(place in path for place in places)
        )
        counted += seconds
        print(f"  {part:<36} {seconds:6.2f} s  {100 * seconds / total:5.1f} %")
    rest = total - counted
    print(f"  {'other':<36} {rest:6.2f} s  {100 * rest / total:5.1f} %")

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as runs:
        cfg, text = compose([*overrides, f"runs_dir={runs}", "progress=false", "report=false"])
        perform_run(cfg, text)
    without_report = time.perf_counter() - start
    print(
        f"\nthe same run without the report: {without_report:.1f} s, so the report took "
        f"about {wall - without_report:.1f} s"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
