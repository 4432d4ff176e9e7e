"""A Brave-compatible Web Search endpoint that serves a test collection, offline.

The engine and its provider talk to Brave's API; the experiment needs the same conversation
over a collection with qrels. :class:`BraveSimulator` answers ``GET /res/v1/web/search`` from a
BM25 index with Brave's body, headers, limits and error bodies (``BRAVE_API.md``), so the
provider code under test is the code that talks to Brave. It runs in-process
(:class:`SimulatorTransport`, no socket) or over HTTP on 127.0.0.1 only (:func:`serve`,
:func:`run_server`).

It also serves every document as a web page at its URL's path (``GET /doc/<id>``, no
token: :mod:`evidence_bench.web.pages`), with a deterministic share of failing pages
(``page_failure_rate``); a page that times out never answers (``SimResponse.stall``).

Success bodies are a pure function of the request (same query, same bytes), so cassettes
recorded against the simulator never change between recordings; only error ids and times and,
with ``rate_limit`` set, the per-second rate-limit headers vary.
"""

from __future__ import annotations

import hmac
import html
import json
import math
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from json.encoder import encode_basestring
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx

from evidence_bench.collections.beir import Collection, Document
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import MAX_QUERY_CHARS, MAX_QUERY_WORDS
from evidence_bench.web.bm25 import BM25Index
from evidence_bench.web.pages import PAGE_PATH, STALL_HEADER, check_failure_rate, render_page
from evidence_bench.web.saved_index import collection_index
from evidence_bench.web.snippets import SnippetIndex

__all__ = [
    "LISTEN_BACKLOG",
    "MAX_REQUEST_BODY",
    "SEARCH_PATH",
    "BraveSimulator",
    "RunningSimulator",
    "SimResponse",
    "SimulatorTransport",
    "forget_indexes",
    "prepare_index",
    "run_server",
    "serve",
]

SEARCH_PATH = "/res/v1/web/search"
LOOPBACK = "127.0.0.1"
MAX_COUNT = 20
MAX_OFFSET = 9
TITLE_WORDS = 10
MONTH_SECONDS = 2_592_000
#: Reported when ``rate_limit`` is None, and the monthly window in every answer: the monthly
#: quota is not simulated, each answer reports one request used.
UNLIMITED_RATE = 1000
MONTHLY_QUOTA = 15_000

#: Connections the kernel queues before ``accept``: socketserver's default of 5 drops
#: clients of a burst (they wait out SYN retries), a run's workers and pages come in bursts.
LISTEN_BACKLOG = 1024
#: The largest request body read (and discarded: the search is a GET); a larger
#: ``Content-Length`` is answered 413 without reading the body.
MAX_REQUEST_BODY = 64 * 1024

_INTEGER = re.compile(r"-?[0-9]+")
_BOOLEANS = {"true": True, "false": False}


@dataclass(frozen=True, slots=True)
class SimResponse:
    """One answer: status, headers (canonical case) and the exact body bytes.

    ``stall``: send nothing at all (a page that times out); status and body are unused.
    ``decoded``: for a search answer, what makes ``json.loads(body)`` afresh from the pieces
    the body was laid out from, without reading the body (:class:`SimulatorTransport`).
    """

    status: int
    headers: dict[str, str]
    body: bytes
    stall: bool = False
    decoded: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def json(self) -> Any:
        """The body decoded (every search answer is JSON)."""
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class _SearchRequest:
    q: str
    count: int
    offset: int
    text_decorations: bool
    extra_snippets: bool


class BraveSimulator:
    """Answers Brave Web Search requests from a collection's BM25 ranking.

    ``token``: the only accepted ``X-Subscription-Token`` (None accepts any non-empty one).
    ``rate_limit``: successful requests allowed per 1-second window (None: unlimited, and
    the rate-limit headers are constants). ``clock`` (monotonic seconds) drives the window;
    ``wall_clock`` (Unix seconds) stamps error bodies. ``page_failure_rate``: the share of
    document pages that fail (404, timeout or non-HTML, by a hash of the document id);
    ``page_stall_s``: how long the HTTP server holds a timing-out page's connection before
    closing it unanswered (0: it answers at once, a 504 carrying
    :data:`~evidence_bench.web.pages.STALL_HEADER`, for a client that knows to read it as
    the timeout: ``record``'s).
    """

    def __init__(
        self,
        collection: Collection,
        *,
        token: str | None = None,
        rate_limit: int | None = None,
        extra_snippet_count: int = 3,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        page_failure_rate: float = 0.0,
        page_stall_s: float = 30.0,
    ) -> None:
        if rate_limit is not None and rate_limit < 1:
            raise ConfigurationError(f"rate_limit must be at least 1 or None, got {rate_limit}")
        if not 0 <= extra_snippet_count <= 5:
            raise ConfigurationError(
                f"extra_snippet_count must be 0-5 (Brave sends up to 5), got {extra_snippet_count}"
            )
        self.collection = collection
        self.page_failure_rate = check_failure_rate(page_failure_rate)
        self.page_stall_s = page_stall_s
        self.extra_snippet_count = extra_snippet_count
        self._token = token
        self._rate_limit = rate_limit
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._window_start: float | None = None
        self._window_used = 0
        self._index, self._snippets = _index_for(collection)
        host = collection.host
        favicon = f"https://{host}/favicon.ico"
        #: every result's profile, and its meta_url but for the path
        self._profile = {
            "name": collection.name,
            "url": f"https://{host}/",
            "long_name": host,
            "img": favicon,
        }
        self._meta_url = {"scheme": "https", "netloc": host, "hostname": host, "favicon": favicon}
        #: a result's fields after its description, encoded, around its meta_url's path
        self._rest = _pieces(_result_rest(self._profile, self._meta_url, _STAND_IN))
        #: doc id -> its result's fixed fields (:meth:`_fields`)
        self._encoded: dict[str, _Fields] = {}

    def __repr__(self) -> str:
        token = "None" if self._token is None else "'***'"
        return (
            f"BraveSimulator(collection={self.collection.name!r}, token={token}, "
            f"rate_limit={self._rate_limit})"
        )

    def handle(
        self, method: str, path: str, params: Mapping[str, str], headers: Mapping[str, str]
    ) -> SimResponse:
        """Answer one request; ``params`` are the query parameters, ``headers`` any case."""
        if path.startswith(PAGE_PATH) and method.upper() in ("GET", "HEAD"):
            return self.page(path[len(PAGE_PATH) :])
        if path != SEARCH_PATH:
            return self._error(404, "RESOURCE_NOT_FOUND", "Resource not found.", {"path": path})
        if method.upper() != "GET":
            return self._error(
                405,
                "METHOD_NOT_ALLOWED",
                f"Method {method.upper()} not allowed.",
                {"allow": "GET"},
                {"Allow": "GET"},
            )
        lowered = {name.lower(): value for name, value in headers.items()}
        token = lowered.get("x-subscription-token")
        errors: list[dict[str, Any]] = []
        if token is None:
            errors.append(
                _field_error(("header", "x-subscription-token"), "Field required", "missing")
            )
        request = _parse_params(params, errors)
        if errors or request is None or token is None:
            return self._error(
                422, "VALIDATION", "Unable to validate request parameter(s)", {"errors": errors}
            )
        if not self._token_ok(token):
            return self._error(
                422,
                "SUBSCRIPTION_TOKEN_INVALID",
                "The provided subscription token is invalid.",
                {"component": "authentication"},
            )
        allowed, rate_headers, rate_current = self._take_rate_slot()
        if not allowed:
            meta = {
                "plan": "Simulator",
                "rate_limit": self._rate_limit,
                "rate_current": rate_current,
                "quota_limit": MONTHLY_QUOTA,
                "quota_current": 1,
                "component": "rate_limiter",
            }
            return self._error(
                429, "RATE_LIMITED", "Request rate limit exceeded for plan", meta, rate_headers
            )
        body, decoded = self._search_body(request)
        headers = {"Content-Type": "application/json", **rate_headers}
        return SimResponse(200, headers, body, decoded=decoded)

    def page(self, doc_id: str) -> SimResponse:
        """The web page of ``doc_id`` (:func:`~evidence_bench.web.pages.render_page`)."""
        page = render_page(self.collection, doc_id, failure_rate=self.page_failure_rate)
        if page.stall:
            return SimResponse(0, {}, b"", stall=True)
        return SimResponse(page.status, {"Content-Type": page.content_type}, page.body)

    def refusal(self, status: int, code: str, detail: str) -> SimResponse:
        """Brave's error body for a request refused before it is parsed (400, 413); the
        connection closes after it."""
        return self._error(status, code, detail, {"component": "http"}, {"Connection": "close"})

    # -- authentication and rate limit -------------------------------------------------------

    def _token_ok(self, token: str) -> bool:
        if not token.strip():
            return False
        if self._token is None:
            return True
        return hmac.compare_digest(token.encode(), self._token.encode())

    def _take_rate_slot(self) -> tuple[bool, dict[str, str], int]:
        """Count one successful request in the current 1-second window, if it has room."""
        limit = self._rate_limit
        if limit is None:
            return True, _rate_headers(UNLIMITED_RATE, UNLIMITED_RATE - 1, 1), 1
        now = self._clock()
        with self._lock:
            if self._window_start is None or now - self._window_start >= 1.0:
                self._window_start = now
                self._window_used = 0
            reset = max(1, math.ceil(self._window_start + 1.0 - now))
            if self._window_used >= limit:
                return False, _rate_headers(limit, 0, reset), self._window_used + 1
            self._window_used += 1
            return True, _rate_headers(limit, limit - self._window_used, reset), self._window_used

    def _error(
        self,
        status: int,
        code: str,
        detail: str,
        meta: Mapping[str, Any],
        extra_headers: Mapping[str, str] | None = None,
    ) -> SimResponse:
        body = {
            "type": "ErrorResponse",
            "error": {
                "id": str(uuid.uuid4()),
                "status": status,
                "code": code,
                "detail": detail,
                "meta": dict(meta),
            },
            "time": int(self._wall_clock()),
        }
        headers = {"Content-Type": "application/json", **(extra_headers or {})}
        return SimResponse(status, headers, _encode(body))

    # -- the search body ---------------------------------------------------------------------

    def _search_body(self, request: _SearchRequest) -> tuple[bytes, Callable[[], Any]]:
        """The JSON body, compact (``json.dumps`` with ``(",", ":")`` separators and
        ``ensure_ascii=False``), laid out from pieces encoded once (:data:`_QUERY`,
        :data:`_MAIN`, each document's fixed fields: :meth:`_fields`); each answer encodes
        its query and snippets. With it, what makes the body decoded from the same pieces
        (:func:`_decoded_body`)."""
        start = request.offset * request.count
        analyzed = self._index.analyze(request.q)
        hits = self._index.search_terms(analyzed, start + request.count + 1)
        page = [
            self.collection.documents[doc_id] for doc_id, _ in hits[start : start + request.count]
        ]
        more = len(hits) > start + request.count and request.offset < MAX_OFFSET
        head, tail = _QUERY[more]
        parts = [head, _string(request.q).encode(), tail, _MAIN[len(page)]]
        results: list[tuple[_Fields, str, list[str]]] = []
        if page:
            results = self._results(page, request, frozenset(analyzed))
            parts.append(b',"web":{"type":"search","results":[')
            parts.append(b",".join([_result_bytes(*result) for result in results]))
            parts.append(b'],"family_friendly":true}')
        parts.append(b"}")
        q, profile, meta_url = request.q, self._profile, self._meta_url
        return b"".join(parts), lambda: _decoded_body(q, more, results, profile, meta_url)

    def _results(
        self, page: list[Document], request: _SearchRequest, terms: frozenset[str]
    ) -> list[tuple[_Fields, str, list[str]]]:
        """Each document's fixed fields (:meth:`_fields`), description and extra snippets
        (JSON-escaped, as they are encoded; ``terms``: the query's)."""
        extra = self.extra_snippet_count if request.extra_snippets else 0
        prepared = self._snippets or SnippetIndex.of(page)
        shown = prepared.snippets(
            [doc.doc_id for doc in page], terms, 1 + extra, request.text_decorations
        )
        results: list[tuple[_Fields, str, list[str]]] = []
        for doc, snippets in zip(page, shown, strict=True):
            description = snippets[0] if snippets else ""
            # Brave's extra snippets are plain excerpts, without <strong> decorations.
            extras = snippets[1:] if request.extra_snippets else []
            results.append((self._fields(doc), description, extras))
        return results

    def _fields(self, doc: Document) -> _Fields:
        """A result's encoded fields before its description (an opening brace, title, url
        and the description's opening quote) and after it (its closing quote, type to
        meta_url, without the closing brace), with its title, url and meta_url's path as
        they decode, made once per document."""
        found = self._encoded.get(doc.doc_id)
        if found is None:
            title, url = html.escape(_title(doc)), self.collection.url_for(doc.doc_id)
            path = f"› doc › {doc.doc_id}"
            before, after = self._rest
            found = (
                f'{{"title":{_string(title)},"url":{_string(url)},"description":"'.encode(),
                f'",{before[1:]}{_string(path)}{after[:-1]}'.encode(),
                title,
                url,
                path,
            )
            self._encoded[doc.doc_id] = found
        return found


#: A result's fixed fields (:meth:`BraveSimulator._fields`): encoded around its description,
#: and its title, url and meta_url's path decoded.
_Fields = tuple[bytes, bytes, str, str, str]
#: A result's fields between its description and its profile, as Brave sends them.
_RESULT_FIELDS: dict[str, Any] = {
    "type": "search_result",
    "subtype": "generic",
    "is_source_local": False,
    "is_source_both": False,
    "is_live": False,
    "language": "en",
    "family_friendly": True,
}


def _result_rest(profile: dict[str, str], meta_url: dict[str, str], path: str) -> dict[str, Any]:
    """A result's fields after its description: profile and meta_url new dicts."""
    return {**_RESULT_FIELDS, "profile": {**profile}, "meta_url": {**meta_url, "path": path}}


def _result_bytes(fields: _Fields, description: str, extras: list[str]) -> bytes:
    """One result object encoded: its fixed fields around its description, and its extra
    snippets (JSON-escaped already) when it has any."""
    head, tail = fields[0], fields[1]
    if extras:
        joined = '","'.join(extras)
        return b"".join(
            (head, description.encode(), tail, f',"extra_snippets":["{joined}"]}}'.encode())
        )
    return b"".join((head, description.encode(), tail, b"}"))


def _unescaped(escaped: str) -> str:
    """A JSON string's content (without its quotes) decoded, as ``json.loads`` does; text
    without a backslash has no escape (every escape starts with one)."""
    return json.loads(f'"{escaped}"') if "\\" in escaped else escaped


def _decoded_body(
    q: str,
    more: bool,
    results: list[tuple[_Fields, str, list[str]]],
    profile: dict[str, str],
    meta_url: dict[str, str],
) -> dict[str, Any]:
    """What ``json.loads`` makes of the body :meth:`BraveSimulator._search_body` lays out
    from the same pieces: equal, its keys in the body's order, every dict and list new
    (strings are immutable), in a fraction of the time of decoding the body."""
    body: dict[str, Any] = {"query": _query_object(q, more), **_main_object(len(results))}
    if results:
        decoded: list[dict[str, Any]] = []
        for (_, _, title, url, path), description, extras in results:
            result = {
                "title": title,
                "url": url,
                "description": _unescaped(description),
                **_RESULT_FIELDS,
                "profile": {**profile},
                "meta_url": {**meta_url, "path": path},
            }  # the fields in _result_rest's order, in one display (faster than a call)
            if extras:
                result["extra_snippets"] = [_unescaped(extra) for extra in extras]
            decoded.append(result)
        body["web"] = {"type": "search", "results": decoded, "family_friendly": True}
    return body


_INDEXES: dict[str, tuple[BM25Index, SnippetIndex | None]] = {}
_INDEXES_LOCK = threading.Lock()
_INDEXES_KEPT = 4
#: Up to this many documents, every document's snippet words are prepared once, with the
#: index (~30 bytes a word); beyond, each answer prepares its page's (a few ms a page).
WHOLE_SNIPPETS_LIMIT = 20_000


def _index_for(collection: Collection) -> tuple[BM25Index, SnippetIndex | None]:
    """The BM25 index over title + text (the saved one,
    :mod:`evidence_bench.web.saved_index`, else built), and for a collection of at most
    :data:`WHOLE_SNIPPETS_LIMIT` documents their snippet words, shared by simulators of the
    same checksum.

    A runner may build a simulator per worker or per replay miss; indexing once per
    collection keeps that cheap. The few most recent collections are kept.
    """
    with _INDEXES_LOCK:
        found = _INDEXES.get(collection.checksum)
        if found is None:
            documents = collection.documents
            whole = len(documents) <= WHOLE_SNIPPETS_LIMIT
            snippets = SnippetIndex.of(list(documents.values())) if whole else None
            found = (collection_index(collection), snippets)
            if len(_INDEXES) >= _INDEXES_KEPT:
                del _INDEXES[next(iter(_INDEXES))]
            _INDEXES[collection.checksum] = found
        return found


def prepare_index(collection: Collection) -> None:
    """Build ``collection``'s index now, as its first simulator would: a runner does so
    before it forks its workers, which then share the index's pages instead of each
    building its own."""
    _index_for(collection)


def forget_indexes() -> None:
    """Drop the indexes kept (a runner's parent, once its workers are forked)."""
    with _INDEXES_LOCK:
        _INDEXES.clear()


# -- request parsing (Brave's rules, pydantic-style messages) ------------------------------------


def _field_error(loc: Sequence[str], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": list(loc), "msg": msg, "type": kind}


def _parse_params(params: Mapping[str, str], errors: list[dict[str, Any]]) -> _SearchRequest | None:
    """The search request, or None after appending each violation to ``errors``."""
    before = len(errors)
    q = params.get("q")
    loc = ("query", "q")
    if q is None:
        errors.append(_field_error(loc, "Field required", "missing"))
    elif not q.strip():
        errors.append(
            _field_error(loc, "String should have at least 1 character", "string_too_short")
        )
    elif len(q) > MAX_QUERY_CHARS:
        msg = f"String should have at most {MAX_QUERY_CHARS} characters"
        errors.append(_field_error(loc, msg, "string_too_long"))
    elif len(q.split()) > MAX_QUERY_WORDS:
        msg = f"Value error, query should have at most {MAX_QUERY_WORDS} words"
        errors.append(_field_error(loc, msg, "value_error"))
    count = _parse_int(params, "count", MAX_COUNT, 1, MAX_COUNT, errors)
    offset = _parse_int(params, "offset", 0, 0, MAX_OFFSET, errors)
    decorations = _parse_bool(params, "text_decorations", True, errors)
    extra = _parse_bool(params, "extra_snippets", False, errors)
    _parse_bool(params, "spellcheck", True, errors)
    if len(errors) > before or q is None:
        return None
    return _SearchRequest(q, count, offset, decorations, extra)


def _parse_int(
    params: Mapping[str, str],
    name: str,
    default: int,
    low: int,
    high: int,
    errors: list[dict[str, Any]],
) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    loc = ("query", name)
    if not _INTEGER.fullmatch(raw.strip()):
        msg = "Input should be a valid integer, unable to parse string as an integer"
        errors.append(_field_error(loc, msg, "int_parsing"))
        return default
    value = int(raw)
    if value < low:
        errors.append(
            _field_error(
                loc, f"Input should be greater than or equal to {low}", "greater_than_equal"
            )
        )
    elif value > high:
        errors.append(
            _field_error(loc, f"Input should be less than or equal to {high}", "less_than_equal")
        )
    return value


def _parse_bool(
    params: Mapping[str, str], name: str, default: bool, errors: list[dict[str, Any]]
) -> bool:
    raw = params.get(name)
    if raw is None:
        return default
    value = _BOOLEANS.get(raw.strip().lower())
    if value is None:
        msg = "Input should be a valid boolean, unable to interpret input"
        errors.append(_field_error(("query", name), msg, "bool_parsing"))
        return default
    return value


def _rate_headers(per_second: int, remaining: int, reset: int) -> dict[str, str]:
    """Brave's two-window headers: per second, then per month (BRAVE_API.md)."""
    return {
        "X-RateLimit-Limit": f"{per_second}, {MONTHLY_QUOTA}",
        "X-RateLimit-Policy": f"{per_second};w=1, {MONTHLY_QUOTA};w={MONTH_SECONDS}",
        "X-RateLimit-Remaining": f"{remaining}, {MONTHLY_QUOTA - 1}",
        "X-RateLimit-Reset": f"{reset}, {MONTH_SECONDS}",
    }


def _json(value: Any) -> str:
    """Brave's compact JSON: no spaces, non-ASCII characters as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _encode(body: Mapping[str, Any]) -> bytes:
    return _json(body).encode()


#: One string as :func:`_json` encodes it (json's own encoder for ``ensure_ascii=False``).
_string: Callable[[str], str] = encode_basestring


def _query_object(original: str, more: bool) -> dict[str, Any]:
    """A search body's ``query``: what Brave says of the query it answered."""
    return {
        "original": original,
        "show_strict_warning": False,
        "is_navigational": False,
        "is_news_breaking": False,
        "spellcheck_off": True,
        "country": "us",
        "bad_results": False,
        "should_fallback": False,
        "postal_code": "",
        "city": "",
        "header_country": "",
        "more_results_available": more,
        "state": "",
    }


def _main_object(size: int) -> dict[str, Any]:
    """A search body's ``mixed`` (one ``main`` entry per result) and ``type``."""
    main = [{"type": "web", "index": i, "all": False} for i in range(size)]
    return {"mixed": {"type": "mixed", "main": main, "top": [], "side": []}, "type": "search"}


#: Where a text goes in an object encoded once (:func:`_pieces`): no answer holds it.
_STAND_IN = "\x00"


def _pieces(value: Mapping[str, Any]) -> tuple[str, str]:
    """``value`` as :func:`_json` encodes it, before and after its one :data:`_STAND_IN`."""
    head, _, tail = _json(value).partition(_string(_STAND_IN))
    return head, tail


def _query_pieces(more: bool) -> tuple[bytes, bytes]:
    """A search body's opening up to its query's text (``original``), and what follows it
    up to ``mixed``, as :func:`_json` encodes them."""
    head, tail = _pieces(_query_object(_STAND_IN, more))
    return f'{{"query":{head}'.encode(), tail.encode()


#: By ``more_results_available``: the body's pieces around its query's text.
_QUERY = {more: _query_pieces(more) for more in (False, True)}
#: By page size: the body's ``mixed`` and ``type``, encoded.
_MAIN = [f",{_json(_main_object(size))[1:-1]}".encode() for size in range(MAX_COUNT + 1)]


# -- snippets ------------------------------------------------------------------------------------


def _title(doc: Document) -> str:
    if doc.title.strip():
        return doc.title.strip()
    words = doc.text.split()
    if not words:
        return f"Document {doc.doc_id}"
    return " ".join(words[:TITLE_WORDS]) + (" …" if len(words) > TITLE_WORDS else "")


# -- in-process transport ------------------------------------------------------------------------


class SimulatorTransport(httpx.BaseTransport):
    """An httpx transport that hands each request to a simulator, with no socket."""

    def __init__(self, simulator: BraveSimulator) -> None:
        self.simulator = simulator
        #: httpx's headers of the answers' header sets seen (a response copies them as
        #: they are); with ``rate_limit`` None every search answer has the same
        self._headers: dict[tuple[tuple[str, str], ...], httpx.Headers] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        url = request.url
        # Each name's first value, as ``url.params`` gives it (parse_qs keeping blank values;
        # the raw query is the raw path's part after its first "?"), without a QueryParams.
        params: dict[str, str] = {}
        for name, value in parse_qsl(url.raw_path.decode("ascii").partition("?")[2], True):
            params.setdefault(name, value)
        answer = self.simulator.handle(request.method, url.path, params, request.headers)
        if answer.stall:
            raise httpx.ReadTimeout("the simulated page never answers", request=request)
        key = tuple(answer.headers.items())
        headers = self._headers.get(key)
        if headers is None:
            headers = httpx.Headers(answer.headers)
            if len(self._headers) >= 64:  # per-second rate-limit headers vary
                self._headers.clear()
            self._headers[key] = headers
        if answer.decoded is None:
            return httpx.Response(
                answer.status, headers=headers, content=answer.body, request=request
            )
        response = _SearchResponse(
            answer.status, headers=headers, content=answer.body, request=request
        )
        response.decoded = answer.decoded
        return response


class _SearchResponse(httpx.Response):
    """A search answer whose :meth:`json` is made from the pieces its body was laid out
    from (:attr:`SimResponse.decoded`: equal to decoding the body, every dict and list
    new), the first time it is asked without arguments; then, as ever, by decoding."""

    decoded: Callable[[], Any] | None = None

    def json(self, **kwargs: Any) -> Any:
        make = self.decoded
        if make is None or kwargs:
            return super().json(**kwargs)
        self.decoded = None
        return make()


# -- loopback HTTP server ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunningSimulator:
    """A simulator being served: point a Brave client's base URL at ``base_url``."""

    base_url: str
    port: int

    @property
    def search_url(self) -> str:
        """The Web Search endpoint's full address."""
        return f"{self.base_url}/web/search"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up; report anything else (a bug) as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Hands every request to ``simulator``; no Date or Server header, no access log."""

    simulator: BraveSimulator
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request access log on stderr."""

    def _answer(self, send_body: bool = True) -> None:
        split = urlsplit(self.path)
        params: dict[str, str] = {}
        for name, value in parse_qsl(split.query, keep_blank_values=True):
            params.setdefault(name, value)
        declared = (self.headers.get("Content-Length") or "0").strip()
        if not declared.isdigit():
            self._refuse(400, "BAD_REQUEST", f"Content-Length {declared[:40]!r} is not a size.")
            return
        if int(declared) > MAX_REQUEST_BODY:
            detail = f"Request body over {MAX_REQUEST_BODY} bytes."
            self._refuse(413, "PAYLOAD_TOO_LARGE", detail)
            return
        self.rfile.read(int(declared))
        answer = self.simulator.handle(
            self.command, unquote(split.path), params, dict(self.headers.items())
        )
        if answer.stall and self.simulator.page_stall_s <= 0:  # the timeout, said at once
            self._send(SimResponse(504, {STALL_HEADER: "timeout"}, b""), send_body)
            return
        if answer.stall:  # a page that times out: hold the connection, then hang up
            time.sleep(self.simulator.page_stall_s)
            self.close_connection = True
            return
        self._send(answer, send_body)

    def _send(self, answer: SimResponse, send_body: bool = True) -> None:
        # send_response_only: no Date header, so recorded cassettes stay byte-stable.
        self.send_response_only(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        if send_body:
            self.wfile.write(answer.body)

    def _refuse(self, status: int, code: str, detail: str) -> None:
        """Answer ``status`` with Brave's error body and close: the unread body (if any)
        stays unread, so the connection cannot carry another request."""
        self._send(self.simulator.refusal(status, code, detail))
        self.close_connection = True

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET


def _make_server(simulator: BraveSimulator, host: str, port: int) -> _Server:
    if host != LOOPBACK:
        raise ConfigurationError(
            f"the simulator listens on {LOOPBACK} only, never beyond loopback; got host {host!r}"
        )
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"port must be 0-65535 (0 picks a free one), got {port}")
    handler = type("SimulatorHandler", (_Handler,), {"simulator": simulator})
    try:
        return _Server((LOOPBACK, port), handler)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot listen on {LOOPBACK}:{port} ({exc.strerror}); choose another port"
        ) from exc


@contextmanager
def serve(
    simulator: BraveSimulator, *, host: str = LOOPBACK, port: int = 0
) -> Iterator[RunningSimulator]:
    """Serve ``simulator`` on 127.0.0.1 in a daemon thread for the ``with`` block.

    ``port=0`` picks a free port; the yielded :class:`RunningSimulator` names it.
    """
    server = _make_server(simulator, host, port)
    bound_port = int(server.server_address[1])
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name=f"brave-simulator-{bound_port}",
        daemon=True,
    )
    thread.start()
    try:
        yield RunningSimulator(base_url=f"http://{LOOPBACK}:{bound_port}/res/v1", port=bound_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run_server(simulator: BraveSimulator, host: str = LOOPBACK, port: int = 8765) -> None:
    """Serve ``simulator`` in the foreground until Ctrl-C (the CLI's ``serve`` command)."""
    server = _make_server(simulator, host, port)
    bound_port = int(server.server_address[1])
    print(
        f"Brave-compatible simulator for {simulator.collection.name} at "
        f"http://{LOOPBACK}:{bound_port}/res/v1 (Ctrl-C to stop)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
