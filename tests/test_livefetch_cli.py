"""The commands: ``python -m evidence_bench livefetch`` and ``evidence-fetcher --fetch``,
against pages (and a Brave-shaped search) served on 127.0.0.1 only."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evidence_bench import cli
from evidence_bench.livefetch import Candidate, RecordedDiscovery, RetrievalIntent, StaticDiscovery
from evidence_bench.livefetch._cli import _render, main
from evidence_bench.livefetch.records import (
    EvidencePacket,
    FailureReason,
    FetchFailure,
    PacketSet,
    ScoreBreakdown,
)
from tests.brave_bodies import brave_body, brave_result
from tests.livefetch_pages import article_page

ROOT = Path(__file__).resolve().parents[1]

PAGES = {
    "/news/ai-act-case": (
        "EU opens first AI Act enforcement case",
        [
            "The European AI Office opened its first enforcement case under the AI Act.",
            "The case concerns a general-purpose model provider and its transparency duties.",
            "Fines under the regulation can reach seven percent of worldwide turnover.",
        ],
        "2026-11-28T14:05:00+00:00",
    ),
    "/news/old": (
        "AI Act agreed",
        ["Negotiators agreed the final text of the AI Act after long talks in Brussels."],
        "2025-12-08T23:00:00+00:00",
    ),
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path.startswith("/res/v1/web/search"):
            results = [
                brave_result(title, f"{base}{path}", paragraphs[0], page_age=date[:19])
                for path, (title, paragraphs, date) in PAGES.items()
            ] + [brave_result("Missing", f"{base}/missing", "A page that is gone.")]
            self._send(200, "application/json", json.dumps(brave_body(results)).encode())
        elif self.path in PAGES:
            title, paragraphs, date = PAGES[self.path]
            self._send(
                200,
                "text/html; charset=utf-8",
                article_page(title, paragraphs, published=date).encode(),
            )
        else:
            self._send(404, "text/html", b"<html><body>Not found</body></html>")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def recording(tmp_path: Path, server: str) -> Path:
    """A recorded news discovery of the local pages (and one that is missing)."""
    path = tmp_path / "discovery.json"
    urls = [f"{server}{p}" for p in PAGES] + [f"{server}/missing"]
    inner = StaticDiscovery([Candidate(url=url, source="ddgs-news") for url in urls])
    intent = RetrievalIntent("EU AI Act enforcement", mode="news", max_results=5)
    RecordedDiscovery(path, inner, record_mode="new_episodes").discover(intent)
    return path


def _args(recording: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "EU AI Act enforcement", "--mode", "news", "--max-results", "5",
        "--discovery-file", str(recording), "--cache", str(tmp_path / "lf.sqlite"),
        "--as-of", "2026-12-01", "--allow-private", *extra,
    ]  # fmt: skip


def test_livefetch_json_prints_packets_and_failures(
    recording: Path, tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(recording, tmp_path, "--format", "json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["query"], out["mode"]) == ("EU AI Act enforcement", "news")
    (packet,) = out["packets"]
    assert packet["url"] == f"{server}/news/ai-act-case"
    assert packet["published_at"] == "2026-11-28T14:05:00+00:00"
    assert packet["title"] == "EU opens first AI Act enforcement case"
    assert set(packet["score_breakdown"]) == {"R", "F", "T", "D"}
    assert packet["quotes"] and all(quote in packet["text"] for quote in packet["quotes"])
    assert packet["quotes"][0] == (
        "The European AI Office opened its first enforcement case under the AI Act."
    )
    assert out["failures"] == [
        {"url": f"{server}/missing", "reason": "http_status", "detail": "HTTP 404"}
    ]
    assert out["stale"] == [f"{server}/news/old"]  # 358 days before 2026-12-01 > 14


def test_livefetch_text_shows_dates_quotes_and_failures(
    recording: Path, tmp_path: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(recording, tmp_path, "--freshness-days", "none")) == 0
    out = capsys.readouterr().out
    assert "1. EU opens first AI Act enforcement case" in out
    assert "published 2026-11-28 14:05 UTC" in out
    assert "   > The European AI Office opened its first enforcement case" in out
    assert "2. AI Act agreed" in out and "published 2025-12-08 23:00 UTC" in out
    assert f"   {server}/missing: http_status (HTTP 404)" in out


def test_livefetch_replays_from_the_cache_without_the_server(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(recording, tmp_path, "--format", "json")) == 0
    first = json.loads(capsys.readouterr().out)
    # Second run: the pages come from the cache; only the missing page is asked again.
    assert main(_args(recording, tmp_path, "--format", "json")) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["packets"] == first["packets"]


def test_a_replay_miss_is_one_line_and_exit_1(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(recording, tmp_path)
    args[0] = "something never recorded"
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("python -m evidence_bench livefetch: no recorded discovery for")
    assert str(recording) in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["q", "--max-results", "0"], "must be from 1 to 50"),
        (["q", "--mode", "video"], "invalid choice: 'video'"),
        (["q", "--freshness-days", "-3"], "must be > 0 days"),
        (["q", "--as-of", "yesterday"], "not an ISO-8601 date"),
        (["q", "--feed", "https://f.test/rss"], "--feed needs --mode rss"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_harness_dispatches_livefetch() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evidence_bench", "livefetch", "--help"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stdout.startswith("usage: python -m evidence_bench livefetch")


# --- evidence-fetcher --fetch -----------------------------------------------------------------


@pytest.fixture
def brave_env(server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "test-key")
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", f"{server}/res/v1")
    monkeypatch.chdir(tmp_path)  # the default cache, livefetch.sqlite, lands here
    return server


def test_evidence_fetcher_fetch_shows_each_results_date_and_quotes(
    brave_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["EU AI Act enforcement", "--fetch", "--allow-private", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    blocks = out.split("\n")
    assert "   date: 2026-11-28" in blocks
    assert "   date: 2025-12-08" in blocks
    assert (
        "   > The European AI Office opened its first enforcement case under the AI Act." in blocks
    )
    assert "   page not read: http_status (HTTP 404)" in blocks
    assert (tmp_path / "livefetch.sqlite").exists()


def test_evidence_fetcher_fetch_json_adds_date_quotes_and_failure(
    brave_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(["EU AI Act enforcement", "--fetch", "--allow-private", "--format", "json"]) == 0
    )
    rows = {row["url"].rsplit("/", 1)[1]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["ai-act-case"]["published_at"] == "2026-11-28T14:05:00+00:00"
    assert rows["ai-act-case"]["quotes"][0].startswith("The European AI Office")
    assert rows["ai-act-case"]["fetch_failure"] is None
    assert rows["missing"]["fetch_failure"]["reason"] == "http_status"


def test_evidence_fetcher_fetch_caches_where_cache_says_and_reads_it_back(
    brave_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cache = tmp_path / "elsewhere" / "pages.sqlite"
    cache.parent.mkdir()
    assert (
        cli.main(["EU AI Act enforcement", "--fetch", "--allow-private", "--cache", str(cache)])
        == 0
    )
    first = capsys.readouterr().out
    assert cache.exists() and not (tmp_path / "livefetch.sqlite").exists()
    with sqlite3.connect(cache) as db:
        urls = {url.rsplit("/", 1)[1] for (url,) in db.execute("SELECT url FROM docs")}
    assert "ai-act-case" in urls and "missing" not in urls  # a failed page is not cached
    assert (
        cli.main(["EU AI Act enforcement", "--fetch", "--allow-private", "--cache", str(cache)])
        == 0
    )
    assert capsys.readouterr().out == first


def test_evidence_fetcher_cache_without_fetch_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["q", "--cache", "x.sqlite"]) == 2
    assert cli.main(["q", "--allow-private"]) == 2
    assert "--cache works only with --fetch" in capsys.readouterr().err


def test_evidence_fetcher_fetch_and_interactive_are_exclusive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["q", "--fetch", "--interactive"]) == 2
    assert "--fetch works only without --interactive" in capsys.readouterr().err


def test_livefetch_text_prints_no_control_characters_of_a_page() -> None:
    """A page's title, quotes and address and a failure's detail are the web's text: printed
    with each control character as "?", so a page cannot drive the terminal."""
    packet = EvidencePacket(
        url="https://page.example/\x1b[2J",
        domain="page.example",
        title="Heat \x1b]8;;https://evil.example\x07transfer",
        text="",
        published_at=None,
        fetched_at=datetime(2026, 1, 1, tzinfo=UTC),
        score=0.5,
        score_breakdown=ScoreBreakdown(0.5, 1.0, 0.5, 1.0),
        content_sha256="0" * 64,
        quotes=("slabs heat \x1b[1A\x1b[2Kfast\x9b",),
    )
    failure = FetchFailure("https://gone.example/", FailureReason.HTTP_STATUS, "500 \x1b[5m")
    out = io.StringIO()
    _render(PacketSet(packets=(packet,), failures=(failure,)), out)
    assert out.getvalue() == (
        "1. Heat ?]8;;https://evil.example?transfer\n"
        "   https://page.example/?[2J\n"
        "   published no date · score 0.500 (R 0.50 F 1.00 T 0.50 D 1.00)\n"
        "   > slabs heat ?[1A?[2Kfast?\n"
        "\n"
        "Not fetched (1):\n"
        "   https://gone.example/: http_status (500 ?[5m)\n"
    )


def test_evidence_fetcher_fetch_says_why_when_every_page_failed(
    brave_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PacketSet without packets is falsy (its length): when every page failed, the
    listing was the one without --fetch, no reason said, and the JSON had no fetch_failure."""

    def all_failed(query: str, results: Any, cache: str, **options: Any) -> PacketSet:
        failures = tuple(
            FetchFailure(item.url, FailureReason.TIMEOUT, "no answer in 15 s") for item in results
        )
        return PacketSet(packets=(), failures=failures)

    monkeypatch.setattr(cli, "_fetch_pages", all_failed)
    assert cli.main(["EU AI Act enforcement", "--fetch", "--allow-private", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("   page not read: timeout (no answer in 15 s)") == 2
    assert (
        cli.main(
            [
                "EU AI Act enforcement",
                "--fetch",
                "--allow-private",
                "--limit",
                "2",
                "--format",
                "json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [row["fetch_failure"]["reason"] for row in rows] == ["timeout", "timeout"]
