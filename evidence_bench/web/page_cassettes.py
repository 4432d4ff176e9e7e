"""Page cassettes: the pages behind a query set's results, fetched once and replayed.

``record`` fetches every page its episodes read, each URL once, into ``@pages.json`` beside
the query set's search cassettes (no query id begins with ``@``); its sha256 is in the
manifest and replay checks it before the first page is read. Replay opens no socket.

The format is JSON, not vcrpy's, because a page that times out has no answer to record:
each record holds what the reader needs (status, content type, body) or the
:class:`~evidence_bench.web.failure.FailureReason` that ended the fetch. No request header
is kept, every form of the API key is replaced in every body before anything is written,
and the file is written whole, its pages sorted by URL, so the same pages give the same
bytes.

:class:`PageStore` replays (each URL's text extracted once per process); :class:`LivePages`
records.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from evidence_bench._atomic import write_atomic
from evidence_bench._secrets import redact
from evidence_bench.errors import DataError, ReplayMissError, WriteError
from evidence_bench.evidence import canonical_url
from evidence_bench.web.bounded import read_page_bounded
from evidence_bench.web.cassette_manifest import RECORD_COMMAND, find_manifest, read_page_entry
from evidence_bench.web.cassettes import OnMiss, holds_secret, refuse_secrets
from evidence_bench.web.failure import FailureReason, FetchFailure
from evidence_bench.web.fetch import (
    MAX_CONCURRENCY,
    PER_HOST,
    HostGates,
    Limits,
    fetch,
    html_failure,
)
from evidence_bench.web.guard import ANY_ADDRESS, AddressPolicy
from evidence_bench.web.page_text import ExtractedPage, read_page
from evidence_bench.web.pages import STALL_HEADER

__all__ = [
    "MAX_BODY_BYTES", "PAGES_NAME", "DirectTransport", "LivePages", "LoopbackRouter", "PageRecord",
    "PageStore", "fetch_page", "read_page_cassette", "write_page_cassette",
]  # fmt: skip

PAGES_NAME = "@pages.json"
FORMAT = 1
#: A page body larger than this is not read (recorded as ``too_large``).
MAX_BODY_BYTES = 5_000_000
USER_AGENT = "evidence_bench-page-recorder/1 (+offline relevance-feedback benchmark)"


@dataclass(frozen=True, slots=True)
class PageRecord:
    """One fetch of a page: the answer (``status``, ``content_type``, ``body``) or the
    ``error`` that ended the fetch before one came (``status`` 0)."""

    url: str
    status: int = 0
    content_type: str = ""
    body: bytes = b""
    error: str = ""

    @property
    def failure(self) -> FailureReason | None:
        """Why the page gives no text (``timeout``, or as LiveFetch decides,
        :func:`~evidence_bench.web.fetch.html_failure`), or None."""
        if self.error:
            try:
                return FailureReason.parse(self.error)
            except ValueError:  # a word of a later version: the page failed all the same
                return FailureReason.NETWORK
        why = html_failure(self.status, self.content_type, self.body)
        return None if why is None else why[0]

    def read(self, timeout_s: float | None = None) -> ExtractedPage | FailureReason:
        """The page extracted with ``precision``, or why it gives no text. With
        ``timeout_s``, in a child process (:mod:`evidence_bench.web.bounded`), ``timeout``
        past it; without, in this process, as replay reads."""
        if (failure := self.failure) is not None:
            return failure
        read = read_page if timeout_s is None else partial(read_page_bounded, timeout_s=timeout_s)
        return read(
            self.body, url=self.url, content_type=self.content_type, precision=True, metadata=False
        )

    def text(self) -> str | None:
        """:meth:`read`'s text in this process; None when the page gave none."""
        page = self.read()
        return page.text if isinstance(page, ExtractedPage) else None

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"url": self.url, "status": self.status}
        if self.error:
            entry["error"] = self.error
            return entry
        entry["content_type"] = self.content_type
        try:
            entry["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            entry["body_base64"] = base64.b64encode(self.body).decode("ascii")
        return entry


def _record(entry: object, where: str) -> PageRecord:
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
        raise ValueError(f"{where} is not a page record with a url")
    status = entry.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        raise ValueError(f"{where} has no integer status")
    if "error" in entry:
        return PageRecord(entry["url"], status, error=str(entry["error"]))
    if isinstance(entry.get("body"), str):
        body = entry["body"].encode("utf-8")
    elif isinstance(entry.get("body_base64"), str):
        body = base64.b64decode(entry["body_base64"])
    else:
        raise ValueError(f"{where} has no body")
    return PageRecord(entry["url"], status, str(entry.get("content_type", "")), body)


def fetch_page(
    client: httpx.Client, url: str, *, timeout_s: float = 5.0, policy: AddressPolicy = ANY_ADDRESS
) -> PageRecord:
    """GET ``url`` through ``client`` by the guarded GET (:data:`MAX_BODY_BYTES`, ``timeout_s``
    for the whole request, every hop under ``policy``); a failure is recorded, never
    raised."""
    key = canonical_url(url)
    answer = fetch(
        client,
        url,
        limits=Limits(timeout_s=timeout_s, max_bytes=MAX_BODY_BYTES),
        policy=policy,
        headers={"User-Agent": USER_AGENT},
    )
    if isinstance(answer, FetchFailure):
        return PageRecord(key, error=answer.reason.value)
    return PageRecord(key, answer.status, answer.content_type, answer.body)


#: httpx's own socket transport, as imported: vcrpy's recorder patches it during a search
#: recording, and the pages read meanwhile belong in the page cassette.
_SEND = httpx.HTTPTransport.handle_request


class DirectTransport(httpx.BaseTransport):
    """httpx's socket transport, out of reach of a search recording's vcrpy patch."""

    def __init__(self, *, timeout: float) -> None:
        self._inner = httpx.HTTPTransport()
        self._timeout = httpx.Timeout(timeout).as_dict()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions["timeout"] = self._timeout
        return _SEND(self._inner, request)

    def close(self) -> None:
        self._inner.close()


class LoopbackRouter(DirectTransport):
    """Sends every request to the simulator on 127.0.0.1:``port`` (a collection's hosts
    resolve nowhere); the page is recorded under its own URL. An answer carrying
    :data:`~evidence_bench.web.pages.STALL_HEADER` is the timeout it stands for, raised at
    once."""

    def __init__(self, port: int, *, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self._port = port

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        response = super().handle_request(request)
        if STALL_HEADER in response.headers:
            response.close()
            raise httpx.ReadTimeout("the simulated page never answers", request=request)
        return response


class LivePages:
    """A page source that fetches each URL once through ``client`` (:func:`fetch_page`)
    and keeps the record in :attr:`records`, which ``record`` writes to the page cassette.

    A batch's missing pages are fetched side by side, at most ``concurrency`` at once and
    ``per_host`` to one host. With ``bounded`` (the live web), a fetched page is extracted
    within what its fetch left of ``timeout_s``, so a hostile page cannot hold the run;
    without (the harness's simulator), extraction has no time limit, so the record does not
    depend on the machine. A page in ``known`` is always extracted without one. One thread
    calls it at a time.
    """

    def __init__(
        self,
        client: httpx.Client,
        known: Mapping[str, PageRecord] | None = None,
        *,
        timeout_s: float = 5.0,
        policy: AddressPolicy = ANY_ADDRESS,
        concurrency: int = MAX_CONCURRENCY,
        per_host: int = PER_HOST,
        bounded: bool = True,
    ):
        self._client = client
        self._timeout_s = timeout_s
        self._bounded = bounded
        self._policy = policy
        self._concurrency = max(1, concurrency)
        self._hosts = HostGates(per_host)
        self.records: dict[str, PageRecord] = dict(known or {})
        self._texts: dict[str, str | None] = {}

    def page_texts(self, urls: Sequence[str]) -> list[str | None]:
        keys = [canonical_url(url) for url in urls]
        missing: dict[str, str] = {}  # canonical URL -> the first URL asked for it
        for url, key in zip(urls, keys, strict=True):
            if key not in self.records:
                missing.setdefault(key, url)
        fetched = self._fetch_all(list(missing.values()))
        spent = {}
        for key, (record, elapsed) in zip(missing, fetched, strict=True):
            self.records[key] = record
            spent[key] = elapsed
        for key in keys:
            if key not in self._texts:
                budget = self._timeout_s - spent[key] if self._bounded and key in spent else None
                self._texts[key] = self._read(key, budget)
        return [self._texts[key] for key in keys]

    def _read(self, key: str, timeout_s: float | None) -> str | None:
        """The page's text, within ``timeout_s`` when given; a page whose extraction runs
        past it is recorded as ``timeout``, so a replay reads it as this run did."""
        read = self.records[key].read(timeout_s)
        if read is FailureReason.TIMEOUT:
            self.records[key] = PageRecord(key, error=FailureReason.TIMEOUT.value)
        return read.text if isinstance(read, ExtractedPage) else None

    def _fetch_all(self, urls: list[str]) -> list[tuple[PageRecord, float]]:
        """Each URL's record and the seconds its fetch took, in the order of ``urls``,
        however they finish."""
        if len(urls) <= 1 or self._concurrency == 1:
            return [self._fetch(url) for url in urls]
        with ThreadPoolExecutor(min(self._concurrency, len(urls))) as pool:
            return list(pool.map(self._fetch, urls))

    def _fetch(self, url: str) -> tuple[PageRecord, float]:
        with self._hosts(url):
            started = time.monotonic()
            record = fetch_page(self._client, url, timeout_s=self._timeout_s, policy=self._policy)
            return record, time.monotonic() - started


def read_page_cassette(path: Path) -> tuple[dict[str, Any], dict[str, PageRecord]]:
    """The header and the records (by canonical URL) of the page cassette at ``path``.

    Raises ValueError saying what is wrong with it; OSError as the file system does.
    """
    data = path.read_bytes()
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("pages"), list):
        raise ValueError("no 'pages' list")
    records = {}
    for index, entry in enumerate(document["pages"]):
        record = _record(entry, f"pages[{index}]")
        records[record.url] = record
    header = {key: value for key, value in document.items() if key != "pages"}
    return header, records


def write_page_cassette(
    path: Path,
    records: Iterable[PageRecord],
    *,
    header: Mapping[str, Any],
    secrets: Sequence[str] = (),
) -> None:
    """Write the page cassette: the records sorted by URL, every form of each secret
    replaced, whole or not at all."""
    pages = [record.to_json() for record in sorted(records, key=lambda r: r.url)]
    # a body stored as base64 (not UTF-8) cannot be redacted without breaking it: refused
    for page in pages:
        if "body_base64" in page and holds_secret(json.dumps(page), secrets):
            raise WriteError(
                f"refusing to write {path}: it would hold the API key (the page {page['url']})"
            )
    # at the JSON level, since a body's key may be JSON-escaped in the file
    text = redact(
        json.dumps({**header, "format": FORMAT, "pages": pages}, indent=1, sort_keys=True), secrets
    )
    try:
        refuse_secrets(path, text, secrets)  # a form scrubbing did not know (a base64 body's)
    except WriteError as refused:
        held = (p["url"] for p in pages if holds_secret(redact(json.dumps(p), secrets), secrets))
        where = next((f" (the page {url})" for url in held), "")
        raise WriteError(f"{refused}{where}") from None
    write_atomic(path, text + "\n")


#: Extracted texts by what decides them: the cassette's sha256, ``on_miss``, the simulated
#: failure rate and the canonical URL; each page is extracted once per process.
_TEXTS: dict[tuple[Any, ...], str | None] = {}
_TEXTS_LOCK = threading.Lock()


class PageStore:
    """The pages of one query set's page cassette, replayed; a page it lacks is answered by
    ``on_miss``: ``simulate`` fetches it from ``fallback`` (an in-process simulator
    transport), ``skip`` reads it as failed, ``error`` stops naming the URL and the
    ``record`` command."""

    def __init__(
        self,
        directory: Path,
        *,
        on_miss: OnMiss,
        failure_rate: float | None = None,
        fallback: Callable[[], httpx.BaseTransport] | None = None,
        record_hint: str = "",
    ) -> None:
        self.path = directory / PAGES_NAME
        self.on_miss = on_miss
        self._failure_rate = failure_rate
        self._fallback_factory = fallback
        self._client: httpx.Client | None = None
        self._hint = record_hint or RECORD_COMMAND
        self._loaded: tuple[str, dict[str, PageRecord]] | None = None
        self._misses: dict[str, PageRecord] = {}

    def _load(self) -> tuple[str, dict[str, PageRecord]]:
        if self._loaded is None:
            self._loaded = self._verified()
        return self._loaded

    def _verified(self) -> tuple[str, dict[str, PageRecord]]:
        again = f"record it with: {self._hint}"
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            if self.on_miss is OnMiss.ERROR:
                raise ReplayMissError(
                    f"no page cassette {self.path} for evidence=page; {again}"
                ) from None
            if self.on_miss is OnMiss.SKIP:  # every page its snippet: page configs = snippets'
                raise ReplayMissError(
                    f"no page cassette {self.path} for evidence=page (replay.on_miss=skip "
                    f"leaves out the pages a cassette lacks, not the cassette); {again}"
                ) from None
            return "", {}  # every page a miss, simulated
        except OSError as exc:
            raise DataError(f"page cassette {self.path} cannot be read ({exc.strerror})") from exc
        manifest = find_manifest(self.path.parent)
        expected = read_page_entry(manifest, self._hint) if manifest else None
        if manifest is None or expected is None:
            raise DataError(
                f"page cassette {self.path} cannot be verified: no manifest lists it; {again}"
            )
        sha = hashlib.sha256(data).hexdigest()
        if sha != expected:
            raise DataError(
                f"page cassette {self.path} was changed since it was recorded (its sha256 "
                f"differs from {manifest}); restore it, or delete it and {again}"
            )
        try:
            header, records = read_page_cassette(self.path)
        except ValueError as exc:
            raise DataError(f"page cassette {self.path} is damaged ({exc}); {again}") from None
        recorded = header.get("failure_rate")
        if self._failure_rate is not None and recorded not in (None, self._failure_rate):
            raise DataError(
                f"page cassette {self.path} was recorded with pages.failure_rate={recorded}, "
                f"the run asks pages.failure_rate={self._failure_rate}; set it, or {again}"
            )
        return sha, records

    def _miss(self, url: str, key: str) -> PageRecord:
        if self.on_miss is OnMiss.SIMULATE and self._fallback_factory is not None:
            if key not in self._misses:
                if self._client is None:
                    self._client = httpx.Client(transport=self._fallback_factory())
                self._misses[key] = fetch_page(self._client, url)
            return self._misses[key]
        if self.on_miss is OnMiss.SKIP or self.on_miss is OnMiss.SIMULATE:
            return PageRecord(key, error=FailureReason.SKIPPED.value)
        raise ReplayMissError(
            f"no recorded page for {url} in {self.path} (record mode none); "
            f"record it with: {self._hint}"
        )

    def page_texts(self, urls: Sequence[str]) -> list[str | None]:
        """Each page's extracted text, once per process and URL (None: the page failed)."""
        return [self._text(url) for url in urls]

    def _text(self, url: str) -> str | None:
        sha, records = self._load()
        key = canonical_url(url)
        where = sha or f"missing:{self.path}"
        cache_key = (where, self.on_miss, self._failure_rate, key)
        with _TEXTS_LOCK:
            if cache_key in _TEXTS:
                return _TEXTS[cache_key]
        record = records.get(key) or self._miss(url, key)
        text = record.text()
        with _TEXTS_LOCK:
            _TEXTS[cache_key] = text
        return text
