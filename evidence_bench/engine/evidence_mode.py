"""What a ranker or refiner reads of a result: its snippet, its page, or both.

``evidence=page`` lets any ranker or refiner read the text of the page behind each result
(fetched once, extracted by :mod:`evidence_bench.web.page_text`, clipped at a word
boundary), and ``both`` the snippet and the page. The wrappers hand the part they wrap a
*reading copy* of each candidate, whose ``snippet`` is what the mode reads, and map its
answer back to the candidates themselves, so rankings, feedback and judgments stay keyed by
the same canonical URLs. A page that failed is read as its snippet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from evidence_bench.engine.base import Feedback, Ranker, RefinedQuery, Refiner
from evidence_bench.engine.params import part_key
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence, renumber
from evidence_bench.web.page_text import clip_text

__all__ = [
    "EvidenceMode", "PageEvidenceRanker", "PageEvidenceRefiner", "PageSource", "evidence_mode",
    "reading_copies",
]  # fmt: skip


class EvidenceMode(StrEnum):
    """What of a result a ranker or refiner reads."""

    SNIPPET = "snippet"
    PAGE = "page"
    BOTH = "both"


def evidence_mode(key: str, value: object) -> EvidenceMode:
    """``value`` as an :class:`EvidenceMode`, or a ConfigurationError naming ``key``."""
    try:
        return EvidenceMode(str(value))
    except ValueError:
        valid = ", ".join(mode.value for mode in EvidenceMode)
        raise ConfigurationError(f"{key}={value!r} is not valid (valid: {valid})") from None


@runtime_checkable
class PageSource(Protocol):
    """The extracted text of the page at each URL, in order: fetched (or replayed) and
    cached by the source, a batch at a time (so a fetching source can fetch them side by
    side); None where the page failed (not found, timeout, not HTML) or holds no text."""

    def page_texts(self, urls: Sequence[str]) -> list[str | None]: ...


class _NoPages:
    """The source of a part built without pages (config validation): reading fails."""

    def page_texts(self, urls: Sequence[str]) -> list[str | None]:
        raise ConfigurationError(
            "evidence=page or both needs the pages of a query set's page cassette; "
            "this engine part was built without them"
        )


NO_PAGES: PageSource = _NoPages()


def _read(item: Evidence, mode: EvidenceMode, text: str | None) -> Evidence:
    if not text:
        return item  # no page: the snippet is what there is
    text = clip_text(text)
    extra: tuple[str, ...]
    if mode is EvidenceMode.PAGE:
        snippet, extra = text, ()
    else:
        snippet, extra = f"{item.snippet} {text}", item.extra_snippets
    return dataclasses.replace(item, snippet=snippet, extra_snippets=extra)


def reading_copies(
    candidates: Sequence[Evidence], mode: EvidenceMode, pages: PageSource
) -> list[Evidence]:
    """Each candidate as ``mode`` reads it: ``snippet`` replaced by the page's text
    (``page``, extra snippets dropped) or followed by it (``both``); the candidate itself
    where the page failed, or for ``snippet``."""
    if mode is EvidenceMode.SNIPPET:
        return list(candidates)
    texts = pages.page_texts([item.url for item in candidates])
    return [_read(item, mode, text) for item, text in zip(candidates, texts, strict=True)]


@dataclass
class PageEvidenceRanker:
    """``inner`` ranking reading copies of the candidates (:func:`reading_copies`).

    Not frozen, as :class:`~evidence_bench.engine.boost.BoostRelevant`: :class:`Ranker`
    declares ``name`` settable. A ranker that explains its scores (``score_breakdown``)
    explains them over the same reading copies.
    """

    inner: Ranker
    mode: EvidenceMode
    pages: PageSource = field(default=NO_PAGES, compare=False, repr=False)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.inner.name

    def effective_params(self) -> dict[str, Any]:
        """The inner ranker's key and the mode; the source is the run's, not the config's."""
        return {"inner": part_key(self.inner), "evidence": self.mode.value}

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """A permutation of ``candidates`` (the originals), rank renumbered 1..n."""
        by_key = {item.key: item for item in candidates}
        ranked = self.inner.rank(query, reading_copies(candidates, self.mode, self.pages), feedback)
        return renumber(by_key[item.key] for item in ranked)

    def __getattr__(self, name: str) -> Any:
        # Reached only for what the wrapper lacks: the inner ranker's score_breakdown.
        if name == "score_breakdown" and "inner" in self.__dict__:
            explain = getattr(self.inner, name)

            def over_copies(query: str, candidates: Sequence[Evidence], feedback: Feedback) -> Any:
                return explain(query, reading_copies(candidates, self.mode, self.pages), feedback)

            return over_copies
        raise AttributeError(name)


@dataclass(frozen=True)
class PageEvidenceRefiner:
    """``inner`` refining from reading copies of the candidates (:func:`reading_copies`)."""

    inner: Refiner
    mode: EvidenceMode
    pages: PageSource = field(default=NO_PAGES, compare=False, repr=False)

    def effective_params(self) -> dict[str, Any]:
        """The inner refiner's key and the mode."""
        return {"inner": part_key(self.inner), "evidence": self.mode.value}

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        return self.inner.refine(query, reading_copies(candidates, self.mode, self.pages), feedback)
