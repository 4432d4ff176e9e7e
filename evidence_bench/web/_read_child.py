"""The child process of :class:`~evidence_bench.web.bounded.BoundedReader`: reads requests
``(body, url, content_type, precision, metadata)`` from stdin and writes each page's
:func:`~evidence_bench.web.page_text.read_page` result to stdout, until stdin closes."""

from __future__ import annotations

import os
import sys


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not break a frame
    requests = sys.stdin.buffer

    import htmldate  # noqa: F401  (imported before "ready": no page's time pays for them)
    import readability  # noqa: F401
    import trafilatura  # noqa: F401

    from evidence_bench.web.bounded import read_frame, write_frame
    from evidence_bench.web.page_text import read_page

    write_frame(answers, "ready")
    while True:
        try:
            body, url, content_type, precision, metadata = read_frame(requests)
        except EOFError:
            return
        page = read_page(
            body, url=url, content_type=content_type, precision=precision, metadata=metadata
        )
        write_frame(answers, page)


if __name__ == "__main__":
    main()
