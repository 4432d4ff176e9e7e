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
from typing import Any

import httpx
import pytest

from evidence_bench.collections.beir import Collection, Document, Query
from evidence_bench.web import simulator
from evidence_bench.web.simulator import SEARCH_PATH, BraveSimulator, SimulatorTransport
from tests.simulator_requests import search_requests, simulators

ANSWERS = Path(__file__).resolve().parent / "data" / "simulator_answers.json"


@pytest.mark.parametrize("prepared", ["whole collection", "each page"])
def test_seeded_requests_are_answered_as_before_byte_for_byte(
    prepared: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the snippet words are prepared for the whole collection at once (a small
    one) or for each answer's page (a large one), the same bytes."""
    if prepared == "each page":
        monkeypatch.setattr(simulator, "WHOLE_SNIPPETS_LIMIT", 0)
    simulator.forget_indexes()
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
    simulator.forget_indexes()


def test_each_answer_decoded_from_its_pieces_is_what_decoding_its_body_gives() -> None:
    """``SimResponse.decoded`` (what the in-process transport's ``json()`` returns first)
    equals ``json.loads(body)`` with its keys in the same order, for every pinned request;
    its dicts and lists are new each time."""
    pinned = json.loads(ANSWERS.read_text())
    sims = simulators()
    for name, params, _ in pinned:
        answer = sims[name].handle("GET", SEARCH_PATH, params, {"X-Subscription-Token": "t"})
        assert answer.decoded is not None
        made, again = answer.decoded(), answer.decoded()
        expected = json.loads(answer.body)
        assert made == expected, (name, params)
        assert json.dumps(made, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)
        if "web" in made:
            first, other = made["web"]["results"][0], again["web"]["results"][0]
            assert first == other and first is not other
            assert first["profile"] is not other["profile"]
            assert first["meta_url"] is not other["meta_url"]


def test_the_transport_decodes_its_answer_from_the_pieces_once_then_from_the_body() -> None:
    sims = simulators()
    transport = SimulatorTransport(sims["cranfield"])
    with httpx.Client(transport=transport, base_url="http://sim/res/v1") as client:
        response = client.get(
            "/web/search",
            params={"q": 'shock "waves" \\ on cones', "count": "3"},
            headers={"X-Subscription-Token": "t"},
        )
        first, second = response.json(), response.json()
    assert first == second == json.loads(response.content)
    assert first is not second
    assert first["query"]["original"] == 'shock "waves" \\ on cones'
    assert len(first["web"]["results"]) == 3
    with httpx.Client(transport=transport, base_url="http://sim/res/v1") as client:
        refused = client.get("/web/search", params={"q": "x"})  # no token: an error body
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "VALIDATION"


def test_escaped_snippets_decode_from_the_pieces_as_from_the_body() -> None:
    """A document whose text JSON must escape (a backslash, control characters): its
    description and extra snippets decoded from the pieces are what decoding the body
    gives, in both paths of the decoding (with and without an escape)."""
    text = "heat \\flux\x01 at C:\\temp \x1f" + " plain heat words" * 40 + " heat\x02end"
    documents = {
        "1": Document("1", "Back\\slash", text),
        "2": Document("2", "", "plain heat text, nothing escaped"),
    }
    collection = Collection("Escapes", documents, {"q": Query("q", "heat")}, {"q": {"1": 1}})
    simulator = BraveSimulator(collection, extra_snippet_count=3)
    shown: list[dict[str, Any]] = []
    for params in ({"q": "heat flux"}, {"q": "heat", "extra_snippets": "true"}):
        answer = simulator.handle("GET", SEARCH_PATH, params, {"X-Subscription-Token": "t"})
        assert answer.decoded is not None
        made, expected = answer.decoded(), json.loads(answer.body)
        assert json.dumps(made, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)
        shown.append(made["web"]["results"][0])
    assert shown[0]["title"] == "Back\\slash"
    assert shown[0]["description"].startswith(
        "<strong>heat</strong> \\<strong>flux</strong>\x01 at C:\\temp plain"
    )
    extras = "".join(shown[1]["extra_snippets"])
    assert "\\flux\x01" in extras or "heat\x02end" in extras
