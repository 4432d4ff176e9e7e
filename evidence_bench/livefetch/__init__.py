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

from evidence_bench.livefetch.extract import decode_html, extract_page
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
    "Candidate",
    "EvidencePacket",
    "ExtractedPage",
    "FailureReason",
    "FetchFailure",
    "Mode",
    "PacketSet",
    "RetrievalIntent",
    "ScoreBreakdown",
    "decode_html",
    "extract_page",
]
