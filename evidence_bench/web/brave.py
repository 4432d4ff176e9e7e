"""Brave Web Search as a :class:`~evidence_bench.engine.base.SearchProvider`.

One query becomes ``GET {base}/web/search`` requests, one per page of up to 20 results.
Answers that may succeed later (429, 5xx, transport failures) are retried under a bounded
:class:`RetryPolicy`; every httpx and JSON failure is translated into the package's errors
here, at this one boundary. The subscription token never leaves memory: it is masked in the
provider's repr and removed from any message built from a dependency's text.
"""

from __future__ import annotations

import functools
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar
from urllib.parse import urlencode, urlsplit

import httpx

from evidence_bench._printable import plain_text
from evidence_bench._secrets import KEY_ENV, redact, redact_json
from evidence_bench.errors import (
    ConfigurationError,
    ProviderStatusError,
    QueryError,
    RateLimitError,
    RequestError,
    ResponseFormatError,
)
from evidence_bench.evidence import (
    Evidence,
    dedupe,
    normalize_text,
    validate_query,
)
from evidence_bench.web.fetch import Answer, Limits, Refused, get, url_host
from evidence_bench.web.guard import ANY_ADDRESS, GuardedTransport

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "MAX_ANSWER_BYTES",
    "MAX_COUNT",
    "MAX_OFFSET",
    "BraveProvider",
    "HttpClient",
    "RetryPolicy",
]

API_KEY_ENV = KEY_ENV
BASE_URL_ENV = "BRAVE_SEARCH_BASE_URL"
DEFAULT_BASE_URL = "https://api.search.brave.com/res/v1"
#: Brave's bounds: ``count`` is 1–20 results a page; ``offset`` is a page number 0–9.
MAX_COUNT = 20
MAX_OFFSET = 9

_MASK = "****"
#: The most a Brave answer may hold, decoded (20 results with extra snippets are ~100 KB).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: Brave's endpoint is the user's own setting (or the simulator on 127.0.0.1), not a
#: web-sourced URL: no address is refused; the deadline and the cap still hold.
_ANY_ADDRESS = ANY_ADDRESS
#: Parameters the provider sets itself; ``params`` may not override them.
_RESERVED_PARAMS = ("q", "count", "offset", "extra_snippets")
_T = TypeVar("_T")
#: httpx's client class as imported (a test may replace ``httpx.Client`` with a factory).
_HTTPX_CLIENT = httpx.Client


class HttpClient(Protocol):
    """What the provider needs of an HTTP client: the shape of ``httpx.Client.get``."""

    def get(
        self,
        url: str,
        *,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        timeout: float,
    ) -> httpx.Response: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries for answers that may succeed later: 429, 5xx and transport failures.

    ``attempts`` counts every request, the first included. Before retry ``n`` (1-based) the
    provider waits ``backoff * 2 ** (n - 1)`` seconds, capped at ``max_wait``; after a 429
    that carries ``X-RateLimit-Reset`` it waits that reset instead, and gives up at once when
    the reset is longer than ``max_wait``. Other 4xx answers are never retried: they would
    fail the same way again.
    """

    attempts: int = 3
    backoff: float = 0.5
    max_wait: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy.attempts must be at least 1, got {self.attempts}"
            )
        if not (self.backoff >= 0 and self.max_wait >= 0):
            raise ConfigurationError(
                f"RetryPolicy.backoff and max_wait must be >= 0, got {self.backoff}, "
                f"{self.max_wait}"
            )

    def delay(self, retry: int, error: RequestError) -> float | None:
        """Seconds to wait before retry number ``retry`` (1-based) after ``error``, or None."""
        if retry >= self.attempts or not _retryable(error):
            return None
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_wait else None
        return float(min(self.backoff * 2 ** (retry - 1), self.max_wait))


#: What an HTTP header value can carry as a token: visible ASCII, no spaces.
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


def _retryable(error: RequestError) -> bool:
    if isinstance(error, ProviderStatusError):
        if error.code == "QUOTA_LIMITED":
            return False  # the monthly quota: no wait within reason brings it back
        return error.status == 429 or error.status >= 500
    return True  # a transport failure or a timeout


class BraveProvider:
    """Fetches normalized, deduplicated evidence from Brave's Web Search API.

    The key comes from ``api_key`` or ``BRAVE_SEARCH_API_KEY``, the base URL from
    ``base_url``, ``BRAVE_SEARCH_BASE_URL`` or Brave's own. Without ``http_client`` each
    :meth:`search` opens an ``httpx.Client`` and closes it when done. ``retry=None`` means the
    default :class:`RetryPolicy`; pass ``RetryPolicy(attempts=1)`` for no retries. ``params``
    adds Brave parameters (``country``, ``safesearch``, …) after the provider's own.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        http_client: HttpClient | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 10.0,
        extra_snippets: bool = False,
        params: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        key = (api_key or os.environ.get(API_KEY_ENV) or "").strip()
        if not key:
            raise ConfigurationError(
                f"no Brave API key: set {API_KEY_ENV} (in Python, or pass api_key=; "
                "get one at https://api-dashboard.search.brave.com)"
            )
        if not _HEADER_SAFE.fullmatch(key):  # never echo it: it is a secret
            raise ConfigurationError(
                f"the Brave API key (api_key or {API_KEY_ENV}) holds characters an HTTP "
                "header cannot carry"
            )
        base = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).strip().rstrip("/")
        try:
            parts = urlsplit(base)
            parts.port  # noqa: B018 - parsing the port is what may fail
        except ValueError:
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"Brave base URL {base!r} (from base_url or {BASE_URL_ENV}) is not an http(s) URL"
            )
        if not timeout > 0:
            raise ConfigurationError(f"timeout must be > 0 seconds, got {timeout}")
        extra = dict(params or {})
        clashes = [name for name in _RESERVED_PARAMS if name in extra]
        if clashes:
            raise ConfigurationError(
                f"params may not set {', '.join(clashes)}: the provider sets "
                f"{', '.join(_RESERVED_PARAMS)} itself (use limit= and extra_snippets=)"
            )
        self._key = key
        self.base_url = base
        self._endpoint = f"{base}/web/search"
        self._client = http_client
        self._retry = retry if retry is not None else RetryPolicy()
        self._timeout = timeout
        self._extra_snippets = extra_snippets
        self._params = extra
        self._sleep = sleep
        # What every request sends, made once: httpx's own types, which it copies as they are.
        self._headers = httpx.Headers(
            {"X-Subscription-Token": key, "Accept": "application/json", "Accept-Encoding": "gzip"}
        )
        self._httpx_timeout = httpx.Timeout(timeout)

    def __repr__(self) -> str:
        return (
            f"BraveProvider(api_key={_MASK!r}, base_url={self.base_url!r}, "
            f"extra_snippets={self._extra_snippets}, retry={self._retry!r})"
        )

    def search(self, query: str, *, limit: int = 10) -> list[Evidence]:
        """Up to ``limit`` results in Brave's order, deduplicated by canonical URL.

        Raises :class:`QueryError` before any request when Brave would refuse the query.
        Pages are fetched while fewer than ``limit`` distinct results are held, Brave says
        more are available, and the last page (offset 9) has not been reached.
        """
        text = validate_query(query)
        if limit < 1:
            raise QueryError(f"limit must be at least 1, got {limit}")
        if self._client is not None:
            return self._search(self._client, text, limit)
        transport = GuardedTransport(_ANY_ADDRESS)  # holds the deadline on every read
        with httpx.Client(timeout=self._timeout, transport=transport, trust_env=False) as client:
            return self._search(client, text, limit)

    def _search(self, client: HttpClient, query: str, limit: int) -> list[Evidence]:
        count = min(limit, MAX_COUNT)
        found: list[Evidence] = []
        for offset in range(MAX_OFFSET + 1):
            body = self._fetch(client, self._query_params(query, count, offset))
            page, more = _parse_page(body, f"Brave's answer for offset {offset}", len(found) + 1)
            found = dedupe([*found, *page])
            if more is None:  # Brave may omit the flag: a full page suggests another one
                more = len(page) >= count
            if len(found) >= limit or not page or not more:
                break
        return found[:limit]

    def _query_params(self, query: str, count: int, offset: int) -> dict[str, str]:
        # Always send offset, even 0, so equal searches make byte-equal requests (cassettes).
        params = {"q": query, "count": str(count), "offset": str(offset)}
        if self._extra_snippets:
            params["extra_snippets"] = "true"
        params.update(self._params)
        return params

    def _fetch(self, client: HttpClient, params: Mapping[str, str]) -> Mapping[str, object]:
        retry = 1
        while True:
            try:
                return self._request(client, params)
            except RequestError as error:
                wait = self._retry.delay(retry, error)
                if wait is None:
                    raise
                self._sleep(wait)
                retry += 1

    def _send(self, client: httpx.Client, params: Mapping[str, str]) -> httpx.Response:
        """The answer by the guarded GET: one deadline of ``timeout`` for all of it, at most
        :data:`MAX_ANSWER_BYTES` decoded, one content coding; no redirect followed."""
        # The URL httpx would build from ``params`` (its query is urlencode's, as httpx's
        # QueryParams writes it); a client's own params come first.
        url = f"{self._endpoint}?{urlencode(params)}"
        limits = Limits(timeout_s=self._timeout, max_bytes=MAX_ANSWER_BYTES, max_redirects=0)
        try:
            answer = get(client, url, limits=limits, policy=_ANY_ADDRESS, headers=self._headers)
        except Refused as exc:
            raise ResponseFormatError(
                f"Brave's answer from {self._endpoint} was refused: {self._redact(exc.detail)}"
            ) from None
        assert isinstance(answer, Answer)  # (no check was asked)
        request = httpx.Request("GET", url)
        return httpx.Response(
            answer.status, headers=answer.headers, content=answer.body, request=request
        )

    def _request(self, client: HttpClient, params: Mapping[str, str]) -> Mapping[str, object]:
        try:
            if isinstance(client, _HTTPX_CLIENT):
                response = self._send(client, params)
            else:
                response = client.get(
                    self._endpoint, params=params, headers=self._headers, timeout=self._timeout
                )
        except httpx.RequestError as exc:
            text = self._redact(str(exc))
            cause = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            raise RequestError(f"could not reach Brave at {self.base_url}: {cause}") from exc
        if not response.is_success:
            raise self._status_error(response)
        try:
            body = response.json()
        except ValueError as exc:
            kind = response.headers.get("Content-Type", "no Content-Type")
            raise ResponseFormatError(
                f"Brave's answer from {self._endpoint} is not JSON ({kind}): {exc}"
            ) from exc
        except RecursionError:  # nesting deeper than the parser's stack: no Brave answer
            raise ResponseFormatError(
                f"Brave's answer from {self._endpoint} is JSON nested too deeply to read"
            ) from None
        if not isinstance(body, dict):
            raise ResponseFormatError(
                f"Brave's answer from {self._endpoint} is a JSON {_json_type(body)}, "
                "expected a JSON object"
            )
        # An echoed key never enters a result: what a live run ranks and refines on is what
        # its cassette replays (the key in the environment; none set, nothing is walked).
        redacted: dict[str, object] = redact_json(body)
        return redacted

    def _status_error(self, response: httpx.Response) -> ProviderStatusError:
        code, detail = _error_fields(response)
        if code in ("SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_NOT_FOUND"):
            detail = f"{detail or ''} (check {API_KEY_ENV})".strip()
        code = self._redact(code) if code is not None else None
        detail = self._redact(detail) if detail is not None else None
        status = response.status_code
        if status == 429:
            reset = _reset_seconds(response.headers.get("X-RateLimit-Reset"))
            return RateLimitError(status, code, detail, self._endpoint, retry_after=reset)
        return ProviderStatusError(status, code, detail, self._endpoint)

    def _redact(self, text: str) -> str:
        return redact(text, [self._key])


def _error_fields(response: httpx.Response) -> tuple[str | None, str | None]:
    """``error.code`` and ``error.detail`` of Brave's ErrorResponse body, when it is one."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return None, None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, None
    code, detail = error.get("code"), error.get("detail")
    text = " ".join(detail.split()) if isinstance(detail, str) else None
    meta = error.get("meta")
    problems = meta.get("errors") if isinstance(meta, dict) else None
    if isinstance(problems, list):  # VALIDATION: which parameter, and what is wrong with it
        named = [
            f"{'.'.join(str(part) for part in p.get('loc', []))}: {p.get('msg', '')}"
            for p in problems
            if isinstance(p, dict)
        ]
        if named:
            text = f"{text or 'invalid request'} ({'; '.join(named)})"
    return code if isinstance(code, str) else None, text


def _reset_seconds(header: str | None) -> float | None:
    """The first window of ``X-RateLimit-Reset`` ("1, 1419704": per second, per month)."""
    if not header:
        return None
    try:
        seconds = float(header.split(",")[0])
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _parse_page(
    body: Mapping[str, object], where: str, rank: int = 1
) -> tuple[list[Evidence], bool | None]:
    """The page's results, ranked from ``rank`` on (where :func:`dedupe` puts them when none
    is a duplicate, so it need not copy them), and ``query.more_results_available`` (None
    when absent)."""
    query = _optional(body, "query", dict, "", where)
    more = _optional(query, "more_results_available", bool, "query", where) if query else None
    web = _optional(body, "web", dict, "", where)  # no "web" at all when nothing matched
    items = _optional(web, "results", list, "web", where) if web else None
    results: list[Evidence] = []
    for index, item in enumerate(items or []):
        path = f"web.results[{index}]"
        if not isinstance(item, dict):
            raise ResponseFormatError(
                f"{where}: {path} is a JSON {_json_type(item)}, expected a JSON object"
            )
        results.append(_evidence(item, path, where, rank + index))
    return results, more


#: normalize_text, remembered: a document's title (and often its snippet) comes back in
#: answer after answer, and the function is pure.
_normalized = functools.lru_cache(maxsize=1 << 13)(normalize_text)


def _evidence(item: Mapping[str, object], path: str, where: str, rank: int) -> Evidence:
    """One result as :class:`Evidence`; :func:`_checked_evidence` when a field is not as a
    result of the simulator's (or a plain one of Brave's) has it, which says what is wrong."""
    get = item.get
    url, title, description = get("url"), get("title"), get("description")
    extras, meta, page_age = get("extra_snippets"), get("meta_url"), get("page_age")
    age, language = get("age"), get("language")
    hostname = meta.get("hostname") if type(meta) is dict else None
    if not (
        type(url) is str
        and type(title) is str
        and (url := url.strip())
        and (description is None or type(description) is str)
        and (extras is None or (type(extras) is list and not extras))
        and (meta is None or type(meta) is dict)
        and (hostname is None or type(hostname) is str)
        and (page_age is None or type(page_age) is str)
        and (age is None or type(age) is str)
        and (language is None or type(language) is str)
    ):
        return _checked_evidence(item, path, where, rank)
    return Evidence(
        _normalized(title),
        plain_text(url),
        _normalized(description or ""),
        "brave",
        rank,
        _page_age(page_age),
        age or "",
        hostname or url_host(url),
        language or "",
    )


def _checked_evidence(item: Mapping[str, object], path: str, where: str, rank: int) -> Evidence:
    url = plain_text(_required(item, "url", str, path, where).strip())
    if not url:
        raise ResponseFormatError(f"{where}: {path}.url is empty")
    title = _required(item, "title", str, path, where)
    description = _optional(item, "description", str, path, where) or ""
    extras = _optional(item, "extra_snippets", list, path, where) or []
    snippets: list[str] = []
    for index, extra in enumerate(extras):
        if not isinstance(extra, str):
            raise ResponseFormatError(
                f"{where}: {path}.extra_snippets[{index}] is a JSON {_json_type(extra)}, "
                "expected a JSON string"
            )
        if text := _normalized(extra):
            snippets.append(text)
    meta = _optional(item, "meta_url", dict, path, where)
    hostname = _optional(meta, "hostname", str, f"{path}.meta_url", where) if meta else None
    return Evidence(
        title=_normalized(title),
        url=url,
        snippet=_normalized(description),
        source="brave",
        rank=rank,
        page_age=_page_age(_optional(item, "page_age", str, path, where)),
        age=_optional(item, "age", str, path, where) or "",
        domain=hostname or url_host(url),
        language=_optional(item, "language", str, path, where) or "",
        extra_snippets=tuple(snippets),
    )


def _page_age(value: str | None) -> datetime | None:
    """Brave's ``page_age`` ("2025-06-30T05:41:00", no zone); an aware value becomes naive UTC
    so every ``page_age`` compares with every other. Unparseable text gives None."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _optional(
    obj: Mapping[str, object], name: str, kind: type[_T], parent: str, where: str
) -> _T | None:
    """``obj[name]`` checked to be a ``kind``; absent or null is None (Brave omits freely)."""
    value = obj.get(name)
    if value is None or isinstance(value, kind):
        return value
    path = f"{parent}.{name}" if parent else name
    raise ResponseFormatError(
        f"{where}: {path} is a JSON {_json_type(value)}, expected a JSON {_JSON_TYPES[kind]}"
    )


def _required(obj: Mapping[str, object], name: str, kind: type[_T], parent: str, where: str) -> _T:
    value = _optional(obj, name, kind, parent, where)
    if value is None:
        raise ResponseFormatError(f"{where}: {parent}.{name} missing")
    return value


_JSON_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
    type(None): "null",
}


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)
