"""The web side of a replay: what one simulated answer and one replayed answer cost.

    PYTHONPATH=. python benchmarks/bench_simulator.py [N] [--save FILE | --check FILE]

N (default 400) seeded random search requests over Cranfield and CACM, shaped like a run's:
a query of the collection with a few words of a document appended (a refined query), 1-20
results a page, offsets 0-9, with and without extra snippets and text decorations. It
prints, for each part, requests per second:

- the index built for a collection (once per process in a run);
- ``BraveSimulator.handle`` on the N requests, the first time (each document's snippet data
  made when first shown) and again;
- the provider's whole round trip to the simulator (``BraveProvider.search`` through an
  ``httpx.Client`` on the in-process transport, parse and normalize included);
- a replayed answer: every request recorded in Cranfield's cassettes, answered by a
  ``CassetteStore`` (cassettes parsed once, as in a run), through the provider.

It also prints one sha256 over every simulated body, in order: the simulator's answers
must stay byte for byte the same, so compare it with the code before a change
(``--save FILE`` writes each request's digest, ``--check FILE`` compares and names the first
request that differs). The figures are wall times on a shared machine: compare them with a
run of the code before a change made in the same minute.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from evidence_bench.collections.beir import Collection
from evidence_bench.web.brave import BraveProvider, RetryPolicy
from evidence_bench.web.cassette_manifest import cassette_files
from evidence_bench.web.cassettes import REPLAY_BASE_URL, CassetteStore, OnMiss
from evidence_bench.web.simulator import SEARCH_PATH, BraveSimulator, SimulatorTransport
from tests.simulator_requests import ROOT, search_requests, simulators

TOKEN = {"X-Subscription-Token": "bench"}


def per_second(count: int, seconds: float, cpu: float) -> str:
    return (
        f"{count / seconds:8.0f} requests/s ({seconds * 1000 / count:.3f} ms each, "
        f"{cpu * 1000 / count:.3f} ms CPU)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=400)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--check", type=Path)
    parser.add_argument(
        "--awkward", action="store_true", help="every fourth request to the awkward collection"
    )
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    sims = simulators()
    print(
        f"collections loaded and indexed: {time.perf_counter() - started:.3f} s "
        f"({time.process_time() - cpu:.3f} s CPU)"
    )
    requests = search_requests(sims, args.n, awkward=args.awkward)

    digests: list[str] = []
    for label in ("simulator, first pass", "simulator, again"):
        started, cpu = time.perf_counter(), time.process_time()
        bodies = [sims[name].handle("GET", SEARCH_PATH, params, TOKEN) for name, params in requests]
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"{label:32} {per_second(len(requests), elapsed, cpu)}")
        assert all(answer.status == 200 for answer in bodies)
        digests = [hashlib.sha256(answer.body).hexdigest() for answer in bodies]
    print(f"bodies sha256: {hashlib.sha256(''.join(digests).encode()).hexdigest()}")
    provider_round_trip(sims, requests)
    replayed(sims["cranfield"].collection)
    if args.save:
        rows = [
            [name, params, digest] for (name, params), digest in zip(requests, digests, strict=True)
        ]
        args.save.write_text("[\n" + ",\n".join(json.dumps(row) for row in rows) + "\n]\n")
    if args.check:
        rows = json.loads(args.check.read_text())
        for (name, params, digest), (asked, mine) in zip(
            rows, zip(requests, digests, strict=True), strict=True
        ):
            if [name, params] != list(asked):
                sys.exit(f"not the requests of {args.check}: {name} {params}")
            if digest != mine:
                sys.exit(f"differs: {name} {params}")
        print(f"all {len(rows)} bodies as in {args.check}")


def provider_round_trip(sims: dict[str, BraveSimulator], requests: list[Any]) -> None:
    clients = {name: httpx.Client(transport=SimulatorTransport(sim)) for name, sim in sims.items()}
    providers = {
        name: BraveProvider(
            "bench", base_url="http://sim.invalid/res/v1", http_client=client,
            retry=RetryPolicy(attempts=1),
        )
        for name, client in clients.items()
    }  # fmt: skip
    started, cpu = time.perf_counter(), time.process_time()
    for name, params in requests:
        providers[name].search(params["q"], limit=int(params["count"]))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"{'provider -> simulator':32} {per_second(len(requests), elapsed, cpu)}")


def replayed(collection: Collection) -> None:
    directory = ROOT / "cassettes" / collection.name
    recorded: list[tuple[str, str]] = []
    for path in cassette_files(directory):
        for interaction in json.loads(path.read_text())["interactions"]:
            recorded.append((path.stem, interaction["request"]["uri"]))
    store = CassetteStore(directory, on_miss=OnMiss.ERROR)
    started, cpu = time.perf_counter(), time.process_time()
    for query_id in {query_id for query_id, _ in recorded}:
        store.replies(query_id)  # read, verified and keyed, as replay does
    load = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    for query_id, uri in recorded:
        with httpx.Client(transport=store.transport(query_id)) as client:
            params = dict(parse_qsl(urlsplit(uri).query))  # all: count=20, offset=0
            provider = BraveProvider(
                "bench", base_url=REPLAY_BASE_URL, http_client=client,
                retry=RetryPolicy(attempts=1),
            )  # fmt: skip
            provider.search(params["q"], limit=int(params["count"]))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"cassettes of {collection.name}: {len(recorded)} requests, parsed in {load:.3f} s")
    print(f"{'provider -> cassette (fetch)':32} {per_second(len(recorded), elapsed, cpu)}")


if __name__ == "__main__":
    main()
