"""Extraction cost per page: trafilatura's fast mode against its default (with its own
fallbacks), on Cranfield or CACM documents served in a boilerplate page; then one
LiveFetch run over N such pages (httpx.MockTransport, no network), cold and from the cache.

    PYTHONPATH=. python benchmarks/bench_livefetch_extract.py [cranfield|cacm] [N]

Both modes run on the same pages in the same minute, alternating, so the ratio is
meaningful on a busy machine even where the absolute figures are not.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trafilatura

from evidence_bench.livefetch import extract_page
from tests.livefetch_pages import article_page, collection_docs


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "cranfield"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    pages = [article_page(d["title"], [d["text"]]) for d in collection_docs(name, count)]
    extract_page(pages[0], url="u")  # imports and caches warmed
    fast: list[float] = []
    full: list[float] = []
    kept = 0
    for page in pages:
        started = time.perf_counter()
        result = extract_page(page, url="u")
        fast.append(time.perf_counter() - started)
        started = time.perf_counter()
        trafilatura.bare_extraction(page, fast=False, with_metadata=True)
        full.append(time.perf_counter() - started)
        kept += result.method == "trafilatura"
    f, s = statistics.median(fast) * 1000, statistics.median(full) * 1000
    print(f"{name}: {len(pages)} pages, {kept} by trafilatura's fast mode")
    print(f"extract_page (fast): median {f:.1f} ms/page")
    print(f"trafilatura default: median {s:.1f} ms/page (x{s / f:.2f})")
    pipeline(name, pages)


def pipeline(name: str, pages: list[str]) -> None:
    import tempfile
    from datetime import UTC, datetime

    import httpx

    from evidence_bench.livefetch import Candidate, LiveFetch, RetrievalIntent, StaticDiscovery

    urls = [f"https://{name}.evidence-bench.test/doc/{n}" for n in range(len(pages))]
    by_url = dict(zip(urls, pages, strict=True))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"Content-Type": "text/html"}, text=by_url[str(request.url)]
        )

    intent = RetrievalIntent("boundary layer heat transfer", max_results=8, freshness_days=None)
    with tempfile.TemporaryDirectory() as tmp:
        for label in ("cold", "cached"):
            with LiveFetch(
                StaticDiscovery([Candidate(url) for url in urls]),
                cache_path=Path(tmp) / "lf.sqlite",
                as_of=datetime(2026, 12, 1, tzinfo=UTC),
                transport=httpx.MockTransport(handler),
            ) as lf:
                started = time.perf_counter()
                packets = lf.run_sync(intent)
                elapsed = time.perf_counter() - started
            print(f"LiveFetch {label}: {len(pages)} pages, {len(packets)} packets, {elapsed:.2f} s")


if __name__ == "__main__":
    main()
