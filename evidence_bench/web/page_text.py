"""The seam where a fetched page becomes the text the engine reads: one function.

:func:`page_text` extracts a page's main text with trafilatura (fast mode: its own
algorithm, without the jusText and readability fallbacks), so navigation, cookie banners,
related links and footers do not count as the page's words. ``favor_precision``: without
it, a page whose article holds a heading and no paragraph (half of CACM's documents are a
title alone) came back as its navigation, breadcrumbs and byline; with it such a page gives
no text, so the reader falls back to the snippet, and pages with an article keep all of it
(measured on every 8th Cranfield and CACM document: every word of the document kept,
boilerplate words in 11 of 401 CACM pages instead of 222). LiveFetch's extractor
(``evidence_bench.livefetch.extract.extract_page``: trafilatura, then readability-lxml)
does the same job for the LiveFetch pipeline; when both live on one branch, point
:data:`EXTRACT` at ``lambda html, url, content_type: extract_page(html, url=url,
content_type=content_type).text`` and everything that reads pages follows (the page
cassettes hold the HTML, not the text, so they stay valid).

The text is clipped to :data:`MAX_CHARS` (LiveFetch's ``MAX_CHARS``) where it is read
(:mod:`evidence_bench.engine.evidence_mode`), not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from evidence_bench._lazy import module

if TYPE_CHECKING:
    import trafilatura
else:  # imported at the first page read: a run on snippets never loads it (~12 MB)
    trafilatura = module("trafilatura")

__all__ = ["EXTRACT", "MAX_CHARS", "page_text", "trafilatura_text"]

#: The most characters of a page's text a ranker or refiner reads.
MAX_CHARS = 12_000


def trafilatura_text(html: bytes | str, url: str, content_type: str | None) -> str:
    """The main text of ``html`` by trafilatura's fast mode ("" when it finds none).

    ``content_type`` is unused: trafilatura detects the encoding of bytes itself.
    """
    text = trafilatura.extract(
        html,
        url=url,
        fast=True,
        favor_precision=True,
        include_comments=False,
        include_tables=True,
        deduplicate=False,
        with_metadata=False,
    )
    return text or ""


#: The extractor :func:`page_text` calls: ``(html, url, content_type) -> text``.
EXTRACT: Callable[[bytes | str, str, str | None], str] = trafilatura_text


def page_text(html: bytes | str, *, url: str, content_type: str | None = None) -> str:
    """The text a page's HTML holds for a reader, boilerplate removed ("" when none)."""
    return EXTRACT(html, url, content_type)
