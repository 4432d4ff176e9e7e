"""Benchmark: the report page's rendering alone, from a run's stored analysis, for one or
more checkouts in turn (CPU seconds, the least of N, interleaved).

    python benchmarks/bench_render.py RUN_DIR CHECKOUT... [--repeat N]

Each checkout renders ``render_page`` of the context stored in RUN_DIR/analysis.json.gz (as
``report RUN_DIR`` does after reading it) in its own process, ``--repeat`` times (default
20) after one untimed rendering (the template compiled, its bytecode cached); the checkouts
take turns in rounds of five, so a machine that slows meanwhile slows each alike.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = """
import gzip, json, sys, time
from evidence_bench.report import page, stored
with gzip.open(sys.argv[1], "rt", encoding="utf-8") as handle:
    handle.readline()
    context = json.loads(handle.readline(), object_hook=stored._decoded)
page.render_page(context)
best = float("inf")
for _ in range(int(sys.argv[2])):
    start = time.process_time()
    html = page.render_page(context)
    best = min(best, time.process_time() - start)
print(best, len(html.encode()))
"""


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args(argv)
    stored = options.run_dir / "analysis.json.gz"
    with gzip.open(stored, "rt", encoding="utf-8") as handle:
        json.loads(handle.readline())  # (a readable stored analysis)
    print(f"load before: {os.getloadavg()[0]:.1f}")
    best = {checkout: float("inf") for checkout in options.checkouts}
    size = {}
    for _ in range(max(1, options.repeat // 5)):
        for checkout in options.checkouts:
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(stored), "5"],
                env={**os.environ, "PYTHONPATH": str(checkout.resolve())},
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            seconds, size[checkout] = done.stdout.split()
            best[checkout] = min(best[checkout], float(seconds))
    print(f"load after: {os.getloadavg()[0]:.1f}; render_page, CPU, least of {options.repeat}")
    first = best[options.checkouts[0]]
    for checkout in options.checkouts:
        change = 100 * (best[checkout] / first - 1)
        print(f"{checkout.name:<24} {best[checkout]:.3f} s  ({change:+.1f}%)  {size[checkout]} B")


if __name__ == "__main__":
    main(sys.argv[1:])
