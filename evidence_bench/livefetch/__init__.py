"""LiveFetch: discover candidate pages, fetch them, extract their text and date, score,
quote and cache them.

::

    discovery.py   Discovery protocol: Brave, ddgs (web, news), RSS/Atom, recorded JSON
    fetch.py       bounded, capped httpx.AsyncClient fetches; failures as records
    extract.py     trafilatura (fast), readability-lxml fallback, htmldate dates
    quotes.py      1-3 supporting sentences, exact substrings of the text
    cache.py       SQLite (WAL) cache of fetched, extracted pages
    pipeline.py    LiveFetch: the stages in order, sync and async
    records.py     RetrievalIntent, EvidencePacket, FetchFailure, PacketSet, ...
"""

from evidence_bench.livefetch.cache import DEFAULT_CACHE_PATH, CachedDoc, PageCache
from evidence_bench.livefetch.discovery import (
    BraveDiscovery,
    DdgsDiscovery,
    Discovery,
    FeedDiscovery,
    RecordedDiscovery,
    RecordMode,
    StaticDiscovery,
    candidate_limit,
)
from evidence_bench.livefetch.extract import clip_text, decode_html, extract_page
from evidence_bench.livefetch.fetch import USER_AGENT, FetchedPage, PageFetcher
from evidence_bench.livefetch.pipeline import LiveFetch, default_discovery
from evidence_bench.livefetch.quotes import quotes_for
from evidence_bench.livefetch.records import (
    Candidate,
    EvidencePacket,
    ExtractedPage,
    FailureReason,
    FetchFailure,
    Mode,
    PacketSet,
    RetrievalIntent,
    ScoreBreakdown,
)

__all__ = [
    "DEFAULT_CACHE_PATH",
    "USER_AGENT",
    "BraveDiscovery",
    "CachedDoc",
    "Candidate",
    "DdgsDiscovery",
    "Discovery",
    "EvidencePacket",
    "ExtractedPage",
    "FailureReason",
    "FeedDiscovery",
    "FetchFailure",
    "FetchedPage",
    "LiveFetch",
    "Mode",
    "PacketSet",
    "PageCache",
    "PageFetcher",
    "RecordMode",
    "RecordedDiscovery",
    "RetrievalIntent",
    "ScoreBreakdown",
    "StaticDiscovery",
    "candidate_limit",
    "clip_text",
    "decode_html",
    "default_discovery",
    "extract_page",
    "quotes_for",
]
