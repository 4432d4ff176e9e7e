"""The simulator's answers are pinned byte for byte: 600 seeded requests (Cranfield, CACM and
awkward documents; every page size, offsets, extra snippets, with and without decorations)
against the sha256 of each body as the simulator of ``main`` at 6312fbd answered them, before
its snippets and BM25 were made faster. A cassette recorded against the simulator, and every
simulated replay miss, depends on these bytes; tests/test_cassettes.py checks the requests
the cassettes hold.

``tests/data/simulator_answers.json`` was written by
``python benchmarks/bench_simulator.py 600 --awkward --save tests/data/simulator_answers.json``
and is never rewritten: a difference is a change of the simulator's answers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evidence_bench.web.simulator import SEARCH_PATH
from tests.simulator_requests import search_requests, simulators

ANSWERS = Path(__file__).resolve().parent / "data" / "simulator_answers.json"


def test_seeded_requests_are_answered_as_before_byte_for_byte() -> None:
    pinned = json.loads(ANSWERS.read_text())
    sims = simulators()
    requests = search_requests(sims, len(pinned), awkward=True)
    assert [[name, params] for name, params, _ in pinned] == [list(r) for r in requests]
    differ = []
    for name, params, digest in pinned:
        answer = sims[name].handle("GET", SEARCH_PATH, params, {"X-Subscription-Token": "t"})
        assert answer.status == 200
        if hashlib.sha256(answer.body).hexdigest() != digest:
            differ.append((name, params))
    assert differ == []
    # Again, now that every document shown has been prepared: the same bytes.
    for name, params, digest in pinned[::7]:
        answer = sims[name].handle("GET", SEARCH_PATH, params, {"X-Subscription-Token": "t"})
        assert hashlib.sha256(answer.body).hexdigest() == digest
