"""HTML pages for LiveFetch's tests: an article inside realistic boilerplate, and the
Cranfield/CACM documents served that way.

The boilerplate (navigation, a cookie banner, related links, a footer, scripts) is what
extraction must remove; the article is what it must keep.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

__all__ = [
    "BOILERPLATE",
    "COLLECTIONS",
    "article_page",
    "collection_docs",
]

COLLECTIONS = Path(__file__).resolve().parents[2] / "shared" / "collections"
if not COLLECTIONS.is_dir():  # a worktree at /work/wt/<name>: shared/ is /work/shared
    COLLECTIONS = Path("/work/shared/collections")

#: Phrases of the boilerplate: none of them may reach an extracted text.
BOILERPLATE = (
    "We use cookies",
    "Accept all cookies",
    "Related articles",
    "Subscribe to our newsletter",
    "All rights reserved",
    "trackingPixel",
)


def article_page(
    title: str,
    paragraphs: list[str],
    *,
    published: str | None = "2026-11-24T09:30:00+00:00",
    head_extra: str = "",
) -> str:
    """A news-site page: ``paragraphs`` in an ``<article>``, everything else boilerplate."""
    meta = f'<meta property="article:published_time" content="{published}">' if published else ""
    body = "\n".join(f"<p>{html.escape(text)}</p>" for text in paragraphs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)} | Example News</title>
{meta}{head_extra}
<script>window.trackingPixel = function() {{ document.write("<p>trackingPixel</p>"); }};</script>
<style>body {{ font-family: sans-serif; }}</style>
</head><body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/world">World</a></li>
<li><a href="/science">Science</a></li><li><a href="/about">About us</a></li></ul></nav></header>
<div class="cookie-banner" id="cookie-consent"><p>We use cookies to improve your
experience.</p><button>Accept all cookies</button></div>
<main><article><h1>{html.escape(title)}</h1>
{body}
</article>
<aside class="related"><h2>Related articles</h2><ul>
<li><a href="/a1">Ten things about aircraft you never knew</a></li>
<li><a href="/a2">Why the weather was strange this year</a></li>
<li><a href="/a3">A short history of the jet engine</a></li></ul></aside></main>
<footer><p>Subscribe to our newsletter for weekly updates.</p>
<p>Copyright 2026 Example News. All rights reserved.</p></footer>
</body></html>"""


def collection_docs(name: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` documents with a text of a shipped collection (``_id``,
    ``title``, ``text``; many CACM records have a title only)."""
    docs = []
    with (COLLECTIONS / name / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            if doc.get("text", "").strip():
                docs.append(doc)
            if len(docs) == count:
                break
    return docs
