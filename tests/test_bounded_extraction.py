"""Extraction bounded in time (issue 31): a hostile page that keeps the parser busy is a
``timeout`` within the page's deadline, in LiveFetch and in ``record``, and the pages after
it are read. The page is served by the hostile server on 127.0.0.1 (with the opt-in)."""

from __future__ import annotations

import httpx

from evidence_bench.livefetch import LiveFetch, RetrievalIntent, StaticDiscovery
from evidence_bench.livefetch.records import Candidate
from evidence_bench.web.bounded import read_page_bounded
from evidence_bench.web.failure import FailureReason
from evidence_bench.web.guard import ANY_ADDRESS, AddressPolicy, GuardedTransport
from evidence_bench.web.page_cassettes import LivePages, PageRecord
from evidence_bench.web.page_text import ExtractedPage, read_page
from tests.hostile_server import SLOW_PARSE, hostile
from tests.livefetch_pages import article_page

ARTICLE = [
    "The heat transfer through a slab is governed by conduction in its interior.",
    "At the walls, the boundary layer sets how much heat the surrounding flow carries away.",
]
FINE = article_page("Heat in slabs", ARTICLE).encode()


class _QuickLiveFetch(LiveFetch):
    """2 s a page: far less than the hostile page's parse takes."""

    TIMEOUT_S = 2.0


class _PatientLiveFetch(LiveFetch):
    """A minute a page: the fine page cannot run out of it, however loaded the machine."""

    TIMEOUT_S = 60.0


def test_a_page_slow_to_parse_times_out_and_the_next_page_is_read() -> None:
    assert read_page_bounded(SLOW_PARSE, url="u", timeout_s=1.0) is FailureReason.TIMEOUT
    page = read_page_bounded(FINE, url="u", timeout_s=10.0)  # (a new child)
    assert isinstance(page, ExtractedPage) and ARTICLE[0] in page.text
    assert page == read_page(FINE, url="u")  # the same reading as in this process


def test_livefetch_reports_the_hostile_page_as_timeout_and_reads_the_next() -> None:
    """The hostile page within 2 s, then (the same process's reader, its child killed) the
    fine page within a generous budget, so only the hostile page can time out."""
    policy = AddressPolicy(allow_private=True)
    intent = RetrievalIntent("fine page", freshness_days=None)
    with hostile() as server:
        slow = [Candidate(url=server.url("/slow-parse"))]
        with _QuickLiveFetch(StaticDiscovery(slow), cache_path=None, policy=policy) as lf:
            failed = lf.run_sync(intent)
        fine = [Candidate(url=server.url("/ok"))]
        with _PatientLiveFetch(StaticDiscovery(fine), cache_path=None, policy=policy) as lf:
            packets = lf.run_sync(intent)
    assert [(f.url, f.reason, f.detail) for f in failed.failures] == [
        (server.url("/slow-parse"), FailureReason.TIMEOUT, "extraction ran past the page's 2 s")
    ]
    assert list(failed) == []
    assert packets.failures == ()
    assert [packet.url for packet in packets] == [server.url("/ok")]


def test_record_keeps_a_page_slow_to_parse_as_timeout() -> None:
    """A live-web ``record`` extracts within what the fetch left of ``pages.timeout_s``; the
    page is recorded as the timeout it was, so replay reads it as the recording run did.
    The fine page after it has a generous budget, so only the hostile page can time out."""
    with hostile() as server, httpx.Client(transport=GuardedTransport(ANY_ADDRESS)) as client:
        slow, fine = server.url("/slow-parse"), server.url("/ok")
        pages = LivePages(client, timeout_s=2.0, policy=ANY_ADDRESS)
        assert pages.page_texts([slow]) == [None]
        patient = LivePages(client, timeout_s=60.0, policy=ANY_ADDRESS)  # (a new child)
        (text,) = patient.page_texts([fine])
    assert pages.records[slow] == PageRecord(slow, error="timeout")
    assert pages.records[slow].failure is FailureReason.TIMEOUT
    assert text is not None and "A fine page." in text
    assert patient.records[fine].failure is None
    assert patient.records[fine].body.startswith(b"<!")
