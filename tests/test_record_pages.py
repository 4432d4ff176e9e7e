"""``record``'s page fetches: side by side within LiveFetch's bounds, no simulated timeout
waited out, and the page cassette byte for byte what fetching one at a time, waiting every
timeout out, recorded (the code before). Against the simulator on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from evidence_bench.collections.beir import Collection, load_collection
from evidence_bench.web.fetch import MAX_CONCURRENCY, PER_HOST
from evidence_bench.web.page_cassettes import LivePages, LoopbackRouter, write_page_cassette
from evidence_bench.web.pages import SIMULATED_FAILURES, page_failure
from evidence_bench.web.simulator import BraveSimulator, SimResponse, serve

ROOT = Path(__file__).resolve().parents[1]
RATE = 0.05


def _cranfield() -> Collection:
    return load_collection(ROOT / "collections" / "cranfield")


def _urls(collection: Collection) -> list[str]:
    """40 pages of the real collection, among them every kind of failure, each twice."""
    ids = list(collection.documents)[:34]
    for kind in SIMULATED_FAILURES:
        ids += [d for d in collection.documents if page_failure(d, RATE) is kind][:2]
    return [collection.url_for(doc_id) for doc_id in ids]


def _recorded(
    path: Path,
    collection: Collection,
    urls: list[str],
    *,
    stall_s: float,
    timeout_s: float,
    at_once: int,
) -> tuple[bytes, list[str]]:
    """The page cassette of ``urls`` fetched ``at_once`` side by side from a served
    simulator that holds a timing-out page ``stall_s`` (0: says so at once)."""
    simulator = BraveSimulator(collection, page_failure_rate=RATE, page_stall_s=stall_s)
    with serve(simulator) as running:
        router = LoopbackRouter(running.port, timeout=timeout_s)
        with httpx.Client(transport=router, trust_env=False) as client:
            pages = LivePages(
                client, timeout_s=timeout_s, concurrency=at_once, per_host=at_once, bounded=False
            )
            pages.page_texts(urls[:5])
            pages.page_texts(urls)  # (the first five again: each URL fetched once)
    header = {"query_set": "cranfield", "failure_rate": RATE}
    write_page_cassette(path, pages.records.values(), header=header)
    return path.read_bytes(), list(pages.records)


def test_side_by_side_without_waiting_records_what_one_at_a_time_recorded(
    tmp_path: Path,
) -> None:
    cranfield = _cranfield()
    urls = _urls(cranfield)
    # a timing-out page held well past a client timeout that any other page's fetch keeps
    # well within, however loaded the machine (the simulator's pages are extracted unbounded)
    before, _ = _recorded(
        tmp_path / "before.json", cranfield, urls, stall_s=20.0, timeout_s=5.0, at_once=1
    )
    # a client that would wait a minute: its timeouts are recorded without one waited out
    after, order = _recorded(
        tmp_path / "after.json", cranfield, urls, stall_s=0.0, timeout_s=60.0, at_once=6
    )
    assert after == before
    assert b'"error": "timeout"' in after and after.count(b'"error": "timeout"') == 2
    assert order == list(dict.fromkeys(urls))  # recorded in the order asked, not finished


def test_pages_are_fetched_side_by_side_within_the_bounds() -> None:
    """Three hosts' pages (routed to one simulator): never more than ``PER_HOST`` to one
    host nor ``MAX_CONCURRENCY`` in all in flight, and more than one at a time."""
    cranfield = _cranfield()
    simulator = BraveSimulator(cranfield, page_failure_rate=0.0)
    ids = list(cranfield.documents)[:36]
    host_of = {doc_id: f"h{i % 3}.test" for i, doc_id in enumerate(ids)}
    lock = threading.Lock()
    now: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    page = simulator.page

    def slow_page(doc_id: str) -> SimResponse:
        with lock:
            now[host_of[doc_id]] += 1
            now["all"] += 1
            for key in (host_of[doc_id], "all"):
                peak[key] = max(peak[key], now[key])
        time.sleep(0.05)
        with lock:
            now[host_of[doc_id]] -= 1
            now["all"] -= 1
        return page(doc_id)

    simulator.page = slow_page  # type: ignore[method-assign]
    urls = [f"https://{host_of[doc_id]}/doc/{doc_id}" for doc_id in ids]
    with serve(simulator) as running:
        router = LoopbackRouter(running.port, timeout=30)
        with httpx.Client(transport=router, trust_env=False) as client:
            texts = LivePages(client, timeout_s=30).page_texts(urls)
    assert all(texts)
    assert 1 < peak["all"] <= MAX_CONCURRENCY
    assert all(1 <= peak[f"h{i}.test"] <= PER_HOST for i in range(3))


def test_a_known_page_is_not_judged_again_by_time() -> None:
    """A record kept from an earlier recording is read as replay reads it, whatever is left
    of ``timeout_s``: never turned into a timeout by a slow extraction now."""
    cranfield = _cranfield()
    url = cranfield.url_for(next(iter(cranfield.documents)))
    simulator = BraveSimulator(cranfield, page_failure_rate=0.0)
    with serve(simulator) as running:
        router = LoopbackRouter(running.port, timeout=30)
        with httpx.Client(transport=router, trust_env=False) as client:
            fetched = LivePages(client, timeout_s=30, bounded=False)
            (text,) = fetched.page_texts([url])
    record = fetched.records[url]
    assert text and record.failure is None

    def no_request(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a known page was fetched again: {request.url}")

    with httpx.Client(transport=httpx.MockTransport(no_request)) as client:
        # bounded, with no time left at all: a bounded extraction could only time out
        pages = LivePages(client, {url: record}, timeout_s=1e-9)
        assert pages.page_texts([url]) == [text]
    assert pages.records[url] == record
