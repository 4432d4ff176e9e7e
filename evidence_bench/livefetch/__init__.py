"""LiveFetch: discover candidate pages, fetch them, extract their text and date (the web
layer's page pipeline, :mod:`evidence_bench.web.page_text`), score, quote and cache them.

::

    discovery.py   Discovery protocol: Brave, ddgs (web, news), RSS/Atom, recorded JSON
    fetch.py       bounded, capped fetches in threads; failures as records
    quotes.py      1-3 supporting sentences, exact substrings of the text
    cache.py       SQLite (WAL) cache of fetched, extracted pages
    pipeline.py    LiveFetch: the stages in order, sync and async
    records.py     RetrievalIntent, EvidencePacket, FetchFailure, PacketSet, ...
"""

from typing import TYPE_CHECKING

from evidence_bench._lazy import attach

if TYPE_CHECKING:
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
    from evidence_bench.web.decode import decode_html
    from evidence_bench.web.page_text import clip_text, extract_page

__all__ = [
    "DEFAULT_CACHE_PATH", "USER_AGENT", "BraveDiscovery", "CachedDoc", "Candidate", "DdgsDiscovery",
    "Discovery", "EvidencePacket", "ExtractedPage", "FailureReason", "FeedDiscovery",
    "FetchFailure", "FetchedPage", "LiveFetch", "Mode", "PacketSet", "PageCache", "PageFetcher",
    "RecordMode", "RecordedDiscovery", "RetrievalIntent", "ScoreBreakdown", "StaticDiscovery",
    "candidate_limit", "clip_text", "decode_html", "default_discovery", "extract_page",
    "quotes_for",
]  # fmt: skip

# Imported on first use (:mod:`evidence_bench._lazy`): importing the package does not import
# trafilatura, httpx or SQLite until a name that needs them is used.
__getattr__, __dir__ = attach(
    __name__,
    {
        "evidence_bench.livefetch.cache": ["DEFAULT_CACHE_PATH", "CachedDoc", "PageCache"],
        "evidence_bench.livefetch.discovery": [
            "BraveDiscovery", "DdgsDiscovery", "Discovery", "FeedDiscovery", "RecordedDiscovery",
            "RecordMode", "StaticDiscovery", "candidate_limit",
        ],
        "evidence_bench.livefetch.fetch": ["USER_AGENT", "FetchedPage", "PageFetcher"],
        "evidence_bench.livefetch.pipeline": ["LiveFetch", "default_discovery"],
        "evidence_bench.livefetch.quotes": ["quotes_for"],
        "evidence_bench.livefetch.records": [
            "Candidate", "EvidencePacket", "ExtractedPage", "FailureReason", "FetchFailure", "Mode",
            "PacketSet", "RetrievalIntent", "ScoreBreakdown",
        ],
        "evidence_bench.web.decode": ["decode_html"],
        "evidence_bench.web.page_text": ["clip_text", "extract_page"],
    },
)  # fmt: skip
del TYPE_CHECKING, attach
