"""A page's main text, title and publication date, from its HTML.

:func:`extract_page` tries trafilatura first, in its fast mode (Barbaresi 2021,
"Trafilatura: A Web Scraping Library and Command-Line Tool for Text Discovery and
Extraction", ACL demos), which keeps the main content and drops navigation, related links,
cookie banners and footers; when it finds no text, readability-lxml (a port of
Arc90's Readability) is the fallback. The publication date comes from the page's metadata
(``article:published_time``, JSON-LD, ``<time>``...) through htmldate, with its
extensive search of the text turned off: a date guessed from the body is more often wrong
than missing. newspaper3k is not used: it has had no release since 2018.

Hostile input is expected (scripts, megabytes of markup, bad encodings, no body): nothing
here raises on a page; a page with no text gives ``method="none"`` and empty text. Bytes
are decoded by :func:`decode_html`, which returns None for a body that is no text at all.
"""

from __future__ import annotations

import codecs
import logging
import re
from datetime import UTC, datetime
from typing import Any

from evidence_bench.livefetch.records import ExtractedPage
from evidence_bench.web.failure import FailureReason

__all__ = [
    "MAX_HTML_CHARS",
    "ExtractedPage",
    "clip_text",
    "decode_html",
    "extract_page",
    "read_page",
]

#: Markup beyond this many characters is not parsed: a main text lies in the first
#: megabytes, and parsing cost grows with the tree.
MAX_HTML_CHARS = 2_000_000

# Options of htmldate (through trafilatura and directly): metadata only, the original
# (published, not updated) date, with the time and zone when the page gives them.
_DATE_PARAMS: dict[str, Any] = {
    "extensive_search": False,
    "original_date": True,
    "outputformat": "%Y-%m-%dT%H:%M:%S%z",
}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_CT_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.I)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# C0 controls other than tab, newline, form feed and carriage return: text has few of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")
_BLANKS = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLOCK_TAGS = (
    "p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "blockquote",
    "pre", "section", "article", "table", "ul", "ol", "dd", "dt",
)  # fmt: skip
_DROP_TAGS = ("script", "style", "noscript", "template", "iframe", "svg", "head")

# trafilatura, htmldate and readability log every page they cannot parse, up to ERROR
# ("empty HTML tree"): that is this module's normal case, reported by method="none", and
# without a handler Python would print it on stderr of every command.
for _name in ("trafilatura", "readability", "htmldate"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def _codec(name: str) -> str | None:
    """Python's codec for the charset label ``name``; Latin-1's labels (``iso-8859-1``,
    ``latin1``, ...) give windows-1252, as the WHATWG Encoding Standard maps them and
    browsers decode them: pages so labelled use its 0x80-0x9F (curly quotes, dashes, the
    euro), which Latin-1 reads as C1 control characters. (``us-ascii`` stays strict ASCII,
    so a UTF-8 page so labelled falls through to UTF-8.)"""
    try:
        codec = codecs.lookup(name.strip().lower()).name
    except (LookupError, ValueError):
        return None
    return "cp1252" if codec == "iso8859-1" else codec


def _whatwg_1252(error: UnicodeError) -> tuple[str, int]:
    """WHATWG's windows-1252 where Python's cp1252 has no character (0x81, 0x8D, 0x8F, 0x90,
    0x9D): the code point of the byte's value, as Latin-1 gives."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    undefined = error.object[error.start : error.end]
    if any(byte not in b"\x81\x8d\x8f\x90\x9d" for byte in undefined):
        raise error
    return undefined.decode("latin-1"), error.end


codecs.register_error("evidence_bench.whatwg-1252", _whatwg_1252)


def _plausible(text: str, body: bytes) -> bool:
    """Decoded text is text: at most 1% C0 control characters (binary data has many), and
    markup whose bytes hold a ``<`` still holds one once decoded (a UTF-16 label on a UTF-8
    body decodes without error into CJK mojibake, every ``<`` gone)."""
    head = text[:100_000]
    if len(_CONTROL.findall(head)) > max(1, len(head) // 100):
        return False
    return "<" in text[:4096] or b"<" not in body[:4096]


def decode_html(body: bytes, content_type: str | None = None) -> str | None:
    """The body as text, or None when it is not text in any plausible encoding.

    The encoding is the first that decodes the bytes strictly into plausible text, in the
    order of the HTML standard's sniffing (WHATWG, "Determining the character encoding"):
    a byte order mark, the Content-Type's ``charset``, a ``<meta charset>`` in the first
    4 KiB, UTF-8, then the standard's default, windows-1252; past those, charset-normalizer's
    guess. An unknown charset name is skipped. Plausible text has at most 1% C0 control
    characters, which binary data fails.
    """
    if not body:
        return ""
    names: list[str] = []
    for bom, name in _BOMS:
        if body.startswith(bom):
            names.append(name)
            break
    if content_type and (match := _CT_CHARSET.search(content_type)):
        names.append(match.group(1))
    if meta := _META_CHARSET.search(body[:4096]):
        names.append(meta.group(1).decode("ascii", "replace"))
    names += ["utf-8", "windows-1252"]
    for name in names:
        codec = _codec(name)
        if codec is None:
            continue
        errors = "evidence_bench.whatwg-1252" if codec == "cp1252" else "strict"
        try:
            text = body.decode(codec, errors)
        except (UnicodeDecodeError, LookupError):
            continue
        if _plausible(text, body):
            return text.removeprefix("\ufeff")
    from charset_normalizer import from_bytes

    best = from_bytes(body[:1_000_000]).best()
    if best is None or best.encoding is None:
        return None
    try:
        text = body.decode(best.encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    return text if _plausible(text, body) else None


def clip_text(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters, at the last whitespace before the
    limit when there is one in its final fifth (so no word is cut in half), then stripped."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space >= max_chars * 4 // 5:
        cut = cut[:space]
    return cut.rstrip()


def _parse_date(value: str | None) -> datetime | None:
    """htmldate's ``%Y-%m-%dT%H:%M:%S%z`` (or a bare date) as an aware UTC datetime;
    a date without a zone is taken as UTC."""
    if not value:
        return None
    text = value.strip()
    if len(text) > 5 and text[-5] in "+-" and text[-4:].isdigit():  # +0100 -> +01:00
        text = f"{text[:-2]}:{text[-2:]}"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _clean(text: str) -> str:
    """Blank runs to one space, lines stripped, empty lines dropped."""
    lines = (_BLANKS.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _markup_title(markup: str) -> str:
    match = _TITLE.search(markup[:200_000])
    if not match:
        return ""
    import html

    return _clean(html.unescape(re.sub(r"<[^>]*>", " ", match.group(1)))).replace("\n", " ")


def _fragment_text(fragment: str) -> str:
    """The text of an HTML fragment (readability's summary): scripts and styles dropped,
    a line break after each block element."""
    import lxml.html

    root = lxml.html.fromstring(fragment)
    for element in list(root.iter(*_DROP_TAGS)):
        element.drop_tree()
    for element in root.iter(*_BLOCK_TAGS):
        element.tail = "\n" + (element.tail or "")
    return _clean(root.text_content())


def _trafilatura(markup: str, url: str) -> tuple[str, str, datetime | None]:
    import trafilatura

    document = trafilatura.bare_extraction(
        markup,
        url=url or None,
        fast=True,
        with_metadata=True,
        include_comments=False,
        include_tables=True,
        date_extraction_params=_DATE_PARAMS,
        # trafilatura keeps <noscript> ("enable JavaScript") and <template> text.
        prune_xpath=["//noscript", "//template"],
    )
    if document is None or isinstance(document, dict):
        return "", "", None
    return (
        _clean(document.text or ""),
        _clean(document.title or "").replace("\n", " "),
        _parse_date(document.date),
    )


def _readability(markup: str) -> tuple[str, str]:
    from readability import Document

    document = Document(markup)
    return _fragment_text(document.summary(html_partial=True)), _clean(document.short_title())


def _metadata_date(markup: str, url: str) -> datetime | None:
    from htmldate import find_date

    return _parse_date(find_date(markup, url=url or None, **_DATE_PARAMS))


# Extractors are parsers of untrusted markup: any exception of theirs (lxml's parser
# errors, a RecursionError on deep nesting, a ValueError on NUL bytes, their own bugs) means
# "this extractor found nothing", never a failed batch; hence the broad excepts below.


def extract_page(html: bytes | str, *, url: str, content_type: str | None = None) -> ExtractedPage:
    """The main text, title and publication date of one HTML page.

    ``html`` as bytes is decoded by :func:`decode_html` (``content_type``'s charset first);
    undecodable bytes give an empty page. Markup past :data:`MAX_HTML_CHARS` is ignored.
    trafilatura's fast mode is tried first, readability-lxml when it finds no text; the
    title falls back to ``<title>``, the date to htmldate on the page's metadata. Never
    raises on a page's content; ``method`` is "none" when no extractor found text.
    """
    if isinstance(html, bytes):
        decoded = decode_html(html, content_type)
        if decoded is None:
            return ExtractedPage(title="", text="", published_at=None, method="none")
        html = decoded
    markup = html[:MAX_HTML_CHARS].replace("\x00", "")
    if not markup.strip():
        return ExtractedPage(title="", text="", published_at=None, method="none")
    text, title, published = "", "", None
    method: Any = "none"
    try:
        text, title, published = _trafilatura(markup, url)
        if text:
            method = "trafilatura"
    except Exception:
        text = ""
    if not text:
        try:
            text, fallback_title = _readability(markup)
            title = title or fallback_title
            method = "readability" if text else "none"
        except Exception:
            text = ""
    if published is None:
        try:
            published = _metadata_date(markup, url)
        except Exception:
            published = None
    title = title or _markup_title(markup)
    return ExtractedPage(title=title, text=text, published_at=published, method=method)


def read_page(
    body: bytes, *, url: str, content_type: str | None = None
) -> ExtractedPage | FailureReason:
    """A fetched page's body decoded (:func:`decode_html`) and extracted
    (:func:`extract_page`), or why not: ``undecodable`` or ``no_text``."""
    text = decode_html(body, content_type)
    if text is None:
        return FailureReason.UNDECODABLE
    page = extract_page(text, url=url)
    return page if page.text else FailureReason.NO_TEXT
