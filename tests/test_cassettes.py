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
    first = store.replies("1")
    assert store.replies("1") is first
    method, path, query = next(iter(first))
    request = httpx.Request(method, f"http://replay.test{path}", params=query)
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


@pytest.mark.parametrize("name", QUERY_SETS)
def test_replay_reads_every_cassette_as_vcrpy_does(name: str) -> None:
    """Replay reads the JSON without vcrpy: each request's (method, path, sorted query) and
    its response are what vcrpy's ``deserialize`` makes of the same file, in order."""
    from vcr.serialize import deserialize

    from evidence_bench.web.cassettes import SERIALIZER, _document, _recorded

    paths = cassette_files(ROOT / "cassettes" / name)
    for path in paths:
        keys, responses = _recorded(_document(path.read_bytes()))
        requests, expected, *_ = deserialize(path.read_text(), SERIALIZER)
        assert keys == [(r.method, r.path or "/", tuple(r.query)) for r in requests], path
        for response, vcr_response in zip(responses, expected, strict=True):
            body = response["body"]["string"]
            assert body.encode("utf-8") == vcr_response["body"]["string"]
            assert {**response, "body": None} == {**vcr_response, "body": None}
    assert len(paths) > 50


def test_a_request_vcrpy_does_not_write_goes_through_vcrpy() -> None:
    """A request with a field vcrpy's ``Request`` does not take is refused as vcrpy refuses
    it; one with an empty path and a body keys as vcrpy keys it."""
    from evidence_bench.web.cassettes import _document, _recorded

    def cassette(request: dict[str, object]) -> bytes:
        response = {"status": {"code": 200}, "headers": {}, "body": {"string": "{}"}}
        return json.dumps({"interactions": [{"request": request, "response": response}]}).encode()

    odd = {"method": "GET", "uri": "http://h/p?q=1", "body": None, "headers": {}, "extra": 1}
    with pytest.raises(ValueError, match=r"not a vcrpy cassette \(TypeError: .*extra"):
        _recorded(_document(cassette(odd)))
    plain = {"method": "POST", "uri": "http://h?b=2&a=1&c=", "body": "é", "headers": {}}
    assert _recorded(_document(cassette(plain)))[0] == [("POST", "/", (("a", "1"), ("b", "2")))]


def test_a_run_imports_no_vcrpy() -> None:
    """Replay reads the cassettes itself: the run's modules leave vcrpy (and requests,
    urllib3) unimported, ~0.3 s of CPU that every run paid before its workers forked."""
    import subprocess
    import sys

    code = (
        "import sys, evidence_bench.experiment.run, evidence_bench.experiment.runner; "
        "print(sorted({'vcr', 'requests', 'urllib3', 'jinja2', 'rapidfuzz'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
