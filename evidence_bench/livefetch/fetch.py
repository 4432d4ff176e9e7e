"""LiveFetch's page fetches: the guarded GET (:func:`evidence_bench.web.fetch.fetch`),
at most ``max_concurrency`` in flight and ``per_host`` to one host, every redirect hop also
checked by ``admit`` (the intent's domain lists), and only HTML answers kept
(:func:`~evidence_bench.web.fetch.html_failure`, checked before the body is read too).
"""

from __future__ import annotations

import threading

import httpx

from evidence_bench.web.failure import FetchFailure
from evidence_bench.web.fetch import (
    MAX_CONCURRENCY,
    PER_HOST,
    Admit,
    HostGates,
    Limits,
    fetch,
    html_failure,
)
from evidence_bench.web.fetch import Answer as FetchedPage
from evidence_bench.web.guard import OPEN_WEB, AddressPolicy, GuardedTransport

__all__ = [
    "MAX_BYTES", "MAX_CONCURRENCY", "MAX_REDIRECTS", "PER_HOST", "USER_AGENT", "FetchedPage",
    "PageFetcher",
]  # fmt: skip

#: Who is asking, and where to read about it.
USER_AGENT = "evidence_bench-livefetch/0.1 (evidence search research harness; httpx)"
#: The body cap: a main text is far smaller than this; larger answers are not articles.
MAX_BYTES = Limits().max_bytes
#: Redirects followed before giving up (browsers allow 20; articles need one or two).
MAX_REDIRECTS = Limits().max_redirects

_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"


def _check(response: httpx.Response) -> FetchFailure | None:
    """Before the body: a 2xx status and an HTML (or no) Content-Type."""
    why = html_failure(response.status_code, response.headers.get("Content-Type", ""))
    return None if why is None else FetchFailure(str(response.request.url), *why)


class PageFetcher:
    """Fetches pages through one ``httpx.Client`` (``transport`` for tests:
    ``httpx.MockTransport``), from any number of threads. Use as
    ``with PageFetcher(...) as fetcher``."""

    def __init__(
        self,
        *,
        max_concurrency: int = MAX_CONCURRENCY,
        per_host: int = PER_HOST,
        timeout_s: float = 15.0,
        max_redirects: int = MAX_REDIRECTS,
        max_bytes: int = MAX_BYTES,
        user_agent: str = USER_AGENT,
        transport: httpx.BaseTransport | None = None,
        policy: AddressPolicy = OPEN_WEB,
        admit: Admit | None = None,
    ) -> None:
        self.limits = Limits(timeout_s=timeout_s, max_bytes=max_bytes, max_redirects=max_redirects)
        self.policy = policy
        self._admit = admit
        self._overall = threading.BoundedSemaphore(max_concurrency)
        self._hosts = HostGates(per_host)
        self._client = httpx.Client(
            transport=transport or GuardedTransport(policy, max_connections=max_concurrency),
            headers={"User-Agent": user_agent, "Accept": _ACCEPT},
            trust_env=False,
        )

    def __enter__(self) -> PageFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def fetch(self, url: str) -> FetchedPage | FetchFailure:
        """The page at ``url``, or why not: never raises for the URL's trouble."""
        with self._overall, self._hosts(url):
            answer = fetch(
                self._client,
                url,
                limits=self.limits,
                policy=self.policy,
                admit=self._admit,
                check=_check,
            )
        if isinstance(answer, FetchFailure):
            return FetchFailure(url, answer.reason, answer.detail)
        # after the body: a page without a Content-Type must start like HTML
        why = html_failure(answer.status, answer.content_type, answer.body)
        return answer if why is None else FetchFailure(url, *why)
