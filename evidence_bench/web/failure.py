"""Why a page, a feed or an answer gave nothing: one closed vocabulary for every fetch.

LiveFetch's packets, the page cassettes' records and ``record``'s summary all count
failures by these reasons (``FailureReason.parse`` reads the older page-cassette words
``connect`` and ``decoding`` as ``network`` and ``content_encoding``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FailureReason", "FetchFailure"]


class FailureReason(enum.StrEnum):
    """Why a URL gave no text: a closed set, so a caller can count by reason."""

    #: No complete answer within the request's deadline (connect, headers and body), or an
    #: extraction that ran past its time.
    TIMEOUT = "timeout"
    #: The connection could not be made or broke (DNS, refused, reset, TLS).
    NETWORK = "network"
    #: The URL, or a redirect on the way, leads to an address that is not the open web
    #: (loopback, private, link-local, multicast, unspecified, reserved).
    BLOCKED_ADDRESS = "blocked_address"
    #: A redirect led off the allow list or onto the deny list of domains.
    DENIED_DOMAIN = "denied_domain"
    #: The server answered with a status other than 2xx (after redirects).
    HTTP_STATUS = "http_status"
    #: The answer's Content-Type is not HTML (a PDF, JSON, an image...).
    NOT_HTML = "not_html"
    #: The body, decoded, is larger than the cap (the download stops at the cap).
    TOO_LARGE = "too_large"
    #: A Content-Encoding that is stacked (``gzip, gzip``), unknown, or does not decode.
    CONTENT_ENCODING = "content_encoding"
    #: The body cannot be decoded as text in any plausible encoding (binary data).
    UNDECODABLE = "undecodable"
    #: More redirects than the cap, or a redirect loop.
    REDIRECTS = "redirects"
    #: The page decoded, but no extractor found any text in it.
    NO_TEXT = "no_text"
    #: The address is not an http(s) URL, or one that cannot be parsed.
    INVALID_URL = "invalid_url"
    #: Not fetched: a replay without the page and ``replay.on_miss=skip``.
    SKIPPED = "skipped"

    @classmethod
    def parse(cls, value: str) -> FailureReason:
        """``value`` as a reason; the page cassettes' older words included."""
        return cls(_FORMER.get(value, value))


#: The page cassettes' words before there was one vocabulary.
_FORMER = {"connect": "network", "decoding": "content_encoding", "non_html": "not_html"}


@dataclass(frozen=True, slots=True)
class FetchFailure:
    """A URL that gave nothing, with its reason; ``detail`` says more ("HTTP 404")."""

    url: str
    reason: FailureReason
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"url": self.url, "reason": self.reason.value, "detail": self.detail}
