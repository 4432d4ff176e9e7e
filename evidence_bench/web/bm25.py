"""BM25 retrieval over an in-memory inverted index: the simulator's stand-in for a web engine.

Okapi BM25 (Robertson, Walker, Jones, Hancock-Beaulieu & Gatford, "Okapi at TREC-3", 1994;
Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009)::

    score(D, Q) = sum over query terms t of
                  idf(t) * tf(t, D) * (k1 + 1) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))

with Lucene's non-negative idf (``BM25Similarity``)::

    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

A query term that occurs twice counts twice (Robertson's query-term weight with k3 -> inf,
as Lucene's Boolean query does). Document lengths are exact (Lucene rounds them to one byte),
so scores can differ from Anserini's in the last digits; ``k1=0.9, b=0.4`` are its defaults.

Each document is analyzed once, when the index is built, and every posting's BM25 weight
computed then (the same floats as the formula term by term); a search adds the weights of
its query terms into one score per document, in query order (the same sums, in the same
order, as adding term by term), and sorts the best documents it reached by score, ties by doc
id.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["STOP_WORDS", "BM25Index", "Words", "doc_id_order", "number_words", "tokenize"]

#: A short English stop list: articles, prepositions, conjunctions, pronouns, auxiliaries and
#: question words ("what similarity laws must be obeyed ..." keeps only the content words).
_STOP_WORDS_TEXT = """
    a about after all also an and any are as at be been but by can could did do does for from
    had has have how if in into is it its may more most must no not of on or other over should
    so such than that the their them then there these they this those through to under up was
    we were what when where which while who why will with would
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())

_TOKEN = re.compile(r"[^\W_]+")  # a run of letters or digits, in any script
#: Every ASCII character but a letter or a digit, as a space: in ASCII text (``[^\W_]`` is
#: ``[A-Za-z0-9]`` there) the tokens are what ``str.split`` then gives, as in engine/text.py.
_ASCII_GAPS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})

Analyzer = Callable[[str], list[str]]
Ints = npt.NDArray[np.int64]


def tokenize(text: str) -> list[str]:
    r"""Lowercased runs of letters or digits, without 1-character tokens and stop words.

    ``_TOKEN.findall(text.lower())``, split by ``str.translate`` in ASCII; one word of
    letters and digits (``str.isalnum`` is ``[^\W_]``'s class) is its one run, as the
    simulator's index and snippets ask for a collection's every distinct word.
    """
    low = text.lower()
    if low.isascii():
        if low.isalnum():
            return [low] if len(low) > 1 and low not in STOP_WORDS else []
        runs = low.translate(_ASCII_GAPS).split()
    else:
        runs = _TOKEN.findall(low)
    return [t for t in runs if len(t) > 1 and t not in STOP_WORDS]


@dataclass(frozen=True, slots=True)
class Words:
    """Texts split on white space, each distinct word numbered in order of first occurrence:
    ``vocabulary[w]`` and its :func:`tokenize` tokens ``tokens[w]``; every text's words'
    numbers in ``numbers``, text after text, ``counts[i]`` of them for text ``i``.

    A text's tokens are its words' tokens in order: a token never spans white space (a run
    of letters or digits), and lowercasing a word gives what lowercasing its text does there.
    """

    vocabulary: list[str]
    tokens: list[list[str]]
    numbers: npt.NDArray[np.int32]
    counts: list[int]

    @classmethod
    def of(cls, texts: Iterable[list[str]]) -> Words:
        """The words of ``texts``, each a text's words (:func:`number_words`)."""
        number, numbers, counts = number_words(texts)
        vocabulary = list(number)
        del number
        tokens = [tokenize(word) for word in vocabulary]
        return cls(vocabulary, tokens, np.array(numbers, dtype=np.int32), counts)


def number_words(
    texts: Iterable[list[str]],
) -> tuple[dict[str, int], list[int], list[int]]:
    """Each distinct word of ``texts`` (each a list of words) numbered in order of first
    occurrence, every word's number in order, and each text's word count.

    A text's words are made, numbered and freed before the next text's, so the heap keeps
    no holes where a collection's ~250k repeated words were (~15 MB)."""
    number: dict[str, int] = {}
    words: list[int] = []
    counts: list[int] = []
    known = number.__contains__
    for split in texts:
        counts.append(len(split))
        fresh = list(itertools.filterfalse(known, dict.fromkeys(split)))
        if fresh:
            number.update(zip(fresh, range(len(number), len(number) + len(fresh)), strict=True))
        words.extend(map(number.__getitem__, split))
    return number, words, counts


def doc_id_order(doc_id: str) -> tuple[int, int, str]:
    """Sort key for tie-breaks: numeric ids by value first, then other ids as strings.

    Comparing as int only when both ids are numeric would not be a total order with mixed ids
    ("2" < "10" as numbers, "10" < "1a" < "2" as strings), so numeric ids sort first.
    """
    if doc_id.isascii() and doc_id.isdigit():
        return (0, int(doc_id), doc_id)
    return (1, 0, doc_id)


class BM25Index:
    """An inverted index over ``doc_id -> text`` that answers top-k BM25 queries.

    The postings are arrays: term ``t`` (numbered in ``_term_ids``) is held by documents
    ``_post_docs[_post_ptr[t]:_post_ptr[t + 1]]`` (ascending), ``_post_tf`` times each.
    """

    def __init__(
        self,
        docs: Mapping[str, str],
        k1: float = 0.9,
        b: float = 0.4,
        analyzer: Analyzer = tokenize,
        *,
        words: tuple[Words, Sequence[int]] | None = None,
    ) -> None:
        """``words``: the texts' words already numbered, and each of its texts' document (its
        place in ``docs``), for the default analyzer (the simulator numbers a collection's
        words once for this index and its snippets)."""
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1 (got k1={k1}, b={b})")
        self.k1 = k1
        self.b = b
        self.analyzer = analyzer
        self._doc_ids: list[str] = list(docs)
        self._term_ids: dict[str, int] = {}
        if words is not None and analyzer is tokenize:
            terms, owners = self._tokens_by_word(*words)
        elif analyzer is tokenize:
            split = Words.of(text.split() for text in docs.values())
            terms, owners = self._tokens_by_word(split, range(len(self._doc_ids)))
        else:
            terms, owners = self._tokens(docs)
        count = len(self._doc_ids)
        lengths = np.bincount(owners, minlength=count).tolist()
        # (term, document) pairs with their tf, by term then document.
        pairs, tf = np.unique(terms * max(count, 1) + owners, return_counts=True)
        self._post_docs = (pairs % max(count, 1)).astype(np.int32)
        self._post_tf = tf.astype(np.int32)
        self._post_ptr = np.searchsorted(
            pairs // max(count, 1), np.arange(len(self._term_ids) + 1)
        ).tolist()
        total = sum(lengths)
        avgdl = total / len(lengths) if total else 1.0
        # k1 * (1 - b + b * |D| / avgdl), the length normalization, once per document.
        self._norms = [k1 * (1 - b + b * length / avgdl) for length in lengths]
        self._norm_array = np.asarray(self._norms, dtype=np.float64)
        # Each document's place in the tie-break order (doc_id_order), as one int per doc.
        order = sorted(range(len(self._doc_ids)), key=lambda i: doc_id_order(self._doc_ids[i]))
        self._tie_rank = np.empty(len(order), dtype=np.int64)
        self._tie_rank[order] = np.arange(len(order), dtype=np.int64)
        # Every posting's BM25 weight, computed once: idf · tf · (k1 + 1) / (tf + norm), in
        # that order of operations, as the formula term by term (idf by math.log, per term).
        ptr = self._post_ptr
        idf = [self._idf(ptr[t + 1] - ptr[t]) for t in range(len(self._term_ids))]
        per_posting = np.repeat(np.array(idf, dtype=np.float64), np.diff(ptr))
        tf_all = self._post_tf.astype(np.int64)
        self._gains = per_posting * tf_all * (k1 + 1) / (tf_all + self._norm_array[self._post_docs])
        del per_posting, tf_all

    def _tokens(self, docs: Mapping[str, str]) -> tuple[Ints, Ints]:
        """Each token's term id and document, in order: ``analyzer`` on each text."""
        ids = self._term_ids
        terms: list[int] = []
        owners: list[int] = []
        for index, text in enumerate(docs.values()):
            found = [ids.setdefault(term, len(ids)) for term in self.analyzer(text)]
            terms.extend(found)
            owners.extend([index] * len(found))
        return np.array(terms, dtype=np.int64), np.array(owners, dtype=np.int64)

    def _tokens_by_word(self, words: Words, owners: Sequence[int]) -> tuple[Ints, Ints]:
        """What :meth:`_tokens` finds, with :func:`tokenize` run on each distinct word once
        (:class:`Words`); text ``i`` of ``words`` belongs to document ``owners[i]``."""
        ids = self._term_ids
        analyzed = [[ids.setdefault(t, len(ids)) for t in found] for found in words.tokens]
        sizes = np.fromiter(map(len, analyzed), dtype=np.int64, count=len(analyzed))
        flat = np.fromiter(itertools.chain.from_iterable(analyzed), dtype=np.int64)
        ptr = np.zeros(len(analyzed) + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        word_ids = words.numbers
        per_word = sizes[word_ids]
        before = np.cumsum(per_word) - per_word
        picked = np.repeat(ptr[word_ids] - before, per_word) + np.arange(int(per_word.sum()))
        doc_of_word = np.repeat(np.asarray(owners, dtype=np.int64), words.counts)
        return flat[picked], np.repeat(doc_of_word, per_word)

    def __len__(self) -> int:
        return len(self._doc_ids)

    def analyze(self, text: str) -> list[str]:
        """The terms this index sees in ``text`` (for query-biased snippets)."""
        return self.analyzer(text)

    def idf(self, term: str) -> float:
        """Lucene's BM25 idf of ``term``: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        found = self._term_ids.get(term)
        return self._idf(0 if found is None else self._post_ptr[found + 1] - self._post_ptr[found])

    def _idf(self, df: int) -> float:
        return math.log(1 + (len(self._doc_ids) - df + 0.5) / (df + 0.5))

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc_id, score)`` pairs with score > 0, by score then doc id."""
        return self.search_terms(self.analyzer(query), k)

    def search_terms(self, terms: Sequence[str], k: int) -> list[tuple[str, float]]:
        """:meth:`search` for a query already analyzed into ``terms`` (in order)."""
        if k <= 0:
            return []
        known, ptr = self._term_ids, self._post_ptr
        ranges = [(ptr[t], ptr[t + 1]) for t in map(known.get, terms) if t is not None]
        if not ranges:
            return []
        # Each document's gains summed in query-term order, starting from 0.0, as a
        # term-by-term sum does: bincount adds its weights in order (a term's documents are
        # distinct, so each term adds once to a document).
        if len(ranges) == 1:
            ((lo, hi),) = ranges
            docs, gains = self._post_docs[lo:hi], self._gains[lo:hi]
        else:
            docs = np.concatenate([self._post_docs[lo:hi] for lo, hi in ranges])
            gains = np.concatenate([self._gains[lo:hi] for lo, hi in ranges])
        scores = np.bincount(docs, weights=gains, minlength=len(self._doc_ids))
        reached = np.flatnonzero(scores > 0)  # every gain is > 0: the documents reached
        found = scores[reached]
        if len(reached) > k:  # only those that can be in the k best: the k-th score and above
            kth = np.partition(found, len(found) - k)[len(found) - k]
            keep = found >= kth
            reached, found = reached[keep], found[keep]
        best = np.lexsort((self._tie_rank[reached], -found))[:k]
        ids = self._doc_ids
        return [
            (ids[index], score)
            for index, score in zip(reached[best].tolist(), found[best].tolist(), strict=True)
        ]
