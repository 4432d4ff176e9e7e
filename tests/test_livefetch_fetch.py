"""The page fetcher: every failure reason, the bounds, the User-Agent. No network:
httpx.MockTransport, and a server on 127.0.0.1 for a real slow socket."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from evidence_bench.livefetch import FailureReason, FetchedPage, FetchFailure, PageFetcher
from evidence_bench.livefetch.fetch import MAX_REDIRECTS, USER_AGENT
from evidence_bench.web.guard import AddressPolicy

HTML = "<html><body><p>Hello.</p></body></html>"
Handler = Callable[[httpx.Request], httpx.Response]


def _fetch(handler: Handler, url: str, **options: float) -> FetchedPage | FetchFailure:
    with PageFetcher(transport=httpx.MockTransport(handler), **options) as fetcher:
        return fetcher.fetch(url)


def _reason(result: FetchedPage | FetchFailure) -> FailureReason:
    assert isinstance(result, FetchFailure), result
    return result.reason


def test_an_html_page_is_fetched_with_the_projects_user_agent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"Content-Type": "text/html; charset=utf-8"}, text=HTML)

    result = _fetch(handler, "https://a.test/page")
    assert isinstance(result, FetchedPage)
    assert result.body == HTML.encode() and result.status == 200
    assert seen[0].headers["User-Agent"] == USER_AGENT
    assert "evidence_bench" in USER_AGENT


@pytest.mark.parametrize("status", [404, 410, 500, 503])
def test_a_non_2xx_status_is_http_status(status: int) -> None:
    result = _fetch(lambda r: httpx.Response(status, text=HTML), "https://a.test/")
    assert _reason(result) is FailureReason.HTTP_STATUS
    assert isinstance(result, FetchFailure) and result.detail == f"HTTP {status}"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/pdf", b"%PDF-1.7 ..."),
        ("application/json", b'{"a": 1}'),
        ("image/png", b"\x89PNG\r\n"),
        ("", b"\x89PNG\r\n\x1a\n binary"),  # no Content-Type and not HTML-looking
    ],
)
def test_a_body_that_is_not_html_is_not_html(content_type: str, body: bytes) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    result = _fetch(lambda r: httpx.Response(200, headers=headers, content=body), "https://a.test/")
    assert _reason(result) is FailureReason.NOT_HTML


def test_html_without_a_content_type_is_sniffed() -> None:
    body = b"  <!-- c --><!DOCTYPE html><html><body>x</body></html>"
    result = _fetch(lambda r: httpx.Response(200, content=body), "https://a.test/")
    assert isinstance(result, FetchedPage)


def test_a_declared_length_over_the_cap_is_too_large_before_any_body() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"Content-Type": "text/html", "Content-Length": "999999999"}, content=b""
        )

    result = _fetch(handler, "https://a.test/")
    assert _reason(result) is FailureReason.TOO_LARGE


def test_a_streamed_body_over_the_cap_stops_downloading() -> None:
    sent: list[int] = []

    def endless() -> Iterator[bytes]:
        for _ in range(10_000):
            sent.append(1)
            yield b"<p>" + b"x" * 1021

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/html"}, content=endless())

    result = _fetch(handler, "https://a.test/", max_bytes=64 * 1024)
    assert _reason(result) is FailureReason.TOO_LARGE
    assert len(sent) <= 66  # 64 KiB in 1 KiB chunks, and the one that crossed the cap


def test_a_redirect_loop_is_redirects() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": str(request.url)})

    assert _reason(_fetch(handler, "https://a.test/loop")) is FailureReason.REDIRECTS


def test_redirects_up_to_the_cap_are_followed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        step = int(request.url.path.strip("/") or 0)
        if step < MAX_REDIRECTS:
            return httpx.Response(301, headers={"Location": f"/{step + 1}"})
        return httpx.Response(200, headers={"Content-Type": "text/html"}, text=HTML)

    result = _fetch(handler, "https://a.test/0")
    assert isinstance(result, FetchedPage)
    assert result.final_url == f"https://a.test/{MAX_REDIRECTS}"
    chain = _fetch(handler, "https://a.test/0", max_redirects=MAX_REDIRECTS - 1)
    assert _reason(chain) is FailureReason.REDIRECTS


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (httpx.ConnectTimeout("connect timed out"), FailureReason.TIMEOUT),
        (httpx.ReadTimeout("read timed out"), FailureReason.TIMEOUT),
        (httpx.ConnectError("Name or service not known"), FailureReason.NETWORK),
        (httpx.RemoteProtocolError("peer closed connection"), FailureReason.NETWORK),
    ],
)
def test_transport_errors_are_translated(error: Exception, reason: FailureReason) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    assert _reason(_fetch(handler, "https://a.test/")) is reason


@pytest.mark.parametrize(
    "url",
    [
        "ftp://a.test/file",
        "mailto:x@a.test",
        "not a url",
        "",
        "http://[::1/",  # urlsplit: "Invalid IPv6 URL" (it raised, ending the batch)
        "https://xn--/",  # a host IDNA refuses (it raised IDNAError)
    ],
)
def test_an_address_that_is_not_http_is_invalid_url(url: str) -> None:
    assert _reason(_fetch(lambda r: httpx.Response(200), url)) is FailureReason.INVALID_URL


def test_a_body_that_never_ends_times_out_as_a_whole() -> None:
    def drip() -> Iterator[bytes]:
        while True:
            time.sleep(0.02)
            yield b"<"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Type": "text/html"}, content=drip())

    started = time.monotonic()
    result = _fetch(handler, "https://a.test/", timeout_s=0.2)
    assert _reason(result) is FailureReason.TIMEOUT
    assert time.monotonic() - started < 2.0


@pytest.fixture
def dripping_server() -> Iterator[str]:
    """127.0.0.1: answers headers at once, then one body byte every 50 ms, forever."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                             b"Content-Length: 100000\r\n\r\n")  # fmt: skip
                while not stop.is_set():
                    try:
                        conn.sendall(b"<")
                    except OSError:
                        break
                    stop.wait(0.05)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/slow"
    stop.set()
    thread.join(5)
    listener.close()


def test_a_real_server_dripping_bytes_times_out_as_a_whole(dripping_server: str) -> None:
    """Each read gets a byte well within the per-read timeout; only the whole-request
    timeout ends it."""

    with PageFetcher(timeout_s=0.6, policy=AddressPolicy(allow_private=True)) as fetcher:
        result = fetcher.fetch(dripping_server)
    assert _reason(result) is FailureReason.TIMEOUT


def test_concurrency_is_bounded_overall_and_per_host() -> None:
    in_flight: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        with lock:
            in_flight[host] += 1
            in_flight["*"] += 1
            peak[host] = max(peak[host], in_flight[host])
            peak["*"] = max(peak["*"], in_flight["*"])
        time.sleep(0.05)
        with lock:
            in_flight[host] -= 1
            in_flight["*"] -= 1
        return httpx.Response(200, headers={"Content-Type": "text/html"}, text=HTML)

    urls = [f"https://h{n % 4}.test/{n}" for n in range(40)]

    fetcher = PageFetcher(transport=httpx.MockTransport(handler))
    with fetcher, ThreadPoolExecutor(len(urls)) as threads:
        results = list(threads.map(fetcher.fetch, urls))
    assert all(isinstance(result, FetchedPage) for result in results)
    # 4 hosts x 2 per host could reach 8; the overall bound of 6 holds it at 6.
    assert peak["*"] == 6
    assert max(peak[f"h{n}.test"] for n in range(4)) == 2


def test_the_failure_reasons_are_a_closed_set() -> None:
    """Each one is produced by a test: in this file, or (undecodable, no_text) in
    test_livefetch_pipeline.py."""
    assert [reason.value for reason in FailureReason] == [
        "timeout", "network", "blocked_address", "denied_domain", "http_status", "not_html",
        "too_large", "content_encoding", "undecodable", "redirects", "no_text", "invalid_url",
        "skipped",
    ]  # fmt: skip
