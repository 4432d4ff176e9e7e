"""One guarded GET for everything that fetches from the web: pages, feeds, Brave's answers.

:func:`get` and :func:`fetch` (through an ``httpx.Client``, from any number of threads):

- follow redirects themselves, at most ``Limits.max_redirects``, each hop an http(s) URL
  whose host the destination policy (:class:`~evidence_bench.web.guard.AddressPolicy`) and
  ``admit`` (LiveFetch's domain lists) accept;
- keep one deadline for the whole request (``Limits.timeout_s``), not a timeout per read;
- decode the body as it arrives through at most one content coding (``gzip`` or
  ``deflate``), the cap (``Limits.max_bytes``) counting decoded bytes;
- let ``check`` refuse the final answer from its status and headers, before its body.

:func:`fetch` never raises for a URL's trouble: it returns an :class:`Answer` or a
:class:`~evidence_bench.web.failure.FetchFailure`. httpx's errors are translated here.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from evidence_bench.errors import BlockedAddressError
from evidence_bench.web.failure import FailureReason, FetchFailure
from evidence_bench.web.guard import OPEN_WEB, AddressPolicy, clamp, deadline, remaining

__all__ = [
    "ACCEPT_ENCODING", "HTML_TYPES", "MAX_CONCURRENCY", "PER_HOST", "Answer", "HostGates", "Limits",
    "Refused", "fetch", "get", "html_failure", "url_host",
]  # fmt: skip

#: Requests in flight at once, and to one host, of a fetcher of many pages (LiveFetch's,
#: a recording's): politeness, and no host starves the others.
MAX_CONCURRENCY = 6
PER_HOST = 2
#: The codings this module decodes, and so the only ones it asks for.
ACCEPT_ENCODING = "gzip, deflate"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Media types read as HTML.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_HTML_START = re.compile(rb"^\s*(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)", re.I | re.S)


def url_host(url: str) -> str:
    """``url``'s host, lowercase ("" when it has none or does not parse)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


class HostGates:
    """At most ``per_host`` requests to one host at once, from any number of threads:
    ``with gates(url):`` around each request."""

    def __init__(self, per_host: int) -> None:
        self._per_host = max(1, per_host)
        self._gates: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    def __call__(self, url: str) -> threading.BoundedSemaphore:
        host = url_host(url)
        with self._lock:
            gate = self._gates.get(host)
            if gate is None:
                gate = self._gates[host] = threading.BoundedSemaphore(self._per_host)
        return gate


def html_failure(
    status: int, content_type: str, body: bytes | None = None
) -> tuple[FailureReason, str] | None:
    """Why an answer is not an HTML page (its reason and detail), or None: a status other
    than 2xx, a Content-Type other than :data:`HTML_TYPES`, or no Content-Type and a
    ``body`` that does not start like HTML. Without ``body`` (before it is read), no
    Content-Type passes."""
    if not 200 <= status < 300:
        return FailureReason.HTTP_STATUS, f"HTTP {status}"
    media = content_type.split(";", 1)[0].strip().lower()
    if media and media not in HTML_TYPES:
        return FailureReason.NOT_HTML, f"Content-Type {media}"
    if not media and body is not None and not _HTML_START.match(body[:1024]):
        return FailureReason.NOT_HTML, "no Content-Type, body not HTML"
    return None


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of one request: ``timeout_s`` for all of it (every hop's connect, headers
    and body), ``max_bytes`` of decoded body, ``max_redirects`` followed (``0``: a redirect
    is the answer)."""

    timeout_s: float = 15.0
    max_bytes: int = 3 * 1024 * 1024
    max_redirects: int = 5


@dataclass(frozen=True, slots=True)
class Answer:
    """A final answer: the URL asked for, every URL visited (``hops``, the last is where
    the body came from), its status, headers (without the content coding's) and body;
    ``elapsed_s``: the seconds the request took, of its deadline (the page pipeline gives
    its extraction what is left)."""

    url: str
    hops: tuple[str, ...]
    status: int
    headers: httpx.Headers = field(repr=False)
    body: bytes = field(repr=False)
    elapsed_s: float = 0.0

    @property
    def final_url(self) -> str:
        return self.hops[-1]

    @property
    def content_type(self) -> str:
        return str(self.headers.get("Content-Type", ""))


#: A hop's URL -> why it is refused (LiveFetch's domain lists), or None.
Admit = Callable[[str], "str | None"]
#: The final answer, before its body -> why it is refused (``not_html``), or None.
Check = Callable[[httpx.Response], "FetchFailure | None"]


class Refused(Exception):
    """What :func:`get` raises for a URL or body the rules refuse (a stacked coding, a body
    over the cap, a redirect off the lists); :func:`fetch` returns it as a failure."""

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class _Body:
    """The body as it arrives, decoded through at most one content coding, capped."""

    def __init__(self, response: httpx.Response, max_bytes: int) -> None:
        codings = [
            part.strip().lower()
            for part in response.headers.get("Content-Encoding", "").split(",")
            if part.strip() and part.strip().lower() != "identity"
        ]
        if response.is_stream_consumed:  # an in-memory answer (a test's, a replay's), decoded
            codings = []
        if len(codings) > 1:
            raise Refused(
                FailureReason.CONTENT_ENCODING,
                f"stacked Content-Encoding {', '.join(codings)} (at most one is decoded)",
            )
        coding = codings[0] if codings else ""
        if coding in ("gzip", "x-gzip"):
            self._inflate: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._inflate = zlib.decompressobj()
        elif coding:
            raise Refused(FailureReason.CONTENT_ENCODING, f"Content-Encoding {coding}")
        else:
            self._inflate = None
        self._deflate = coding == "deflate"
        self._max = max_bytes
        self._parts: list[bytes] = []
        self._size = 0

    def _keep(self, part: bytes) -> None:
        self._size += len(part)
        if self._size > self._max:
            raise Refused(FailureReason.TOO_LARGE, f"body over {self._max} bytes")
        self._parts.append(part)

    def feed(self, raw: bytes) -> None:
        if self._inflate is None:
            self._keep(raw)
            return
        data = raw
        while data and not self._inflate.eof:
            try:  # never more than the cap allows out of one call, however dense the input
                part = self._inflate.decompress(data, self._max - self._size + 1)
            except zlib.error as exc:
                if self._deflate and not self._parts and self._size == 0:
                    self._inflate, self._deflate = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue  # a raw deflate stream, as servers send under "deflate"
                detail = f"body does not decode: {exc}"
                raise Refused(FailureReason.CONTENT_ENCODING, detail) from None
            self._keep(part)
            data = self._inflate.unconsumed_tail

    def done(self) -> bytes:
        return b"".join(self._parts)


def _hop(url: str, policy: AddressPolicy, admit: Admit | None) -> None:
    """Raise Refused unless ``url`` may be requested."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError as exc:  # "Invalid IPv6 URL"
        raise Refused(FailureReason.INVALID_URL, str(exc)) from None
    if parts.scheme not in ("http", "https") or not host:
        raise Refused(FailureReason.INVALID_URL, f"not an http(s) URL: {url[:200]}")
    try:
        policy.check_host(host)
    except BlockedAddressError as exc:
        raise Refused(FailureReason.BLOCKED_ADDRESS, str(exc)) from None
    if admit is not None and (why := admit(url)) is not None:
        raise Refused(FailureReason.DENIED_DOMAIN, why)


def _next(response: httpx.Response, hops: list[str], limits: Limits) -> str | None:
    """The redirect's target, or None when ``response`` is the answer."""
    if limits.max_redirects == 0 or response.status_code not in _REDIRECTS:
        return None
    location = response.headers.get("Location", "").strip()
    if not location:
        return None
    try:
        target = str(response.url.join(location).copy_with(fragment=None))
    except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
        detail = f"redirect to {location[:200]!r}: {exc}"
        raise Refused(FailureReason.INVALID_URL, detail) from None
    if target in hops:
        raise Refused(FailureReason.REDIRECTS, f"redirect loop back to {target}")
    if len(hops) > limits.max_redirects:
        raise Refused(FailureReason.REDIRECTS, f"more than {limits.max_redirects} redirects")
    return target


def _request(
    client: httpx.Client, url: str, headers: Mapping[str, str], total: float
) -> httpx.Request:
    params = None
    if client.params:  # httpx replaces a URL's query by the client's params: merge them
        parsed = httpx.URL(url)
        url, params = str(parsed.copy_with(query=None)), parsed.params
    request = client.build_request(
        "GET", url, params=params, headers={"Accept-Encoding": ACCEPT_ENCODING}
    )
    request.headers.update(headers)
    left = remaining()
    request.extensions["timeout"] = httpx.Timeout(max(min(total, left or total), 0.001)).as_dict()
    return request


def _opened(response: httpx.Response, limits: Limits, check: Check | None) -> _Body | FetchFailure:
    if check is not None and (refused := check(response)) is not None:
        return refused
    length = response.headers.get("Content-Length", "")
    encoded = bool(response.headers.get("Content-Encoding"))
    if not encoded and length.isdigit() and int(length) > limits.max_bytes:
        raise Refused(
            FailureReason.TOO_LARGE, f"Content-Length {length} > {limits.max_bytes} bytes"
        )
    return _Body(response, limits.max_bytes)


def _answer(
    url: str, hops: list[str], response: httpx.Response, body: bytes, started: float
) -> Answer:
    headers = httpx.Headers(
        [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
    )
    elapsed = time.monotonic() - started
    return Answer(url, tuple(hops), response.status_code, headers, body, elapsed)


def _failure(url: str, exc: BaseException, limits: Limits) -> FetchFailure:
    """``exc`` (what ended a fetch) as the failure it means."""
    if isinstance(exc, Refused):
        return FetchFailure(url, exc.reason, exc.detail)
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return FetchFailure(
            url, FailureReason.TIMEOUT, f"no complete answer in {limits.timeout_s:g} s"
        )
    if isinstance(exc, BlockedAddressError):
        return FetchFailure(url, FailureReason.BLOCKED_ADDRESS, str(exc))
    if isinstance(exc, httpx.DecodingError):  # (an in-memory answer httpx decoded)
        return FetchFailure(url, FailureReason.CONTENT_ENCODING, str(exc))
    if isinstance(exc, httpx.InvalidURL | UnicodeError):  # (a host IDNA refuses: xn--)
        return FetchFailure(url, FailureReason.INVALID_URL, str(exc) or type(exc).__name__)
    detail = str(exc) or type(exc).__name__
    return FetchFailure(url, FailureReason.NETWORK, detail.splitlines()[0])


_ERRORS = (
    Refused, TimeoutError, BlockedAddressError, httpx.TransportError, httpx.DecodingError,
    httpx.InvalidURL, UnicodeError,
)  # fmt: skip


def get(
    client: httpx.Client,
    url: str,
    *,
    limits: Limits = Limits(),
    policy: AddressPolicy = OPEN_WEB,
    admit: Admit | None = None,
    check: Check | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer | FetchFailure:
    """GET ``url`` through ``client`` under the rules above; raises what ended it (httpx's
    errors, :class:`Refused`, BlockedAddressError). ``check``'s refusal is returned."""
    hops: list[str] = []
    started = time.monotonic()
    with deadline(limits.timeout_s):
        target: str | None = url
        while target is not None:
            _hop(target, policy, admit)
            hops.append(target)
            request = _request(client, target, headers or {}, limits.timeout_s)
            response = client.send(request, stream=True, follow_redirects=False)
            try:
                target = _next(response, hops, limits)
                if target is not None:
                    continue
                opened = _opened(response, limits, check)
                if isinstance(opened, FetchFailure):
                    return opened
                parts = [response.content] if response.is_stream_consumed else None
                for raw in parts or response.iter_raw():
                    opened.feed(raw)
                    clamp(None, httpx.ReadTimeout)  # the deadline, between reads
                return _answer(url, hops, response, opened.done(), started)
            finally:
                response.close()
    raise AssertionError("unreachable")  # pragma: no cover


def fetch(
    client: httpx.Client,
    url: str,
    *,
    limits: Limits = Limits(),
    policy: AddressPolicy = OPEN_WEB,
    admit: Admit | None = None,
    check: Check | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer | FetchFailure:
    """:func:`get`, whatever ended it returned as a failure: never raises for the URL."""
    try:
        return get(
            client, url, limits=limits, policy=policy, admit=admit, check=check, headers=headers
        )
    except _ERRORS as exc:
        return _failure(url, exc, limits)
