"""Discovery: Brave, ddgs, RSS/Atom feeds, and recorded discovery replayed without a request."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from evidence_bench.errors import ConfigurationError, DataError, ReplayMissError, RequestError
from evidence_bench.livefetch import (
    BraveDiscovery,
    Candidate,
    DdgsDiscovery,
    FailureReason,
    FeedDiscovery,
    RecordedDiscovery,
    RetrievalIntent,
    candidate_limit,
)
from evidence_bench.livefetch.discovery import recording_key
from evidence_bench.web.brave import BraveProvider
from tests.brave_bodies import brave_body, brave_result

DATA = Path(__file__).parent / "data" / "livefetch"

# Rows shaped like ddgs 9's answers (DDGS().news / DDGS().text), keys as it returns them.
NEWS_ROWS = [
    {
        "date": "2026-11-28T14:05:00+00:00",
        "title": "EU regulators open first <b>AI Act</b> enforcement case",
        "body": "The AI Office opened its first formal proceedings under the AI Act.",
        "url": "https://news.example.eu/ai-act-first-case",
        "image": "https://news.example.eu/img.jpg",
        "source": "Example EU News",
    },
    {
        "date": "2026-11-25T09:00:00+00:00",
        "title": "What the AI Act's general-purpose rules mean",
        "body": "A guide to the obligations for general-purpose AI models.",
        "url": "https://policy.example.org/gpai-guide?utm_source=ddg",
        "image": "",
        "source": "Example Policy",
    },
]
TEXT_ROWS = [
    {"title": "AI Act - Wikipedia-like", "href": "https://wiki.example.org/AI_Act", "body": "x"},
    {"title": "no url", "href": "", "body": "skipped"},
]


class FakeDDGS:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def news(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append(("news", query, kwargs))
        return NEWS_ROWS

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append(("text", query, kwargs))
        return TEXT_ROWS


def test_ddgs_news_rows_become_candidates() -> None:
    fake = FakeDDGS()
    intent = RetrievalIntent("EU AI Act enforcement", mode="news", max_results=5)
    candidates = DdgsDiscovery(client_factory=lambda: fake).discover(intent)
    assert candidates == [
        Candidate(
            url="https://news.example.eu/ai-act-first-case",
            title="EU regulators open first AI Act enforcement case",
            snippet="The AI Office opened its first formal proceedings under the AI Act.",
            published_at=datetime(2026, 11, 28, 14, 5, tzinfo=UTC),
            source="ddgs-news",
        ),
        Candidate(
            url="https://policy.example.org/gpai-guide?utm_source=ddg",
            title="What the AI Act's general-purpose rules mean",
            snippet="A guide to the obligations for general-purpose AI models.",
            published_at=datetime(2026, 11, 25, 9, 0, tzinfo=UTC),
            source="ddgs-news",
        ),
    ]
    (kind, query, kwargs) = fake.calls[0]
    # freshness_days 14 -> ddgs' "m" (a week is too short); 5 results -> 15 candidates.
    assert (kind, query, kwargs["timelimit"], kwargs["max_results"]) == (
        "news",
        "EU AI Act enforcement",
        "m",
        15,
    )


@pytest.mark.parametrize(
    ("days", "limit"), [(1, "d"), (7, "w"), (14, "m"), (365, "y"), (None, None)]
)
def test_ddgs_timelimit_covers_the_freshness_window(days: float | None, limit: str | None) -> None:
    fake = FakeDDGS()
    DdgsDiscovery(client_factory=lambda: fake).discover(RetrievalIntent("q", freshness_days=days))
    assert fake.calls[0][0] == "news" and fake.calls[0][2]["timelimit"] == limit


def test_ddgs_web_rows_without_a_url_are_skipped() -> None:
    intent = RetrievalIntent("AI Act", mode="web")
    candidates = DdgsDiscovery(client_factory=FakeDDGS).discover(intent)
    assert [c.url for c in candidates] == ["https://wiki.example.org/AI_Act"]


def test_a_ddgs_failure_is_a_request_error() -> None:
    class Failing:
        def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
            raise RuntimeError("Ratelimit: 202 from html.duckduckgo.com")

    with pytest.raises(RequestError, match="ddgs web search for 'q' failed: Ratelimit"):
        DdgsDiscovery(client_factory=Failing).discover(RetrievalIntent("q", mode="web"))


def test_brave_discovery_uses_the_brave_provider() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.params["count"] == "20"  # min(20, Brave's max page)
        results = [
            brave_result("Heat in slabs", "https://a.example.gov/heat", "About <b>heat</b>.",
                         page_age="2026-11-01T10:00:00"),
            brave_result("Other", "https://b.example.org/x", "Other text."),
        ]  # fmt: skip
        return httpx.Response(200, json=brave_body(results))

    client = httpx.Client(transport=httpx.MockTransport(handler))
    provider = BraveProvider("test-key", base_url="http://127.0.0.1:9/res/v1", http_client=client)
    candidates = BraveDiscovery(provider).discover(
        RetrievalIntent("heat slabs", mode="web", max_results=8)
    )
    assert [c.url for c in candidates] == ["https://a.example.gov/heat", "https://b.example.org/x"]
    assert candidates[0].snippet == "About heat."
    assert candidates[0].published_at == datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
    with pytest.raises(ConfigurationError, match="web only"):
        BraveDiscovery(provider).discover(RetrievalIntent("q", mode="news"))


RSS = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Example feed</title>
<item><title>AI Act enforcement begins</title><link>https://feed.example.eu/1</link>
<description>The enforcement of the AI Act begins.</description>
<pubDate>Fri, 27 Nov 2026 08:00:00 GMT</pubDate></item>
<item><title>Football results</title><link>https://feed.example.eu/2</link>
<description>Scores of the weekend.</description></item>
<item><title>AI Act guide</title><link>https://feed.example.eu/3</link>
<description>Enforcement, fines and the AI Act's timeline explained.</description>
<pubDate>Mon, 23 Nov 2026 12:30:00 +0100</pubDate></item>
</channel></rss>"""
ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom example</title>
<entry><title>AI Act: the Commission's enforcement powers</title>
<link href="https://atom.example.org/a"/><id>a</id>
<updated>2026-11-29T10:00:00Z</updated><summary>Powers of enforcement.</summary></entry>
</feed>"""


def _feeds(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/rss":
        return httpx.Response(200, headers={"Content-Type": "application/rss+xml"}, content=RSS)
    if request.url.path == "/atom":
        return httpx.Response(200, headers={"Content-Type": "application/atom+xml"}, content=ATOM)
    return httpx.Response(404)


def test_feed_entries_sharing_a_query_term_are_candidates_most_terms_first() -> None:
    feeds = ["https://f.test/rss", "https://f.test/atom", "https://f.test/missing"]
    discovery = FeedDiscovery(feeds, transport=httpx.MockTransport(_feeds))
    candidates = discovery.discover(RetrievalIntent("AI Act enforcement", mode="rss"))
    # Terms ai, act, enforc: entries 1 and 3 and the Atom one hold all three (feed order),
    # "Football results" none.
    assert [(c.url, c.published_at) for c in candidates] == [
        ("https://feed.example.eu/1", datetime(2026, 11, 27, 8, 0, tzinfo=UTC)),
        ("https://feed.example.eu/3", datetime(2026, 11, 23, 11, 30, tzinfo=UTC)),
        ("https://atom.example.org/a", datetime(2026, 11, 29, 10, 0, tzinfo=UTC)),
    ]
    assert [(f.url, f.reason) for f in discovery.failures] == [
        ("https://f.test/missing", FailureReason.HTTP_STATUS)
    ]


def test_rss_needs_a_feed() -> None:
    with pytest.raises(ConfigurationError, match="at least one feed"):
        FeedDiscovery([])


# --- recorded discovery ---------------------------------------------------------------------


def test_the_committed_fixture_replays_without_any_request() -> None:
    """tests/data/livefetch/ddgs_news.json was written by RecordedDiscovery recording
    DdgsDiscovery (over the ddgs-shaped rows above); replay needs no inner discovery."""
    recorded = RecordedDiscovery(DATA / "ddgs_news.json")
    intent = RetrievalIntent("EU AI Act enforcement", mode="news", max_results=5)
    candidates = recorded.discover(intent)
    assert [c.url for c in candidates] == [
        "https://news.example.eu/ai-act-first-case",
        "https://policy.example.org/gpai-guide?utm_source=ddg",
    ]
    assert candidates[0].published_at == datetime(2026, 11, 28, 14, 5, tzinfo=UTC)


def test_record_then_replay_gives_the_same_candidates(tmp_path: Path) -> None:
    path = tmp_path / "rec" / "discovery.json"
    fake = FakeDDGS()
    inner = DdgsDiscovery(client_factory=lambda: fake)
    intent = RetrievalIntent("EU AI Act enforcement", mode="news", max_results=5)
    recorder = RecordedDiscovery(path, inner, record_mode="new_episodes")
    first = recorder.discover(intent)
    again = recorder.discover(intent)  # held now: replayed, not searched
    assert len(fake.calls) == 1 and again == first
    replayed = RecordedDiscovery(path).discover(intent)
    assert replayed == first
    data = json.loads(path.read_text())
    assert data["recordings"][recording_key(intent)]["discovery"] == "ddgs"
    assert list(tmp_path.glob("rec/.*tmp")) == []  # atomic: no temporary file left


def test_the_committed_fixture_is_what_recording_writes(tmp_path: Path) -> None:
    path = tmp_path / "discovery.json"
    intent = RetrievalIntent("EU AI Act enforcement", mode="news", max_results=5)
    RecordedDiscovery(path, DdgsDiscovery(client_factory=FakeDDGS), record_mode="all").discover(
        intent
    )
    assert path.read_bytes() == (DATA / "ddgs_news.json").read_bytes()


def test_a_replay_miss_names_the_file_the_key_and_the_closest(tmp_path: Path) -> None:
    recorded = RecordedDiscovery(DATA / "ddgs_news.json")
    with pytest.raises(ReplayMissError) as caught:
        recorded.discover(RetrievalIntent("EU AI Act fines", mode="news", max_results=5))
    message = str(caught.value)
    assert "news:15:EU AI Act fines" in message
    assert str(DATA / "ddgs_news.json") in message
    assert "news:15:EU AI Act enforcement" in message and "record mode none" in message


def test_record_all_searches_again(tmp_path: Path) -> None:
    fake = FakeDDGS()
    recorder = RecordedDiscovery(
        tmp_path / "d.json", DdgsDiscovery(client_factory=lambda: fake), record_mode="all"
    )
    recorder.discover(RetrievalIntent("q"))
    recorder.discover(RetrievalIntent("q"))
    assert len(fake.calls) == 2


def test_no_api_key_reaches_a_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "sekrit-key-123")

    class Leaky:
        name = "leaky"

        def discover(self, intent: RetrievalIntent) -> list[Candidate]:
            return [Candidate(url="https://a.test/?key=sekrit-key-123", snippet="sekrit-key-123")]

    path = tmp_path / "d.json"
    RecordedDiscovery(path, Leaky(), record_mode="new_episodes").discover(RetrievalIntent("q"))
    text = path.read_text()
    assert "sekrit-key-123" not in text and "REDACTED-API-KEY" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot be read"),
        ('{"format": "other"}', "is not a evidence_bench.livefetch.discovery/1 file"),
        ('{"format": "evidence_bench.livefetch.discovery/1", "recordings": []}', "not an object"),
    ],
)
def test_a_bad_recording_is_one_line_naming_it(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "d.json"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as caught:
        RecordedDiscovery(path).discover(RetrievalIntent("q"))
    assert str(path) in str(caught.value)


def test_record_modes_are_a_closed_set() -> None:
    with pytest.raises(ConfigurationError, match="none, all, new_episodes"):
        RecordedDiscovery("x.json", record_mode="sometimes")
    with pytest.raises(ConfigurationError, match="needs an inner discovery"):
        RecordedDiscovery("x.json", record_mode="all")


def test_candidate_limit_oversamples_and_caps() -> None:
    assert candidate_limit(RetrievalIntent("q", max_results=1)) == 3
    assert candidate_limit(RetrievalIntent("q", max_results=8)) == 24
    assert candidate_limit(RetrievalIntent("q", max_results=50)) == 30


def test_feed_dates_do_not_depend_on_the_local_timezone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sydney is on summer time (UTC+11) in November, an hour off its standard offset:
    local-time arithmetic (mktime - timezone) would be an hour wrong there."""
    import time

    monkeypatch.setenv("TZ", "Australia/Sydney")
    time.tzset()
    try:
        discovery = FeedDiscovery(["https://f.test/rss"], transport=httpx.MockTransport(_feeds))
        (first, *_) = discovery.discover(RetrievalIntent("AI Act enforcement", mode="rss"))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert first.published_at == datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
