"""Searches asked end to end as a run's worker asks them, each answer's body and the provider's
``Evidence`` reduced to sha256 digests (``tests/data/search_path.json``,
``benchmarks/bench_search.py pin``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import httpx

from evidence_bench.collections.queryset import load_query_set
from evidence_bench.web.brave import BraveProvider, RetryPolicy
from evidence_bench.web.cassettes import REPLAY_BASE_URL, CassetteStore, OnMiss, ReplayClient
from evidence_bench.web.simulator import BraveSimulator, SimulatorTransport

ROOT = Path(__file__).resolve().parents[1]
CRANFIELD = {
    "name": "cranfield",
    "path": str(ROOT / "collections" / "cranfield"),
    "cassettes": str(ROOT / "cassettes" / "cranfield"),
}


class _Noted(httpx.BaseTransport):
    """The store's transport for one query, noting each answer: R(eplayed) or S(imulated),
    and its body's sha256."""

    def __init__(self, store: CassetteStore, query_id: str, noted: list[str]) -> None:
        self._store, self._query_id, self._noted = store, query_id, noted

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        simulated = self._store.counts["simulated"]
        response = self._store.answer(self._query_id, request)
        kind = "S" if self._store.counts["simulated"] > simulated else "R"
        self._noted.append(f"{kind} {hashlib.sha256(response.read()).hexdigest()}")
        return response


def pinned_searches(asked: Sequence[tuple[str, str, int]]) -> list[list[object]]:
    """``[query id, q, limit, answers, evidence digest]`` for each search, asked in order
    through one cassette store that simulates misses, a replay client per search."""
    query_set = load_query_set(CRANFIELD, limit=None)
    collection = query_set.collection
    store = CassetteStore(
        query_set.cassettes,
        on_miss=OnMiss.SIMULATE,
        fallback=lambda: SimulatorTransport(BraveSimulator(collection)),
    )
    pins: list[list[object]] = []
    for query_id, query, limit in asked:
        noted: list[str] = []
        with ReplayClient(transport=_Noted(store, query_id, noted)) as client:
            provider = BraveProvider(
                "pin", base_url=REPLAY_BASE_URL, http_client=client, retry=RetryPolicy(attempts=1)
            )
            found = provider.search(query, limit=limit)
        fields = [{**item.to_dict(), "key": item.key} for item in found]
        text = json.dumps(fields, ensure_ascii=False, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()
        pins.append([query_id, query, limit, noted, digest])
    return pins
