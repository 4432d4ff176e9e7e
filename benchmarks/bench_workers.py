"""Benchmark: where two workers lose time on the episodes (issue 30: ``episodes_time_s``
>= 1.8x faster with ``workers=2`` than with ``workers=1``).

    PYTHONPATH=. python benchmarks/bench_workers.py [--repeat N] [--cli] [overrides...]
    (+experiment=rocchio_sweep unless another is given)

Each pass in a new process, from the state :func:`~evidence_bench.experiment.runner.execute`
builds before the episodes, and with their outputs taken as ``run`` takes them (each
query's rows into a :class:`~evidence_bench.runs.store.TableBuilder`, its documents
merged):

1. the episodes with ``workers=1`` and ``workers=2``, alternated ``--repeat`` times (default
   2), the median of each: the wall; the CPU of the queries' tasks (each task's thread CPU,
   summed); with two workers, the workers' CPU outside their tasks (sending each result),
   the parent's CPU while they run (its main thread, and the pool's thread that reads and
   unpickles results), and the tail: how long one worker idles after its last task while
   the other finishes; what the workers send: the pickled bytes a query (its rows, its
   documents) and the CPU of unpickling them all again here, the pool thread's share;
   ``--cli`` times the same inside ``python -m evidence_bench run`` (in-process, its run
   directory in a temporary folder), whose parent holds more at the fork than the plan;
2. the machine's cost of running two at once: the queries' halves (every other query) in
   two processes forked from that state, one after the other, then both at the same time,
   their tasks' CPU summed; beside it, as controls, the same for a lookup loop over a 2 MB
   dict and for an arithmetic loop that touches almost no memory.

On an idle machine of two cores, one worker's episodes take their CPU (the tasks' and the
parent's), and two workers' at least (the tasks' CPU + the workers' and the parent's
other CPU) / 2 + the tail: their ratio is the most two workers can give. The tasks' CPU
with two workers over the one with one is what running two at once costs (part 2 shows
it without the pool: on this 2-core VM work that reads a few MB slows down when both cores
run it, arithmetic does not). Figures are CPU seconds on a shared machine, the load is
printed beside them: compare them within one call.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

if not os.environ.get("PYTHONPATH"):  # else the checkout it names
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evidence_bench.experiment import runner
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import RunPlan, plan_run
from evidence_bench.runs.store import TableBuilder

_TICK = os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _uptime() -> str:
    """The load averages as ``uptime`` prints them (1, 5 and 15 minutes)."""
    return "load average: " + ", ".join(f"{load:.2f}" for load in os.getloadavg())


def _sent(outputs: Sequence[runner.QueryOutput]) -> dict[str, float]:
    """What the workers sent: the mean pickled bytes a query, all of it and its rows' and
    documents' parts, and the CPU seconds of unpickling every query's output."""
    protocol = pickle.HIGHEST_PROTOCOL
    blobs = [pickle.dumps(out, protocol) for out in outputs]
    count = len(outputs) or 1
    cpu = time.process_time()
    for blob in blobs:
        pickle.loads(blob)
    return {
        "bytes": sum(map(len, blobs)) / count,
        "rows_bytes": sum(len(pickle.dumps(out.rows, protocol)) for out in outputs) / count,
        "documents_bytes": sum(len(pickle.dumps(out.documents, protocol)) for out in outputs)
        / count,
        "unpickle": time.process_time() - cpu,
    }


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process, every thread (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children() -> list[int]:
    found: list[int] = []
    for task in os.scandir("/proc/self/task"):
        with open(f"{task.path}/children") as handle:
            found.extend(int(child) for child in handle.read().split())
    return found


def _timed_tasks(log: Path) -> Callable[[], None]:
    """Time every query's task (wall and thread CPU) into ``log``, one file per process;
    returns the undo."""
    guarded = runner._guarded

    def timed(plan: RunPlan, query_id: str) -> runner.QueryOutput:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return guarded(plan, query_id)
        finally:
            with open(log / f"tasks.{os.getpid()}", "a") as handle:
                done = [query_id, start, time.perf_counter(), time.thread_time() - cpu]
                handle.write(json.dumps(done) + "\n")

    runner._guarded = timed

    def undo() -> None:
        runner._guarded = guarded

    return undo


def _observed(
    outputs: Iterable[runner.QueryOutput], total: int, workers: int, figures: dict[str, float]
) -> Iterator[runner.QueryOutput]:
    """``outputs`` passed on, timed from the first asked for to the last: the wall, this
    process's CPU (and its main thread's) and, with workers, theirs, into ``figures``."""
    received: list[runner.QueryOutput] = []
    pids: list[int] = []
    worker_cpu = 0.0
    start, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    for count, out in enumerate(outputs, 1):
        received.append(out)
        yield out
        if workers > 1 and not pids:
            pids = _children()
        if count == total:  # the workers are idle, not yet gone
            worker_cpu = sum(_process_cpu(pid) for pid in pids)
    wall = time.perf_counter() - start
    cpu, main = time.process_time() - cpu, time.thread_time() - main
    figures.update(wall=wall, cpu=cpu, main=main, workers_cpu=worker_cpu)
    if workers > 1:
        figures.update(_sent(received))


def _figures(log: Path, workers: int, observed: dict[str, float]) -> dict[str, float]:
    """A pass's figures from its tasks' log and what :func:`_observed` saw."""
    # per process: its tasks as (query_id, start, end, thread CPU)
    tasks = [[json.loads(line) for line in path.open()] for path in log.iterdir()]
    task_cpu = sum(task[3] for own in tasks for task in own)
    figures = {**observed, "tasks": task_cpu}
    if workers > 1:
        ends = [max(task[2] for task in own) for own in tasks]
        figures["parent"] = observed["cpu"]
        figures["outside"] = observed["workers_cpu"] - task_cpu
        figures["tail"] = max(ends) - min(ends)
    else:
        figures["parent"] = observed["cpu"] - task_cpu  # the rest of the one process
    return figures


def episodes(plan: RunPlan, query_ids: Sequence[str], workers: int) -> dict[str, float]:
    """One pass of the episodes, taken as ``run`` takes them; its figures."""
    observed: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder)
        undo = _timed_tasks(log)
        try:
            outputs = runner.execute(plan, query_ids, workers=workers)
            builder, documents = TableBuilder(), dict[str, Any]()
            for out in _observed(outputs, len(query_ids), workers, observed):
                builder.add(out.rows)
                for key, item in out.documents.items():
                    documents.setdefault(key, item)
        finally:
            undo()
        return _figures(log, workers, observed)


def cli_episodes(workers: int, overrides: Sequence[str]) -> dict[str, float]:
    """One pass of ``python -m evidence_bench run OVERRIDES workers=N`` in this process, its
    episodes observed as :func:`episodes` observes them: the run as a user starts it, the
    parent's state at the fork included (its run directory in a temporary folder)."""
    from evidence_bench.commands import main as cli
    from evidence_bench.experiment import run

    observed: dict[str, float] = {}
    execute = run.execute  # type: ignore[attr-defined]

    def observed_execute(
        plan: RunPlan, query_ids: Sequence[str], *, workers: int = 0
    ) -> Iterator[runner.QueryOutput]:
        outputs = execute(plan, query_ids, workers=workers)
        return _observed(outputs, len(query_ids), workers, observed)

    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder, "tasks")
        log.mkdir()
        undo = _timed_tasks(log)
        run.execute = observed_execute  # type: ignore[attr-defined]
        argv = ["run", *overrides, f"workers={workers}", "progress=false",
                f"runs_dir={folder}/runs"]  # fmt: skip
        try:
            with contextlib.redirect_stdout(sys.stderr):
                cli(argv)
        except SystemExit as exc:  # the command's status: only a failure stops the pass
            if exc.code:
                raise
        finally:
            run.execute = execute  # type: ignore[attr-defined]
            undo()
        return _figures(log, workers, observed)


def _in_child(work: Callable[[], Any]) -> tuple[int, int]:
    """Fork a process that runs ``work`` and writes its thread CPU to a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        cpu = time.thread_time()
        work()
        os.write(write, repr(time.thread_time() - cpu).encode())
        os._exit(0)
    os.close(write)
    return pid, read


def _cpu_of(child: tuple[int, int]) -> float:
    pid, read = child
    os.waitpid(pid, 0)
    with os.fdopen(read) as handle:
        return float(handle.read())


def two_at_once(works: Sequence[Callable[[], Any]]) -> tuple[float, float]:
    """The summed CPU of two works in forked processes, one after the other and at once."""
    apart = sum(_cpu_of(_in_child(work)) for work in works)
    children = [_in_child(work) for work in works]
    return apart, sum(_cpu_of(child) for child in children)


def _lookups(size: int) -> Callable[[], int]:
    table = {i: str(i) for i in range(size // 64)}  # ~64 bytes an entry
    keys = list(table)
    step = 7919  # a prime: every key, out of order

    def work() -> int:
        total, n = 0, len(keys)
        for i in range(2_000_000):
            total += len(table[keys[(i * step) % n]])
        return total

    return work


def _arithmetic() -> int:
    x = 0
    for i in range(6_000_000):
        x = (x * 31 + i) & 0xFFFF
    return x


def _fresh(workers: int, overrides: Sequence[str], cli: bool) -> dict[str, float]:
    """:func:`episodes` (or :func:`cli_episodes`) in a new process, as ``run`` starts it: a
    parent whose heap has held another pass's episodes would hand its workers freed pages to
    copy as they write."""
    command = [sys.executable, __file__, "--one-pass", str(workers), *overrides]
    command += ["--cli"] if cli else []
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, metavar="N")
    parser.add_argument(
        "--cli", action="store_true",
        help="time the episodes of the run command itself (part 1), not of the plan alone",
    )  # fmt: skip
    parser.add_argument("--one-pass", type=int, metavar="WORKERS", help=argparse.SUPPRESS)
    options, overrides = parser.parse_known_args(argv)
    if not any(o.startswith("+experiment=") for o in overrides):
        overrides = ["+experiment=rocchio_sweep", *overrides]
    if options.one_pass and options.cli:
        print(json.dumps(cli_episodes(options.one_pass, overrides)))
        return
    cfg, _ = compose([*overrides, "progress=false"])
    plan = plan_run(cfg)
    query_ids = list(runner.replay_worker(plan).query_set.queries)
    if options.one_pass:
        print(json.dumps(episodes(plan, query_ids, options.one_pass)))
        return
    print(f"{plan.experiment}: {len(query_ids)} queries; {os.cpu_count()} cores; {_uptime()}")

    passes: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for _ in range(options.repeat):
        for workers in (1, 2):
            passes[workers].append(_fresh(workers, overrides, options.cli))
            print(f"  workers={workers}: {passes[workers][-1]['wall']:.2f} s ({_load()})")
    one, two = ({k: statistics.median(p[k] for p in passes[w]) for k in passes[w][0]}
                for w in (1, 2))  # fmt: skip
    within = "the run command" if options.cli else "the plan alone"
    print(f"\n1. the episodes of {within} (median of {options.repeat}; CPU seconds)")
    print(f"  wall, workers=1 -> 2           {one['wall']:.2f} s -> {two['wall']:.2f} s "
          f"({one['wall'] / two['wall']:.2f}x)")  # fmt: skip
    print(f"  the tasks' CPU                 {one['tasks']:.2f} s -> {two['tasks']:.2f} s "
          f"({100 * (two['tasks'] / one['tasks'] - 1):+.0f} %)")  # fmt: skip
    print(f"  the parent's, beside them      {one['parent']:.2f} s -> {two['parent']:.2f} s "
          f"(its main thread {two['main']:.2f} s, the pool's thread the rest)")  # fmt: skip
    print(f"  the workers', outside tasks    {two['outside']:.2f} s (sending results)")
    print(f"  the tail (one worker idle)     {two['tail']:.2f} s")
    print(f"  sent a query (pickled)         {two['bytes'] / 1e3:.0f} kB: its rows "
          f"{two['rows_bytes'] / 1e3:.0f} kB, its documents {two['documents_bytes'] / 1e3:.0f} kB; "
          f"unpickling all {two['unpickle']:.2f} s")  # fmt: skip
    other = two["parent"] + two["outside"]
    bound = (two["tasks"] + other) / 2 + two["tail"]
    alone = one["tasks"] + one["parent"]
    print(f"  two cores need at least        {bound:.2f} s: ({two['tasks']:.2f} + {other:.2f}) / 2 "
          f"+ {two['tail']:.2f}; one needs {alone:.2f} s: at most {alone / bound:.2f}x "
          "on an idle machine")  # fmt: skip

    print(f"\n2. two at once: summed CPU, one after the other -> at the same time ({_load()})")
    runner._share(plan)
    gc.freeze()  # as the pool's parent does before forking
    halves = [query_ids[0::2], query_ids[1::2]]

    def half(ids: Sequence[str]) -> Callable[[], None]:
        def work() -> None:
            for query_id in ids:
                runner._guarded(plan, query_id)

        return work

    for name, works in (
        ("the episodes' halves", [half(ids) for ids in halves]),
        ("a 2 MB dict's lookups", [_lookups(2 << 20)] * 2),
        ("arithmetic, no memory", [_arithmetic] * 2),
    ):
        apart, together = two_at_once(works)
        print(f"  {name:<24} {apart:6.2f} s -> {together:6.2f} s "
              f"({100 * (together / apart - 1):+.0f} %)")  # fmt: skip
    gc.unfreeze()
    runner._forget_worker()
    print(f"({_uptime()} afterwards)")


if __name__ == "__main__":
    main(sys.argv[1:])
