"""Brave Web Search bodies shaped like the real ones, for tests that fake Brave.

The shapes follow Brave's published contract (query, mixed, type, web with results carrying
profile, meta_url, thumbnail, page_age, extra_snippets...), including keys the provider does
not use, so a test also checks that unknown keys are ignored.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "RATE_LIMIT_HEADERS",
    "brave_body",
    "brave_error",
    "brave_result",
    "brave_results",
]

#: Rate-limit headers Brave sends on success: one value per window (per second, per month).
RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": "1, 15000",
    "X-RateLimit-Policy": "1;w=1, 15000;w=2592000",
    "X-RateLimit-Remaining": "0, 14999",
    "X-RateLimit-Reset": "1, 1419704",
}


def brave_result(title: str, url: str, description: str = "", **extra: Any) -> dict[str, Any]:
    """One ``web.results[]`` item; ``extra`` overrides or adds keys (None removes a key)."""
    parts = urlsplit(url)
    hostname = parts.hostname or ""
    crumbs = " › ".join(segment for segment in parts.path.split("/") if segment)
    result: dict[str, Any] = {
        "title": title,
        "url": url,
        "is_source_local": False,
        "is_source_both": False,
        "description": description,
        "page_age": "2025-06-30T05:41:00",
        "profile": {
            "name": hostname.removeprefix("www.").split(".")[0].title(),
            "url": f"{parts.scheme}://{parts.netloc}/",
            "long_name": hostname.removeprefix("www."),
            "img": "https://imgs.search.brave.com/profile-icon.png",
        },
        "language": "en",
        "family_friendly": True,
        "type": "search_result",
        "subtype": "generic",
        "is_live": False,
        "meta_url": {
            "scheme": parts.scheme,
            "netloc": hostname.removeprefix("www."),
            "hostname": hostname,
            "favicon": "https://imgs.search.brave.com/favicon.png",
            "path": f"› {crumbs}" if crumbs else "",
        },
        "thumbnail": {
            "src": "https://imgs.search.brave.com/thumb.jpg",
            "original": f"{parts.scheme}://{parts.netloc}/share.png",
            "logo": False,
        },
        "age": "June 30, 2025",
    }
    for key, value in extra.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def brave_results(count: int, *, start: int = 0, host: str = "example.org") -> list[dict[str, Any]]:
    """``count`` distinct results numbered from ``start`` (``/doc/{n}`` on ``host``)."""
    return [
        brave_result(
            f"Document {n}",
            f"https://{host}/doc/{n}",
            f"The <strong>document</strong> numbered {n}.",
        )
        for n in range(start, start + count)
    ]


def brave_body(
    results: list[dict[str, Any]] | None, *, more: bool = False, query: str = "q"
) -> dict[str, Any]:
    """A 200 body; ``results=None`` omits ``web`` as Brave does when nothing matched."""
    body: dict[str, Any] = {
        "query": {
            "original": query,
            "show_strict_warning": False,
            "is_navigational": False,
            "is_news_breaking": False,
            "spellcheck_off": True,
            "country": "us",
            "bad_results": False,
            "should_fallback": False,
            "postal_code": "",
            "city": "",
            "header_country": "",
            "more_results_available": more,
            "state": "",
        },
        "mixed": {
            "type": "mixed",
            "main": [{"type": "web", "index": i, "all": False} for i in range(len(results or []))],
            "top": [],
            "side": [],
        },
        "type": "search",
    }
    if results is not None:
        body["web"] = {"type": "search", "family_friendly": True, "results": results}
    return body


def brave_error(status: int, code: str, detail: str, **meta: Any) -> dict[str, Any]:
    """Brave's ErrorResponse body; ``meta`` fills ``error.meta``."""
    return {
        "type": "ErrorResponse",
        "error": {
            "id": "3f2b7d0e-6d0c-4d8e-9a53-2d1b1f4c8e21",
            "status": status,
            "code": code,
            "detail": detail,
            "meta": meta,
        },
        "time": 1751264460,
    }
