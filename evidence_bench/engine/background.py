"""idf from a background sample of pages, not from the candidates alone.

``idf=background`` takes document frequencies over a :class:`Background`: the pages behind
the first result page of every query of the query set (what a client that served those
queries holds in its page cache; no judgment is read), plus the candidates it does not
hold, read as the part reads its candidates (:func:`reading_copies`). It is a pure function
of the query set, the provider's first answers and the pages.

    idf(t) = ln((N + 1) / (df(t) + 1)) + 1   over N = |background ∪ candidates|

(the ranker's smoothed form). Why: docs/tutorials/pages.rst ("Reach").
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from evidence_bench.engine.evidence_mode import EvidenceMode, PageSource, reading_copies
from evidence_bench.engine.ranking import PoolMatrix, TfidfRocchioRanker, pool_matrix, weighted
from evidence_bench.engine.text import Analyzer, term_counts
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence, dedupe

__all__ = [
    "IDF_SOURCES", "Background", "BackgroundRocchioRanker", "DocumentFrequencies",
    "query_set_background",
]  # fmt: skip

#: Where a ranker's or refiner's idf comes from: ``candidates`` (the default: the results
#: it orders) or ``background`` (a :class:`Background` plus the candidates).
IDF_SOURCES = ("candidates", "background")

Reader = Callable[[Evidence], str]


@dataclass(frozen=True, slots=True)
class DocumentFrequencies:
    """How many documents of a sample hold each term (by its number in the analyzer's
    :func:`~evidence_bench.engine.text.lexicon`), the sample's size and its keys."""

    n: int
    df: Mapping[int, int]
    keys: frozenset[str]

    def idf(self, terms: Iterable[tuple[str, Sequence[int]]]) -> dict[int, float]:
        """The smoothed idf of every term of ``terms`` ((key, distinct terms) per candidate)
        over the sample plus the candidates it does not hold, ``ln((N + 1) / (df + 1)) + 1``."""
        extra: Counter[int] = Counter()
        n = self.n
        seen: list[Sequence[int]] = []
        for key, words in terms:
            seen.append(words)
            if key not in self.keys:
                n += 1
                extra.update(words)
        df = self.df
        return {
            term: math.log((n + 1) / (df.get(term, 0) + extra[term] + 1)) + 1.0
            for words in seen
            for term in words
        }


@dataclass(frozen=True, eq=False)
class Background:
    """A sample of results whose pages give the document frequencies (compared by identity:
    one per run). ``items`` are deduplicated by canonical URL, in the order first met."""

    items: tuple[Evidence, ...]
    pages: PageSource = field(repr=False)
    _cache: dict[tuple[Any, ...], DocumentFrequencies] = field(
        default_factory=dict, repr=False, compare=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.items)

    def frequencies(
        self, analyzer: Analyzer, mode: EvidenceMode, reader: Reader
    ) -> DocumentFrequencies:
        """The sample's document frequencies as ``mode`` reads its results (computed once per
        analyzer, mode and reader)."""
        key = (analyzer, mode, reader)
        with self._lock:
            found = self._cache.get(key)
        if found is None:
            df: Counter[int] = Counter()
            for item in reading_copies(self.items, mode, self.pages):
                df.update(term_counts(analyzer, reader(item))[0].tolist())
            found = DocumentFrequencies(
                len(self.items), dict(df), frozenset(item.key for item in self.items)
            )
            with self._lock:
                self._cache.setdefault(key, found)
        return found


def query_set_background(
    queries: Mapping[str, str],
    first_page: Callable[[str, str], Sequence[Evidence]],
    pages: PageSource,
) -> Background:
    """The results of ``first_page(query_id, query)`` for every query, in query order,
    deduplicated by canonical URL, read through ``pages``."""
    found: list[Evidence] = []
    for query_id, query in queries.items():
        found.extend(first_page(query_id, query))
    return Background(tuple(dedupe(found)), pages)


class _NoBackground:
    """The background of a part built without one (config validation): reading fails."""

    def frequencies(self, analyzer: Analyzer, mode: EvidenceMode, reader: Reader) -> Any:
        raise ConfigurationError(
            "idf=background needs the run's background sample (the pages of every query's "
            "first results); this engine part was built without it"
        )


#: The placeholder a part built for validation holds.
NO_BACKGROUND: Any = _NoBackground()


def _text(item: Evidence) -> str:
    return item.text


@lru_cache(maxsize=1024)
def _matrix(
    background: Background,
    mode: EvidenceMode,
    analyzer: Analyzer,
    keyed: tuple[tuple[str, str], ...],
) -> PoolMatrix:
    """The candidates' tf-idf arrays (:func:`~evidence_bench.engine.ranking.pool_matrix`)
    with idf over the background and the candidates."""
    matrix = pool_matrix(analyzer, tuple(text for _, text in keyed))
    frequencies = background.frequencies(analyzer, mode, _text)
    numbers = matrix.numbers.tolist()
    idf = frequencies.idf(
        (key, [numbers[column] for column in columns])
        for (key, _), columns in zip(keyed, matrix.document_columns, strict=True)
    )
    return weighted(matrix, np.array([idf[number] for number in numbers]))


@dataclass(frozen=True)
class BackgroundRocchioRanker(TfidfRocchioRanker):
    """:class:`~evidence_bench.engine.ranking.TfidfRocchioRanker` with its idf over a
    :class:`Background` and the candidates (see the module docstring); everything else,
    Rocchio's update included, is the same. ``mode`` is how its candidates are read, so the
    background is read alike."""

    background: Background = field(default=NO_BACKGROUND, compare=False, repr=False)
    mode: EvidenceMode = EvidenceMode.PAGE

    def effective_params(self) -> dict[str, Any]:
        """The TF-IDF ranker's, with the idf source."""
        return {**super().effective_params(), "idf": "background"}

    def matrix(self, candidates: Sequence[Evidence]) -> PoolMatrix:
        """The candidates' tf-idf arrays, idf over the background and the candidates."""
        keyed = tuple((item.key, item.text) for item in candidates)
        return _matrix(self.background, self.mode, self.analyzer, keyed)
