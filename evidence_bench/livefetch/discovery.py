"""Discovery: where LiveFetch's candidate URLs come from, behind one small protocol.

::

    Discovery.discover(intent) -> list[Candidate]

:class:`BraveDiscovery` (the Brave provider), :class:`DdgsDiscovery` (keyless web and news
search through ``ddgs``, the ``[livefetch]`` extra), :class:`FeedDiscovery` (RSS/Atom feeds
by feedparser) and :class:`RecordedDiscovery`, any of them recorded to or replayed from a
JSON file (``ddgs`` has its own HTTP client, which vcrpy cannot record). Each returns at
most :func:`candidate_limit` candidates: more than ``max_results``, because some pages fail
or are filtered out after discovery.
"""

from __future__ import annotations

import calendar
import difflib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import httpx

from evidence_bench._atomic import write_atomic
from evidence_bench._secrets import redact
from evidence_bench.engine.base import SearchProvider
from evidence_bench.engine.text import tokenize
from evidence_bench.errors import ConfigurationError, DataError, ReplayMissError, RequestError
from evidence_bench.evidence import normalize_text
from evidence_bench.livefetch.fetch import USER_AGENT
from evidence_bench.livefetch.records import (
    Candidate,
    FailureReason,
    FetchFailure,
    Mode,
    RetrievalIntent,
    as_utc,
)
from evidence_bench.web.fetch import Answer, Limits, fetch
from evidence_bench.web.guard import OPEN_WEB, AddressPolicy, GuardedTransport
from evidence_bench.web.page_text import require_pages

__all__ = [
    "BraveDiscovery", "DdgsDiscovery", "Discovery", "FeedDiscovery", "RecordMode",
    "RecordedDiscovery", "StaticDiscovery", "candidate_limit",
]  # fmt: skip

#: The most a feed's body may hold, decoded (feeds of a few hundred entries are ~1 MB).
MAX_FEED_BYTES = 5 * 1024 * 1024
#: Candidates per wanted result (some pages fail or are too old), and the most in total.
OVERSAMPLE = 3
MAX_CANDIDATES = 30
#: The format tag of a recorded discovery file.
RECORDING_FORMAT = "evidence_bench.livefetch.discovery/1"


def candidate_limit(intent: RetrievalIntent) -> int:
    """How many candidates discovery returns for ``intent``."""
    return min(intent.max_results * OVERSAMPLE, MAX_CANDIDATES)


class Discovery(Protocol):
    """Finds candidate URLs for an intent, best first."""

    def discover(self, intent: RetrievalIntent) -> list[Candidate]: ...


def _iso(value: object) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return as_utc(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return None


class StaticDiscovery:
    """The same candidates for any intent (results already in hand, tests)."""

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        self.candidates = list(candidates)

    def discover(self, intent: RetrievalIntent) -> list[Candidate]:
        return self.candidates[: max(candidate_limit(intent), len(self.candidates))]


class BraveDiscovery:
    """Web results from a Brave(-compatible) provider; ``provider=None`` builds a
    :class:`~evidence_bench.web.brave.BraveProvider` from the environment on first
    use (``BRAVE_SEARCH_API_KEY``, ``BRAVE_SEARCH_BASE_URL``). Brave's web search has no
    news vertical here, so mode ``news`` is refused; use :class:`DdgsDiscovery`."""

    name = "brave"

    def __init__(self, provider: SearchProvider | None = None) -> None:
        self._provider = provider

    def discover(self, intent: RetrievalIntent) -> list[Candidate]:
        if intent.mode is not Mode.WEB:
            raise ConfigurationError(
                f"Brave discovery searches the web only, not mode {intent.mode.value!r}; "
                "use ddgs (news) or feeds (rss)"
            )
        if self._provider is None:
            from evidence_bench.web.brave import BraveProvider

            self._provider = BraveProvider()
        results = self._provider.search(intent.query, limit=candidate_limit(intent))
        return [Candidate.of(item, "brave") for item in results]


def _timelimit(days: float | None) -> str | None:
    """ddgs' ``timelimit`` (d, w, m, y) that covers ``freshness_days``."""
    if days is None:
        return None
    for limit, span in (("d", 1), ("w", 7), ("m", 31), ("y", 366)):
        if days <= span:
            return limit
    return None


class DdgsDiscovery:
    """Keyless web (``DDGS().text``) and news (``DDGS().news``) search. ``ddgs`` is the
    ``[livefetch]`` extra; without it, :meth:`discover` raises a ConfigurationError that
    says how to install it."""

    name = "ddgs"

    def __init__(
        self,
        *,
        region: str = "us-en",
        safesearch: str = "moderate",
        backend: str = "auto",
        timeout_s: int = 10,
        client_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.region = region
        self.safesearch = safesearch
        self.backend = backend
        self.timeout_s = timeout_s
        self._factory = client_factory

    def _client(self) -> Any:
        if self._factory is not None:
            return self._factory()
        try:
            from ddgs import DDGS
        except ImportError:
            raise ConfigurationError(
                "keyless discovery needs ddgs: pip install 'evidence_bench[livefetch]'"
            ) from None
        return DDGS(timeout=self.timeout_s)

    def discover(self, intent: RetrievalIntent) -> list[Candidate]:
        if intent.mode is Mode.RSS:
            raise ConfigurationError("ddgs discovery searches web and news, not rss feeds")
        client = self._client()
        search = client.news if intent.mode is Mode.NEWS else client.text
        try:
            rows = search(
                intent.query,
                region=self.region,
                safesearch=self.safesearch,
                timelimit=_timelimit(intent.freshness_days),
                max_results=candidate_limit(intent),
                backend=self.backend,
            )
        except Exception as exc:  # ddgs' own errors (DDGSException, its HTTP client's)
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RequestError(
                f"ddgs {intent.mode.value} search for {intent.query!r} failed: {detail}"
            ) from exc
        candidates = []
        for row in rows or []:
            if not isinstance(row, dict):
                continue
            url = str(row.get("href") or row.get("url") or "").strip()
            if not url:
                continue
            candidates.append(
                Candidate(
                    url=url,
                    title=normalize_text(str(row.get("title") or "")),
                    snippet=normalize_text(str(row.get("body") or "")),
                    published_at=_iso(row.get("date")),
                    source=f"ddgs-{intent.mode.value}",
                )
            )
        return candidates[: candidate_limit(intent)]


def _entry_date(entry: Any) -> datetime | None:
    """feedparser's ``*_parsed`` are UTC struct_times: ``timegm``, not the local ``mktime``."""
    for key in ("published_parsed", "updated_parsed"):
        parsed = entry.get(key)
        if parsed:
            return datetime.fromtimestamp(calendar.timegm(parsed), tz=UTC)
    return None


class FeedDiscovery:
    """The entries of RSS/Atom ``feeds`` that share a term with the query, most terms
    first, then in feed order. Each feed is fetched by the guarded GET
    (:func:`evidence_bench.web.fetch.fetch`: one deadline of ``timeout_s``, at most
    :data:`MAX_FEED_BYTES` decoded, every hop under ``policy``; ``transport`` for tests)
    and parsed by feedparser; a feed that cannot be fetched or parsed is skipped and listed
    in :attr:`failures` (the pipeline reports it beside the page failures)."""

    name = "feeds"

    def __init__(
        self,
        feeds: Sequence[str],
        *,
        timeout_s: float = 15.0,
        transport: httpx.BaseTransport | None = None,
        policy: AddressPolicy = OPEN_WEB,
    ) -> None:
        if not feeds:
            raise ConfigurationError("rss discovery needs at least one feed URL")
        require_pages("rss discovery", ("feedparser",))
        self.feeds = list(feeds)
        self.timeout_s = timeout_s
        self.policy = policy
        self._transport = transport
        self.failures: list[FetchFailure] = []

    def _fetch(self, client: httpx.Client, feed_url: str) -> Answer | None:
        answer = fetch(
            client,
            feed_url,
            limits=Limits(timeout_s=self.timeout_s, max_bytes=MAX_FEED_BYTES),
            policy=self.policy,
        )
        if isinstance(answer, FetchFailure):
            self.failures.append(FetchFailure(feed_url, answer.reason, f"feed: {answer.detail}"))
            return None
        if not 200 <= answer.status < 300:
            self.failures.append(
                FetchFailure(feed_url, FailureReason.HTTP_STATUS, f"feed: HTTP {answer.status}")
            )
            return None
        return answer

    def discover(self, intent: RetrievalIntent) -> list[Candidate]:
        import feedparser

        self.failures = []
        terms = set(tokenize(intent.query))
        found: list[tuple[int, int, Candidate]] = []
        with httpx.Client(
            transport=self._transport or GuardedTransport(self.policy),
            headers={"User-Agent": USER_AGENT},
            trust_env=False,
        ) as client:
            for feed_url in self.feeds:
                answer = self._fetch(client, feed_url)
                if answer is None:
                    continue
                # (its headers hold no Content-Encoding: the body is decoded already)
                parsed = feedparser.parse(
                    answer.body, response_headers={"content-type": answer.content_type}
                )
                if not parsed.entries:
                    self.failures.append(
                        FetchFailure(feed_url, FailureReason.UNDECODABLE, "feed: no entries")
                    )
                    continue
                for entry in parsed.entries:
                    link = str(entry.get("link") or "").strip()
                    if not link:
                        continue
                    title = normalize_text(str(entry.get("title") or ""))
                    summary = normalize_text(str(entry.get("summary") or ""))
                    overlap = len(terms & set(tokenize(f"{title} {summary}")))
                    if terms and overlap == 0:
                        continue
                    candidate = Candidate(
                        url=link,
                        title=title,
                        snippet=summary,
                        published_at=_entry_date(entry),
                        source="rss",
                    )
                    found.append((-overlap, len(found), candidate))
        found.sort(key=lambda row: (row[0], row[1]))
        return [candidate for _, _, candidate in found[: candidate_limit(intent)]]


class RecordMode(StrEnum):
    """As vcrpy's record modes: ``none`` replays only (a miss is an error), ``all``
    records every intent afresh, ``new_episodes`` replays what is held and records the rest."""

    NONE = "none"
    ALL = "all"
    NEW_EPISODES = "new_episodes"


def recording_key(intent: RetrievalIntent) -> str:
    """What a recorded answer is looked up by: mode, candidate count and query."""
    return f"{intent.mode.value}:{candidate_limit(intent)}:{intent.query.strip()}"


class RecordedDiscovery:
    """Discovery recorded to or replayed from the JSON file ``path``.

    The file holds, per :func:`recording_key`, the candidates the ``inner`` discovery
    returned. It is written whole through a temporary file and a rename, with sorted keys
    so re-recording the same answers gives the same bytes, and with every spelling of the
    API key redacted (:func:`evidence_bench._secrets.redact`; discovery answers hold none,
    but a file that may be committed is checked anyway). ``record_mode=none``
    (the default) never calls ``inner`` and makes no request.
    """

    name = "recorded"

    def __init__(
        self,
        path: str | Path,
        inner: Discovery | None = None,
        *,
        record_mode: RecordMode | str = RecordMode.NONE,
    ) -> None:
        self.path = Path(path)
        self.inner = inner
        try:
            self.record_mode = RecordMode(record_mode)
        except ValueError:
            valid = ", ".join(mode.value for mode in RecordMode)
            raise ConfigurationError(
                f"record_mode must be one of {valid}, got {record_mode!r}"
            ) from None
        if self.record_mode is not RecordMode.NONE and inner is None:
            raise ConfigurationError(
                f"record_mode={self.record_mode.value} needs an inner discovery to record"
            )
        self._recordings: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._recordings is not None:
            return self._recordings
        if not self.path.exists():
            self._recordings = {}
            return self._recordings
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"recorded discovery {self.path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != RECORDING_FORMAT:
            raise DataError(f"recorded discovery {self.path} is not a {RECORDING_FORMAT} file")
        recordings = data.get("recordings")
        if not isinstance(recordings, dict):
            raise DataError(f"recorded discovery {self.path}: 'recordings' is not an object")
        self._recordings = recordings
        return recordings

    def discover(self, intent: RetrievalIntent) -> list[Candidate]:
        recordings = self._load()
        key = recording_key(intent)
        held = recordings.get(key)
        if held is not None and self.record_mode is not RecordMode.ALL:
            try:
                return [Candidate.from_dict(row) for row in held["candidates"]]
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(
                    f"recorded discovery {self.path}: entry {key!r} is malformed ({exc})"
                ) from exc
        if self.record_mode is RecordMode.NONE or self.inner is None:
            closest = difflib.get_close_matches(key, list(recordings), n=3, cutoff=0.0)
            near = f"; closest recorded: {', '.join(map(repr, closest))}" if closest else ""
            raise ReplayMissError(
                f"no recorded discovery for {key!r} in {self.path} (record mode none){near}; "
                "record it with --record-mode new_episodes (record_mode='new_episodes' in Python)"
            )
        candidates = self.inner.discover(intent)
        recordings[key] = {
            "discovery": str(getattr(self.inner, "name", type(self.inner).__name__)),
            "candidates": [candidate.to_dict() for candidate in candidates],
        }
        self._save(recordings)
        return candidates

    def _save(self, recordings: dict[str, Any]) -> None:
        text = json.dumps(
            {"format": RECORDING_FORMAT, "recordings": recordings},
            indent=2,
            sort_keys=True,
            ensure_ascii=False,
        )
        text = redact(text)
        write_atomic(self.path, text + "\n", parents=True)
