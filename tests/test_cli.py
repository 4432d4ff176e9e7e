"""evidence-fetcher end to end, against a Brave-compatible server on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from evidence_bench.api import fetch_evidence
from evidence_bench.cli import main
from evidence_bench.engine.ranking import TfidfRocchioRanker

Row = tuple[str, str, str]  # title, url, description

JAGUAR_FIRST: list[Row] = [
    (
        "Jaguar cars official site",
        "https://www.jaguar.example/",
        "Luxury <strong>Jaguar</strong> cars and SUVs.",
    ),
    (
        "Jaguar (Panthera onca)",
        "https://wildlife.example/jaguar",
        "The jaguar is a large cat of the Americas.",
    ),
    (
        "Jaguar habitat and range",
        "https://wildlife.example/jaguar/habitat",
        "Jaguar habitat: rainforest, swamps and grassland.",
    ),
    (
        "Used Jaguar prices",
        "https://cars.example/used-jaguar",
        "Compare prices of used Jaguar cars.",
    ),
]
JAGUAR_REFINED: list[Row] = [
    (
        "Jaguar habitat (again)",
        "https://wildlife.example/jaguar/habitat/?utm_source=brave",
        "Same page.",
    ),
    (
        "What jaguars eat",
        "https://wildlife.example/jaguar-prey",
        "Jaguar prey: capybara, caiman and deer.",
    ),
    (
        "Big cats of the rainforest",
        "https://zoo.example/big-cats",
        "Jaguar, leopard and tiger in the rainforest.",
    ),
]
OCELOT_FIRST: list[Row] = [
    ("Ocelot facts", "https://wildlife.example/ocelot", "The ocelot is a small wild cat."),
    ("Ocelot range map", "https://maps.example/ocelot", "Where ocelots live."),
]
OCELOT_REFINED: list[Row] = [
    ("Ocelot facts", "https://wildlife.example/ocelot#diet", "The ocelot is a small wild cat."),
    ("Ocelot kittens", "https://wildlife.example/ocelot-kittens", "Small wild cat kittens."),
]
#: A page's title, URL and snippet holding terminal control sequences: an OSC 8 hyperlink
#: (ESC ] 8 ; ; URL BEL), a clear-screen CSI, a cursor-up with line erase, a C1 CSI (0x9b).
HOSTILE: list[Row] = [
    (
        "heat \x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2Jslab",
        "https://hostile.example/a\x1b[31m",
        "heat transfer \x1b[1A\x1b[2Kspoofed line \x9b31m",
    ),
]
# The first word of q picks the table; q equal to that word gets the first list, any other q
# (a refined query) the second.
ROUTES = {
    "jaguar": (JAGUAR_FIRST, JAGUAR_REFINED),
    "ocelot": (OCELOT_FIRST, OCELOT_REFINED),
    "hostile": (HOSTILE, HOSTILE),
}


@dataclass
class FakeBrave:
    base_url: str
    server: _Server
    requests: list[dict[str, str]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        params = {name: values[0] for name, values in parse_qs(parts.query).items()}
        params["token"] = self.headers.get("X-Subscription-Token", "")
        self.server.requests.append(params)
        if parts.path != "/res/v1/web/search":
            self._send(
                404, {"type": "ErrorResponse", "error": {"status": 404, "code": "NOT_FOUND"}}
            )
        elif params["token"] != self.server.token:
            error = {
                "status": 422,
                "code": "SUBSCRIPTION_TOKEN_INVALID",
                "detail": self.server.detail,
            }
            self._send(422, {"type": "ErrorResponse", "error": error})
        else:
            self._send(200, self._results(params))

    @staticmethod
    def _results(params: dict[str, str]) -> dict[str, object]:
        q = params.get("q", "")
        first, refined = ROUTES.get(q.split(" ")[0].lower(), ([], []))
        rows = first if q.lower() == q.split(" ")[0].lower() else refined
        count = int(params.get("count", "20"))
        start = int(params.get("offset", "0")) * count
        page = rows[start : start + count]
        results = [
            {
                "title": title,
                "url": url,
                "description": description,
                "meta_url": {"hostname": urlsplit(url).hostname},
            }
            for title, url, description in page
        ]
        return {
            "type": "search",
            "query": {"original": q, "more_results_available": start + count < len(rows)},
            "web": {"type": "search", "results": results},
        }

    def _send(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        return


class _Server(ThreadingHTTPServer):
    requests: list[dict[str, str]]
    token: str  # the only key accepted
    detail = "The provided subscription token is invalid."  # a refusal's error.detail


@pytest.fixture
def brave(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBrave]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.requests = []
    server.token = "test"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/res/v1"
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", base_url)
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "test")
    fake = FakeBrave(base_url=base_url, server=server)
    fake.requests = server.requests
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str | None = None
) -> tuple[int, str, str]:
    if stdin is not None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "stdin", io.StringIO(stdin))
            code = main(argv)
    else:
        code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _listing(block: str) -> list[tuple[str, str]]:
    """(title, url) pairs of a numbered listing, checking the numbers run 1..n."""
    entries = re.findall(r"^(\d+)\. (.*)\n   (\S+)$", block, flags=re.MULTILINE)
    assert [int(number) for number, _, _ in entries] == list(range(1, len(entries) + 1))
    return [(title, url) for _, title, url in entries]


# --- one-shot output ------------------------------------------------------------------------


def _interactive_first_listing(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code, out, _ = _run(["--interactive", *args, "jaguar"], capsys, stdin="done\n")
    assert code == 0
    return [url for _, url in _listing(out.split("Type 'help'")[0])]


def test_text_output_lists_the_sessions_first_ranking(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["jaguar"], capsys)
    assert code == 0
    assert err == ""
    listing = _listing(out)
    # every Brave result once, in the order --interactive shows first
    assert sorted(url for _, url in listing) == sorted(url for _, url, _ in JAGUAR_FIRST)
    assert [url for _, url in listing] == _interactive_first_listing(capsys)
    assert "1. " in out and "   Luxury Jaguar cars and SUVs.\n" in out
    assert [request["q"] for request in brave.requests] == ["jaguar", "jaguar"]
    assert brave.requests[0]["token"] == "test"


def test_the_listing_is_the_default_rankers_order_of_brave_results(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["--format", "json", "jaguar"], capsys)
    assert code == 0
    expected = fetch_evidence("jaguar", ranker=TfidfRocchioRanker())  # same server, same env
    assert [item["url"] for item in json.loads(out)] == [item.url for item in expected]
    assert [item.url for item in expected] != [url for _, url, _ in JAGUAR_FIRST]  # reordered


def test_json_output(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--format", "json", "jaguar"], capsys)
    assert code == 0
    results = json.loads(out)
    assert [item["url"] for item in results] == _interactive_first_listing(capsys)
    assert [item["rank"] for item in results] == [1, 2, 3, 4]
    by_url = {item["url"]: item for item in results}
    assert by_url["https://www.jaguar.example/"]["title"] == "Jaguar cars official site"
    assert by_url["https://www.jaguar.example/"]["snippet"] == "Luxury Jaguar cars and SUVs."
    assert {item["source"] for item in results} == {"brave"}
    assert {"title", "url", "snippet", "source", "rank"} <= set(results[0])


def test_control_characters_of_web_text_are_not_printed(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    """A title, URL or snippet cannot drive the terminal: each control character became a
    space where Brave's text entered (``plain_text``), in the listing and in JSON alike."""
    code, out, _ = _run(["hostile"], capsys)
    assert code == 0
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)
    assert out == (
        "1. heat ]8;;https://evil.example click ]8;; [2Jslab\n"
        "   https://hostile.example/a [31m\n"
        "   heat transfer [1A [2Kspoofed line 31m\n"
    )
    code, out, _ = _run(["hostile", "--format", "json"], capsys)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)  # C1's CSI (0x9b) too
    assert "\\u001b" not in out and "\\u009b" not in out
    assert json.loads(out)[0]["title"] == "heat ]8;;https://evil.example click ]8;; [2Jslab"
    assert json.loads(out)[0]["snippet"] == "heat transfer [1A [2Kspoofed line 31m"


def test_an_error_line_prints_no_control_character_of_the_servers(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server's error detail is its text: the one error line shows its controls as "?"."""
    brave.server.token = "other"  # every request refused, with the detail below
    brave.server.detail = "bad \x1b[2J\x1b]8;;https://evil.example\x07click"
    code, _, err = _run(["jaguar"], capsys)
    assert code == 1
    assert err.startswith("evidence-fetcher: ") and err.count("\n") == 1
    assert "bad ?[2J?]8;;https://evil.example?click" in err


def test_query_words_are_joined(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["ocelot", "range", "--format", "json"], capsys)
    assert code == 0
    assert len(json.loads(out)) == len(OCELOT_REFINED)
    assert brave.requests[0]["q"] == "ocelot range"


def test_limit_caps_the_results(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--limit", "2", "jaguar"], capsys)
    assert code == 0
    assert len(_listing(out)) == 2
    assert brave.requests[0]["count"] == "2"


@pytest.mark.parametrize("limit", ["0", "201", "ten"])
def test_limit_out_of_range_is_a_usage_error(
    limit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(["--limit", limit, "jaguar"], capsys)
    assert code == 2
    assert out == ""
    assert "evidence-fetcher: error: argument --limit" in err


def test_no_results(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["zebra"], capsys)
    assert (code, out) == (0, "No results.\n")
    code, out, _ = _run(["zebra", "--format", "json"], capsys)
    assert (code, json.loads(out)) == (0, [])


# --- failures -------------------------------------------------------------------------------


def test_interactive_with_json_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["--interactive", "--format", "json", "jaguar"], capsys)
    assert code == 2
    assert out == ""
    assert err == "evidence-fetcher: --interactive works only with --format text\n"


def test_missing_key_exits_1_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("BRAVE_SEARCH_API_KEY", raising=False)
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", "http://127.0.0.1:9/res/v1")
    code, out, err = _run(["jaguar"], capsys)
    assert code == 1
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("evidence-fetcher: ")
    assert "BRAVE_SEARCH_API_KEY" in err


def test_missing_key_in_a_real_process_has_no_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAVE_SEARCH_")}
    env["BRAVE_SEARCH_BASE_URL"] = "http://127.0.0.1:9/res/v1"
    done = subprocess.run(
        [sys.executable, "-m", "evidence_bench.cli", "jaguar"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "BRAVE_SEARCH_API_KEY" in done.stderr


def test_brave_error_exits_1_with_one_line(
    brave: FakeBrave, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "wrong")
    code, out, err = _run(["jaguar"], capsys)
    assert code == 1
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("evidence-fetcher: ")
    assert "422" in err


def test_network_failure_exits_1_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "test")
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", f"http://127.0.0.1:{port}/res/v1")
    code, out, err = _run(["jaguar"], capsys)
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith("evidence-fetcher: ")
    assert f"127.0.0.1:{port}" in err


def test_invalid_query_exits_1(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["x" * 401], capsys)
    assert (code, out) == (1, "")
    assert "400" in err
    assert len(err.splitlines()) == 1
    assert brave.requests == []


# --- interactive ----------------------------------------------------------------------------


def _blocks(out: str) -> list[str]:
    """The output split at each prompt: [initial listing, answer to command 1, ...]."""
    return out.split("> ")


def test_interactive_transcript(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    commands = "relevant 3\nless 1 2\nshow\nexpand\ndone\n"
    code, out, err = _run(["--interactive", "jaguar"], capsys, stdin=commands)
    assert code == 0
    assert err == ""
    blocks = _blocks(out)
    assert len(blocks) == 6  # initial listing + one answer per command
    initial = _listing(blocks[0])
    assert sorted(url for _, url in initial) == sorted(url for _, url, _ in JAGUAR_FIRST)
    assert blocks[0].endswith("Type 'help' for commands, 'done' to finish.\n")
    assert blocks[1] == "recorded relevant: 3\n"
    assert blocks[2] == "recorded less: 1 2\n"

    show = blocks[3].splitlines()
    assert show[0] == "Updated ranking from accumulated feedback:"
    shown = _listing(blocks[3])
    assert sorted(shown) == sorted(initial)
    # the third result, the only one pulled, now leads; the two pushed ones trail it
    assert shown[0] == initial[2]

    expand = blocks[4].splitlines()
    refined = expand[0].removeprefix("Searching with refined query: ")
    assert expand[0] != refined
    assert refined.startswith("jaguar ")
    assert [request["q"] for request in brave.requests] == ["jaguar", refined]
    assert expand[1] == "Added 2 new results."
    assert expand[2] == "Updated ranking:"
    expanded = _listing(blocks[4])
    assert len(expanded) == 6
    assert {url for _, url in expanded} == {url for _, url, _ in JAGUAR_FIRST} | {
        "https://wildlife.example/jaguar-prey",
        "https://zoo.example/big-cats",
    }
    assert blocks[5] == ""


def test_expand_adding_one_result_is_singular(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["--interactive", "ocelot"], capsys, stdin="relevant 1\nexpand\n")
    assert code == 0
    assert "\nAdded 1 new result.\n" in _blocks(out)[2]


def test_expand_without_feedback_searches_the_query_again(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["--interactive", "ocelot"], capsys, stdin="expand\ndone\n")
    assert code == 0
    lines = _blocks(out)[1].splitlines()
    assert lines[:2] == ["Searching with refined query: ocelot", "Added 0 new results."]


def test_bad_input_is_reported_and_the_session_goes_on(
    brave: FakeBrave, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = "more 12\nless x\nfrobnicate 1\nunsure\n\nirrelevant 4\nHELP\ndone\n"
    code, out, err = _run(["--interactive", "jaguar"], capsys, stdin=commands)
    assert code == 0
    assert err == ""
    blocks = _blocks(out)
    assert blocks[1] == "no result at position 12; the list has 4\n"
    assert blocks[2] == "not a result number: 'x'\n"
    assert blocks[3] == "unknown command 'frobnicate'; type 'help' for the list\n"
    assert blocks[4] == "give the numbers of the results, e.g. 'more 1 3'\n"
    assert blocks[5] == ""  # an empty line just prompts again
    assert blocks[6] == "recorded irrelevant: 4\n"
    for command in ("more", "less", "relevant", "irrelevant", "unsure", "show", "expand", "done"):
        assert re.search(rf"^  {command}\b", blocks[7], flags=re.MULTILINE), command
    assert blocks[8] == ""
    assert [request["q"] for request in brave.requests] == ["jaguar"]


def test_end_of_input_ends_cleanly(brave: FakeBrave, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["--interactive", "jaguar"], capsys, stdin="more 1\n")
    assert code == 0
    assert err == ""
    assert out.endswith("> recorded more: 1\n> \n")


def test_failed_expand_keeps_the_session(
    brave: FakeBrave, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first search succeeds; the server then stops accepting the key, so expand gets 422.
    class Revoke:
        lines = io.StringIO("relevant 1\nexpand\nshow\ndone\n")

        def readline(self) -> str:
            brave.server.token = "rotated"
            return self.lines.readline()

    monkeypatch.setattr(sys, "stdin", Revoke())
    code = main(["--interactive", "jaguar"])
    out, err = capsys.readouterr()
    assert code == 0
    assert _blocks(out)[3].startswith("Updated ranking from accumulated feedback:\n")
    assert err.startswith("evidence-fetcher: ")
    assert "422" in err
    assert len(err.splitlines()) == 1
    assert len(brave.requests) == 2
