"""The page pipeline after the fetch: decode, extract, clip, and why a page gave no text.

One extractor serves LiveFetch's packets and the engine's page evidence: :func:`read_page`
decodes a fetched body (:func:`~evidence_bench.web.decode.decode_html`) and extracts its
main text by :func:`extract_page` (trafilatura's fast mode, Barbaresi 2021, ACL demos), or
says why not; a reader clips the text to :data:`MAX_CHARS` by :func:`clip_text`. With
``precision=True`` (page evidence) a page without an article gives no text, and the reader
keeps the snippet. The text and title come back without control characters.
"""

from __future__ import annotations

import html as html_entities
import importlib.util
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from evidence_bench._lazy import module
from evidence_bench._printable import plain_text
from evidence_bench.errors import ConfigurationError
from evidence_bench.web.decode import decode_html
from evidence_bench.web.failure import FailureReason

if TYPE_CHECKING:
    import trafilatura
else:  # imported at the first page read: a run on snippets never loads it
    trafilatura = module("trafilatura")

__all__ = [
    "EXTRACTOR_VERSION", "MAX_CHARS", "MAX_HTML_CHARS", "PAGE_STACK", "ExtractedPage",
    "ExtractionMethod", "as_utc", "clip_text", "extract_page", "read_page", "require_pages",
]  # fmt: skip

#: The version of what :func:`read_page` gives for a page, raised whenever a page's text
#: changes, so a text stored by an older version (LiveFetch's page cache) is never served.
EXTRACTOR_VERSION = 3
#: The most characters of a page's text a reader (a ranker, a refiner, a packet) reads.
MAX_CHARS = 12_000
#: Markup beyond this many characters is not parsed: a main text lies in the first
#: megabytes, and parsing cost grows with the tree.
MAX_HTML_CHARS = 2_000_000

#: What this module and LiveFetch import of the optional extra ``pages``.
PAGE_STACK = (
    "trafilatura", "readability", "lxml", "lxml_html_clean", "htmldate", "charset_normalizer",
)  # fmt: skip

#: How an extracted page's text was obtained; "none" when no extractor found any text.
ExtractionMethod = Literal["trafilatura", "readability", "none"]

# Options of htmldate (through trafilatura and directly): metadata only, the original
# (published, not updated) date, with the time and zone when the page gives them.
_DATE_PARAMS: dict[str, Any] = {
    "extensive_search": False,
    "original_date": True,
    "outputformat": "%Y-%m-%dT%H:%M:%S%z",
}
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
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


def require_pages(what: str, modules: tuple[str, ...] = PAGE_STACK) -> None:
    """Raise a ConfigurationError naming the ``pages`` extra unless ``modules`` can be
    imported; ``what`` says what needs them (``ranker.evidence=page``)."""
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # (ValueError: a module blocked in sys.modules)
            found = False
        if not found:
            raise ConfigurationError(
                f"{what} needs the page stack, an optional extra: "
                f"pip install 'evidence_bench[pages]' (cannot import {name})"
            )


@dataclass(frozen=True, slots=True)
class ExtractedPage:
    """A page's main text, title and publication date, and which extractor found them."""

    title: str
    text: str
    published_at: datetime | None
    method: ExtractionMethod


_EMPTY = ExtractedPage(title="", text="", published_at=None, method="none")


def clip_text(text: str, max_chars: int = MAX_CHARS) -> str:
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
    return as_utc(moment)


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC, aware; a naive one is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _clean(text: str) -> str:
    """Blank runs to one space, lines stripped, empty lines dropped."""
    lines = (_BLANKS.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _markup_title(markup: str) -> str:
    match = _TITLE.search(markup[:200_000])
    if not match:
        return ""
    title = html_entities.unescape(re.sub(r"<[^>]*>", " ", match.group(1)))
    return _clean(title).replace("\n", " ")


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


def _trafilatura(
    markup: str, url: str, *, precision: bool, metadata: bool
) -> tuple[str, str, datetime | None]:
    document = trafilatura.bare_extraction(
        markup,
        url=url or None,
        fast=True,
        favor_precision=precision,
        with_metadata=metadata,
        include_comments=False,
        include_tables=True,
        deduplicate=False,
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


def extract_page(
    html: bytes | str,
    *,
    url: str,
    content_type: str | None = None,
    precision: bool = False,
    metadata: bool = True,
) -> ExtractedPage:
    """The main text (and with ``metadata``, the title and publication date) of one page.

    ``html`` as bytes is decoded by :func:`~evidence_bench.web.decode.decode_html`
    (``content_type``'s charset first); undecodable bytes give an empty page. trafilatura's
    fast mode first; unless ``precision``, readability-lxml when it finds no text. The title
    falls back to ``<title>``, the date to htmldate on the page's metadata. Never raises on
    a page's content; ``method`` is "none" when no extractor found text.
    """
    if isinstance(html, bytes):
        decoded = decode_html(html, content_type)
        if decoded is None:
            return _EMPTY
        html = decoded
    markup = html[:MAX_HTML_CHARS].replace("\x00", "")
    if not markup.strip():
        return _EMPTY
    text, title, published = "", "", None
    method: ExtractionMethod = "none"
    try:
        text, title, published = _trafilatura(markup, url, precision=precision, metadata=metadata)
        if text:
            method = "trafilatura"
    except Exception:
        text = ""
    if not text and not precision:
        try:
            text, fallback_title = _readability(markup)
            title = title or fallback_title
            method = "readability" if text else "none"
        except Exception:
            text = ""
    if not metadata:
        return ExtractedPage(title="", text=plain_text(text), published_at=None, method=method)
    if published is None:
        try:
            published = _metadata_date(markup, url)
        except Exception:
            published = None
    title = title or _markup_title(markup)
    return ExtractedPage(
        title=plain_text(title), text=plain_text(text), published_at=published, method=method
    )


def read_page(
    body: bytes,
    *,
    url: str,
    content_type: str | None = None,
    precision: bool = False,
    metadata: bool = True,
) -> ExtractedPage | FailureReason:
    """A fetched page's body decoded and extracted (:func:`extract_page`), or why not:
    ``undecodable`` or ``no_text``."""
    text = decode_html(body, content_type)
    if text is None:
        return FailureReason.UNDECODABLE
    page = extract_page(text, url=url, precision=precision, metadata=metadata)
    return page if page.text else FailureReason.NO_TEXT
