"""The committed cassettes: complete, secret-free, described by their manifest, and equal
to what the simulator answers today (so a simulated miss is what a recording would hold)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from evidence_bench.collections.beir import load_collection
from evidence_bench.web.cassette_manifest import MANIFEST_NAME, cassette_files
from evidence_bench.web.cassettes import (
    CassetteStore,
    OnMiss,
    ReplayClient,
    cassette_path,
    file_sha256,
)
from evidence_bench.web.simulator import BraveSimulator

ROOT = Path(__file__).resolve().parents[1]
QUERY_SETS = ["cranfield", "cacm"]


@pytest.mark.parametrize("name", QUERY_SETS)
def test_every_judged_query_has_a_cassette_listed_in_the_manifest(name: str) -> None:
    collection = load_collection(ROOT / "collections" / name, name=name)
    directory = ROOT / "cassettes" / name
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    assert manifest["collection_checksum"] == collection.checksum
    assert manifest["recorded_from"] == "simulator"
    for query_id in collection.judged_query_ids():
        path = cassette_path(directory, query_id)
        assert manifest["cassettes"][path.name] == file_sha256(path), path
    assert len(manifest["cassettes"]) == len(collection.judged_query_ids())


@pytest.mark.parametrize("name", QUERY_SETS)
def test_simulator_answers_every_recorded_request_byte_for_byte(name: str) -> None:
    simulator = BraveSimulator(load_collection(ROOT / "collections" / name, name=name))
    checked = 0
    for path in cassette_files(ROOT / "cassettes" / name):
        for interaction in json.loads(path.read_text())["interactions"]:
            request, response = interaction["request"], interaction["response"]
            assert "x-subscription-token" not in {h.lower() for h in request["headers"]}
            url = urlsplit(request["uri"])
            answer = simulator.handle(
                request["method"],
                url.path,
                dict(parse_qsl(url.query)),
                {"x-subscription-token": "t"},
            )
            assert answer.status == response["status"]["code"]
            assert answer.body == response["body"]["string"].encode("utf-8"), (path, url.query)
            checked += 1
    assert checked > 100


def test_a_cassette_is_parsed_once_per_process() -> None:
    store = CassetteStore(ROOT / "cassettes" / "cranfield", on_miss=OnMiss.ERROR)
    first = store.cassette("1")
    assert store.cassette("1") is first
    request = httpx.Request("GET", first.requests[0].uri)
    assert store.answer("1", request).status_code == 200
    assert store.answer("1", request).status_code == 200  # replays repeat
    assert store.counts["replayed"] == 2


def test_a_replay_client_keeps_cookies_only_from_answers_that_set_them() -> None:
    """ReplayClient skips httpx's cookie parsing for answers without Set-Cookie, and still
    keeps (and sends back) the cookie of an answer that sets one, as httpx.Client does."""
    sent: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get("cookie"))
        if request.url.path == "/set":
            return httpx.Response(200, headers={"Set-Cookie": "session=abc; Path=/"})
        return httpx.Response(200, json={"ok": True})

    for client_type in (httpx.Client, ReplayClient):
        sent.clear()
        with client_type(transport=httpx.MockTransport(answer)) as client:
            client.get("http://sim.invalid/plain")
            assert dict(client.cookies) == {}
            client.get("http://sim.invalid/set")
            client.get("http://sim.invalid/plain")
            assert dict(client.cookies) == {"session": "abc"}
        assert sent == [None, None, "session=abc"]
