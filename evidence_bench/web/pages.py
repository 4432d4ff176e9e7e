"""The collection's documents as web pages: what a search result's URL serves.

The engine reads more than the snippet when it fetches the page behind a result, and the
page it fetches from the open web is not the document alone: navigation, a cookie banner,
related links, share buttons and a footer surround it, and its date sits in a meta tag.
:func:`render_page` serves each document of a collection that way at its URL
(``https://<collection>.evidence-bench.test/doc/<id>``), so the text extractor under test
has real boilerplate to remove. Everything is a pure function of the collection and the
document id: the same bytes in every process and every recording.

A configurable share of pages fails, chosen by a hash of the document id (so the same pages
fail in every run), in equal parts of :data:`SIMULATED_FAILURES`: ``http_status`` (a 404),
``timeout`` (the server never answers) or ``not_html`` (a PDF where a page was expected).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from typing import TYPE_CHECKING

from evidence_bench.collections.beir import Collection, Document
from evidence_bench.errors import ConfigurationError
from evidence_bench.web.failure import FailureReason

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = [
    "PAGE_PATH", "SIMULATED_FAILURES", "STALL_HEADER", "SimPage", "check_failure_rate",
    "page_failure", "published_on", "render_page",
]  # fmt: skip

#: The path prefix of a document's page: ``/doc/<id>`` (Collection.url_for).
PAGE_PATH = "/doc/"
#: Words per paragraph of a document's text on its page.
_PARAGRAPH_WORDS = 70
_RELATED = 4
#: Publication dates are spread over these days (1960-01-01 to 2025-12-31).
_EPOCH = date(1960, 1, 1)
_DAYS = (date(2025, 12, 31) - _EPOCH).days + 1

_NAV = (
    ("Home", "/"), ("Archive", "/doc/"), ("Topics", "/topics"), ("Authors", "/authors"),
    ("About", "/about"), ("Subscribe", "/subscribe"),
)  # fmt: skip
_COOKIES = (
    "We use cookies to personalise content, remember your preferences and analyse our "
    "traffic. By clicking Accept all you consent to our use of cookies.",
    "This site stores cookies on your device to improve your browsing experience and for "
    "analytics. You can change your choice at any time in the cookie settings.",
    "Our partners and we use cookies and similar technologies to measure audiences and "
    "deliver a better experience. Manage your consent below.",
)
_FOOTERS = (
    "Sign up for our newsletter to get the latest records in your inbox every week.",
    "Follow us for updates on new additions to the archive and upcoming events.",
    "Questions about this archive? Our help desk answers within two working days.",
)


#: How a simulated page fails, in the order the hash draws from.
SIMULATED_FAILURES = (FailureReason.HTTP_STATUS, FailureReason.TIMEOUT, FailureReason.NOT_HTML)


#: The header of the answer a simulator served with ``page_stall_s=0`` sends at once for a
#: page that times out, instead of holding the connection: ``record``'s loopback router
#: reads it as the timeout it stands for, without waiting one out.
STALL_HEADER = "X-Evidence-Bench-Stall"


@dataclass(frozen=True, slots=True)
class SimPage:
    """A page answer: status, content type and body; ``stall``: never answer (a timeout)."""

    status: int
    content_type: str
    body: bytes
    stall: bool = False


def _unit(*parts: str) -> float:
    """A number in [0, 1) that is a pure function of ``parts`` (sha256)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def check_failure_rate(rate: float) -> float:
    """``rate`` as a float in [0, 1], or a ConfigurationError naming ``pages.failure_rate``."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise ConfigurationError(f"pages.failure_rate must be a number in [0, 1], got {rate!r}")
    return float(rate)


def page_failure(doc_id: str, rate: float) -> FailureReason | None:
    """How the page of ``doc_id`` fails at failure share ``rate``, or None when it loads.

    The draw depends on the document id only, so a page that fails at a rate fails at every
    higher one too, and the same pages fail in every collection that holds that id.
    """
    rate = check_failure_rate(rate)
    if _unit("page-failure", doc_id) >= rate:
        return None
    kinds = SIMULATED_FAILURES
    return kinds[int(_unit("page-failure-kind", doc_id) * len(kinds))]


def published_on(doc_id: str) -> date:
    """The publication date a document's page declares (deterministic, 1960-2025)."""
    return _EPOCH + timedelta(days=int(_unit("published", doc_id) * _DAYS))


@cache
def _environment() -> Environment:
    # Imported here: a run that renders no page (snippets only) never needs jinja2, and the
    # parent imports this module before its workers fork.
    from evidence_bench._templates import template_environment

    return template_environment("evidence_bench.web", keep_trailing_newline=True)


def _paragraphs(text: str) -> list[str]:
    words = text.split()
    return [
        " ".join(words[i : i + _PARAGRAPH_WORDS]) for i in range(0, len(words), _PARAGRAPH_WORDS)
    ]


def _related(collection: Collection, doc: Document) -> list[tuple[str, str]]:
    """A few other documents, chosen by hash: their titles are boilerplate on this page."""
    ids = list(collection.documents)
    chosen: list[tuple[str, str]] = []
    for k in range(_RELATED * 2):
        other = ids[int(_unit("related", doc.doc_id, str(k)) * len(ids))]
        if other == doc.doc_id or any(href.endswith(f"/{other}") for _, href in chosen):
            continue
        title = collection.documents[other].title.strip() or f"Document {other}"
        chosen.append((title, f"{PAGE_PATH}{other}"))
        if len(chosen) == _RELATED:
            break
    return chosen


def render_page(collection: Collection, doc_id: str, *, failure_rate: float = 0.0) -> SimPage:
    """The page ``collection`` serves for ``doc_id`` (404 for an id it does not hold)."""
    doc = collection.documents.get(doc_id)
    failure = page_failure(doc_id, failure_rate) if doc is not None else FailureReason.HTTP_STATUS
    if failure is FailureReason.HTTP_STATUS:
        body = _environment().from_string(_NOT_FOUND).render(site=collection.host)
        return SimPage(404, "text/html; charset=utf-8", body.encode())
    if failure is FailureReason.TIMEOUT:
        return SimPage(0, "", b"", stall=True)
    assert doc is not None
    if failure is FailureReason.NOT_HTML:
        pdf = f"%PDF-1.4\n% evidence-bench record {doc_id}\n%%EOF\n".encode()
        return SimPage(200, "application/pdf", pdf)
    published = published_on(doc_id)
    title = doc.title.strip() or f"Document {doc_id}"
    pick = int(_unit("boilerplate", doc_id) * 3)
    page = (
        _environment()
        .get_template("page.html.j2")
        .render(
            title=title,
            site=f"{collection.name.capitalize()} archive",
            url=collection.url_for(doc_id),
            doc_id=doc_id,
            description=" ".join(doc.text.split()[:25]),
            published=published.isoformat(),
            published_text=published.strftime("%d %B %Y"),
            nav=_NAV,
            cookie=_COOKIES[pick],
            paragraphs=_paragraphs(doc.text),
            related=_related(collection, doc),
            footer=_FOOTERS[pick],
            year=2026,
        )
    )
    return SimPage(200, "text/html; charset=utf-8", page.encode())


_NOT_FOUND = (
    "<!DOCTYPE html>\n<html><head><title>Page not found | {{ site }}</title></head>"
    "<body><h1>404</h1><p>The page you asked for is not here.</p></body></html>\n"
)
