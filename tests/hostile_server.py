"""A hostile web server on 127.0.0.1 (port 0) for the guarded HTTP layer's fault tests.

Each path is one attack: dripping headers or body, stacked or bombed content codings,
a page slow to parse, a wrong charset label, redirects to the inside. Run as a script
inside an address-space limit, it starts the server, runs one fetch case against it and
prints one line: the failure reason and its detail
(``python tests/hostile_server.py CASE BOMB_FILE``).
"""

from __future__ import annotations

import gzip
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

HTML = (
    b"<!DOCTYPE html><html><head><title>Fine</title></head><body><p>A fine page.</p></body></html>"
)
FEED = (
    b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
    b"<item><title>Heat transfer news</title><link>https://example.org/a</link></item>"
    b"</channel></rss>"
)
#: A page whose parse keeps trafilatura and lxml busy for many seconds (2 MB of words
#: between ``<br>``s), far longer than its fetch.
SLOW_PARSE = b"<html><body><p>" + b"w<br>" * 400_000 + b"</p></body></html>"
_DRIP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"
BRAVE = b'{"type": "search", "web": {"results": []}}'


def gzip_bomb(path: Path, gigabytes: float = 0.5) -> Path:
    """A gzip stream of ``gigabytes`` of zeros (about a thousandth of that on disk)."""
    if not path.exists():
        deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        block = bytes(1 << 20)
        with path.open("wb") as out:
            for _ in range(int(gigabytes * 1024)):
                out.write(deflate.compress(block))
            out.write(deflate.flush())
    return path


def _send(conn: socket.socket, data: bytes) -> None:
    with suppress(OSError):
        conn.sendall(data)


def _drip(conn: socket.socket, data: bytes, every: float, stop: threading.Event) -> None:
    for byte in data:
        if stop.is_set():
            return
        try:
            conn.sendall(bytes([byte]))
        except OSError:
            return
        stop.wait(every)


def _answer(status: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class HostileServer:
    """Serves the attacks on 127.0.0.1; ``url(path)`` is where."""

    def __init__(self, bomb: Path | None = None) -> None:
        self._bomb = bomb.read_bytes() if bomb is not None else b""
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self.port = self._listener.getsockname()[1]
        self.paths: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                request = conn.recv(65536).decode("latin-1")
            except OSError:
                return
            path = request.split(" ", 2)[1] if request.count(" ") >= 2 else "/"
            self.paths.append(path)
            self._route(conn, path.split("?", 1)[0])

    def _route(self, conn: socket.socket, path: str) -> None:
        html = {"Content-Type": "text/html; charset=utf-8"}
        stop = self._stop
        routes: dict[str, Callable[[], None]] = {
            "/ok": lambda: _send(conn, _answer("200 OK", html, HTML)),
            "/slow-parse": lambda: _send(conn, _answer("200 OK", html, SLOW_PARSE)),
            "/drip-body": lambda: (
                _send(conn, _DRIP_HEAD),
                _drip(conn, b"<" * 100_000, 0.05, stop),
            ),
            "/drip-headers": lambda: _drip(conn, _answer("200 OK", html, HTML), 0.05, stop),
            "/stacked": lambda: _send(
                conn,
                _answer(
                    "200 OK",
                    {**html, "Content-Encoding": "gzip, gzip"},
                    gzip.compress(gzip.compress(HTML)),
                ),
            ),
            "/nested-bomb": lambda: _send(
                conn,
                _answer(
                    "200 OK",
                    {**html, "Content-Encoding": "gzip, gzip"},
                    gzip.compress(self._bomb),
                ),
            ),
            "/bomb": lambda: _send(
                conn, _answer("200 OK", {**html, "Content-Encoding": "gzip"}, self._bomb)
            ),
            "/feed-bomb": lambda: _send(
                conn,
                _answer(
                    "200 OK",
                    {"Content-Type": "application/rss+xml", "Content-Encoding": "gzip"},
                    self._bomb,
                ),
            ),
            "/res/v1/web/search": lambda: _send(
                conn,
                _answer(
                    "200 OK",
                    {"Content-Type": "application/json", "Content-Encoding": "gzip"},
                    self._bomb,
                ),
            ),
            "/drip/res/v1/web/search": lambda: _drip(
                conn, _answer("200 OK", {"Content-Type": "application/json"}, BRAVE), 0.05, stop
            ),
            "/drip-feed": lambda: _drip(
                conn, _answer("200 OK", {"Content-Type": "application/rss+xml"}, FEED), 0.05, stop
            ),
            "/to-metadata": lambda: _send(
                conn,
                _answer("302 Found", {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
            ),
            "/to-loopback": lambda: _send(
                conn, _answer("302 Found", {"Location": f"http://127.1:{self.port}/ok"}, b"")
            ),
        }
        route = routes.get(path)
        if route is None:
            _send(conn, _answer("404 Not Found", html, b"<html><body>no</body></html>"))
        else:
            route()


@contextmanager
def hostile(bomb: Path | None = None) -> Iterator[HostileServer]:
    with HostileServer(bomb) as server:
        yield server


def _case(name: str, server: HostileServer) -> str:
    """Run one memory-heavy case; its outcome as one line ``reason: detail``."""
    import httpx

    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.livefetch.discovery import FeedDiscovery
    from evidence_bench.livefetch.records import RetrievalIntent
    from evidence_bench.web.brave import BraveProvider, RetryPolicy
    from evidence_bench.web.failure import FetchFailure
    from evidence_bench.web.fetch import Limits, fetch
    from evidence_bench.web.guard import ANY_ADDRESS, GuardedTransport

    if name in ("bomb", "nested-bomb"):
        with httpx.Client(transport=GuardedTransport(ANY_ADDRESS)) as client:
            answer = fetch(
                client, server.url(f"/{name}"), limits=Limits(timeout_s=20), policy=ANY_ADDRESS
            )
        if isinstance(answer, FetchFailure):
            return f"{answer.reason}: {answer.detail}"
        return f"fetched: {len(answer.body)} bytes"
    if name == "feed-bomb":
        feeds = FeedDiscovery([server.url("/feed-bomb")], timeout_s=20, policy=ANY_ADDRESS)
        found = feeds.discover(RetrievalIntent("heat", mode="rss"))
        (failure,) = feeds.failures or [None]
        return f"{failure.reason}: {failure.detail}" if failure else f"found: {len(found)}"
    if name == "brave-bomb":
        provider = BraveProvider(
            "test-key", base_url=server.url("/res/v1"), retry=RetryPolicy(attempts=1)
        )
        try:
            provider.search("heat")
        except EvidenceBenchError as exc:
            return f"{type(exc).__name__}: {exc}"
        return "answered"
    raise SystemExit(f"unknown case {name}")


if __name__ == "__main__":
    case, bomb_file = sys.argv[1], Path(sys.argv[2])
    started = time.monotonic()
    with hostile(bomb_file) as running:
        print(_case(case, running))
    print(f"seconds: {time.monotonic() - started:.2f}")
