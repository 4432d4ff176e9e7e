"""Typed search results and the normalization that makes them comparable.

Brave decorates descriptions with ``<strong>`` and HTML entities and may return the same page
under several URLs (tracking parameters, fragments, a trailing slash); feedback is keyed by
the canonical URL so a mark follows the page, not the spelling of its address.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from evidence_bench._printable import plain_text
from evidence_bench.errors import QueryError

__all__ = [
    "MAX_QUERY_CHARS", "MAX_QUERY_WORDS", "Evidence", "canonical_url", "dedupe", "normalize_text",
    "renumber", "validate_query",
]  # fmt: skip

#: Brave's limits on ``q`` (BRAVE_API.md); checked before any request is sent.
MAX_QUERY_CHARS = 400
MAX_QUERY_WORDS = 50

_TAG = re.compile(r"<[^>]*>")
# Inline emphasis (Brave's match highlighting) joins the text around it; other tags separate.
_INLINE_TAG = re.compile(r"</?(?:strong|b|em|i|mark|span)(?:\s[^>]*)?>", re.IGNORECASE)
# What urlsplit and str.strip disagree on at the edges; stripped before and after parsing.
_EDGE = re.compile(r"^[\s\x00-\x20]+|[\s\x00-\x20]+$")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_TRACKING_EXACT = frozenset({"gclid", "fbclid"})


@dataclass(frozen=True, slots=True)
class Evidence:
    """One search result, normalized.

    ``rank`` is the 1-based position in the list that holds it: the provider's order after
    dedup for retrieved candidates, the displayed order for a ranking.
    """

    title: str
    url: str
    snippet: str
    source: str = "brave"
    rank: int = 0
    page_age: datetime | None = None
    age: str = ""
    domain: str = ""
    language: str = ""
    extra_snippets: tuple[str, ...] = field(default=())
    #: The canonical URL (:func:`canonical_url` of ``url``): the identity used for dedup,
    #: feedback and judgments. Computed once, when the result is made: an episode reads it
    #: millions of times.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", canonical_url(self.url))

    @property
    def text(self) -> str:
        """Title and snippet, the text a local ranker scores."""
        return f"{self.title} {self.snippet}"

    def with_rank(self, rank: int) -> Evidence:
        """A copy at another rank."""
        return dataclasses.replace(self, rank=rank)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields (``page_age`` as ISO-8601)."""
        return {
            "title": self.title,
            "url": self.url,
            "snippet": self.snippet,
            "source": self.source,
            "rank": self.rank,
            "page_age": self.page_age.isoformat() if self.page_age else None,
            "age": self.age,
            "domain": self.domain,
            "language": self.language,
            "extra_snippets": list(self.extra_snippets),
        }


def normalize_text(value: str) -> str:
    """Strip HTML tags, unescape entities, collapse whitespace; control characters become
    spaces. Entities are unescaped after tags are stripped, so an escaped ``&lt;b&gt;``
    survives as literal text. Never raises.
    """
    tags = value.count("<")
    if tags and tags == value.count("<strong>") + value.count("</strong>"):
        # Every "<" opens Brave's highlighting, exactly spelled: what _INLINE_TAG removes,
        # and no other tag is left for _TAG.
        value = value.replace("<strong>", "").replace("</strong>", "")
    elif tags:
        value = _TAG.sub(" ", _INLINE_TAG.sub("", value))
    if "&" in value:  # without it, no entity
        value = _unescape(value)
    # str.split's white space is re's \s (both str.isspace), and strip() drops the same.
    return " ".join(plain_text(value).split())


#: What html.escape writes (Brave's and the simulator's descriptions hold little else),
#: each entity with the character it stands for, ``&amp;`` last.
_ESCAPES = (("&#x27;", "'"), ("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def _unescape(value: str) -> str:
    """``html.unescape(value)``; by ``str.replace`` when every ``&`` begins one of
    :data:`_ESCAPES` (``&amp;`` replaced last, so no replacement makes a new entity)."""
    if value.count("&") != sum(value.count(entity) for entity, _ in _ESCAPES):
        return html.unescape(value)
    for entity, character in _ESCAPES:
        value = value.replace(entity, character)
    return value


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("utm_") or lowered in _TRACKING_EXACT


@functools.lru_cache(maxsize=1 << 16)
def canonical_url(url: str) -> str:
    """The identity of a page's address, for dedup and feedback keys.

    Lowercases scheme and host, drops the default port, the fragment and tracking parameters
    (``utm_*``, ``gclid``, ``fbclid``), and a trailing slash on a non-root path. The query
    string's remaining parameters keep their order. Never raises: an address that cannot be
    parsed is returned stripped of surrounding whitespace.
    """
    raw = _EDGE.sub("", url)
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        return raw
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host
    if parts.username or parts.password:
        auth = parts.username or ""
        if parts.password:
            auth += f":{parts.password}"
        netloc = f"{auth}@{host}"
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        netloc += f":{port}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    params = [(k, v) for k, v in pairs if not _is_tracking(k)]
    query = urlencode(params, doseq=True)
    path = parts.path
    # Without a query the path ends the address, so white space a fragment hid ends it no
    # more: stripped with the trailing slashes, until neither is left ("/a/ /" is "/a").
    while True:
        trimmed = path if query else _EDGE.sub("", path)
        if len(trimmed) > 1 and trimmed.endswith("/"):
            trimmed = trimmed.rstrip("/") or "/"
        if trimmed == path:
            break
        path = trimmed
    if not path and host:
        path = "/"
    return _EDGE.sub("", urlunsplit((scheme, netloc, path, query, "")))


def renumber(ordered: Iterable[Evidence]) -> list[Evidence]:
    """``rank`` = position, 1-based; an item already at its rank is reused (it is frozen)."""
    return [
        item if item.rank == position else item.with_rank(position)
        for position, item in enumerate(ordered, start=1)
    ]


def dedupe(results: Iterable[Evidence]) -> list[Evidence]:
    """Keep the first (best-ranked) result per canonical URL; renumber ``rank`` from 1. The
    same input objects give the same output objects back (the latest few are remembered).
    """
    items = results if isinstance(results, list | tuple) else list(results)
    key = tuple(map(id, items))
    known = _DEDUPED.get(key)
    if known is not None:
        return list(known[1])
    kept = _dedupe(items)
    with _DEDUPED_LOCK:
        if len(_DEDUPED) >= _DEDUPED_KEPT:
            del _DEDUPED[next(iter(_DEDUPED))]  # the oldest
        # The inputs are kept with their ids: no other object takes an id while it is a key.
        _DEDUPED[key] = (tuple(items), kept)
    return list(kept)


#: dedupe's answers by the ids of its inputs (held alive beside them), the latest few.
_DEDUPED: dict[tuple[int, ...], tuple[tuple[Evidence, ...], list[Evidence]]] = {}
_DEDUPED_KEPT = 512
_DEDUPED_LOCK = threading.Lock()


def _dedupe(results: Sequence[Evidence]) -> list[Evidence]:
    seen: set[str] = set()
    kept: list[Evidence] = []
    for item in results:
        key = item.key
        if key in seen:
            continue
        seen.add(key)
        kept.append(item if item.rank == len(kept) + 1 else item.with_rank(len(kept) + 1))
    return kept


def validate_query(query: str) -> str:
    """Return the query stripped, or raise :class:`QueryError` where Brave would refuse it."""
    text = query.strip()
    if not text:
        raise QueryError("query is empty")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"query has {len(text)} characters; Brave allows at most {MAX_QUERY_CHARS}"
        )
    words = len(text.split())
    if words > MAX_QUERY_WORDS:
        raise QueryError(f"query has {words} words; Brave allows at most {MAX_QUERY_WORDS}")
    return text
