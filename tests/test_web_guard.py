"""The guarded HTTP layer (issue 31): each attack a parametrized case that fails safe with
one reason. No connection leaves 127.0.0.1: the address policy is tested with a stub
resolver and a recording network backend, and the hostile server listens on 127.0.0.1 with
the opt-in. The memory-heavy cases (decompression bombs) run in a subprocess under an
address-space limit, so a regression fails instead of taking the machine."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from evidence_bench.errors import RequestError, ResponseFormatError
from evidence_bench.livefetch import LiveFetch, RetrievalIntent, StaticDiscovery
from evidence_bench.livefetch.discovery import FeedDiscovery
from evidence_bench.livefetch.records import Candidate
from evidence_bench.web.brave import BraveProvider, RetryPolicy
from evidence_bench.web.decode import decode_html
from evidence_bench.web.failure import FailureReason, FetchFailure
from evidence_bench.web.fetch import Answer, Limits, fetch
from evidence_bench.web.guard import (
    ANY_ADDRESS,
    OPEN_WEB,
    GuardedTransport,
)
from evidence_bench.web.page_cassettes import fetch_page
from evidence_bench.web.page_text import read_page
from tests.hostile_server import HTML, gzip_bomb, hostile

HERE = Path(__file__).resolve().parent


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every socket connect recorded and refused: a blocked case must never reach one."""
    tried: list[object] = []

    def connect(self: socket.socket, address: object) -> None:
        tried.append(address)
        raise OSError("no connection in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)
    return tried


def _guarded(resolver: Any = None, backend: Any = None) -> httpx.Client:
    options: dict[str, Any] = {}
    if resolver is not None:
        options["resolver"] = resolver
    if backend is not None:
        options["backend"] = backend
    return httpx.Client(transport=GuardedTransport(OPEN_WEB, **options), trust_env=False)


def _reason(result: Answer | FetchFailure) -> FailureReason:
    assert isinstance(result, FetchFailure), result
    assert "\n" not in result.detail  # one line
    return result.reason


# -- the destination policy -----------------------------------------------------------------

SPELLINGS = [
    "http://127.0.0.1/",
    "http://localhost/",
    "http://LOCALHOST./admin",
    "http://api.localhost/",
    "http://[::1]/",
    "http://0.0.0.0/",
    "http://2130706433/",
    "http://127.1/",
    "http://0x7f.1/",
    "http://017700000001/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://[fe80::1]/",
    "http://[::]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
]


@pytest.mark.parametrize("url", SPELLINGS)
def test_every_spelling_of_the_inside_is_blocked_before_any_socket(
    url: str, no_sockets: list[object]
) -> None:
    with _guarded() as client:
        result = fetch(client, url)
    assert _reason(result) is FailureReason.BLOCKED_ADDRESS
    assert no_sockets == []


@pytest.mark.parametrize(
    "answers",
    [
        ["127.0.0.1"],
        ["::1"],
        ["169.254.169.254"],
        ["10.1.2.3"],
        ["::ffff:192.168.0.1"],
        ["93.184.216.34", "10.0.0.5"],  # one inside answer refuses the name
    ],
)
def test_a_name_resolving_inside_is_blocked_before_any_socket(
    answers: list[str], no_sockets: list[object]
) -> None:
    asked: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return answers

    with _guarded(resolver) as client:
        result = fetch(client, "https://rebind.example.com/page")
    assert _reason(result) is FailureReason.BLOCKED_ADDRESS
    assert asked == [("rebind.example.com", 443)]
    assert no_sockets == []


class _Recording(httpcore.NetworkBackend):
    """Records where a connection would go; answers with a stream whose peer is ``peer``."""

    def __init__(self, peer: str | None = None) -> None:
        self.peer = peer
        self.calls: list[tuple[str, int]] = []

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((host, port))
        if self.peer is None:
            raise httpcore.ConnectError("recorded, not connected")
        return _Peer(self.peer)


class _Peer(httpcore.NetworkStream):
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.closed = False

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return b""

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, info: str) -> Any:
        return (self.peer, 80) if info == "server_addr" else None


def test_the_connection_goes_to_the_checked_address_not_the_name_again() -> None:
    """DNS rebinding: the name is resolved once, and the socket connects to that address."""
    backend = _Recording()
    with _guarded(lambda host, port: ["93.184.216.34"], backend) as client:
        result = fetch(client, "http://news.example.com/a")
    assert _reason(result) is FailureReason.NETWORK
    assert backend.calls == [("93.184.216.34", 80)]


def test_a_connected_peer_inside_is_blocked() -> None:
    """The socket's peer is checked too (a resolver and a socket that disagree)."""
    backend = _Recording(peer="127.0.0.1")
    with _guarded(lambda host, port: ["93.184.216.34"], backend) as client:
        result = fetch(client, "http://news.example.com/a")
    assert _reason(result) is FailureReason.BLOCKED_ADDRESS
    assert "127.0.0.1" in result.detail if isinstance(result, FetchFailure) else False


@pytest.mark.parametrize("path", ["/to-metadata", "/to-loopback"])
def test_a_redirect_into_the_inside_is_blocked_on_its_hop(path: str) -> None:
    """A public page (a mock) redirecting inside: the hop is refused before it is sent."""
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        if request.url.host == "open.example.com":
            target = "http://169.254.169.254/" if path == "/to-metadata" else "http://127.1/"
            return httpx.Response(302, headers={"Location": target})
        return httpx.Response(200, html=HTML.decode())

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        result = fetch(client, "https://open.example.com/r")
    assert _reason(result) is FailureReason.BLOCKED_ADDRESS
    assert sent == ["https://open.example.com/r"]


def test_the_opt_in_reaches_a_server_of_ones_own() -> None:
    with hostile() as server, httpx.Client(transport=GuardedTransport(ANY_ADDRESS)) as client:
        result = fetch(client, server.url("/ok"), policy=ANY_ADDRESS)
        blocked = fetch(client, server.url("/ok"))
    assert isinstance(result, Answer) and result.body == HTML
    assert _reason(blocked) is FailureReason.BLOCKED_ADDRESS


def test_the_default_guarded_transport_refuses_loopback_at_connect() -> None:
    """Past the literal check (a name), the resolved address is checked: ``localtest``
    names resolving to 127.0.0.1 through a stub."""
    with hostile() as server, _guarded(lambda host, port: ["127.0.0.1"]) as client:
        result = fetch(client, f"http://my.example.com:{server.port}/ok")
    assert _reason(result) is FailureReason.BLOCKED_ADDRESS
    assert server.paths == []


# -- domain lists and trust on every hop ----------------------------------------------------


def _site(request: httpx.Request) -> httpx.Response:
    if request.url.host == "agency.example.gov":
        return httpx.Response(302, headers={"Location": "https://spam.example.com/page"})
    body = (
        "<html><head><title>Heat</title></head><body><article><p>"
        + "Heat transfer in boundary layers is measured by careful experiments. " * 12
        + "</p></article></body></html>"
    )
    return httpx.Response(200, headers={"Content-Type": "text/html; charset=utf-8"}, text=body)


def _livefetch(intent: RetrievalIntent) -> Any:
    candidates = [Candidate(url="https://agency.example.gov/go")]
    with LiveFetch(
        StaticDiscovery(candidates), cache_path=None, transport=httpx.MockTransport(_site)
    ) as lf:
        return lf.run_sync(intent)


def test_a_redirect_off_the_allow_list_is_denied_domain() -> None:
    packets = _livefetch(RetrievalIntent("heat transfer", allow_domains=("example.gov",)))
    assert [(f.reason, f.detail) for f in packets.failures] == [
        (FailureReason.DENIED_DOMAIN, "spam.example.com is not on the allow list")
    ]
    denied = _livefetch(RetrievalIntent("heat transfer", deny_domains=("spam.example.com",)))
    assert [f.reason for f in denied.failures] == [FailureReason.DENIED_DOMAIN]


def test_an_open_redirect_lends_no_trust() -> None:
    """T of the least trusted host on the way: .gov's 0.9 does not pass to spam.example.com."""
    (packet,) = _livefetch(RetrievalIntent("heat transfer", freshness_days=None))
    assert packet.domain == "spam.example.com"
    assert packet.score_breakdown.T == 0.5  # the default prior, not .gov's 0.9


# -- deadlines: the whole request, not each read --------------------------------------------

DRIPS = ["/drip-body", "/drip-headers"]


@pytest.mark.parametrize("path", DRIPS)
def test_a_dripping_page_ends_at_its_deadline(path: str) -> None:
    with hostile() as server, httpx.Client(transport=GuardedTransport(ANY_ADDRESS)) as client:
        started = time.monotonic()
        result = fetch(client, server.url(path), limits=Limits(timeout_s=0.8), policy=ANY_ADDRESS)
        took = time.monotonic() - started
    assert _reason(result) is FailureReason.TIMEOUT
    assert took < 4.0


class _HangingResolver:
    """A resolver that never answers until released (as a dead DNS server): records who
    asked; no lookup reaches the network."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self.release = threading.Event()

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        self.release.wait(60)
        return ["127.0.0.1"]


def test_a_lookup_that_hangs_ends_at_the_requests_deadline(no_sockets: list[object]) -> None:
    """The lookup is part of the request's one deadline (getaddrinfo has no timeout of its
    own): the request ends as ``timeout`` and no socket is ever opened."""
    resolver = _HangingResolver()
    limits = Limits(timeout_s=0.5)
    url = "https://hangs.example.org/page"

    started = time.monotonic()
    try:
        with _guarded(resolver) as client:
            result = fetch(client, url, limits=limits)
    finally:
        took = time.monotonic() - started
        resolver.release.set()  # the lookup's thread ends
    assert _reason(result) is FailureReason.TIMEOUT
    assert resolver.asked == [("hangs.example.org", 443)]
    assert no_sockets == []
    assert took < 10.0  # (without the bound: the resolver's 60 s)


def test_records_page_fetch_ends_at_pages_timeout() -> None:
    with hostile() as server, httpx.Client(transport=GuardedTransport(ANY_ADDRESS)) as client:
        started = time.monotonic()
        record = fetch_page(client, server.url("/drip-body"), timeout_s=0.8)
        took = time.monotonic() - started
    assert record.failure is FailureReason.TIMEOUT and took < 4.0


def test_a_dripping_feed_ends_at_its_deadline() -> None:
    with hostile() as server:
        feeds = FeedDiscovery([server.url("/drip-feed")], timeout_s=0.8, policy=ANY_ADDRESS)
        started = time.monotonic()
        assert feeds.discover(RetrievalIntent("heat", mode="rss")) == []
        took = time.monotonic() - started
    assert [f.reason for f in feeds.failures] == [FailureReason.TIMEOUT] and took < 4.0


def test_a_dripping_brave_answer_ends_at_its_deadline() -> None:
    with hostile() as server:
        provider = BraveProvider(
            "k", base_url=server.url("/drip/res/v1"), timeout=0.8, retry=RetryPolicy(attempts=1)
        )
        started = time.monotonic()
        with pytest.raises(RequestError, match="Timeout"):
            provider.search("heat")
        took = time.monotonic() - started
    assert took < 4.0


def test_a_feed_that_redirects_inside_is_blocked() -> None:
    with hostile() as server:
        feeds = FeedDiscovery([server.url("/to-metadata")], policy=ANY_ADDRESS)
        feeds.discover(RetrievalIntent("heat", mode="rss"))
        blocked = FeedDiscovery([server.url("/drip-feed")])
        blocked.discover(RetrievalIntent("heat", mode="rss"))
    # the opt-in admits 127.0.0.1 and the metadata address alike: the hop is then a network
    # failure of this machine, never a connection elsewhere (the policy tests above)
    assert [f.reason for f in blocked.failures] == [FailureReason.BLOCKED_ADDRESS]


# -- content codings and the cap on decoded bytes -------------------------------------------


def test_stacked_content_codings_are_refused() -> None:
    with hostile() as server, httpx.Client(transport=GuardedTransport(ANY_ADDRESS)) as client:
        result = fetch(client, server.url("/stacked"), policy=ANY_ADDRESS)
    assert _reason(result) is FailureReason.CONTENT_ENCODING
    assert isinstance(result, FetchFailure) and "gzip, gzip" in result.detail


def test_an_unknown_content_coding_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Encoding": "compress"}, stream=_Raw(b"x"))

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        assert _reason(fetch(client, "https://a.example.com/")) is FailureReason.CONTENT_ENCODING


class _Raw(httpx.SyncByteStream):
    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gzip stream of 512 MiB of zeros (about 0.5 MB)."""
    return gzip_bomb(tmp_path_factory.mktemp("bomb") / "zeros.gz")


def _limited(case: str, bomb: Path) -> tuple[str, float]:
    """Run ``case`` of tests/hostile_server.py in a process whose address space is capped
    at 384 MiB over what its imports take: decoding the bomb's 512 MiB would fail there."""
    probe = subprocess.run(
        [sys.executable, "-c", _BASELINE],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parent,
    )
    limit = int(probe.stdout) + 384 * 1024 * 1024

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    done = subprocess.run(
        [sys.executable, str(HERE / "hostile_server.py"), case, str(bomb)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
        cwd=HERE.parent,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line, seconds = done.stdout.splitlines()
    return line, float(seconds.split()[1])


# Virtual memory after the imports the cases make (threads of the resolver and the server
# add their stacks; the limit leaves room for them)
_BASELINE = (
    "import httpx, feedparser, evidence_bench.livefetch.discovery, evidence_bench.web.brave\n"
    "for line in open('/proc/self/status'):\n"
    "    if line.startswith('VmSize:'): print(int(line.split()[1]) * 1024)\n"
)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("bomb", "too_large: body over 3145728 bytes"),
        ("nested-bomb", "content_encoding: stacked Content-Encoding gzip, gzip"),
        ("feed-bomb", "too_large: feed: body over 5242880 bytes"),
        (
            "brave-bomb",
            "ResponseFormatError: Brave's answer from http://127.0.0.1:PORT/res/v1/web/search "
            "was refused: body over 4194304 bytes",
        ),
    ],
)
def test_a_decompression_bomb_stops_at_the_cap_in_bounded_memory(
    case: str, expected: str, bomb: Path
) -> None:
    line, seconds = _limited(case, bomb)
    head, _, tail = expected.partition("PORT")
    assert line.startswith(head) and line.endswith(tail.split(" ", 1)[-1] if tail else "")
    assert "(at most one is decoded)" in line if case == "nested-bomb" else True
    assert seconds < 30


def test_a_brave_answer_over_the_cap_is_one_line() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Raw(b"[" * (5 * 1024 * 1024)))

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        provider = BraveProvider("k", http_client=client, retry=RetryPolicy(attempts=1))
        with pytest.raises(ResponseFormatError, match=r"refused: body over 4194304 bytes$"):
            provider.search("heat")


# -- charsets -------------------------------------------------------------------------------

UTF8_PAGE = "<html><head><title>Café</title></head><body><p>Ça va – “fine”.</p></body></html>"


@pytest.mark.parametrize("label", ["utf-16", "utf-16le", "UTF-16BE", "utf-32"])
def test_a_wrong_utf16_label_on_a_utf8_body_falls_back(label: str) -> None:
    body = UTF8_PAGE.encode("utf-8")
    assert decode_html(body, f"text/html; charset={label}") == UTF8_PAGE


def test_a_true_utf16_body_still_decodes_by_its_label() -> None:
    body = UTF8_PAGE.encode("utf-16-le")
    assert decode_html(body, "text/html; charset=utf-16le") == UTF8_PAGE


def test_binary_is_undecodable() -> None:
    noise = bytes(range(256)) * 64
    assert read_page(noise, url="https://a.example.com/", content_type="text/html") is (
        FailureReason.UNDECODABLE
    )


# -- the cases of issue 31 not covered above ---------------------------------------------------


@pytest.mark.parametrize("url", SPELLINGS)
def test_records_page_fetcher_blocks_every_spelling_of_the_inside(
    url: str, no_sockets: list[object]
) -> None:
    """``record``'s page fetcher under the open web's policy (live Brave, no opt-in): each
    spelling is recorded as ``blocked_address``, before any socket."""
    with _guarded() as client:
        record = fetch_page(client, url, timeout_s=2, policy=OPEN_WEB)
    assert record.failure is FailureReason.BLOCKED_ADDRESS
    assert no_sockets == []


def test_a_bomb_in_a_batch_costs_the_batch_no_other_page(tmp_path: Path) -> None:
    """A decompression bomb beside a normal page: the bomb stops at the cap as
    ``too_large`` and the normal page still becomes a packet (decoding never holds the
    event loop past the others' deadlines). In process, so a small bomb (64 MiB: a
    regression costs that much, the capped-memory cases above hold the big one)."""
    with hostile(gzip_bomb(tmp_path / "small.gz", gigabytes=1 / 16)) as server:
        candidates = [Candidate(url=server.url("/bomb")), Candidate(url=server.url("/ok"))]
        with LiveFetch(StaticDiscovery(candidates), cache_path=None, policy=ANY_ADDRESS) as lf:
            packets = lf.run_sync(RetrievalIntent("fine page", freshness_days=None))
    assert [f.reason for f in packets.failures] == [FailureReason.TOO_LARGE]
    assert [p.url for p in packets.packets] == [server.url("/ok")]
