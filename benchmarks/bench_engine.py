"""The episodes' CPU in one process: what a worker spends on its queries, and their digest.

    PYTHONPATH=. python benchmarks/bench_engine.py [N] [--profile FILE] [--pools] [overrides...]

Composes ``+experiment=rocchio_sweep`` (or the experiment the overrides name) with
``experiment.queries=N`` (default 25), builds the worker as a run's worker does (query set,
cassettes, engines, users: timed apart), then runs every query's episodes in this process
and prints the CPU time (``time.process_time``) they took, per query and in all.

It also prints one sha256 over every query's output (its score rows, feedback rows and
episode records, in order): a change to the engine must leave it as it was, so compare it
with the code before the change. ``--profile FILE`` writes a cProfile of the episodes alone
(``python -m pstats FILE`` reads it). CPU times vary with the machine's load: compare them
with a run of the code before a change made in the same minute.

``--pools`` also prints the CPU of the candidate pools' steps apart (each second counted
once, in the innermost): their tf-idf arrays (``_Pool.space``), the rankers' orders
(``QueryMemo.prefetch`` / ``_pool_orders``) and the refined queries (``refine_pool`` /
``refine``). The script imports the package from ``PYTHONPATH`` where it is set, so
``PYTHONPATH=/other/checkout python benchmarks/bench_engine.py --pools`` measures that
checkout's code with this script.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evidence_bench.experiment import memo
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.runner import _run_query, replay_worker

#: The pools' steps measured by ``--pools``: (owner, method, part).
_POOL_STEPS = [
    (memo._Pool, "space", "arrays"),
    (memo.QueryMemo, "prefetch", "orders"),
    (memo.QueryMemo, "_pool_orders", "orders"),
    (memo.QueryMemo, "refine_pool", "refine"),
    (memo.QueryMemo, "refine", "refine"),
]


def _time_pools() -> dict[str, float]:
    """Wrap the pools' steps so each CPU second lands in the innermost step running."""
    spent: dict[str, float] = {}
    stack: list[str] = []
    since = [0.0]

    def timed(method: Callable[..., Any], part: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            now = time.process_time()
            if stack:
                spent[stack[-1]] = spent.get(stack[-1], 0.0) + now - since[0]
            stack.append(part)
            since[0] = now
            try:
                return method(*args, **kwargs)
            finally:
                now = time.process_time()
                done = stack.pop()
                spent[done] = spent.get(done, 0.0) + now - since[0]
                since[0] = now

        return run

    for owner, name, part in _POOL_STEPS:
        setattr(owner, name, timed(getattr(owner, name), part))
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=25)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--pools", action="store_true", help="the pools' steps' CPU apart")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    overrides = args.overrides
    if not any(o.lstrip("+").startswith("experiment=") for o in overrides):
        overrides = ["+experiment=rocchio_sweep", *overrides]
    with tempfile.TemporaryDirectory() as runs:
        cfg, _ = compose(
            [*overrides, f"experiment.queries={args.n}", f"runs_dir={runs}", "progress=false"]
        )
    plan = plan_run(cfg)
    cpu = time.process_time()
    pools = _time_pools() if args.pools else None
    worker = replay_worker(plan)
    print(f"worker built: {time.process_time() - cpu:.3f} s CPU")
    query_ids = list(worker.query_set.queries)
    digest = hashlib.sha256()
    profile = cProfile.Profile() if args.profile else None
    cpu = time.process_time()
    if profile:
        profile.enable()
    outputs = [_run_query(plan, query_id) for query_id in query_ids]
    if profile:
        profile.disable()
    spent = time.process_time() - cpu
    for out in outputs:
        digest.update(repr(out.rows.score_rows()).encode())
        digest.update(repr(out.rows.feedback_rows()).encode())
        digest.update(json.dumps(out.rows.episodes, sort_keys=True, default=str).encode())
    episodes = sum(len(out.rows.episodes) for out in outputs)
    print(
        f"{len(query_ids)} queries, {episodes} episodes: {spent:.3f} s CPU "
        f"({spent * 1000 / len(query_ids):.1f} ms a query, "
        f"{spent * 1e6 / max(episodes, 1):.0f} us an episode)"
    )
    if pools is not None:
        parts = " + ".join(f"{part} {seconds:.3f}" for part, seconds in sorted(pools.items()))
        print(f"pools: {parts} = {sum(pools.values()):.3f} s CPU")
    print(f"output sha256 {digest.hexdigest()}")
    if profile and args.profile:
        profile.dump_stats(str(args.profile))
        print(f"profile written to {args.profile}")


if __name__ == "__main__":
    main()
