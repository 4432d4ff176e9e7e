"""The LiveFetch pipeline end to end over MockTransport pages: failures beside packets,
freshness against a fixed as_of, domain lists, the cache, quotes, clipping, the shipped
collections."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from evidence_bench.errors import ConfigurationError
from evidence_bench.livefetch import (
    Candidate,
    FailureReason,
    FeedDiscovery,
    LiveFetch,
    PacketSet,
    RetrievalIntent,
    StaticDiscovery,
)
from tests.livefetch_pages import COLLECTIONS, article_page, collection_docs

AS_OF = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
CLOCK = datetime(2026, 12, 1, 9, 15, tzinfo=UTC)
HTML = {"Content-Type": "text/html; charset=utf-8"}


def _paragraphs(topic: str) -> list[str]:
    return [
        f"This report is about {topic} and the measurements made of it in the tunnel.",
        f"The {topic} results agree with the theory within the scatter of the data.",
        "A final paragraph closes the article with a summary of the conclusions drawn.",
    ]


class Site:
    """Pages by URL, served through a MockTransport that counts requests."""

    def __init__(self) -> None:
        self.pages: dict[str, Callable[[], httpx.Response]] = {}
        self.requests: list[str] = []

    def article(self, url: str, topic: str, published: str | None) -> None:
        """A page on ``topic``; its last paragraph names the URL, so no two texts match."""
        paragraphs = [*_paragraphs(topic), f"This page was published at {url} for readers."]
        body = article_page(topic.title(), paragraphs, published=published)
        self.pages[url] = lambda: httpx.Response(200, headers=HTML, text=body)

    def raw(self, url: str, response: Callable[[], httpx.Response]) -> None:
        self.pages[url] = response

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        self.requests.append(url)
        if url not in self.pages:
            return httpx.Response(404)
        return self.pages[url]()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def _run(
    site: Site,
    urls: list[str],
    intent: RetrievalIntent,
    *,
    cache_path: Path | None = None,
    live: type[LiveFetch] = LiveFetch,
    **options: object,
) -> PacketSet:
    candidates = [Candidate(url=url) for url in urls]
    with live(
        StaticDiscovery(candidates),
        cache_path=cache_path,
        as_of=AS_OF,
        clock=lambda: CLOCK,
        transport=site.transport(),
        **options,  # type: ignore[arg-type]
    ) as lf:
        return lf.run_sync(intent)


def test_the_class_attributes_bound_every_run() -> None:
    assert LiveFetch.MAX_CONCURRENCY == 6
    assert LiveFetch.TIMEOUT_S == 15.0
    assert LiveFetch.MAX_CHARS == 12000
    assert LiveFetch.FRESHNESS_HALF_LIFE == 7.0


def test_the_freshness_filter_uses_as_of_not_the_clock() -> None:
    site = Site()
    site.article("https://a.test/13-days", "heat transfer", "2026-11-18T00:00:00+00:00")
    site.article("https://a.test/15-days", "heat transfer", "2026-11-16T00:00:00+00:00")
    site.article("https://a.test/undated", "heat transfer", None)
    site.article("https://a.test/future", "heat transfer", "2026-12-05T00:00:00+00:00")
    urls = list(site.pages)
    packets = _run(site, urls, RetrievalIntent("heat transfer", freshness_days=14))
    assert packets.stale == ("https://a.test/15-days",)
    fresh = {packet.url: packet.score_breakdown.F for packet in packets}
    # F = 2^(-age/7): 13 days -> 2^(-13/7) = e^(-1.287273) = 0.276022; undated -> the
    # neutral 0.5; a date after as_of counts as age 0 -> 1.0.
    assert fresh == pytest.approx(
        {"https://a.test/13-days": 0.276022, "https://a.test/undated": 0.5,
         "https://a.test/future": 1.0},
        abs=1e-6,
    )  # fmt: skip
    unfiltered = _run(site, urls, RetrievalIntent("heat transfer", freshness_days=None))
    assert len(unfiltered) == 4 and unfiltered.stale == ()
    aged = {p.url: p.score_breakdown.F for p in unfiltered}
    assert aged["https://a.test/15-days"] == pytest.approx(2 ** (-15 / 7))


def test_failures_are_recorded_beside_the_packets_in_candidate_order() -> None:
    site = Site()
    site.article("https://ok.test/good", "shock waves", "2026-11-30T00:00:00Z")

    def answer(content_type: str, body: bytes) -> Callable[[], httpx.Response]:
        return lambda: httpx.Response(200, headers={"Content-Type": content_type}, content=body)

    site.raw("https://bad.test/pdf", answer("application/pdf", b"%PDF"))
    site.raw("https://bad.test/binary", answer("text/html", bytes(range(256)) * 8))
    site.raw("https://bad.test/empty", answer("text/html", b"<html><body></body></html>"))
    site.raw("https://bad.test/gone", lambda: httpx.Response(410))
    site.raw("https://bad.test/huge", answer("text/html", b"<p>" + b"x" * 5000))

    def refuse() -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    site.raw("https://bad.test/down", refuse)
    urls = [*list(site.pages), "ftp://bad.test/file"]
    packets = _run(site, urls, RetrievalIntent("shock waves"), max_bytes=4096)
    assert [packet.url for packet in packets] == ["https://ok.test/good"]
    assert [(f.url, f.reason) for f in packets.failures] == [
        ("https://bad.test/pdf", FailureReason.NOT_HTML),
        ("https://bad.test/binary", FailureReason.UNDECODABLE),
        ("https://bad.test/empty", FailureReason.NO_TEXT),
        ("https://bad.test/gone", FailureReason.HTTP_STATUS),
        ("https://bad.test/huge", FailureReason.TOO_LARGE),
        ("https://bad.test/down", FailureReason.NETWORK),
        ("ftp://bad.test/file", FailureReason.INVALID_URL),
    ]


def test_a_slow_page_times_out_and_the_rest_arrive() -> None:
    site = Site()
    site.article("https://ok.test/good", "wing lift", "2026-11-30T00:00:00Z")

    def drip() -> Iterator[bytes]:
        while True:
            time.sleep(0.02)
            yield b"<"

    def slow(request: httpx.Request) -> httpx.Response:
        if request.url.host == "slow.test":  # a body that never ends
            return httpx.Response(200, headers=HTML, content=drip())
        return site.handle(request)

    class Quick(LiveFetch):
        TIMEOUT_S = 0.3

    with Quick(
        StaticDiscovery([Candidate("https://slow.test/x"), Candidate("https://ok.test/good")]),
        cache_path=None,
        as_of=AS_OF,
        transport=httpx.MockTransport(slow),
    ) as lf:
        packets = lf.run_sync(RetrievalIntent("wing lift"))
    assert [p.url for p in packets] == ["https://ok.test/good"]
    assert [(f.url, f.reason) for f in packets.failures] == [
        ("https://slow.test/x", FailureReason.TIMEOUT)
    ]


def test_allow_and_deny_domains_cover_subdomains_on_label_boundaries() -> None:
    site = Site()
    hosts = ["nasa.gov", "www.nasa.gov", "notnasa.gov", "ntrs.nasa.gov", "example.org"]
    for host in hosts:
        site.article(f"https://{host}/page", "boundary layer", "2026-11-30T00:00:00Z")
    urls = list(site.pages)
    allowed = _run(site, urls, RetrievalIntent("boundary layer", allow_domains=("NASA.gov",)))
    assert sorted(p.domain for p in allowed) == ["nasa.gov", "ntrs.nasa.gov", "www.nasa.gov"]
    assert allowed.excluded == ("https://notnasa.gov/page", "https://example.org/page")
    denied = _run(
        site,
        urls,
        RetrievalIntent(
            "boundary layer", allow_domains=("nasa.gov",), deny_domains=("ntrs.nasa.gov",)
        ),
    )
    assert sorted(p.domain for p in denied) == ["nasa.gov", "www.nasa.gov"]
    assert len(site.requests) == 3 + 2  # excluded candidates are never fetched


def test_a_cached_page_within_its_age_makes_no_request(tmp_path: Path) -> None:
    site = Site()
    site.article("https://a.test/1", "heat transfer", "2026-11-30T00:00:00Z")
    site.article("https://a.test/2", "heat conduction", "2026-11-29T00:00:00Z")
    cache = tmp_path / "lf.sqlite"
    urls = list(site.pages)
    first = _run(site, urls, RetrievalIntent("heat"), cache_path=cache)
    assert len(site.requests) == 2
    second = _run(site, urls, RetrievalIntent("heat"), cache_path=cache)
    assert len(site.requests) == 2  # no new request
    assert second.packets == first.packets
    assert all(p.fetched_at == CLOCK for p in second)
    expired = _run(
        site, urls, RetrievalIntent("heat"), cache_path=cache, cache_max_age=timedelta(0)
    )
    assert len(site.requests) == 4 and len(expired) == 2


def test_packets_are_canonical_clipped_quoted_and_scored() -> None:
    site = Site()
    site.article("https://www.example.gov/report", "supersonic flutter", "2026-11-24T00:00:00Z")

    class Short(LiveFetch):
        MAX_CHARS = 120

    intent = RetrievalIntent("supersonic flutter")
    url = "https://WWW.example.gov/report/?utm_source=feed#section"
    (packet,) = _run(site, [url, "https://www.example.gov/report"], intent, live=Short)
    assert packet.url == "https://www.example.gov/report"
    assert len(site.requests) == 1  # two spellings of one page, fetched once
    assert packet.domain == "www.example.gov" and packet.title == "Supersonic Flutter"
    assert len(packet.text) <= 120 and packet.text.startswith("Supersonic Flutter")
    assert packet.published_at == datetime(2026, 11, 24, tzinfo=UTC)
    assert packet.fetched_at == CLOCK
    assert packet.quotes and all(quote in packet.text for quote in packet.quotes)
    r, f, t, d = packet.score_breakdown
    assert t == 0.9 and d == 0.0  # .gov's trust prior; nothing ranked above it
    assert f == pytest.approx(2 ** (-7 / 7))  # 7 days before as_of: half
    assert packet.score == pytest.approx(0.55 * r + 0.25 * f + 0.20 * t)
    import hashlib

    full = _run(site, [url], intent)[0]
    assert packet.content_sha256 == full.content_sha256
    assert full.content_sha256 == hashlib.sha256(full.text.encode()).hexdigest()


def test_no_quotes_when_not_asked_and_at_most_max_results() -> None:
    site = Site()
    for n in range(6):
        site.article(f"https://a{n}.test/p", f"wing stall case {n}", "2026-11-30T00:00:00Z")
    packets = _run(
        site, list(site.pages), RetrievalIntent("wing stall", max_results=4, need_quotes=False)
    )
    assert len(packets) == 4 and all(p.quotes == () for p in packets)


def test_a_mirror_of_the_same_text_is_one_packet() -> None:
    site = Site()
    body = article_page("Wing stall", _paragraphs("wing stall"))
    for url in ("https://a.test/p", "https://mirror.test/p"):
        site.raw(url, lambda: httpx.Response(200, headers=HTML, text=body))
    packets = _run(site, list(site.pages), RetrievalIntent("wing stall"))
    assert [p.url for p in packets] == ["https://a.test/p"]


def test_run_is_awaitable_and_run_sync_refuses_a_running_loop() -> None:
    site = Site()
    site.article("https://a.test/p", "wing stall", "2026-11-30T00:00:00Z")

    async def go() -> PacketSet:
        async with LiveFetch(
            StaticDiscovery([Candidate("https://a.test/p")]),
            cache_path=None,
            as_of=AS_OF,
            transport=site.transport(),
        ) as lf:
            with pytest.raises(ConfigurationError, match=r"await lf\.run"):
                lf.run_sync(RetrievalIntent("wing"))
            return await lf.run(RetrievalIntent("wing"))

    assert [p.url for p in asyncio.run(go())] == ["https://a.test/p"]


def test_a_closed_livefetch_refuses_to_run() -> None:
    lf = LiveFetch(StaticDiscovery([]), cache_path=None)
    with lf:
        assert len(lf.run_sync(RetrievalIntent("q"))) == 0
    with pytest.raises(ConfigurationError, match="closed"):
        lf.run_sync(RetrievalIntent("q"))


def test_feed_failures_join_the_page_failures() -> None:
    rss = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>f</title>
    <item><title>Wing stall report</title><link>https://a.test/p</link></item>
    </channel></rss>"""

    def feeds(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/rss":
            return httpx.Response(200, content=rss)
        return httpx.Response(500)

    site = Site()
    site.article("https://a.test/p", "wing stall", None)
    discovery = FeedDiscovery(
        ["https://f.test/rss", "https://f.test/broken"], transport=httpx.MockTransport(feeds)
    )
    with LiveFetch(discovery, cache_path=None, as_of=AS_OF, transport=site.transport()) as lf:
        packets = lf.run_sync(RetrievalIntent("wing stall", mode="rss"))
    assert [p.url for p in packets] == ["https://a.test/p"]
    assert [(f.url, f.reason) for f in packets.failures] == [
        ("https://f.test/broken", FailureReason.HTTP_STATUS)
    ]


@pytest.mark.parametrize("collection", ["cranfield", "cacm"])
def test_a_shipped_collection_served_as_pages_comes_back_as_its_documents(
    collection: str,
) -> None:
    """The first query's judged documents, served as boilerplate pages at their canonical
    collection URLs: every packet is keyed by that URL (so qrels apply) and holds its
    document's text, whole."""
    lines = (COLLECTIONS / collection / "queries.jsonl").read_text().splitlines()
    queries = [json.loads(line) for line in lines]
    qrels = (COLLECTIONS / collection / "qrels.tsv").read_text().splitlines()[1:]
    query = queries[0]
    judged = [line.split("\t")[1] for line in qrels if line.split("\t")[0] == query["_id"]]
    docs = {doc["_id"]: doc for doc in collection_docs(collection, 10_000)}
    wanted = [doc_id for doc_id in judged if doc_id in docs][:8]
    assert len(wanted) >= 3
    site = Site()
    for doc_id in wanted:
        doc = docs[doc_id]
        body = article_page(doc["title"], [doc["text"]], published="2026-11-20T00:00:00Z")
        url = f"https://{collection}.evidence-bench.test/doc/{doc_id}"
        site.raw(url, lambda body=body: httpx.Response(200, headers=HTML, text=body))
    packets = _run(site, list(site.pages), RetrievalIntent(query["text"][:300], max_results=8))
    assert sorted(p.url for p in packets) == sorted(site.pages)
    for packet in packets:
        doc = docs[packet.url.rsplit("/", 1)[1]]
        assert " ".join(doc["text"].split())[:2000] in " ".join(packet.text.split())
        assert all(quote in packet.text for quote in packet.quotes)
    assert packets.failures == ()
