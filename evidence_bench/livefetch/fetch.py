"""Fetching candidate pages with ``httpx.AsyncClient``, within bounds, failures as records.

Bounds: at most ``max_concurrency`` requests in flight overall and ``per_host`` to one
host (politeness, and no host starves the others); ``timeout_s`` for each phase
(connect, read, write, pool) and for the whole request, so a server that drips a byte a
second still ends; at most ``max_redirects`` redirects; at most ``max_bytes`` of body,
streamed, so an oversized page stops downloading at the cap (a ``Content-Length`` over it
stops before any body). The answer must be HTML (``text/html`` or
``application/xhtml+xml``; with no Content-Type, a body that starts like HTML). Every
request says who sends it (:data:`USER_AGENT`).

:meth:`PageFetcher.fetch` never raises for one URL's trouble: it returns a
:class:`FetchedPage` or a :class:`~evidence_bench.livefetch.records.FetchFailure` with its
reason. httpx's errors are translated here, once.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from evidence_bench.livefetch.records import FailureReason, FetchFailure

__all__ = [
    "HTML_TYPES",
    "MAX_BYTES",
    "MAX_REDIRECTS",
    "PER_HOST",
    "USER_AGENT",
    "FetchedPage",
    "PageFetcher",
]

#: Who is asking, and where to read about it.
USER_AGENT = "evidence_bench-livefetch/0.1 (evidence search research harness; httpx)"
#: Media types taken as HTML.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: The body cap: a main text is far smaller than this; larger answers are not articles.
MAX_BYTES = 3 * 1024 * 1024
#: Redirects followed before giving up (browsers allow 20; articles need one or two).
MAX_REDIRECTS = 5
#: Requests in flight to one host at once.
PER_HOST = 2

_HTML_START = re.compile(rb"^\s*(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)", re.I | re.S)


@dataclass(frozen=True, slots=True)
class FetchedPage:
    """An HTML answer: the URL asked for, the URL answered (after redirects), its body."""

    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


class PageFetcher:
    """Fetches pages through one ``httpx.AsyncClient`` (``transport`` for tests:
    ``httpx.MockTransport``). Use as ``async with PageFetcher(...) as fetcher``."""

    def __init__(
        self,
        *,
        max_concurrency: int = 6,
        per_host: int = PER_HOST,
        timeout_s: float = 15.0,
        max_redirects: int = MAX_REDIRECTS,
        max_bytes: int = MAX_BYTES,
        user_agent: str = USER_AGENT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._overall = asyncio.Semaphore(max_concurrency)
        self._per_host_limit = per_host
        self._hosts: defaultdict[str, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(self._per_host_limit)
        )
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=True,
            max_redirects=max_redirects,
            headers={
                "User-Agent": user_agent,
                "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
            },
            limits=httpx.Limits(max_connections=max_concurrency),
        )

    async def __aenter__(self) -> PageFetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str) -> FetchedPage | FetchFailure:
        """The page at ``url``, or why not."""
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # "Invalid IPv6 URL"
            return FetchFailure(url, FailureReason.INVALID_URL, str(exc))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return FetchFailure(url, FailureReason.INVALID_URL, "not an http(s) URL")
        async with self._overall, self._hosts[_host(url)]:
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await self._fetch(url)
            except TimeoutError:
                return FetchFailure(
                    url, FailureReason.TIMEOUT, f"no complete answer in {self.timeout_s:g} s"
                )
            except httpx.TimeoutException as exc:
                return FetchFailure(url, FailureReason.TIMEOUT, type(exc).__name__)
            except httpx.TooManyRedirects as exc:
                return FetchFailure(url, FailureReason.REDIRECTS, str(exc))
            except (httpx.InvalidURL, UnicodeError) as exc:  # (a host IDNA refuses: xn--)
                return FetchFailure(url, FailureReason.INVALID_URL, str(exc) or type(exc).__name__)
            except (httpx.TransportError, httpx.DecodingError) as exc:
                detail = str(exc) or type(exc).__name__
                return FetchFailure(url, FailureReason.NETWORK, detail.splitlines()[0])

    async def _fetch(self, url: str) -> FetchedPage | FetchFailure:
        async with self._client.stream("GET", url) as response:
            if not response.is_success:
                return FetchFailure(url, FailureReason.HTTP_STATUS, f"HTTP {response.status_code}")
            content_type = response.headers.get("Content-Type", "")
            media = _media_type(content_type)
            if media and media not in HTML_TYPES:
                return FetchFailure(url, FailureReason.NOT_HTML, f"Content-Type {media}")
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > self.max_bytes:
                return FetchFailure(
                    url,
                    FailureReason.TOO_LARGE,
                    f"Content-Length {length} > {self.max_bytes} bytes",
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    return FetchFailure(
                        url, FailureReason.TOO_LARGE, f"body over {self.max_bytes} bytes"
                    )
                chunks.append(chunk)
            body = b"".join(chunks)
            if not media and not _HTML_START.match(body[:1024]):
                return FetchFailure(url, FailureReason.NOT_HTML, "no Content-Type, body not HTML")
            return FetchedPage(
                url=url,
                final_url=str(response.url),
                status=response.status_code,
                content_type=content_type,
                body=body,
            )
