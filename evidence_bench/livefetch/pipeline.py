"""LiveFetch: evidence packets for an intent, from discovery to quotes.

The stages, in order::

    discover -> canonicalize, dedupe, allow/deny domains -> cache or fetch -> extract
             -> freshness filter (against as_of) -> score (R, F, T, D) -> top max_results
             -> quotes

Scoring is :class:`~evidence_bench.engine.livefetch.LiveFetchRanker` over the extracted
text. A candidate that fails (fetch, decode, extraction) is a
:class:`~evidence_bench.livefetch.records.FetchFailure` beside the packets, never an error
of the batch; a page's extraction runs in a child process within what its request left of
``TIMEOUT_S`` (:mod:`evidence_bench.web.bounded`). ``as_of`` and ``clock`` are injectable,
so a run against recorded pages reproduces.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import httpx

from evidence_bench.engine.livefetch import LiveFetchRanker, domain_tier
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence, canonical_url
from evidence_bench.livefetch.cache import DEFAULT_CACHE_PATH, CachedDoc, PageCache
from evidence_bench.livefetch.discovery import (
    BraveDiscovery,
    DdgsDiscovery,
    Discovery,
    FeedDiscovery,
)
from evidence_bench.livefetch.fetch import (
    MAX_BYTES,
    MAX_CONCURRENCY,
    MAX_REDIRECTS,
    PER_HOST,
    USER_AGENT,
    PageFetcher,
)
from evidence_bench.livefetch.quotes import quotes_for
from evidence_bench.livefetch.records import (
    Candidate,
    EvidencePacket,
    FailureReason,
    FetchFailure,
    Mode,
    PacketSet,
    RetrievalIntent,
    as_utc,
)
from evidence_bench.web.bounded import read_page_bounded
from evidence_bench.web.fetch import url_host
from evidence_bench.web.guard import OPEN_WEB, AddressPolicy
from evidence_bench.web.page_text import MAX_CHARS, clip_text, require_pages

__all__ = ["LiveFetch", "default_discovery"]

_SECONDS_PER_DAY = 86400.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _host(url: str) -> str:
    return url_host(url).rstrip(".")


def default_discovery(
    intent: RetrievalIntent, feeds: Sequence[str] = (), *, policy: AddressPolicy = OPEN_WEB
) -> Discovery:
    """Brave for web when ``BRAVE_SEARCH_API_KEY`` is set, else ddgs (keyless); ddgs for
    news; the given feeds for rss (fetched under ``policy``)."""
    if intent.mode is Mode.RSS:
        return FeedDiscovery(feeds, policy=policy)
    if intent.mode is Mode.WEB and os.environ.get("BRAVE_SEARCH_API_KEY", "").strip():
        return BraveDiscovery()
    return DdgsDiscovery()


def _admitted(intent: RetrievalIntent, url: str) -> str | None:
    """Why ``url``'s host is off the intent's domain lists, or None (checked on the
    candidate and on every redirect hop)."""
    host = _host(url)
    tier = domain_tier(host, intent.allow_domains, intent.deny_domains)
    return (None, f"{host} is not on the allow list", f"{host} is on the deny list")[tier]


def _probe(host: str) -> Evidence:
    """A result on ``host``, for its trust T."""
    return Evidence(title="", url=f"https://{host}/", snippet="", source="livefetch", domain=host)


_READ_DETAIL = {
    FailureReason.UNDECODABLE: "no text encoding fits",
    FailureReason.NO_TEXT: "no main text found",
}


@dataclass(frozen=True, slots=True)
class _Page:
    """A candidate with its page: fetched now or read from the cache; ``hosts``: every
    host its redirects passed through (the last served the text)."""

    candidate: Candidate
    doc: CachedDoc
    hosts: tuple[str, ...]


class LiveFetch:
    """The LiveFetch pipeline. ``with LiveFetch() as lf: packets = lf.run_sync(intent)``,
    or ``await lf.run(intent)`` inside an event loop.

    ``discovery`` defaults to :func:`default_discovery` per intent (``feeds`` for mode
    rss). ``cache_path=None`` disables the SQLite cache; a cached page younger than
    ``cache_max_age`` is used without a request. ``transport`` replaces the guarded
    network transport for page fetches (``httpx.MockTransport`` in tests). ``policy``: the
    destination policy of every page and feed request; the default refuses loopback,
    private and link-local addresses (``AddressPolicy(allow_private=True)`` for a server of
    one's own). The class attributes bound every run; a subclass may change them.
    """

    #: Page requests in flight at once (overall; ``per_host`` bounds each host).
    MAX_CONCURRENCY: ClassVar[int] = MAX_CONCURRENCY
    #: Seconds for a whole page: its request (connect, headers and body) and its extraction
    #: together (waiting for a free connection or extraction slot not counted).
    TIMEOUT_S: ClassVar[float] = 15.0
    #: A packet's text is the extracted text clipped to this many characters.
    MAX_CHARS: ClassVar[int] = MAX_CHARS
    #: Freshness F halves every this many days of age before ``as_of``.
    FRESHNESS_HALF_LIFE: ClassVar[float] = 7.0

    def __init__(
        self,
        discovery: Discovery | None = None,
        *,
        feeds: Sequence[str] = (),
        cache_path: str | Path | None = DEFAULT_CACHE_PATH,
        cache_max_age: timedelta = timedelta(days=1),
        as_of: datetime | None = None,
        clock: Callable[[], datetime] = _utcnow,
        transport: httpx.BaseTransport | None = None,
        ranker: LiveFetchRanker | None = None,
        per_host: int = PER_HOST,
        max_redirects: int = MAX_REDIRECTS,
        max_bytes: int = MAX_BYTES,
        user_agent: str = USER_AGENT,
        policy: AddressPolicy = OPEN_WEB,
    ) -> None:
        require_pages("LiveFetch")
        self.discovery = discovery
        self.policy = policy
        self.feeds = tuple(feeds)
        self.cache = (
            PageCache(cache_path, max_age=cache_max_age) if cache_path is not None else None
        )
        self.as_of = as_utc(as_of) if as_of is not None else None
        self._clock = clock
        self._ranker = ranker
        self._fetcher = functools.partial(
            PageFetcher, max_concurrency=self.MAX_CONCURRENCY, timeout_s=self.TIMEOUT_S,
            transport=transport, per_host=per_host, max_redirects=max_redirects,
            max_bytes=max_bytes, user_agent=user_agent, policy=policy,
        )  # fmt: skip
        self._closed = False

    def __repr__(self) -> str:
        return f"LiveFetch(discovery={self.discovery!r}, cache={self.cache!r})"

    # -- lifetime

    def __enter__(self) -> LiveFetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LiveFetch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the cache's connections and refuse further runs (each run opens and
        closes its own HTTP client)."""
        self._closed = True
        if self.cache is not None:
            self.cache.close()

    # -- running

    def run_sync(self, intent: RetrievalIntent) -> PacketSet:
        """:meth:`run` in a new event loop; inside a running loop, await :meth:`run`."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(intent))
        raise ConfigurationError(
            "LiveFetch.run_sync was called inside a running event loop; await lf.run(intent)"
        )

    async def run(self, intent: RetrievalIntent) -> PacketSet:
        """Packets for ``intent``, best first, and the candidates that failed."""
        if self._closed:
            raise ConfigurationError("this LiveFetch is closed; open a new one")
        now = as_utc(self._clock())
        as_of = self.as_of or now
        discovery = self.discovery or default_discovery(intent, self.feeds, policy=self.policy)
        found = await asyncio.to_thread(discovery.discover, intent)
        failures: list[FetchFailure] = list(getattr(discovery, "failures", ()))
        candidates, excluded = self._admit(intent, found)
        with (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="livefetch-extract") as pool,
            ThreadPoolExecutor(self.MAX_CONCURRENCY, thread_name_prefix="livefetch-fetch") as io,
            self._fetcher(admit=functools.partial(_admitted, intent)) as fetcher,
        ):
            outcomes = await asyncio.gather(
                *(self._page(candidate, fetcher, pool, io, now) for candidate in candidates)
            )
        pages: list[_Page] = []
        stale: list[str] = []
        seen_content: set[str] = set()
        for outcome in outcomes:
            if isinstance(outcome, FetchFailure):
                failures.append(outcome)
                continue
            if outcome.doc.content_sha256 in seen_content:
                continue  # the same text under another URL: a mirror adds nothing
            seen_content.add(outcome.doc.content_sha256)
            if self._too_old(intent, outcome, as_of):
                stale.append(outcome.doc.url)
                continue
            pages.append(outcome)
        packets = self._score(intent, pages, as_of)
        return PacketSet(
            packets=tuple(packets),
            failures=tuple(failures),
            stale=tuple(stale),
            excluded=tuple(excluded),
        )

    # -- stages

    def _admit(
        self, intent: RetrievalIntent, found: Sequence[Candidate]
    ) -> tuple[list[Candidate], list[str]]:
        """Canonical URLs, first occurrence kept; hosts off the allow list or on the deny
        list (an entry covers its subdomains) are excluded."""
        kept: list[Candidate] = []
        excluded: list[str] = []
        seen: set[str] = set()
        for candidate in found:
            url = canonical_url(candidate.url)
            if url in seen:
                continue
            seen.add(url)
            if _admitted(intent, url) is not None:
                excluded.append(url)
                continue
            kept.append(dataclasses.replace(candidate, url=url))
        return kept, excluded

    async def _page(
        self,
        candidate: Candidate,
        fetcher: PageFetcher,
        pool: ThreadPoolExecutor,
        io: ThreadPoolExecutor,
        now: datetime,
    ) -> _Page | FetchFailure:
        loop = asyncio.get_running_loop()
        cache = self.cache
        if cache is not None:
            hit = await loop.run_in_executor(
                None, functools.partial(cache.get, candidate.url, now=now)
            )
            if hit is not None:
                return _Page(candidate, hit, (_host(candidate.url),))
        fetched = await loop.run_in_executor(io, fetcher.fetch, candidate.url)
        if isinstance(fetched, FetchFailure):
            return fetched
        page = await loop.run_in_executor(
            pool,
            functools.partial(
                read_page_bounded,
                fetched.body,
                url=fetched.final_url,
                content_type=fetched.content_type,
                timeout_s=self.TIMEOUT_S - fetched.elapsed_s,
            ),
        )
        if page is FailureReason.TIMEOUT:
            detail = f"extraction ran past the page's {self.TIMEOUT_S:g} s"
            return FetchFailure(candidate.url, page, detail)
        if isinstance(page, FailureReason):
            return FetchFailure(candidate.url, page, _READ_DETAIL[page])
        doc = CachedDoc(
            url=candidate.url,
            content_sha256=hashlib.sha256(page.text.encode("utf-8")).hexdigest(),
            fetched_at=now,
            published_at=page.published_at,
            title=page.title or candidate.title,
            text=page.text,
        )
        hosts = tuple(dict.fromkeys(_host(hop) for hop in fetched.hops))
        if cache is not None and hosts == (_host(candidate.url),):
            # (a page served by another host than the candidate's is not kept under the
            # candidate's URL: a later hit would carry the candidate host's trust)
            await loop.run_in_executor(None, cache.put, doc)
        return _Page(candidate, doc, hosts)

    @staticmethod
    def _published(page: _Page) -> datetime | None:
        """The page's own date, else what discovery said (a feed's, a news result's)."""
        return page.doc.published_at or page.candidate.published_at

    def _too_old(self, intent: RetrievalIntent, page: _Page, as_of: datetime) -> bool:
        """Older than ``freshness_days`` before ``as_of``; an undated page is kept."""
        published = self._published(page)
        if intent.freshness_days is None or published is None:
            return False
        age_days = (as_of - as_utc(published)).total_seconds() / _SECONDS_PER_DAY
        return age_days > intent.freshness_days

    def _score(
        self, intent: RetrievalIntent, pages: Sequence[_Page], as_of: datetime
    ) -> list[EvidencePacket]:
        reference = as_of.astimezone(UTC).replace(tzinfo=None).isoformat()
        if self._ranker is not None:
            ranker = dataclasses.replace(self._ranker, as_of=reference)
        else:
            ranker = LiveFetchRanker(half_life_days=self.FRESHNESS_HALF_LIFE, as_of=reference)
        texts = {page.doc.url: clip_text(page.doc.text, self.MAX_CHARS) for page in pages}
        evidence = []
        for page in pages:
            # T of the least trusted host on the way: an open redirect on a trusted host
            # lends no trust to the page it leads to
            domain = min(page.hosts, key=lambda host: ranker.trust_of(_probe(host)))
            published = self._published(page)
            evidence.append(
                Evidence(
                    title=page.doc.title,
                    url=page.doc.url,
                    snippet=texts[page.doc.url],
                    source="livefetch",
                    page_age=as_utc(published).replace(tzinfo=None) if published else None,
                    domain=domain,
                )
            )
        by_url = {page.doc.url: page for page in pages}
        packets = []
        for row in ranker.score_breakdown(intent.query, evidence, {})[: intent.max_results]:
            page = by_url[row.url]
            text = texts[row.url]
            published = self._published(page)
            packets.append(
                EvidencePacket(
                    url=page.doc.url,
                    domain=page.hosts[-1],
                    title=page.doc.title,
                    text=text,
                    published_at=as_utc(published) if published else None,
                    fetched_at=page.doc.fetched_at,
                    score=row.score,
                    score_breakdown=row.breakdown,
                    content_sha256=page.doc.content_sha256,
                    quotes=quotes_for(intent.query, text) if intent.need_quotes else (),
                )
            )
        return packets
