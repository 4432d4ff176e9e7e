"""LiveFetch's records: what is asked (:class:`RetrievalIntent`), what comes back
(:class:`EvidencePacket`, :class:`FetchFailure`, together a :class:`PacketSet`) and what
discovery found (:class:`Candidate`). All are frozen: a packet is a citation, and a
citation does not change.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evidence_bench.engine.livefetch import ScoreBreakdown, domain_list
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence
from evidence_bench.web.failure import FailureReason, FetchFailure
from evidence_bench.web.page_text import ExtractedPage, as_utc

__all__ = [
    "Candidate", "EvidencePacket", "ExtractedPage", "FailureReason", "FetchFailure", "Mode",
    "PacketSet", "RetrievalIntent", "ScoreBreakdown", "as_utc",
]  # fmt: skip


class Mode(enum.StrEnum):
    """Where candidates are discovered: web search, news search, or RSS/Atom feeds."""

    WEB = "web"
    NEWS = "news"
    RSS = "rss"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(mode.value for mode in cls)
            raise ConfigurationError(f"mode must be one of {valid}, got {value!r}") from None


@dataclass(frozen=True, slots=True)
class RetrievalIntent:
    """What to retrieve. ``mode`` is news search unless set (the LiveFetch design's default:
    evidence for a question about now); ``freshness_days=None`` disables the hard freshness
    filter (pages without a date always pass it); domain entries match a host and its
    subdomains, on every redirect hop too."""

    query: str
    mode: Mode = Mode.NEWS
    max_results: int = 8
    freshness_days: float | None = 14
    need_quotes: bool = True
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise ConfigurationError("RetrievalIntent.query is empty")
        object.__setattr__(self, "mode", Mode.parse(self.mode))
        if isinstance(self.max_results, bool) or not (
            isinstance(self.max_results, int) and self.max_results >= 1
        ):
            raise ConfigurationError(
                f"RetrievalIntent.max_results must be a whole number >= 1, got {self.max_results!r}"
            )
        days = self.freshness_days
        if days is not None and not (isinstance(days, int | float) and days > 0):
            raise ConfigurationError(
                f"RetrievalIntent.freshness_days must be > 0 or None, got {days!r}"
            )
        for name in ("allow_domains", "deny_domains"):
            entries = domain_list(f"RetrievalIntent.{name}", getattr(self, name))
            object.__setattr__(self, name, entries)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A URL that discovery found, with what the source said about it."""

    url: str
    title: str = ""
    snippet: str = ""
    published_at: datetime | None = None
    source: str = ""

    @classmethod
    def of(cls, item: Evidence, source: str) -> Candidate:
        """A search result as a candidate, dated by its ``page_age`` (naive UTC)."""
        published = item.page_age.replace(tzinfo=UTC) if item.page_age else None
        return cls(item.url, item.title, item.snippet, published, source)

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "title": self.title,
            "snippet": self.snippet,
            "published_at": self.published_at.isoformat() if self.published_at else None,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        published = data.get("published_at")
        return cls(
            url=str(data["url"]),
            title=str(data.get("title") or ""),
            snippet=str(data.get("snippet") or ""),
            published_at=datetime.fromisoformat(published) if published else None,
            source=str(data.get("source") or ""),
        )


@dataclass(frozen=True, slots=True)
class EvidencePacket:
    """One cited page: its canonical URL, extracted text (at most ``LiveFetch.MAX_CHARS``
    characters), dates (aware, UTC), score and the quotes that support the query, each an
    exact substring of ``text``."""

    url: str
    domain: str
    title: str
    text: str
    published_at: datetime | None
    fetched_at: datetime
    score: float
    score_breakdown: ScoreBreakdown
    content_sha256: str
    quotes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (dates as ISO-8601)."""
        return {
            "url": self.url,
            "domain": self.domain,
            "title": self.title,
            "published_at": self.published_at.isoformat() if self.published_at else None,
            "fetched_at": self.fetched_at.isoformat(),
            "score": self.score,
            "score_breakdown": self.score_breakdown._asdict(),
            "content_sha256": self.content_sha256,
            "quotes": list(self.quotes),
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class PacketSet:
    """The packets of one run, best first, and the candidates that failed, with reasons;
    ``stale`` are the pages dropped by the freshness filter, ``excluded`` the candidates
    dropped by the domain lists (canonical URLs). Iterating it (and ``len``) goes over the
    packets."""

    packets: tuple[EvidencePacket, ...] = ()
    failures: tuple[FetchFailure, ...] = field(default=())
    stale: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[EvidencePacket]:
        return iter(self.packets)

    def __len__(self) -> int:
        return len(self.packets)

    def __getitem__(self, index: int) -> EvidencePacket:
        return self.packets[index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "packets": [packet.to_dict() for packet in self.packets],
            "failures": [failure.to_dict() for failure in self.failures],
            "stale": list(self.stale),
            "excluded": list(self.excluded),
        }
