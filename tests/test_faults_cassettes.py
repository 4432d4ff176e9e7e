"""Issue 14.3, 14.5, 14.6, 14.10: cassettes are verified before replay, written whole or
not at all, kept apart from their manifest, and never hold the key."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import httpx
import pytest

from evidence_bench.__main__ import main
from evidence_bench._atomic import write_atomic
from evidence_bench.collections.beir import load_collection
from evidence_bench.errors import DataError, ReplayMissError, WriteError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import record
from evidence_bench.experiment.run import perform_run
from evidence_bench.web import cassettes as cassettes_module
from evidence_bench.web.cassette_manifest import MANIFEST_NAME, find_manifest
from evidence_bench.web.cassettes import (
    KEY_PLACEHOLDER,
    CassetteStore,
    OnMiss,
    SkippedRequest,
    cassette_path,
    holds_secret,
    refuse_secrets,
)
from evidence_bench.web.simulator import BraveSimulator, SimulatorTransport, serve
from tests.conftest import write_tiny_collection
from tests.fault_fixtures import (
    CRANFIELD_CASSETTES,
    ROOT,
    bless,
    cli,
    copy_cassettes,
    main_in_process,
    one_line,
)

HINT = "python -m evidence_bench record +experiment=smoke"


def _first_request(query_id: str) -> httpx.Request:
    shipped = json.loads((CRANFIELD_CASSETTES / f"{query_id}.json").read_text())
    return httpx.Request("GET", shipped["interactions"][0]["request"]["uri"])


def _never() -> httpx.BaseTransport:
    raise AssertionError("a damaged cassette must not be simulated over")


def _store(cassettes: Path, on_miss: OnMiss) -> CassetteStore:
    return CassetteStore(cassettes, on_miss=on_miss, fallback=_never, record_hint=HINT)


def _write(content: bytes, *, blessed: bool = False) -> Callable[[Path], None]:
    def damage(cassettes: Path) -> None:
        (cassettes / "1.json").write_bytes(content)
        if blessed:
            bless(cassettes, "1.json")

    return damage


def _edited(cassettes: Path) -> None:
    data = json.loads((cassettes / "1.json").read_text())
    data["interactions"][0]["response"]["body"]["string"] = '{"web": {"results": []}}'
    (cassettes / "1.json").write_text(json.dumps(data))


def _unlisted(cassettes: Path) -> None:
    manifest = json.loads((cassettes / MANIFEST_NAME).read_text())
    del manifest["cassettes"]["1.json"]
    (cassettes / MANIFEST_NAME).write_text(json.dumps(manifest))


def _a_directory(cassettes: Path) -> None:
    (cassettes / "1.json").unlink()
    (cassettes / "1.json").mkdir()


SHIPPED = (CRANFIELD_CASSETTES / "1.json").read_bytes()
DEEP = b'{"interactions": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
DAMAGE = [
    pytest.param(_write(b""), "1.json is damaged (not valid JSON", id="empty"),
    pytest.param(_write(b"\x00\xff\xfe" * 100), "1.json is damaged (not UTF-8 text", id="binary"),
    pytest.param(_write(gzip.compress(SHIPPED)[:200]), "1.json is damaged (not UTF-8", id="gzip"),
    pytest.param(_write(SHIPPED[: len(SHIPPED) // 2]), "1.json is damaged (not valid JSON",
                 id="truncated"),
    pytest.param(_write(b"[]"), "1.json is damaged (no 'interactions' list)", id="a list"),
    pytest.param(_write(b'{"interactions": [{"request": {"method": "GET", "uri": "u"}}]}'),
                 "interactions[0].response is not an object", id="no response"),
    pytest.param(_write(b'{"interactions": [{"request": {"method": "GET", "uri": "u"}, '
                        b'"response": {"status": {"code": "200"}}}]}'),
                 "interactions[0].response lacks a status code", id="status as text"),
    pytest.param(_write(DEEP, blessed=True), "1.json is damaged (JSON nested too deeply);",
                 id="deep, blessed"),
    pytest.param(_edited, "1.json was changed since it was recorded (its sha256 differs",
                 id="changed"),
    pytest.param(_unlisted, "1.json is not listed in", id="unlisted"),
    pytest.param(lambda c: (c / MANIFEST_NAME).unlink(), "cannot be verified: ", id="no manifest"),
    pytest.param(lambda c: (c / MANIFEST_NAME).write_text("{"), "is not valid JSON",
                 id="manifest garbage"),
    pytest.param(lambda c: (c / MANIFEST_NAME).write_text("[]"), "has no 'cassettes' object",
                 id="manifest a list"),
    pytest.param(_a_directory, "1.json cannot be read (Is a directory)", id="unreadable"),
]  # fmt: skip


@pytest.mark.parametrize("on_miss", list(OnMiss))
@pytest.mark.parametrize(("damage", "message"), DAMAGE)
def test_a_damaged_or_unverifiable_cassette_is_one_line_whatever_on_miss_says(
    damage: Callable[[Path], None], message: str, on_miss: OnMiss, tmp_path: Path
) -> None:
    cassettes = copy_cassettes(tmp_path / "cassettes", ("1", "2"))
    damage(cassettes)
    store = _store(cassettes, on_miss)
    if message.startswith("1.json"):  # the other cassette still replays
        assert store.answer("2", _first_request("2")).status_code == 200
    with pytest.raises(DataError) as caught:
        store.answer("1", _first_request("1"))
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert HINT in text  # what to run to repair it


@pytest.mark.parametrize(
    ("on_miss", "outcome"),
    [(OnMiss.ERROR, ReplayMissError), (OnMiss.SKIP, SkippedRequest), (OnMiss.SIMULATE, 200)],
)
def test_a_missing_cassette_stays_under_on_miss(
    on_miss: OnMiss, outcome: object, tmp_path: Path, tiny_collection: Path
) -> None:
    cassettes = copy_cassettes(tmp_path / "cassettes", ("2",))
    simulator = BraveSimulator(load_collection(tiny_collection, name="tiny"))
    store = CassetteStore(
        cassettes, on_miss=on_miss, fallback=lambda: SimulatorTransport(simulator)
    )
    request = httpx.Request(
        "GET",
        "http://replay.invalid/res/v1/web/search?q=wing&count=5",
        headers={"X-Subscription-Token": "t"},
    )
    if isinstance(outcome, int):
        assert store.answer("1", request).status_code == outcome
        assert store.counts["simulated"] == 1
    else:
        with pytest.raises(outcome):  # type: ignore[call-overload]
            store.answer("1", request)


# --- item 6: the manifest is out of the query ids' namespace --------------------------------


@pytest.mark.parametrize(
    "query_id",
    ["manifest", "Manifest", "MANIFEST", "@manifest", "@manifest.json", "manifest.json",
     "../@manifest", "a/../@manifest", "", " @manifest"],
)  # fmt: skip
def test_no_query_id_maps_to_the_manifest(query_id: str, tmp_path: Path) -> None:
    path = cassette_path(tmp_path, query_id)
    assert path.parent == tmp_path
    assert path.name.lower() != MANIFEST_NAME.lower()
    assert not path.name.startswith("@")


def _tiny_with_ids(root: Path, ids: dict[str, str]) -> Path:
    """The tiny collection with some query ids renamed (queries and qrels alike)."""
    collection = write_tiny_collection(root)
    lines = (collection / "queries.jsonl").read_text().splitlines()
    renamed = []
    for line in lines:
        query = json.loads(line)
        query["_id"] = ids.get(query["_id"], query["_id"])
        renamed.append(json.dumps(query))
    (collection / "queries.jsonl").write_text("\n".join(renamed) + "\n")
    qrels = (collection / "qrels.tsv").read_text().splitlines()
    rows = [qrels[0]]
    for row in qrels[1:]:
        query_id, doc_id, grade = row.split("\t")
        rows.append(f"{ids.get(query_id, query_id)}\t{doc_id}\t{grade}")
    (collection / "qrels.tsv").write_text("\n".join(rows) + "\n")
    return collection


def _tiny_overrides(collection: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={collection}", f"query_set.cassettes={tmp_path / 'cassettes'}",
        f"runs_dir={tmp_path / 'runs'}", "experiment.depth=10", "experiment.rounds=1",
        "workers=1", "progress=false", "report=false", *extra,
    ]  # fmt: skip


def test_a_query_named_manifest_does_not_clobber_the_manifest(tmp_path: Path) -> None:
    ids = {"1": "manifest", "2": "@manifest", "3": "manifest.json"}
    collection = _tiny_with_ids(tmp_path / "tiny", ids)
    cfg, _ = compose(_tiny_overrides(collection, tmp_path))
    record(plan_run(cfg), provider="simulator", rounds=0)
    cassettes = tmp_path / "cassettes"
    manifest = json.loads((cassettes / MANIFEST_NAME).read_text())
    names = {cassette_path(cassettes, query_id).name for query_id in [*ids.values(), "4"]}
    assert set(manifest["cassettes"]) == names and len(names) == 4
    assert "manifest.json" in names  # the query named "manifest" has its own cassette
    for _ in range(2):  # every later run replays from the same, intact manifest
        cfg, text = compose(_tiny_overrides(collection, tmp_path, "replay.on_miss=error"))
        path = perform_run(cfg, text).path
        assert json.loads((path / "manifest.json").read_text())["replay"]["simulated"] == 0


def test_a_manifest_under_its_old_name_is_read_and_then_moved(tmp_path: Path) -> None:
    cassettes = copy_cassettes(tmp_path / "cassettes", ("1",))
    (cassettes / MANIFEST_NAME).rename(cassettes / "manifest.json")
    assert find_manifest(cassettes) == cassettes / "manifest.json"
    assert _store(cassettes, OnMiss.ERROR).answer("1", _first_request("1")).status_code == 200

    from evidence_bench.collections.queryset import load_query_set
    from evidence_bench.experiment.record import write_manifest

    conf = {"name": "cranfield", "path": "collections/cranfield", "cassettes": str(cassettes)}
    write_manifest(load_query_set(conf, limit=1), provider="simulator", record_rounds=1, deep=True)
    assert sorted(p.name for p in cassettes.iterdir()) == ["1.json", MANIFEST_NAME]
    assert json.loads((cassettes / MANIFEST_NAME).read_text())["cassettes"] == {
        "1.json": hashlib.sha256((cassettes / "1.json").read_bytes()).hexdigest()
    }


# --- item 3: written whole or not at all -----------------------------------------------------


def _record_args(collection: Path, cassettes: Path, *extra: str) -> list[str]:
    return [
        "record", "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={collection}", f"query_set.cassettes={cassettes}",
        "experiment.depth=10", *extra,
    ]  # fmt: skip


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny collection and its cassettes as ``python -m evidence_bench record ...
    record_rounds=1`` writes them (recorded once, in this process; each test gets a copy)."""
    root = tmp_path_factory.mktemp("recorded")
    collection = write_tiny_collection(root / "tiny")
    cassettes = root / "cassettes"
    args = _record_args(collection, cassettes, "record_rounds=1")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        patch.setattr(sys, "argv", ["evidence_bench", *args])
        main(args)  # returns: recorded
    return collection, cassettes


def _copy(recorded: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    collection, cassettes = recorded
    return collection, Path(shutil.copytree(cassettes, tmp_path / "cassettes"))


def test_a_full_disk_leaves_the_cassette_as_it_was(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    collection, cassettes = _copy(recorded, tmp_path)
    before = _snapshot(cassettes)
    # recording every round makes 1.json grow; no file may grow past its current size
    done = cli(
        *_record_args(collection, cassettes, "record_rounds=0", "--force"),
        file_size_limit=len(before["1.json"]),
    )
    line = one_line(done)
    assert done.returncode == 1
    assert line == (
        f"evidence_bench: could not write {cassettes / '1.json'}: File too large; "
        "the file on disk is unchanged"
    )
    assert _snapshot(cassettes) == before  # no truncated cassette, no temporary file


def test_a_manifest_that_cannot_be_written_is_left_as_it_was(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    collection, cassettes = _copy(recorded, tmp_path)
    before = _snapshot(cassettes)
    # nothing new to record: only the manifest is rewritten, and it cannot be
    done = cli(
        *_record_args(collection, cassettes, "record_rounds=1", "--force"), file_size_limit=64
    )
    assert done.returncode == 1
    assert one_line(done).startswith(f"evidence_bench: could not write {cassettes / MANIFEST_NAME}")
    assert _snapshot(cassettes) == before


def test_record_replaces_a_damaged_cassette_and_says_so(
    recorded: tuple[Path, Path],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collection, cassettes = _copy(recorded, tmp_path)
    good = (cassettes / "2.json").read_bytes()
    (cassettes / "2.json").write_bytes(good[:100])  # the old, in-place write's leftover
    args = _record_args(collection, cassettes, "record_rounds=1", "--force")
    done = main_in_process(*args, capfd=capfd, monkeypatch=monkeypatch)
    assert done.returncode == 0, done.stderr
    assert one_line(done) == (
        f"evidence_bench: {cassettes / '2.json'} could not be read; recorded it afresh"
    )
    again = (cassettes / "2.json").read_bytes()
    assert _answers(again) == _answers(good)  # the simulator answers as before
    manifest = json.loads((cassettes / MANIFEST_NAME).read_text())
    assert manifest["cassettes"]["2.json"] == hashlib.sha256(again).hexdigest()


def _answers(cassette: bytes) -> list[tuple[str, object]]:
    """Each recorded request's query string and its response (the port differs by run)."""
    interactions = json.loads(cassette)["interactions"]
    return [(i["request"]["uri"].split("?")[1], i["response"]) for i in interactions]


def test_write_atomic_names_the_file_it_could_not_write(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "baseline.yaml"
    with pytest.raises(WriteError) as caught:
        write_atomic(target, "x: 1\n")
    assert str(caught.value) == (
        f"could not write {target}: No such file or directory; the file on disk is unchanged"
    )
    existing = tmp_path / "kept.json"
    existing.write_text("old\n")
    write_atomic(existing, "new\n")
    assert existing.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]  # no temporary left
    assert existing.stat().st_mode & 0o777 == 0o644


# --- item 10: a server that echoes the key ---------------------------------------------------

SENTINEL = "SENTINEL+KEY/5f3a=9c1e7b"


def _forms(secret: str) -> list[str]:
    escaped = json.dumps(secret)[1:-1]
    return [secret, quote(secret, safe=""), quote_plus(secret), escaped.replace("/", "\\/")]


def test_a_key_echoed_by_the_server_is_in_no_file_written(
    tiny_collection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real loopback HTTP: the server echoes the token in a response header, in the
    results' text and URLs, URL-encoded and JSON-escaped; nothing written may hold it."""
    simulator = BraveSimulator(load_collection(tiny_collection, name="tiny"), token=SENTINEL)
    handle = simulator.handle

    def echoing(method: str, path: str, params: object, headers: dict[str, str]) -> object:
        answer = handle(method, path, params, headers)  # type: ignore[arg-type]
        token = {k.lower(): v for k, v in headers.items()}["x-subscription-token"]
        body = answer.json()
        for result in body.get("web", {}).get("results", [])[:2]:
            result["description"] += f" token={token} url-encoded={quote(token, safe='')}"
        body["echo"] = {"plus": quote_plus(token)}
        text = json.dumps(body)[:-1] + ', "escaped": "' + token.replace("/", "\\/") + '"}'
        answer.headers["X-Echo-Token"] = token
        return type(answer)(answer.status, answer.headers, text.encode())

    monkeypatch.setattr(simulator, "handle", echoing)
    with serve(simulator) as running:
        monkeypatch.setenv("BRAVE_SEARCH_API_KEY", SENTINEL)
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", running.base_url)
        cfg, _ = compose(_tiny_overrides(tiny_collection, tmp_path, "provider=brave_live"))
        record(plan_run(cfg), provider="brave_live", rounds=1)
    files = sorted((tmp_path / "cassettes").iterdir())
    assert [f.name for f in files] == ["1.json", "2.json", "3.json", "4.json", MANIFEST_NAME]
    placeholders = 0
    for file in files:
        text = file.read_text()
        for form in _forms(SENTINEL):
            assert form not in text, (file, form)
        placeholders += text.count(KEY_PLACEHOLDER)
    interactions = sum(len(json.loads(f.read_text())["interactions"]) for f in files[:4])
    # per answer: the header, two descriptions with two forms each, the plus and the escape
    assert placeholders >= interactions * 3
    cassette = json.loads(files[0].read_text())
    response = cassette["interactions"][0]["response"]
    headers = {name.lower(): value for name, value in response["headers"].items()}
    assert headers["x-echo-token"] == [KEY_PLACEHOLDER]


_MIXED = [
    SENTINEL.replace("/", "%2f"),  # one character percent-encoded, the rest verbatim
    SENTINEL.replace("+", "&#43;"),  # one character an HTML entity
    SENTINEL.replace("=", "\\u003d"),  # one character \\u-escaped
]
_MIXED_IDS = ["one-hex", "one-entity", "one-u-escape"]


def _record_echoing(
    echo: str, tiny_collection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simulator = BraveSimulator(load_collection(tiny_collection, name="tiny"), token=SENTINEL)
    handle = simulator.handle

    def echoing(method: str, path: str, params: object, headers: dict[str, str]) -> object:
        answer = handle(method, path, params, headers)  # type: ignore[arg-type]
        text = answer.body.decode()[:-1] + ', "echo": "' + echo + '"}'
        return type(answer)(answer.status, answer.headers, text.encode())

    monkeypatch.setattr(simulator, "handle", echoing)
    with serve(simulator) as running:
        monkeypatch.setenv("BRAVE_SEARCH_API_KEY", SENTINEL)
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", running.base_url)
        cfg, _ = compose(_tiny_overrides(tiny_collection, tmp_path, "provider=brave_live"))
        record(plan_run(cfg), provider="brave_live", rounds=1)


@pytest.mark.parametrize("echo", _MIXED, ids=_MIXED_IDS)
def test_a_key_echoed_in_a_mixed_spelling_is_redacted_word_by_word(
    echo: str, tiny_collection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No whole spelling matches; the word still decodes to the key, so it is replaced whole
    (:func:`evidence_bench._secrets.redact`) and the recording is written without it."""
    _record_echoing(echo, tiny_collection, tmp_path, monkeypatch)
    files = sorted((tmp_path / "cassettes").glob("[0-9]*.json"))
    assert len(files) == 4
    for file in files:
        text = file.read_text()
        assert not holds_secret(text, [SENTINEL]) and echo not in text, file
        echoed = json.loads(json.loads(text)["interactions"][0]["response"]["body"]["string"])
        assert echoed["echo"] == KEY_PLACEHOLDER


@pytest.mark.parametrize("echo", _MIXED[:2], ids=_MIXED_IDS[:2])
def test_a_key_scrubbing_missed_is_never_written(
    echo: str, tiny_collection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last check (:func:`refuse_secrets`): were a spelling to pass scrubbing (here its
    word-by-word pass is switched off), the recording is refused in one line naming the
    cassette, and no cassette holds it."""
    monkeypatch.setattr(cassettes_module, "redact_json", lambda value, secrets=None: value)
    transports = _transport_methods()
    with pytest.raises(WriteError, match=r"refusing to write .*1\.json: it would hold the API key"):
        _record_echoing(echo, tiny_collection, tmp_path, monkeypatch)
    assert not list((tmp_path / "cassettes").glob("[0-9]*.json"))
    # and vcrpy let go of httpx: its save raised before it unpatched, which left every
    # transport of the process recording into the refused cassette
    assert _transport_methods() == transports


def _transport_methods() -> list[object]:
    return [
        vars(transport)[name]
        for transport in (httpx.HTTPTransport, httpx.AsyncHTTPTransport, httpx.MockTransport)
        for name in ("handle_request", "handle_async_request")
        if name in vars(transport)
    ]


def test_a_body_too_deep_to_check_for_the_key_is_refused(tmp_path: Path) -> None:
    """A recorded body nested past the JSON parser's depth cannot be read for the key's
    decoded forms: refused, in one line naming the file, rather than written unchecked."""
    key = "sk/live-123456"
    escaped = key.replace("/", "\\/")  # the key as JSON writes it escaped: only a parse sees it
    deep = "[" * 100_000 + '"' + escaped + '"' + "]" * 100_000
    text = json.dumps({"interactions": [{"response": {"body": {"string": deep}}}]})
    path = tmp_path / "1.json"
    with pytest.raises(WriteError) as caught:
        refuse_secrets(path, text, [key])
    assert str(caught.value) == (
        f"refusing to write {path}: a body is nested too deeply to check it for the API key"
    )
    refuse_secrets(path, json.dumps({"interactions": []}), [key])  # a plain one passes


def test_holds_secret_reads_every_string_decoded() -> None:
    key = "k3y+/="
    body = json.dumps({"results": [{"title": "a"}], "b": "x"})
    assert not holds_secret(json.dumps({"body": {"string": body}}), [key])
    for form in ("k3y%2b%2f%3d", "k3y&#43;&#x2f;&#61;", "k3y+/="):
        nested = json.dumps({"note": form})
        assert holds_secret(json.dumps({"body": {"string": nested}}), [key]), form
    page = base64.b64encode(f"<p>token {key}</p>".encode("latin-1")).decode()
    assert holds_secret(json.dumps({"pages": [{"body_base64": page}]}), [key])
    assert not holds_secret(json.dumps({"pages": [{"body_base64": page}]}), [""])
