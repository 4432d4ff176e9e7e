"""The serial start-up of ``python -m evidence_bench run``: wall and CPU time from the
interpreter's start to the end of imports and compose, to the first query's episodes
starting (or the workers forking), and to the end of the run.

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

# Run in a fresh interpreter: the figures include its imports. The package's modules are
# patched as they are first imported (a meta path hook), so the child imports what the
# command imports, in its order: ``perform_run`` entered marks the end of imports and
# compose; the first ``_run_query`` (workers=1 runs queries in this process), or the fork
# (``_share`` done, workers>1), the first episode. ``in_gc``: the CPU time spent in the
# cyclic garbage collector up to the mark.
_CHILD = """
import gc, importlib.abc, importlib.machinery, json, sys, time
marks, collecting = {}, {"since": 0.0, "total": 0.0}
def timed_gc(phase, info):
    if phase == "start":
        collecting["since"] = time.process_time()
    else:
        collecting["total"] += time.process_time() - collecting["since"]
gc.callbacks.append(timed_gc)
def mark(name):
    if name not in marks:
        marks[name] = (time.time(), time.process_time(), collecting["total"])
def wrap(module, name, before=None, after=None):
    inner = getattr(module, name)
    def timed(*args, **kwargs):
        if before:
            mark(before)
        try:
            return inner(*args, **kwargs)
        finally:
            if after:
                mark(after)
    setattr(module, name, timed)
PATCHES = {
    "evidence_bench.experiment.run": [("perform_run", "imports_compose", None)],
    "evidence_bench.experiment.runner": [
        ("_run_query", "first_episode", None), ("_share", None, "first_episode"),
    ],
}
class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module
        def exec_module(module):
            load(module)
            for patch in PATCHES[name]:
                wrap(module, *patch)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Hook())
from evidence_bench.__main__ import main
try:
    main(["run", *sys.argv[1:]])
finally:
    mark("end")
    marks["package"] = sys.modules["evidence_bench.experiment.runner"].__file__
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
    for name, (wall, cpu, in_gc) in marks.items():
        print(
            f"{name:>15}: {wall - started:6.2f} s wall {cpu:6.2f} s CPU (since its start), "
            f"{in_gc:4.2f} s of it collecting garbage"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
