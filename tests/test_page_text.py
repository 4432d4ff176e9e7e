"""The page pipeline's extraction: main text, title and date out of realistic, hostile and
broken HTML, with and without ``precision``."""

from __future__ import annotations

import codecs
import time
from datetime import UTC, datetime

import pytest

from evidence_bench.web.decode import decode_html
from evidence_bench.web.failure import FailureReason
from evidence_bench.web.page_text import (
    MAX_HTML_CHARS,
    clip_text,
    extract_page,
    read_page,
)
from tests.livefetch_pages import BOILERPLATE, article_page, collection_docs

ARTICLE = [
    "The heat transfer through a slab is governed by conduction in its interior.",
    "At the walls, the boundary layer sets how much heat the surrounding flow carries away.",
    "Measurements at three Mach numbers show the wall temperature rising with speed.",
]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_article_is_kept_and_the_boilerplate_dropped() -> None:
    page = extract_page(
        article_page("Heat in slabs", ARTICLE).encode(),
        url="https://news.example.org/heat",
        content_type="text/html; charset=utf-8",
    )
    assert page.method == "trafilatura"
    for paragraph in ARTICLE:
        assert paragraph in page.text
    for phrase in BOILERPLATE:
        assert phrase not in page.text
    assert page.title == "Heat in slabs"
    assert page.published_at == datetime(2026, 11, 24, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize("collection", ["cranfield", "cacm"])
def test_the_shipped_collections_documents_come_back_whole(collection: str) -> None:
    """Each document, served in the boilerplate page, extracts to its own text, word for
    word (whitespace aside), and to nothing of the boilerplate."""
    docs = collection_docs(collection, 25)
    assert len(docs) == 25
    for doc in docs:
        page = extract_page(
            article_page(doc["title"], [doc["text"]]),
            url=f"https://{collection}.evidence-bench.test/doc/{doc['_id']}",
        )
        assert _flat(doc["text"]) in _flat(page.text), doc["_id"]
        assert not [phrase for phrase in BOILERPLATE if phrase in page.text], doc["_id"]


def test_a_timezone_offset_in_the_date_is_converted_to_utc() -> None:
    page = extract_page(
        article_page("T", ARTICLE, published="2026-11-20T08:30:00+01:00"), url="https://x.test/"
    )
    assert page.published_at == datetime(2026, 11, 20, 7, 30, tzinfo=UTC)


def test_a_json_ld_date_is_read() -> None:
    ld = (
        '<script type="application/ld+json">'
        '{"@type": "NewsArticle", "datePublished": "2025-03-04T10:00:00Z"}</script>'
    )
    page = extract_page(
        article_page("T", ARTICLE, published=None, head_extra=ld), url="https://x.test/"
    )
    assert page.published_at == datetime(2025, 3, 4, 10, 0, tzinfo=UTC)


def test_a_page_without_a_date_has_none() -> None:
    page = extract_page(article_page("T", ARTICLE, published=None), url="https://x.test/")
    assert page.published_at is None
    assert ARTICLE[0] in page.text


def test_script_and_style_content_never_reaches_the_text() -> None:
    hostile = (
        "<html><head><script>var s = '<p>injected paragraph text</p>'; alert(1);</script>"
        "<style>p::before { content: 'styled words'; }</style></head><body>"
        '<div><p onclick="steal()">The visible paragraph about conduction in slabs is here '
        "and it is long enough.</p><script>document.write('more injected text')</script>"
        "<noscript>enable javascript please</noscript></div></body></html>"
    )
    page = extract_page(hostile, url="https://x.test/")
    assert "The visible paragraph about conduction in slabs" in page.text
    for phrase in ("injected", "styled words", "alert", "steal", "enable javascript"):
        assert phrase not in page.text


@pytest.mark.parametrize(
    "markup",
    [
        "",
        "   \n\t",
        "<html></html>",
        "<html><head><title>Only a title</title></head></html>",
        "<html><body></body></html>",
        "<html><body><script>only();</script></body></html>",
        "<!-- nothing but a comment -->",
        "<div><span></span><p></p></div>" * 2_000,
        "</div></p></body>" * 1000,
    ],
)
def test_a_page_without_text_gives_method_none(markup: str) -> None:
    page = extract_page(markup, url="https://x.test/")
    assert (page.text, page.method) == ("", "none")


def test_a_title_only_page_keeps_its_title() -> None:
    page = extract_page("<html><head><title>Only a title</title></head></html>", url="u")
    assert page.title == "Only a title"


def test_broken_markup_still_gives_its_text() -> None:
    broken = (
        "<html><body><div><p>Unclosed paragraph about supersonic shock waves in a nozzle"
        "<p>Second unclosed one, about the pressure ratio across the shock</div></span>"
        "</table>\x00<b><i>crossed</b></i> tags about wave drag at Mach two</body>"
    )
    page = extract_page(broken, url="https://x.test/")
    assert "Unclosed paragraph about supersonic shock waves" in page.text
    assert "pressure ratio across the shock" in page.text


def test_precision_leaves_out_the_readability_fallback() -> None:
    """A bare fragment is too small for trafilatura's thresholds: readability takes it for a
    packet, and with ``precision`` (page evidence) the page gives no text instead."""
    fragment = "<p>Short text here. Another sentence about slabs.</p>"
    assert extract_page(fragment, url="u").method == "readability"
    precise = extract_page(fragment, url="u", precision=True)
    assert (precise.text, precise.method) == ("", "none")
    assert read_page(fragment.encode(), url="u", precision=True) is FailureReason.NO_TEXT


def test_precision_keeps_an_article_whole() -> None:
    page = extract_page(article_page("Heat in slabs", ARTICLE), url="u", precision=True)
    assert page.method == "trafilatura"
    assert all(paragraph in page.text for paragraph in ARTICLE)
    assert not [phrase for phrase in BOILERPLATE if phrase in page.text]


def test_without_metadata_there_is_no_title_or_date() -> None:
    page = extract_page(article_page("Heat in slabs", ARTICLE), url="u", metadata=False)
    assert (page.title, page.published_at) == ("", None)
    assert ARTICLE[0] in page.text


def test_the_readability_fallback_takes_what_trafilatura_leaves() -> None:
    """A bare fragment is too small for trafilatura's thresholds; readability takes it."""
    page = extract_page("<p>Short text here. Another sentence about slabs.</p>", url="u")
    assert page.method == "readability"
    assert page.text == "Short text here. Another sentence about slabs."


def test_deep_nesting_does_not_raise() -> None:
    page = extract_page("<div>" * 50_000 + "deep" + "</div>" * 50_000, url="u")
    assert page.method in ("trafilatura", "readability", "none")


def test_a_huge_page_is_read_up_to_the_cap_only() -> None:
    head = article_page("Huge", ARTICLE)
    filler = "<div>" + "filler words " * ((MAX_HTML_CHARS // 13) + 1000) + "</div>"
    tail = "<p>MARKER-BEYOND-THE-CAP in its own paragraph.</p>"
    huge = head.replace("</article>", f"</article>{filler}{tail}")
    assert len(huge) > MAX_HTML_CHARS + 10_000
    started = time.perf_counter()
    page = extract_page(huge, url="u")
    assert time.perf_counter() - started < 60  # a bound, not a benchmark (shared cores)
    assert ARTICLE[0] in page.text
    assert "MARKER-BEYOND-THE-CAP" not in page.text


# --- encodings ----------------------------------------------------------------------------

FRENCH = (
    "<html><body><article><p>La crème brûlée du café est très appréciée. Les élèves "
    "préfèrent la tarte à la rhubarbe, mais le maître d'hôtel recommande la crème.</p>"
    "</article></body></html>"
)


def test_the_content_type_charset_decides_first() -> None:
    body = FRENCH.encode("iso-8859-1")
    page = extract_page(body, url="u", content_type="text/html; charset=ISO-8859-1")
    assert "La crème brûlée du café est très appréciée." in page.text


@pytest.mark.parametrize("label", ["iso-8859-1", "ISO_8859-1", "latin1", "windows-1252"])
def test_latin_1_labels_decode_as_windows_1252(label: str) -> None:
    """WHATWG's Encoding Standard: Latin-1's labels are windows-1252, as browsers read them,
    so 0x93/0x94 are curly quotes, 0x80 the euro, 0x97 a dash, 0x92 an apostrophe (Latin-1
    made them C1 control characters); 0x81, which windows-1252 leaves undefined, is U+0081
    as WHATWG maps it (Python's cp1252 refused the page, and a guessed encoding garbled it)."""
    body = "<p>The \x93AI Act\x94 costs \x805 \x97 it\x92s enforced, à partir de là\x81.</p>"
    text = decode_html(body.encode("latin-1"), f"text/html; charset={label}")
    assert text == (
        "<p>The \u201cAI Act\u201d costs \u20ac5 \u2014 it\u2019s enforced, à partir de là\x81.</p>"
    )


def test_a_utf_8_page_labelled_us_ascii_is_read_as_utf_8() -> None:
    body = "<p>Le café — ouvert.</p>".encode()
    assert decode_html(body, "text/html; charset=us-ascii") == "<p>Le café — ouvert.</p>"


def test_a_meta_charset_is_used_without_a_header() -> None:
    text = "<meta charset='shift_jis'><p>日本語のテキストです。これは本文の段落です。</p>"
    page = extract_page(text.encode("shift_jis"), url="u")
    assert "日本語のテキストです。" in page.text


def test_a_lying_or_unknown_charset_falls_back_to_what_decodes() -> None:
    utf8 = FRENCH.encode("utf-8")
    assert "crème brûlée" in (decode_html(utf8, "text/html; charset=no-such-charset") or "")
    # Declared UTF-8, sent as Latin-1: strict UTF-8 fails, the guess still finds the text.
    latin = FRENCH.encode("iso-8859-1")
    assert "crème brûlée" in (decode_html(latin, "text/html; charset=utf-8") or "")


def test_a_byte_order_mark_wins() -> None:
    text = "<p>Texte en UTF-16 avec accents: été, hiver.</p>"
    body = codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    assert decode_html(body, "text/html; charset=iso-8859-1") == text


def test_binary_data_is_undecodable() -> None:
    binary = bytes(range(256)) * 64
    assert decode_html(binary, "text/html") is None
    page = extract_page(binary, url="u", content_type="text/html")
    assert (page.text, page.method, page.published_at) == ("", "none", None)


# --- clipping -------------------------------------------------------------------------------


def test_clip_text_cuts_at_a_word_boundary_within_the_limit() -> None:
    assert clip_text("short", 10) == "short"
    assert clip_text("alpha beta gamma delta", 13) == "alpha beta"
    # No space in the last fifth: a hard cut.
    assert clip_text("abcdefghij klmnopqrstuvwxyz", 20) == "abcdefghij klmnopqrs"
    assert len(clip_text("word " * 5000, 12000)) <= 12000
