"""``serve`` under hostile load: a burst of parallel clients, and request bodies that are too
large to read. Every case is answered (or refused) on 127.0.0.1, bounded in count and time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from evidence_bench.collections.beir import Collection, Document, Query
from evidence_bench.web.simulator import (
    MAX_REQUEST_BODY,
    BraveSimulator,
    RunningSimulator,
    serve,
)

TOKEN = "serve-fault-token"
PARALLEL = 200
#: Each client's whole exchange (connect, send, answer) must end within this many seconds;
#: a connection left in a full listen backlog waits for the kernel's SYN retry (1 s, 3 s, …).
EXCHANGE_S = 10.0


def _collection() -> Collection:
    docs = {
        "d1": Document("d1", "Boundary layers", "heat transfer in boundary layers"),
        "d2": Document("d2", "Wings", "flutter of swept wings at supersonic speed"),
    }
    queries = {"q1": Query("q1", "boundary layer")}
    return Collection("serve-faults", docs, queries, {"q1": {"d1": 1}})


@pytest.fixture(scope="module")
def running() -> Iterator[RunningSimulator]:
    with serve(BraveSimulator(_collection(), token=TOKEN)) as server:
        yield server


def _exchange(port: int, request: bytes, start: threading.Barrier | None = None) -> bytes:
    """Send ``request`` on a fresh connection; return the whole answer (the server closes),
    or what arrived before :data:`EXCHANGE_S` ran out or the connection failed."""
    if start is not None:
        start.wait(EXCHANGE_S)
    deadline = time.monotonic() + EXCHANGE_S
    chunks: list[bytes] = []
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=EXCHANGE_S) as sock:
            sock.sendall(request)
            while time.monotonic() < deadline:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as exc:  # a timeout or a reset: the request was not answered
        chunks.append(f"unanswered ({type(exc).__name__})".encode())
    return b"".join(chunks)


def _get(query: str) -> bytes:
    return (
        f"GET /res/v1/web/search?q={query} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"X-Subscription-Token: {TOKEN}\r\nConnection: close\r\n\r\n"
    ).encode()


def test_a_burst_of_parallel_requests_is_answered_in_full(running: RunningSimulator) -> None:
    """All 200 clients connect at once (a barrier); every one gets a 200 answer."""
    start = threading.Barrier(PARALLEL)
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = [
            pool.submit(_exchange, running.port, _get("boundary"), start) for _ in range(PARALLEL)
        ]
        answers = [future.result(timeout=EXCHANGE_S * 3) for future in futures]
    statuses = [answer.split(b"\r\n", 1)[0] for answer in answers]
    unanswered = [status for status in statuses if status != b"HTTP/1.1 200 OK"]
    assert not unanswered, f"{len(unanswered)} of {PARALLEL} not answered: {unanswered[:3]}"


@pytest.mark.parametrize(
    ("length", "reason"),
    [
        (10**12, "a terabyte announced: refused before a byte of it is read"),
        (MAX_REQUEST_BODY + 1, "one byte over the bound"),
    ],
)
def test_a_request_body_over_the_bound_is_413(
    running: RunningSimulator, length: int, reason: str
) -> None:
    request = (
        f"POST /res/v1/web/search?q=x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()
    answer = _exchange(running.port, request)  # sends none of the announced body
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), (reason, answer[:200])
    assert b'"code":"PAYLOAD_TOO_LARGE"' in body, reason
    assert b"Connection: close" in head, reason


@pytest.mark.parametrize(
    ("length", "status"),
    [
        (0, b"405"),  # within the bound: read, then answered as usual (search is GET only)
        (MAX_REQUEST_BODY, b"405"),
    ],
)
def test_a_request_body_within_the_bound_is_read_and_answered(
    running: RunningSimulator, length: int, status: bytes
) -> None:
    request = (
        f"POST /res/v1/web/search?q=x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"X-Subscription-Token: {TOKEN}\r\nConnection: close\r\nContent-Length: {length}\r\n\r\n"
    ).encode() + b"x" * length
    answer = _exchange(running.port, request)
    assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == status


@pytest.mark.parametrize("length", ["-1", "12abc", "1e9"])
def test_a_malformed_content_length_is_400(running: RunningSimulator, length: str) -> None:
    request = (
        f"POST /res/v1/web/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\n"
    ).encode()
    answer = _exchange(running.port, request)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
