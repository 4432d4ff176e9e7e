"""What a run's searches cost in a worker: the provider, httpx, the cassettes and the simulator.

    PYTHONPATH=. python benchmarks/bench_search.py capture SEARCHES.json -- run \
        +experiment=rocchio_sweep experiment.queries=50 workers=1 report=false runs_dir=/tmp/x
    PYTHONPATH=. python benchmarks/bench_search.py replay SEARCHES.json [--bodies FILE] [--repeat N]

``capture`` runs the command (``python -m evidence_bench ...``) in this process and writes
every search the provider was asked, in order: ``[query id, q, limit]`` (what the runner's
memo did not answer). ``replay`` builds the simulator's index as a runner's parent does
(``prepare_index``, its CPU time printed), then asks those searches again as a worker does:
one replay client per query on a fresh cassette store that simulates misses, a
``BraveProvider`` on it. It prints the CPU time of all of them and per request (replayed and
simulated), the least of ``--repeat`` times (each on a new store and simulator, the
provider's and ``Evidence``'s caches emptied, as a worker starts). ``--bodies FILE`` writes
each request's URL, the sha256 of its body and whether it was simulated (S) or replayed
(R): compare the file of two versions with ``cmp``. To compare two checkouts with the same
script, run a copy of it from outside both with ``PYTHONPATH`` set to each.

    PYTHONPATH=. python benchmarks/bench_search.py pin SEARCHES.json --every 6 --save OUT.json

``pin`` asks every ``--every``-th search of SEARCHES.json as ``replay`` does and writes, for
each, the sha256 of every answer's body (R or S) and of the ``Evidence`` the provider made
of them (``tests/data/search_path.json``, checked by ``tests/test_brave_search_path.py``).

CPU time on a shared machine is noisy: compare with the code before a change in the same
minute, several runs each, the least of each.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from evidence_bench import evidence
from evidence_bench.collections.queryset import load_query_set
from evidence_bench.web import brave
from evidence_bench.web.cassettes import REPLAY_BASE_URL, CassetteStore, OnMiss
from evidence_bench.web.simulator import BraveSimulator, SimulatorTransport, prepare_index

CRANFIELD = {
    "name": "cranfield",
    "path": "collections/cranfield",
    "cassettes": "cassettes/cranfield",
}


def capture(out: Path, argv: list[str]) -> None:
    asked: list[tuple[str | None, str, int]] = []
    search = brave.BraveProvider.search

    def logged(self: brave.BraveProvider, query: str, *, limit: int = 10) -> Any:
        transport = getattr(getattr(self, "_client", None), "_transport", None)
        asked.append((getattr(transport, "_query_id", None), query, limit))
        return search(self, query, limit=limit)

    brave.BraveProvider.search = logged  # type: ignore[method-assign]
    from evidence_bench.__main__ import main

    sys.argv = ["evidence_bench", *argv]
    try:
        main()
    except SystemExit as exc:
        if exc.code:
            raise
    out.write_text(json.dumps(asked) + "\n")
    print(f"{len(asked)} searches written to {out}", file=sys.stderr)


def replay(searches: Path, bodies: Path | None, repeat: int) -> None:
    asked = json.loads(searches.read_text())
    query_set = load_query_set(CRANFIELD, limit=None)
    collection = query_set.collection
    cpu = time.process_time()
    prepare_index(collection)
    print(f"prepare_index (Cranfield): {time.process_time() - cpu:.3f} s CPU")
    written: list[str] = []
    if bodies is not None:
        answer = CassetteStore.answer

        def noted(self: CassetteStore, query_id: str, request: httpx.Request) -> httpx.Response:
            simulated = self.counts["simulated"]
            response = answer(self, query_id, request)
            kind = "S" if self.counts["simulated"] > simulated else "R"
            digest = hashlib.sha256(response.read()).hexdigest()
            written.append(f"{query_id} {request.url} {digest} {kind}")
            return response

        CassetteStore.answer = noted  # type: ignore[method-assign]
    by_query: dict[str, list[tuple[str, int]]] = {}
    for query_id, query, limit in asked:
        by_query.setdefault(query_id, []).append((query, limit))
    client_type = getattr(sys.modules["evidence_bench.web.cassettes"], "ReplayClient", httpx.Client)
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)  # as a runner's workers
    times: list[float] = []
    for _ in range(repeat):
        _forget()
        store = CassetteStore(
            query_set.cassettes,
            on_miss=OnMiss.SIMULATE,
            fallback=lambda: SimulatorTransport(BraveSimulator(collection)),
        )
        cpu = time.process_time()
        for query_id, queries in by_query.items():
            with client_type(transport=store.transport(query_id)) as client:
                provider = brave.BraveProvider(
                    "bench", base_url=REPLAY_BASE_URL, http_client=client,
                    retry=brave.RetryPolicy(attempts=1),
                )  # fmt: skip
                for query, limit in queries:
                    provider.search(query, limit=limit)
        times.append(time.process_time() - cpu)
        if bodies is not None:
            bodies.write_text("\n".join(written) + "\n")
            bodies = None
            CassetteStore.answer = answer  # type: ignore[method-assign]
    requests = sum(store.counts.values())
    cpu = min(times)
    print(
        f"{len(asked)} searches, {requests} requests ({dict(store.counts)}): {cpu:.3f} s CPU, "
        f"{cpu * 1000 / requests:.3f} ms a request (least of {repeat}: "
        f"{', '.join(f'{t:.3f}' for t in times)})"
    )


def _forget() -> None:
    """Empty the caches a worker starts without (each version's that it has), so that every
    repeat costs what the first does."""
    for owner, name in ((brave, "_normalized"), (evidence, "canonical_url")):
        cached = getattr(owner, name, None)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    getattr(evidence, "_DEDUPED", {}).clear()


def pin(searches: Path, every: int, out: Path) -> None:
    from tests.search_path import pinned_searches

    asked = json.loads(searches.read_text())[::every]
    pins = pinned_searches([(query_id, query, limit) for query_id, query, limit in asked])
    out.write_text(json.dumps(pins, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(pins)} searches pinned in {out}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("capture", "replay", "pin"))
    parser.add_argument("searches", type=Path)
    parser.add_argument("--bodies", type=Path)
    parser.add_argument("--every", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--save", type=Path)
    parser.add_argument("argv", nargs="*")
    args = parser.parse_args()
    if args.mode == "capture":
        capture(args.searches, args.argv)
    elif args.mode == "pin":
        pin(args.searches, args.every, args.save)
    else:
        replay(args.searches, args.bodies, args.repeat)


if __name__ == "__main__":
    main()
