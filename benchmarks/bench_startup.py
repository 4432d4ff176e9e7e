"""The serial start-up of ``python -m evidence_bench run``: wall and CPU time from the
interpreter's start to the first query's episodes starting, and to the end of the run.

Every query waits for it, and with workers it runs before they fork: it bounds both the
run's wall time and what a second worker can gain (Amdahl). Compare checkouts in the same
minute (the machine is shared); CPU time is the steadier figure::

    PYTHONPATH=. python benchmarks/bench_startup.py [OVERRIDES...]
    PYTHONPATH=/other/checkout python /other/checkout/benchmarks/bench_startup.py ...

Run it from the checkout to time (a ``-c`` child imports the package from its working
directory). Default overrides: ``+experiment=rocchio_sweep experiment.queries=1 workers=1
report=false``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time

# Run in a fresh interpreter: the figures include its imports. The first ``_run_query``
# (workers=1 runs queries in this process) marks the first episode.
_CHILD = """
import json, sys, time
import evidence_bench.experiment.runner as runner
marks = {}
first = runner._run_query
def timed(plan, query_id):
    if not marks:
        marks["first_episode"] = (time.time(), time.process_time())
    return first(plan, query_id)
runner._run_query = timed
from evidence_bench.__main__ import main
try:
    main(["run", *sys.argv[1:]])
finally:
    marks["end"] = (time.time(), time.process_time())
    marks["package"] = runner.__file__
    print("BENCH " + json.dumps(marks), file=sys.stderr)
"""


def main(argv: list[str]) -> None:
    overrides = argv or [
        "+experiment=rocchio_sweep",
        "experiment.queries=1",
        "workers=1",
        "report=false",
    ]
    with tempfile.TemporaryDirectory() as runs:
        started = time.time()  # the child's CPU time starts with it; its wall time, here
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHILD,
                *overrides,
                f"runs_dir={runs}",
                "progress=false",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    line = [x for x in done.stderr.splitlines() if x.startswith("BENCH ")]
    if done.returncode != 0 or not line:
        sys.exit(f"bench_startup: the run failed:\n{done.stderr[-2000:]}")
    marks = json.loads(line[-1].removeprefix("BENCH "))
    print(f"package: {marks.pop('package')}")
    for name, (wall, cpu) in marks.items():
        print(f"{name:>14}: {wall - started:6.2f} s wall {cpu:6.2f} s CPU (since its start)")


if __name__ == "__main__":
    main(sys.argv[1:])
