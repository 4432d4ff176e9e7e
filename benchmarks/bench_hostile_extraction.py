"""Why extraction is bounded by a child process and not by a size cap: the time to extract
hostile pages of the same size (MAX_HTML_CHARS characters, the cap already in force) in
this process, by shape; then the cost the child adds to an ordinary page (the recorded
Cranfield pages, read in process and through read_page_bounded).

    PYTHONPATH=. python benchmarks/bench_hostile_extraction.py [SIZE_CHARS]

A cap sound for every shape would have to hold the slowest one within a page's deadline,
and the slowest and the fastest shape differ by more than an order of magnitude per
character: so low a cap would cut the markup of ordinary article pages.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evidence_bench.web.bounded import read_page_bounded
from evidence_bench.web.page_cassettes import PAGES_NAME, read_page_cassette
from evidence_bench.web.page_text import MAX_HTML_CHARS, extract_page, read_page

ROOT = Path(__file__).resolve().parents[1]


def _shapes(n: int) -> dict[str, str]:
    return {
        "one text node": "<html><body><p>" + "word " * (n // 5) + "</p></body></html>",
        "deep nesting": "<div>" * (n // 11) + "x" + "</div>" * (n // 11),
        "small paragraphs": "<body>" + "<p>word word word word</p>" * (n // 27) + "</body>",
        "words between <br>": "<body><p>" + "w<br>" * (n // 5) + "</p></body>",
        "link lists": "<body>" + "<div><a href='/x'>link text here</a></div>" * (n // 45),
        "table cells": "<table>" + "<tr><td>a b</td><td>c d</td></tr>" * (n // 33) + "</table>",
    }


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else MAX_HTML_CHARS
    print(f"load average {os.getloadavg()[0]:.2f}; hostile pages of {size:,} characters")
    for name, markup in _shapes(size).items():
        started = time.perf_counter()
        page = extract_page(markup, url="https://x.test/")
        took = time.perf_counter() - started
        print(f"  {name:20s} {took:6.2f} s  ({page.method})")
    _header, records = read_page_cassette(ROOT / "cassettes" / "cranfield" / PAGES_NAME)
    pages = [record for record in records.values() if record.failure is None][:300]
    read_page_bounded(pages[0].body, url="u", timeout_s=60)  # the child started
    for label, read in (
        ("in process", lambda r: read_page(r.body, url=r.url, precision=True, metadata=False)),
        (
            "bounded child",
            lambda r: read_page_bounded(
                r.body, url=r.url, timeout_s=60, precision=True, metadata=False
            ),
        ),
    ):
        times = []
        for record in pages:
            started = time.perf_counter()
            read(record)
            times.append(time.perf_counter() - started)
        print(f"{label:14s} median {statistics.median(times) * 1000:.1f} ms/page ({len(pages)})")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
