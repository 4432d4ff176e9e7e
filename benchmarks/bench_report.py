"""Benchmark: a new run's report, step by step, on the tail's own analysis (issue 13).

    PYTHONPATH=. python benchmarks/bench_report.py --load F [--repeat N] [overrides...]
    (default overrides: +experiment=rocchio_sweep workers=2)

Replays a run's query outputs as ``bench_tail.py --load F`` does (``--save F`` there writes
them), lets the run compute its analysis, and then times, in CPU seconds (the least of
``N``, default 5), the three steps of :func:`~evidence_bench.report.page.write_run_report`
on that analysis, before the run writes its own report: the page's context
(``report_context``), its rendering (``render_page``) and storing it (``store_context``,
into a temporary directory). Compare with the code before a change in the same minute
(``PYTHONPATH=/work/main``, same arguments) on a machine others share.
"""

from __future__ import annotations

import runpy
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import evidence_bench.report.page as page
from evidence_bench.report import stored


def _least(step: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = step()
        best = min(best, time.process_time() - start)
    return best, out


def main(argv: list[str]) -> None:
    repeat = 5
    if "--repeat" in argv:
        at = argv.index("--repeat")
        repeat = int(argv[at + 1])
        del argv[at : at + 2]
    if "--load" not in argv:
        raise SystemExit("usage: bench_report.py --load F [--repeat N] [overrides...]")
    if not any(not a.startswith("--") and "=" in a for a in argv):
        argv = [*argv, "+experiment=rocchio_sweep", "workers=2"]
    write_run_report = page.write_run_report

    def timed(run_dir: Path, analysis: Any) -> Path:
        # here, while the run's staging directory (its documents, for the episodes) exists
        from evidence_bench.report.render import report_context

        context_s, context = _least(lambda: report_context(analysis, page.MAX_EPISODES), repeat)
        render_s, html = _least(lambda: page.render_page(context), repeat)
        with tempfile.TemporaryDirectory() as tmp:
            store_s, _ = _least(lambda: stored.store_context(Path(tmp), {}, context), repeat)
        print(
            f"report: context {context_s:.3f} s, render {render_s:.3f} s, store {store_s:.3f} s "
            f"CPU (least of {repeat}); page {len(html.encode()) / 1e6:.2f} MB"
        )
        return write_run_report(run_dir, analysis)

    page.write_run_report = timed
    sys.argv = [str(Path(__file__).with_name("bench_tail.py")), *argv]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
