"""A server on 127.0.0.1 that echoes the API key, in every spelling a reader can decode, into
every output: nothing written and no byte on stdout or stderr may hold it (issue 31, item 7).

The server is hostile Brave and a hostile web at once: its search answers carry the key in
titles, descriptions and URLs, its pages in their title and text, its error answers in
their detail. Each output is checked by its bytes and by their decodings (percent, entity,
JSON, base64), not by the code under test.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Callable, Iterator
from contextlib import suppress
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

import pytest

from evidence_bench.__main__ import main as bench_main
from evidence_bench._secrets import KEY_PLACEHOLDER, redact
from evidence_bench.cli import main as fetcher_main
from evidence_bench.collections.beir import load_collection
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import record
from evidence_bench.experiment.run import perform_run
from evidence_bench.livefetch._cli import main as livefetch_main
from evidence_bench.web.simulator import BraveSimulator, serve
from tests.fault_fixtures import serve_bytes

#: Header-safe, as a Brave key is, with every character an encoding changes.
KEY = "BSAk3y+Zq9/x=y&w\"t'~Vz81Lm"


def _lower_hex(text: str) -> str:
    return re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), text)


FORMS = {
    "plain": KEY,
    "percent": quote(KEY, safe=""),
    "percent-lower": _lower_hex(quote(KEY, safe="")),
    "plus": quote_plus(f"{KEY} {KEY}"),  # a space as +, the key's own + as %2B
    "json-escaped": json.dumps(KEY)[1:-1].replace("/", "\\/"),
    "u-escaped": "".join(f"\\u{ord(c):04x}" for c in KEY),
    "html-entity": html.escape(KEY),
    "numeric-entity": "".join(f"&#{ord(c)};" for c in KEY),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "base64-inside": base64.b64encode(b"id:" + KEY.encode() + b":end").decode(),
}


def _views(data: bytes) -> list[str]:
    """What a reader may decode ``data`` to: written independently of the code under test."""
    text = data.decode("utf-8", "replace")
    views = [text, unquote(text), unquote_plus(text), html.unescape(text)]
    views.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text))
    views.append(text.replace("\\/", "/").replace('\\"', '"'))
    for word in re.findall(r"[A-Za-z0-9+/=]{12,}", text):
        for start in range(4):
            chunk = word[start:]
            with suppress(binascii.Error, ValueError):
                views.append(base64.b64decode(chunk + "=" * (-len(chunk) % 4)).decode("latin-1"))
    return views


def assert_no_key(data: bytes, where: object) -> None:
    assert KEY.encode() not in data, where
    for name, form in FORMS.items():
        assert form.encode() not in data, (where, name)
    for view in _views(data):
        assert KEY not in view, where


def assert_no_key_in_files(root: Path) -> int:
    files = [path for path in root.rglob("*") if path.is_file()]
    for path in files:
        assert_no_key(path.read_bytes(), path)
    return len(files)


# -- the hostile server -------------------------------------------------------------------


def _echoing(form: str) -> Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]:
    """Brave and the web at once, echoing ``form`` (see module doc)."""

    def answer(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        port = request.server.server_address[1]
        parts = urlsplit(request.path)
        echo = {"X-Echo": quote(KEY, safe="")}
        if parts.path == "/res/v1/web/search" and "fail" in parts.query:
            error = {"status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": form}
            body = json.dumps({"type": "ErrorResponse", "error": error})
            return 422, {**echo, "Content-Type": "application/json"}, body.encode()
        if parts.path == "/res/v1/web/search":
            results = [
                {
                    "title": f"Heat transfer {i} {form}",
                    "url": f"http://127.0.0.1:{port}/page/{i}?token={quote(KEY, safe='')}",
                    "description": f"Heat transfer in a boundary layer, token {form} here.",
                }
                for i in range(1, 3)
            ]
            web = {"results": results, "more_results_available": False}
            body = json.dumps({"type": "search", "web": web})
            return 200, {**echo, "Content-Type": "application/json"}, body.encode()
        page = (
            f"<!DOCTYPE html><html><head><title>Heat transfer {form}</title>"
            '<meta property="article:published_time" content="2026-12-01T00:00:00Z">'
            "</head><body><article><h1>Heat transfer</h1>"
            f"<p>Heat transfer in a boundary layer is measured here. The token {form} "
            "was echoed by the server.</p>"
            "<p>Heat transfer across the boundary layer depends on the flow.</p>"
            "</article></body></html>"
        )
        return 200, {**echo, "Content-Type": "text/html; charset=utf-8"}, page.encode()

    return answer


@pytest.fixture(params=list(FORMS), ids=list(FORMS))
def echoed(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[str]:
    """The form the server echoes; the key and the server's URL are in the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", KEY)
    with serve_bytes(_echoing(FORMS[request.param])) as base_url:
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", base_url)
        yield request.param


def _run(
    command: Callable[[list[str]], int | None], argv: list[str], capfd: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    try:
        status = command(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    out, err = capfd.readouterr()
    return int(status or 0), out, err


# -- the redaction itself ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FORMS))
def test_redact_replaces_every_spelling(name: str) -> None:
    text = f"before {FORMS[name]} after"
    redacted = redact(text, [KEY])
    assert KEY_PLACEHOLDER in redacted
    assert redacted.startswith("before ") and redacted.endswith(" after")
    assert_no_key(redacted.encode(), name)


def test_redact_leaves_text_without_the_key_alone() -> None:
    text = 'Heat "transfer" &amp; %2F flow aGVhdCB0cmFuc2Zlcg== \\u0041'
    assert redact(text, [KEY]) == text
    assert redact(text, []) == text


# -- every output -------------------------------------------------------------------------------


def test_evidence_fetcher_json(echoed: str, capfd: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(fetcher_main, ["heat", "transfer", "--format", "json"], capfd)
    assert status == 0, err
    rows = json.loads(out)
    assert len(rows) == 2 and KEY_PLACEHOLDER in rows[0]["title"]
    assert_no_key(out.encode() + err.encode(), "stdout/stderr")


def test_evidence_fetcher_fetch_json_and_cache(
    echoed: str, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["heat", "transfer", "--format", "json", "--fetch", "--allow-private"]
    status, out, err = _run(fetcher_main, [*argv, "--cache", str(tmp_path / "c.sqlite")], capfd)
    assert status == 0, err
    assert KEY_PLACEHOLDER in out
    assert_no_key(out.encode() + err.encode(), "stdout/stderr")
    assert (tmp_path / "c.sqlite").exists()
    assert assert_no_key_in_files(tmp_path) >= 1


def test_livefetch_json_and_cache(
    echoed: str, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["heat transfer", "--mode", "web", "--format", "json", "--allow-private"]
    argv += ["--freshness-days", "none", "--cache", str(tmp_path / "lf.sqlite")]
    status, out, err = _run(livefetch_main, argv, capfd)
    assert status == 0, err
    assert json.loads(out)["packets"], out
    assert KEY_PLACEHOLDER in out
    assert_no_key(out.encode() + err.encode(), "stdout/stderr")
    assert (tmp_path / "lf.sqlite").exists()
    assert_no_key_in_files(tmp_path)


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        (fetcher_main, ["fail"]),
        (fetcher_main, ["fail", "--format", "json"]),
        (livefetch_main, ["fail", "--mode", "web", "--no-cache"]),
    ],
    ids=["evidence-fetcher", "evidence-fetcher-json", "livefetch"],
)
def test_error_lines(
    echoed: str, command: Any, argv: list[str], capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = _run(command, argv, capfd)
    assert status == 1
    assert len(err.splitlines()) == 1 and "422" in err, err
    assert_no_key(out.encode() + err.encode(), "stdout/stderr")
    assert_no_key_in_files(tmp_path)


def record_run_report(
    edit: Callable[[dict[str, Any]], None],
    tiny_collection: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> tuple[Path, str, str]:
    """Record the tiny collection from a simulator whose every result ``edit`` changes,
    run from those cassettes and report the run; the run directory, report's stdout and
    stderr."""
    simulator = BraveSimulator(load_collection(tiny_collection, name="tiny"), token=KEY)
    handle = simulator.handle

    def editing(method: str, path: str, params: object, headers: dict[str, str]) -> object:
        answer = handle(method, path, params, headers)  # type: ignore[arg-type]
        body = answer.json()
        for result in body.get("web", {}).get("results", []):
            edit(result)
        return type(answer)(answer.status, answer.headers, json.dumps(body).encode())

    monkeypatch.setattr(simulator, "handle", editing)
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", KEY)
    overrides = [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={tiny_collection}", f"query_set.cassettes={tmp_path / 'cassettes'}",
        f"runs_dir={tmp_path / 'runs'}", "experiment.depth=10", "experiment.rounds=1",
        "workers=1", "progress=false",
    ]  # fmt: skip
    with serve(simulator) as running:
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", running.base_url)
        cfg, _ = compose([*overrides, "provider=brave_live", "report=false"])
        record(plan_run(cfg), provider="brave_live", rounds=1)
    cfg, text = compose([*overrides, "replay.on_miss=error", "report=false"])
    run_dir = perform_run(cfg, text).path
    status, out, err = _run(bench_main, ["report", str(run_dir)], capfd)
    assert status == 0, err
    assert (run_dir / "report.html").exists()
    return run_dir, out, err


def test_record_run_and_report(
    echoed: str,
    tiny_collection: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Recorded from a Brave that echoes the key into its results, then run and reported
    from those cassettes: cassettes, manifest, run directory and report hold no key."""
    form = FORMS[echoed]

    def echo(result: dict[str, Any]) -> None:
        result["title"] += f" {form}"
        result["description"] += f" token {form} here"

    run_dir, out, err = record_run_report(echo, tiny_collection, tmp_path, monkeypatch, capfd)
    assert_no_key(out.encode() + err.encode(), "stdout/stderr")
    assert assert_no_key_in_files(tmp_path / "cassettes") >= 5
    assert assert_no_key_in_files(run_dir) >= 3
