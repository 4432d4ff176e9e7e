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

Each document is analyzed once, when the index is built, into a sparse term-by-document
matrix of term frequencies (CSC: each term's documents, ascending) and one length per
document; a search works out its terms' postings' BM25 weights (the same floats as the
formula term by term), adds them into one score per document in query order (the same
sums, in the same order, as adding term by term), and sorts the best documents it reached by
score, ties by doc id. :meth:`BM25Index.save` writes the arrays, and :meth:`BM25Index.load`
maps them back into memory without reading them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "STOP_WORDS",
    "BM25Index",
    "Words",
    "analysis_fingerprint",
    "doc_id_order",
    "number_words",
    "tokenize",
]

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


def analysis_fingerprint(k1: float = 0.9, b: float = 0.4) -> str:
    """A short digest of what an index holds beyond its documents: :func:`tokenize` (its
    code, its token pattern, :data:`STOP_WORDS`) and ``k1``, ``b``. A saved index carries
    its fingerprint, and one saved under another is never read (it is built again)."""
    code = tokenize.__code__
    parts = [
        f"format {INDEX_FORMAT}", f"k1 {k1!r}", f"b {b!r}", _TOKEN.pattern,
        " ".join(sorted(STOP_WORDS)), code.co_code.hex(), repr(code.co_consts),
        repr(code.co_names),
    ]  # fmt: skip
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


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
    no holes where a collection's repeated words were."""
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

    The postings are a term-by-document matrix in compressed sparse column layout (CSC):
    term ``t`` (numbered in ``_term_ids``) is held by
    documents ``_docs[_ptr[t]:_ptr[t + 1]]`` (ascending), ``_tf`` times each. Each document
    costs its length's normalization and its place in the tie-break order; each posting
    a document number and a term frequency (:attr:`nbytes`).
    """

    def __init__(
        self,
        docs: Mapping[str, str] | Iterable[tuple[str, str]],
        k1: float = 0.9,
        b: float = 0.4,
        analyzer: Analyzer = tokenize,
    ) -> None:
        """``docs``: each document's id and text, a mapping or ``(doc_id, text)`` pairs (read
        once, in order, a block of documents at a time: a collection's texts are never
        held twice)."""
        _check_parameters(k1, b)
        self.k1, self.b, self.analyzer = k1, b, analyzer
        pairs = docs.items() if isinstance(docs, Mapping) else docs
        self._doc_ids: list[str] = []
        self._term_ids: dict[str, int] = {}
        self._ptr, self._docs, self._tf, lengths = self._postings(pairs)
        self._lengths = lengths
        self._norms = _norms(lengths, k1, b)
        self._tie_rank = _tie_ranks(self._doc_ids)

    def _postings(
        self, pairs: Iterable[tuple[str, str]]
    ) -> tuple[Ints, npt.NDArray[np.int32], npt.NDArray[Any], npt.NDArray[np.int32]]:
        """The CSC arrays (pointers, documents, term frequencies) and each document's length,
        analyzing a block of documents at a time: each block's (document, term) pairs are
        counted, and the blocks' rows turned into the matrix's columns at the end, a block
        at a time (memory: the blocks' pairs and the matrix, never a sort of all pairs)."""
        ids = self._term_ids
        known = ids.__contains__
        blocks: list[tuple[npt.NDArray[np.int32], npt.NDArray[Any], Ints]] = []
        lengths: list[Ints] = []
        wide = False  # a term frequency above 65,535: int32 instead of uint16
        texts = (text for doc_id, text in _appending(pairs, self._doc_ids))
        while block := list(itertools.islice(texts, _BLOCK)):
            tokens = [self.analyzer(text) for text in block]
            sizes = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
            flat = list(itertools.chain.from_iterable(tokens))
            del tokens
            fresh = list(itertools.filterfalse(known, dict.fromkeys(flat)))
            if fresh:
                ids.update(zip(fresh, range(len(ids), len(ids) + len(fresh)), strict=True))
            terms = np.fromiter(map(ids.__getitem__, flat), dtype=np.int64, count=len(flat))
            del flat
            width = max(len(ids), 1)
            owners = np.repeat(np.arange(len(block), dtype=np.int64), sizes)
            keys, tf = np.unique(owners * width + terms, return_counts=True)
            del owners, terms
            per_doc = np.bincount(keys // width, minlength=len(block))
            wide = wide or bool(len(tf) and tf.max() > _NARROW_TF)
            blocks.append(((keys % width).astype(np.int32), tf, per_doc))
            lengths.append(sizes)
        width = len(ids)
        tf_type = np.int32 if wide else np.uint16
        df = np.zeros(width, dtype=np.int64)
        for block_terms, _tf, _per_doc in blocks:
            df += np.bincount(block_terms, minlength=width)
        ptr = np.zeros(width + 1, dtype=np.int64)
        np.cumsum(df, out=ptr[1:])
        docs = np.empty(int(ptr[-1]), dtype=np.int32)
        tf_all = np.empty(int(ptr[-1]), dtype=tf_type)
        # Each block's postings go after the earlier blocks' of the same term: a counting
        # sort by term, each term's documents ascending (blocks and rows are in doc order).
        cursor, first = ptr[:-1].copy(), 0
        while blocks:
            block_terms, tf, per_doc = blocks.pop(0)
            order = np.argsort(block_terms, kind="stable")
            by_term = block_terms[order]
            rank = np.arange(len(by_term)) - np.searchsorted(by_term, by_term)
            at = cursor[by_term] + rank
            owners = np.repeat(np.arange(first, first + len(per_doc), dtype=np.int32), per_doc)
            docs[at], tf_all[at] = owners[order], tf[order]
            cursor += np.bincount(by_term, minlength=width)
            first += len(per_doc)
        doc_lengths = np.concatenate(lengths or [np.zeros(0, np.int64)]).astype(np.int32)
        return ptr, docs, tf_all, doc_lengths

    # -- saved and loaded ---------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the index's arrays and vocabulary into ``directory`` (which must exist):
        what :meth:`load` reads back, memory-mapped. ``index.json``, written last, holds
        each file's size and sha256, which :meth:`load` checks."""
        for name in _ARRAYS:
            np.save(directory / f"{name}.npy", getattr(self, f"_{name}"), allow_pickle=False)
        terms = "\n".join(self._term_ids)  # a term is a run of letters or digits: no newline
        (directory / _TERMS).write_text(terms, encoding="utf-8")
        files = {file: _file_digest(directory / file) for file in _FILES}
        meta = {
            "format": INDEX_FORMAT, "k1": self.k1, "b": self.b, "documents": len(self),
            "analysis": analysis_fingerprint(self.k1, self.b), "files": files,
        }  # fmt: skip
        (directory / _META).write_text(json.dumps(meta), encoding="utf-8")

    @classmethod
    def load(
        cls, directory: Path, doc_ids: list[str], *, k1: float = 0.9, b: float = 0.4
    ) -> BM25Index:
        """The index :meth:`save` wrote into ``directory``, over documents ``doc_ids`` (in
        the saved order), with ``k1`` and ``b``, its postings memory-mapped (pages shared by
        every process that reads them). ValueError or OSError when the files are not a whole
        index of this format over as many documents, analyzed as :func:`tokenize` analyzes
        now with these ``k1`` and ``b`` (:func:`analysis_fingerprint`), or any file's size or
        sha256 is not the one saved (a truncated or damaged file is never used)."""
        try:
            meta = json.loads((directory / _META).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{directory / _META}: not the index's JSON ({exc})") from exc
        if not isinstance(meta, dict):
            raise ValueError(f"{directory / _META}: not the index's JSON")
        if meta.get("format") != INDEX_FORMAT or meta.get("documents") != len(doc_ids):
            raise ValueError(f"{directory}: not an index of format {INDEX_FORMAT} over these")
        if meta.get("analysis") != analysis_fingerprint(k1, b):
            raise ValueError(f"{directory}: analyzed otherwise, or with another k1 or b")
        files = meta.get("files")
        for file in _FILES:
            if not isinstance(files, dict) or files.get(file) != _file_digest(directory / file):
                raise ValueError(f"{directory / file}: not the file the index saved")
        index = cls.__new__(cls)
        _check_parameters(meta["k1"], meta["b"])
        index.k1, index.b, index.analyzer = float(meta["k1"]), float(meta["b"]), tokenize
        index._doc_ids = doc_ids
        for name in _ARRAYS:
            array = np.load(directory / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            setattr(index, f"_{name}", array)
        text = (directory / _TERMS).read_text(encoding="utf-8")
        terms = text.split("\n") if text else []
        index._term_ids = dict(zip(terms, range(len(terms)), strict=True))
        ptr, docs, tf = index._ptr, index._docs, index._tf
        if (
            len(ptr) != len(terms) + 1
            or (len(ptr) and (ptr[0] != 0 or ptr[-1] != len(docs)))
            or len(tf) != len(docs)
            or not len(index._lengths) == len(index._tie_rank) == len(doc_ids)
        ):
            raise ValueError(f"{directory}: the index's arrays do not fit together")
        index._norms = _norms(np.asarray(index._lengths), index.k1, index.b)
        return index

    @property
    def nbytes(self) -> int:
        """The bytes the index holds: its arrays, its vocabulary (each term's string and
        its dict slot) and its list of documents (the ids themselves are the collection's)."""
        arrays = sum(int(getattr(self, f"_{name}").nbytes) for name in (*_ARRAYS, "norms"))
        vocabulary = sys.getsizeof(self._term_ids) + sum(map(sys.getsizeof, self._term_ids))
        return arrays + vocabulary + sys.getsizeof(self._doc_ids)

    # -- searching ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._doc_ids)

    def analyze(self, text: str) -> list[str]:
        """The terms this index sees in ``text`` (for query-biased snippets)."""
        return self.analyzer(text)

    def idf(self, term: str) -> float:
        """Lucene's BM25 idf of ``term``: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        found = self._term_ids.get(term)
        return self._idf(0 if found is None else int(self._ptr[found + 1] - self._ptr[found]))

    def _idf(self, df: int) -> float:
        return math.log(1 + (len(self._doc_ids) - df + 0.5) / (df + 0.5))

    def _gains(self, term: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
        """The documents holding term number ``term`` and its BM25 weight in each:
        idf · tf · (k1 + 1) / (tf + norm), in that order of operations, as the formula term
        by term (idf by math.log)."""
        lo, hi = int(self._ptr[term]), int(self._ptr[term + 1])
        docs = self._docs[lo:hi]
        tf = self._tf[lo:hi].astype(np.float64)
        return docs, self._idf(hi - lo) * tf * (self.k1 + 1) / (tf + self._norms[docs])

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc_id, score)`` pairs with score > 0, by score then doc id."""
        return self.search_terms(self.analyzer(query), k)

    def search_terms(self, terms: Sequence[str], k: int) -> list[tuple[str, float]]:
        """:meth:`search` for a query already analyzed into ``terms`` (in order)."""
        if k <= 0:
            return []
        found = [t for t in map(self._term_ids.get, terms) if t is not None]
        if not found:
            return []
        weights = {term: self._gains(term) for term in dict.fromkeys(found)}
        # Each document's gains summed in query-term order, starting from 0.0, as a
        # term-by-term sum does: bincount adds its weights in order (a term's documents are
        # distinct, so each term adds once to a document).
        if len(found) == 1:
            docs, gains = weights[found[0]]
        else:
            docs = np.concatenate([weights[t][0] for t in found])
            gains = np.concatenate([weights[t][1] for t in found])
        scores = np.bincount(docs, weights=gains, minlength=len(self._doc_ids))
        reached = np.flatnonzero(scores > 0)  # every gain is > 0: the documents reached
        best_scores = scores[reached]
        if len(reached) > k:  # only those that can be in the k best: the k-th score and above
            kth = np.partition(best_scores, len(best_scores) - k)[len(best_scores) - k]
            keep = best_scores >= kth
            reached, best_scores = reached[keep], best_scores[keep]
        best = np.lexsort((self._tie_rank[reached], -best_scores))[:k]
        ids = self._doc_ids
        return [
            (ids[index], score)
            for index, score in zip(reached[best].tolist(), best_scores[best].tolist(), strict=True)
        ]


#: Documents analyzed at a time while indexing.
_BLOCK = 8192
_NARROW_TF = np.iinfo(np.uint16).max
#: The saved index's layout; another number is never read (it is built again).
INDEX_FORMAT = 2
_ARRAYS = ("ptr", "docs", "tf", "lengths", "tie_rank")
_TERMS, _META = "terms.txt", "index.json"
_FILES = (*(f"{name}.npy" for name in _ARRAYS), _TERMS)


def _check_parameters(k1: float, b: float) -> None:
    if k1 < 0 or not 0 <= b <= 1:
        raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1 (got k1={k1}, b={b})")


def _file_digest(path: Path) -> dict[str, Any]:
    """A file's size and sha256, read a block at a time."""
    with path.open("rb") as handle:
        return {
            "bytes": os.fstat(handle.fileno()).st_size,
            "sha256": hashlib.file_digest(handle, "sha256").hexdigest(),
        }


def _appending(pairs: Iterable[tuple[str, str]], ids: list[str]) -> Iterator[tuple[str, str]]:
    """``pairs`` as they are, each doc id appended to ``ids`` as it passes."""
    for pair in pairs:
        ids.append(pair[0])
        yield pair


def _norms(lengths: npt.NDArray[np.int32], k1: float, b: float) -> npt.NDArray[np.float64]:
    """k1 · (1 - b + b · |D| / avgdl), the length normalization, for each document: the
    floats of the formula in Python's order of operations, avgdl as Python divides."""
    total = int(lengths.sum(dtype=np.int64))
    avgdl = total / len(lengths) if total else 1.0
    scaled = np.multiply(b, lengths.astype(np.float64)) / avgdl  # b * |D| exactly, then / avgdl
    return np.multiply(k1, (1 - b) + scaled)


def _tie_ranks(doc_ids: list[str]) -> npt.NDArray[np.int32]:
    """Each document's place in the tie-break order (:func:`doc_id_order`)."""
    order = sorted(range(len(doc_ids)), key=lambda i: doc_id_order(doc_ids[i]))
    ranks = np.empty(len(order), dtype=np.int32)
    ranks[order] = np.arange(len(order), dtype=np.int32)
    return ranks
