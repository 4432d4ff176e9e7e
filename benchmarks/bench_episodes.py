"""The episode loop of a run: what one query's (config, user) episodes cost in a worker.

    PYTHONPATH=. python benchmarks/bench_episodes.py [QUERIES] [--repeat N] [--profile FILE]
        [-- OVERRIDES]

Replays the first QUERIES (default 25) queries of ``+experiment=rocchio_sweep`` (24 configs
x 2 users x 2 rounds) in this process, as a worker with ``workers=1`` does, and prints the
CPU time of :func:`~evidence_bench.experiment.runner.query_output`:

- the first pass: every search replayed from the cassettes (or simulated) as in a run;
- again (``--repeat`` times, default 3, the least printed), on the same replayed queries:
  their providers answer every search from memory, so what is left is the episodes
  themselves (ranking, refining, judging, measuring, rows).

It then prints what sending those rows to the parent costs: pickling them (the worker),
unpickling them and :meth:`~evidence_bench.runs.store.TableBuilder.add` (the parent),
the least of ``--repeat``. It also prints one sha256 over every query's rows (scores,
marks, rankings, documents): compare it with the code before a change, it must not move.
``--profile FILE`` writes a cProfile of the passes from memory. CPU times on a shared
machine: compare them with a run of the code before a change made in the same minute. The
package is imported from ``PYTHONPATH`` where it is set (``PYTHONPATH=/other/checkout``
measures that checkout's code), else from this script's checkout.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pickle
import sys
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # else the checkout it names (compare two with one script)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.runner import query_output, replay_query, replay_worker
from evidence_bench.runs.store import TableBuilder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queries", nargs="?", type=int, default=25)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="passes from memory (the least)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg, _ = compose(
        [
            "+experiment=rocchio_sweep",
            f"experiment.queries={args.queries}",
            "progress=false",
            "workers=1",
            *args.overrides,
        ]
    )
    plan = plan_run(cfg)
    cpu = time.process_time()
    worker = replay_worker(plan)
    print(f"worker built: {time.process_time() - cpu:.3f} s CPU")
    query_ids = list(worker.query_set.queries)[: args.queries]
    clients = [httpx.Client(transport=worker.store.transport(q)) for q in query_ids]
    cpu = time.process_time()
    replayed = [replay_query(worker, q, c) for q, c in zip(query_ids, clients, strict=True)]
    outputs = [query_output(worker, r, worker.engines, plan) for r in replayed]
    first = time.process_time() - cpu
    episodes = sum(len(out.rows.episodes) for out in outputs)
    print(f"first pass, {len(query_ids)} queries, {episodes} episodes: {first:.3f} s CPU")
    profiler = cProfile.Profile() if args.profile else None
    times = []
    for _ in range(args.repeat):
        cpu = time.process_time()
        if profiler is not None:
            profiler.enable()
        again = [query_output(worker, r, worker.engines, plan) for r in replayed]
        if profiler is not None:
            profiler.disable()
        times.append(time.process_time() - cpu)
    if profiler is not None:
        profiler.dump_stats(args.profile)
    second = min(times)
    print(
        f"again, answers from memory: {second:.3f} s CPU "
        f"({second * 1000 / max(episodes, 1):.2f} ms an episode; the least of "
        f"{', '.join(f'{t:.3f}' for t in times)})"
    )
    sent = []
    for _ in range(args.repeat):
        cpu = time.process_time()
        blobs = [pickle.dumps(out, pickle.HIGHEST_PROTOCOL) for out in again]
        dumped = time.process_time() - cpu
        cpu = time.process_time()
        received = [pickle.loads(blob) for blob in blobs]
        loaded = time.process_time() - cpu
        builder, cpu = TableBuilder(), time.process_time()
        for out in received:
            builder.add(out.rows)
        sent.append((dumped, loaded, time.process_time() - cpu))
        del received, builder
    dumped, loaded, added = (min(column) for column in zip(*sent, strict=True))
    print(
        f"rows to the parent ({sum(map(len, blobs)) / len(blobs) / 1024:.0f} KB a query): "
        f"pickled {dumped:.3f} s CPU; unpickled {loaded:.3f} + TableBuilder.add {added:.3f} s"
    )
    digest = hashlib.sha256()
    for out in again:
        rows = out.rows
        # repr, not pickle: equal rows give equal text whatever objects they share
        digest.update(repr((rows.score_rows(), rows.feedback_rows(), rows.episodes)).encode())
        digest.update(repr((rows.ranking_keys, rows.ranking_items.tolist())).encode())
        digest.update(repr((rows.run_pair.tolist(), rows.run_ranking.tolist())).encode())
        digest.update(repr((out.skipped_expands, out.no_usable_feedback)).encode())
        digest.update(repr(list(out.documents)).encode())
    print(f"rows sha256: {digest.hexdigest()}")
    for client in clients:
        client.close()


if __name__ == "__main__":
    main()
