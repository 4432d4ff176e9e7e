"""The simulator's web pages: served at each document's URL with boilerplate and a date,
a deterministic share failing, and the extractor keeping the document and dropping the rest."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from evidence_bench.collections.beir import Collection, load_collection
from evidence_bench.errors import ConfigurationError
from evidence_bench.web.cassettes import OnMiss
from evidence_bench.web.failure import FailureReason
from evidence_bench.web.page_cassettes import PageRecord, PageStore
from evidence_bench.web.pages import (
    SIMULATED_FAILURES,
    page_failure,
    published_on,
    render_page,
)
from evidence_bench.web.simulator import BraveSimulator, SimulatorTransport, serve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cranfield() -> Collection:
    return load_collection(ROOT / "collections" / "cranfield")


@pytest.fixture(scope="module")
def cacm() -> Collection:
    return load_collection(ROOT / "collections" / "cacm")


def page_text(collection: Collection, doc_id: str) -> str:
    """The text page evidence reads of the page of ``doc_id`` ("" for none)."""
    page = render_page(collection, doc_id)
    record = PageRecord(collection.url_for(doc_id), page.status, page.content_type, page.body)
    return record.text() or ""


def test_a_page_carries_the_document_boilerplate_and_a_date(cranfield: Collection) -> None:
    page = render_page(cranfield, "1")
    html = page.body.decode()
    assert (page.status, page.content_type) == (200, "text/html; charset=utf-8")
    doc = cranfield.documents["1"]
    heading = "experimental investigation of the aerodynamics of a wing in a slipstream ."
    assert f"<h1>{heading}</h1>" in html
    assert "propeller slipstream was made in order to determine the spanwise" in html
    for boilerplate in ('id="cookie-consent"', '<nav class="main-nav"', '<aside class="related">',
                        '<footer class="site-footer">', "All rights reserved."):  # fmt: skip
        assert boilerplate in html
    date = published_on("1").isoformat()
    assert f'<meta property="article:published_time" content="{date}">' in html
    assert "1960-01-01" <= date <= "2025-12-31"
    # related links name other documents, never the page's own
    related = re.findall(r'<li><a href="/doc/([^"]+)">', html)
    assert len(related) == 4 and "1" not in related
    assert doc.title.strip() in html


def test_pages_are_the_same_bytes_in_every_load(cranfield: Collection) -> None:
    again = load_collection(ROOT / "collections" / "cranfield")
    for doc_id in ("1", "17", "1400"):
        assert render_page(cranfield, doc_id).body == render_page(again, doc_id).body


def test_web_text_is_escaped_in_the_page(tmp_path: Path) -> None:
    from tests.conftest import write_tiny_collection

    tiny = load_collection(write_tiny_collection(tmp_path / "t", payload="<script>x</script>"))
    html = render_page(tiny, "1").body.decode()
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html


def test_extraction_keeps_the_document_and_drops_the_boilerplate(cranfield: Collection) -> None:
    text = page_text(cranfield, "1")
    words = " ".join(cranfield.documents["1"].text.split())
    assert " ".join(text.split()).endswith(words)  # the article, title heading first
    for boilerplate in ("cookies", "Accept all", "newsletter", "All rights reserved",
                        "Related records", "Subscribe", "Share this record"):  # fmt: skip
        assert boilerplate not in text


def test_failure_share_is_deterministic_and_nested(cranfield: Collection, cacm: Collection) -> None:
    for collection in (cranfield, cacm):
        ids = list(collection.documents)
        at5 = {d: page_failure(d, 0.05) for d in ids}
        assert at5 == {d: page_failure(d, 0.05) for d in ids}  # the same in every call
        failed = {d for d, kind in at5.items() if kind}
        # a 5% share: binomial(n, 0.05) lies within 4 standard deviations of n * 0.05
        n = len(ids)
        assert abs(len(failed) - 0.05 * n) < 4 * (n * 0.05 * 0.95) ** 0.5
        kinds = Counter(kind for kind in at5.values() if kind)
        assert set(kinds) == set(SIMULATED_FAILURES)
        at10 = {d for d in ids if page_failure(d, 0.10)}
        assert failed < at10  # a page failing at 5% fails at 10% too, the same way
        assert all(page_failure(d, 0.10) is at5[d] for d in failed)
    assert all(page_failure(d, 0.0) is None for d in cranfield.documents)
    assert all(page_failure(d, 1.0) is not None for d in cranfield.documents)


def test_a_page_with_a_heading_alone_gives_no_text(cacm: Collection) -> None:
    # CACM's document 1 is a title alone: its page's article is a heading and a byline, and
    # what is left is boilerplate, which must not pass for the page's text
    assert cacm.documents["1"].text == ""
    assert page_text(cacm, "1") == ""
    text = page_text(cacm, "1410")
    assert text.startswith("Interarrival Statistics for Time Sharing Systems\nThe optimization")
    assert "Archive" not in text


@pytest.mark.parametrize("rate", [-0.1, 1.5, "half", True])
def test_a_bad_failure_rate_names_the_key(rate: object) -> None:
    with pytest.raises(ConfigurationError, match=r"failure_rate must be a number in \[0, 1\]"):
        page_failure("1", rate)  # type: ignore[arg-type]


def _one_of(collection: Collection, kind: FailureReason | None, rate: float) -> str:
    return next(d for d in collection.documents if page_failure(d, rate) is kind)


def test_the_simulator_serves_pages_and_their_failures_in_process(cranfield: Collection) -> None:
    simulator = BraveSimulator(cranfield, page_failure_rate=0.05)
    with httpx.Client(transport=SimulatorTransport(simulator)) as client:
        ok = client.get(cranfield.url_for(_one_of(cranfield, None, 0.05)))
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/html")
        missing = client.get(cranfield.url_for(_one_of(cranfield, FailureReason.HTTP_STATUS, 0.05)))
        assert missing.status_code == 404
        pdf = client.get(cranfield.url_for(_one_of(cranfield, FailureReason.NOT_HTML, 0.05)))
        assert (pdf.status_code, pdf.headers["content-type"]) == (200, "application/pdf")
        assert pdf.content.startswith(b"%PDF-")
        with pytest.raises(httpx.ReadTimeout):
            client.get(cranfield.url_for(_one_of(cranfield, FailureReason.TIMEOUT, 0.05)))
        assert client.get("https://cranfield.evidence-bench.test/doc/no-such").status_code == 404


def test_the_loopback_server_serves_pages_and_times_out(cranfield: Collection) -> None:
    simulator = BraveSimulator(cranfield, page_failure_rate=0.05, page_stall_s=0.6)
    with serve(simulator) as running, httpx.Client(timeout=0.2) as client:
        base = f"http://127.0.0.1:{running.port}/doc/"
        doc_id = _one_of(cranfield, None, 0.05)
        page = client.get(base + doc_id)
        assert page.content == render_page(cranfield, doc_id).body
        start = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.get(base + _one_of(cranfield, FailureReason.TIMEOUT, 0.05))
        assert time.monotonic() - start < 0.6


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_the_committed_page_cassettes_hold_what_the_simulator_serves(name: str) -> None:
    # replay.on_miss=simulate answers a page the cassette lacks: it must be the recorded page
    from evidence_bench.web.page_cassettes import PAGES_NAME, read_page_cassette

    collection = load_collection(ROOT / "collections" / name)
    header, records = read_page_cassette(ROOT / "cassettes" / name / PAGES_NAME)
    assert header["failure_rate"] == 0.05
    assert header["collection_checksum"] == collection.checksum
    for url in sorted(records)[::50]:
        record, doc_id = records[url], collection.doc_id_for(url)
        assert doc_id is not None
        page = render_page(collection, doc_id, failure_rate=0.05)
        if page.stall:
            assert record.error == "timeout"
        else:
            assert (record.status, record.content_type, record.body) == (
                page.status, page.content_type, page.body
            )  # fmt: skip


def test_extracted_texts_are_remembered_per_failure_rate(
    tmp_path: Path, cranfield: Collection
) -> None:
    """One process, one (missing) page cassette, two runs: the second, at failure rate 1.0,
    gets every page failed, not the first run's texts (a multirun over
    ``pages.failure_rate`` gave every job the first job's numbers)."""

    def store(rate: float) -> PageStore:
        simulator = BraveSimulator(cranfield, page_failure_rate=rate)
        return PageStore(
            tmp_path,
            on_miss=OnMiss.SIMULATE,
            failure_rate=rate,
            fallback=lambda: SimulatorTransport(simulator),
        )

    url = cranfield.url_for("1")
    first = store(0.0).page_texts([url])[0]
    assert first is not None and first.startswith("experimental investigation of the aero")
    assert store(1.0).page_texts([url])[0] is None  # every page fails at rate 1.0
    assert store(0.0).page_texts([url])[0] == first  # (remembered)


@pytest.mark.parametrize(
    ("status", "content_type", "body", "failure"),
    [
        (200, "text/html; charset=utf-8", b"<p>x</p>", None),
        (200, "application/xhtml+xml", b"<p>x</p>", None),
        (404, "text/html", b"<p>gone</p>", "http_status"),
        (200, "application/pdf", b"%PDF-1.4", "not_html"),
        (200, "", b"<!-- c --><!DOCTYPE html><p>x</p>", None),  # sniffed, as LiveFetch does
        (200, "", b"%PDF-1.4", "not_html"),
    ],
)
def test_a_recorded_page_is_html_by_the_fetchers_rule(
    status: int, content_type: str, body: bytes, failure: str | None
) -> None:
    record = PageRecord("https://ex.test/p", status, content_type, body)
    assert record.failure == failure
