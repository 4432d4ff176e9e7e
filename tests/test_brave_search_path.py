"""The whole search path pinned as ``main`` at e4c12e6 answered it, before the path was made
cheaper: 75 searches of a real run (Cranfield, the sweep's first 50 queries, every 6th search
its workers asked: initial, deepened and refined queries), each asked through a replay client
on a cassette store that simulates misses and parsed by the provider. Every answer's body
(replayed from a cassette or simulated) and the provider's ``Evidence`` are compared by
sha256.

``tests/data/search_path.json`` was written by ``python benchmarks/bench_search.py pin
SEARCHES.json --every 6 --save tests/data/search_path.json`` (SEARCHES.json captured from
``run +experiment=rocchio_sweep experiment.queries=50 workers=1``) and is never rewritten.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.search_path import pinned_searches

PINS = Path(__file__).resolve().parent / "data" / "search_path.json"


def test_real_searches_get_the_same_answers_and_evidence_as_before() -> None:
    pinned = json.loads(PINS.read_text())
    kinds = {answer[0] for _, _, _, answers, _ in pinned for answer in answers}
    assert kinds == {"R", "S"}  # both paths are pinned
    again = pinned_searches([(query_id, query, limit) for query_id, query, limit, *_ in pinned])
    assert [row[3] for row in again] == [row[3] for row in pinned]  # the answers' bodies
    assert again == pinned  # and the evidence made of them
