"""The simulator's query-biased snippets: which windows of a document's text it shows, and how.

A document's snippet text (its text, or its title when it has none) is split on white space
into words. A window is a run of words that joined by spaces fits in ``SNIPPET_CHARS``
(at least one word: a word longer than a snippet is cut when rendered). Up to ``n`` disjoint
windows are chosen, best first: the best has the most distinct query terms, then the most
term hits (a word's hits: the query terms its analysis holds), then starts first; each next
one is the best among the words no earlier window holds, each start's window cut where the
next chosen window begins.

:class:`SnippetIndex` prepares a whole collection at once, with numpy: every document's
words laid end to end, where each start's window ends, and which terms each word holds (each
distinct word analyzed once). A page's best windows are then found for all its documents
together (:meth:`SnippetIndex.windows`); only a request for extra snippets walks the further
windows document by document.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from evidence_bench.collections.beir import Document

__all__ = ["SNIPPET_CHARS", "SnippetIndex", "render_text"]

SNIPPET_CHARS = 300

_SPAN = re.compile(r"[^\W_]+")

Ints = npt.NDArray[np.int64]
#: A word's runs of letters or digits: (start, end, the terms its analysis holds).
Runs = tuple[tuple[int, int, frozenset[str]], ...]


class SnippetIndex:
    """Every document's snippet words, analyzed once (``analyze``: the BM25 index's analyzer).

    Word positions run over the whole collection, document after document in ``documents``
    order: document ``d`` holds words ``starts[d]`` to ``starts[d + 1] - 1``.
    """

    def __init__(self, documents: Sequence[Document], analyze: Callable[[str], list[str]]):
        self._analyze = analyze
        self._terms_of: dict[str, frozenset[str]] = {}
        self._term_ids: dict[str, int] = {}
        self._ids_of: dict[frozenset[str], list[int]] = {}
        #: doc id -> its place in ``documents``
        self.doc_index = {doc.doc_id: i for i, doc in enumerate(documents)}
        # Each word numbered in order of first occurrence, one document at a time: its
        # words' strings are freed before the next document's are made, so the heap does
        # not keep holes where the collection's ~250k repeated words were (~15 MB).
        number: dict[str, int] = {}
        self._distinct: list[int] = []
        counts: list[int] = []
        for doc in documents:
            words = (doc.text or doc.title).split()
            counts.append(len(words))
            self._distinct.extend([number.setdefault(word, len(number)) for word in words])
        lengths = np.array(counts, dtype=np.int64)
        self.starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        distinct = list(number)
        escaped = [html.escape(word) for word in distinct]
        #: every word of the collection (one string object per distinct word), and each
        #: HTML-escaped
        self.words: list[str] = list(map(distinct.__getitem__, self._distinct))
        self.escaped = list(map(escaped.__getitem__, self._distinct))
        self._runs: list[Runs] = [self._runs_of(word) for word in distinct]
        self._strong: dict[int, str] = {}
        word_ids = np.array(self._distinct, dtype=np.int64)
        held = [self._ids(self.terms_of(word)) for word in distinct]
        marked = [
            self._ids(runs[0][2] if len(runs) == 1 else frozenset().union(*(r[2] for r in runs)))
            for runs in self._runs
        ]
        # (word, term) for each term a word's analysis holds, and for each term one of its
        # runs holds (what a decorated snippet marks), in word order.
        self._hit_words, self._hit_terms = _pairs(word_ids, held)
        self._mark_words, self._mark_terms = _pairs(word_ids, marked)
        self._hit_starts = np.searchsorted(self._hit_words, self.starts)
        self._mark_starts = np.searchsorted(self._mark_words, self.starts)
        # chars[i] = Σ_{j < i} (len(words[j]) + 1): words[a:b] joined is
        # chars[b] - chars[a] - 1 characters long. fits[s]: the most words from word s on
        # (as an end) that fit in SNIPPET_CHARS, within the document; at least s + 1.
        sizes = np.array([len(word) + 1 for word in distinct], dtype=np.int64)[word_ids]
        chars = np.zeros(len(self.words) + 1, dtype=np.int64)
        np.cumsum(sizes, out=chars[1:])
        fits = np.searchsorted(chars, chars[:-1] + SNIPPET_CHARS + 1, side="right") - 1
        fits = np.minimum(fits, np.repeat(self.starts[1:], lengths))
        #: ascending over the whole collection, as within each document
        self.fits = np.maximum(fits, np.arange(1, len(self.words) + 1))

    def terms_of(self, text: str) -> frozenset[str]:
        """The distinct terms of one word or run, remembered."""
        terms = self._terms_of.get(text)
        if terms is None:
            terms = frozenset(self._analyze(text))
            self._terms_of[text] = terms
        return terms

    def _ids(self, terms: frozenset[str]) -> list[int]:
        """The ids of ``terms``, sorted by term; new terms get the next ids."""
        found = self._ids_of.get(terms)
        if found is None:
            ids = self._term_ids
            found = [ids.setdefault(term, len(ids)) for term in sorted(terms)]
            self._ids_of[terms] = found
        return found

    def _runs_of(self, word: str) -> Runs:
        if _SPAN.fullmatch(word):  # most words are one run
            return ((0, len(word), self.terms_of(word)),)
        return tuple((m.start(), m.end(), self.terms_of(m.group())) for m in _SPAN.finditer(word))

    def windows(
        self, doc_ids: Sequence[str], terms: frozenset[str], n: int
    ) -> list[tuple[list[tuple[int, int]], list[int]]]:
        """Each document's up to ``n`` windows ``(start, end)``, best first, as word positions,
        and the positions of its words with a run holding a query term.

        The page's query-term hits are listed in word order (a word holding two query terms
        makes two hits). The window from s to e holds the hits ``a:b`` of that list (found by
        bisection); its distinct terms are the hits in it whose previous hit of the same term
        comes before ``a``. Its score only changes where a hit leaves the window (the start
        passes it) or enters it (the end passes it), so a document's first best start is its
        first word or one of those places: only those starts are scored.
        """
        found: list[tuple[list[tuple[int, int]], list[int]]] = [([], []) for _ in doc_ids]
        if not doc_ids or n < 1:
            return found
        page = np.array([self.doc_index[doc_id] for doc_id in doc_ids], dtype=np.int64)
        order = np.argsort(page)  # laid out in word order
        docs = page[order]
        begins, ends = self.starts[docs], self.starts[docs + 1]
        query = np.zeros(len(self._term_ids), dtype=bool)
        query[[self._term_ids[t] for t in terms if t in self._term_ids]] = True
        hits, hit_terms = _gather(self._hit_words, self._hit_terms, self._hit_starts, docs, query)
        marks = _once(
            _gather(self._mark_words, self._mark_terms, self._mark_starts, docs, query)[0]
        )
        count = len(hits)
        # previous[j]: the hit of the same term before hit j (-1: none).
        by_term = np.argsort(hit_terms, kind="stable")
        previous = np.full(count, -1, dtype=np.int64)
        same = hit_terms[by_term[1:]] == hit_terms[by_term[:-1]]
        previous[by_term[1:][same]] = by_term[:-1][same]
        words = _once(hits)
        place = np.searchsorted(begins, words, side="right") - 1  # each hit word's document
        leaves = words + 1
        starts = np.concatenate(
            [
                begins[ends > begins],
                leaves[leaves < ends[place]],
                np.searchsorted(self.fits, words, side="right"),  # where it enters
            ]
        )
        starts = _once(np.sort(starts))
        stops = self.fits[starts]
        first, last = np.searchsorted(hits, starts), np.searchsorted(hits, stops)
        distinct = np.zeros(len(starts), dtype=np.int64)
        width = int((last - first).max()) if count else 0
        if width:
            inside = first[:, None] + np.arange(width)
            new = previous[np.minimum(inside, count - 1)] < first[:, None]
            distinct = np.count_nonzero(new & (inside < last[:, None]), axis=1)
        score = distinct * (count + 1) + (last - first)  # distinct terms first, then hits
        owner = np.searchsorted(begins, starts, side="right") - 1
        ranked = np.lexsort((starts, -score, owner))
        leads = ranked[_firsts(owner[ranked])]
        at_mark = np.searchsorted(marks, np.concatenate([begins, ends]))
        marks_list = marks.tolist()
        for k, start, stop in zip(
            owner[leads].tolist(), starts[leads].tolist(), stops[leads].tolist(), strict=True
        ):
            windows = [(start, stop)]
            if n > 1:
                lo, hi = int(begins[k]), int(ends[k])
                a, b = np.searchsorted(hits, [lo, hi])
                doc_hits = hits[a:b].tolist()
                doc_terms = hit_terms[a:b].tolist()
                windows = self._more_windows(lo, hi, doc_hits, doc_terms, windows, n)
            slot = int(order[k])
            found[slot] = (windows, marks_list[at_mark[k] : at_mark[k + len(docs)]])
        return found

    def _more_windows(
        self,
        lo: int,
        hi: int,
        hits: list[int],
        terms: list[int],
        chosen: list[tuple[int, int]],
        n: int,
    ) -> list[tuple[int, int]]:
        """The next best windows of one document (words lo..hi-1) after ``chosen``, each the
        best among the words no chosen window holds, up to ``n`` in all."""
        held: dict[int, set[int]] = {}
        for position, term in zip(hits, terms, strict=True):
            held.setdefault(position, set()).add(term)
        at = sorted(held)
        sets = [held[i] for i in at]
        fits = self.fits[lo:hi].tolist()
        gaps = [(lo, hi)]
        for start, stop in chosen:
            gaps = [g for gap in gaps for g in _split_gap(gap, start, stop)]
        while gaps and len(chosen) < n:
            candidates = [_best_window(fits, lo, at, sets, g_lo, g_hi) for g_lo, g_hi in gaps]
            _, start, stop = max(candidates, key=lambda c: (c[0], -c[1]))
            chosen.append((start, stop))
            gaps = [g for gap in gaps for g in _split_gap(gap, start, stop)]
        return chosen

    def render(
        self, start: int, stop: int, terms: frozenset[str], marked: list[int], decorate: bool
    ) -> str:
        """Words start..stop-1 HTML-escaped, joined by spaces; query terms in ``<strong>`` if
        ``decorate``: each run of letters or digits whose analysis holds a query term
        (``marked``: the positions of the words with such a run).

        Runs never cross a space and escaping is character by character, so only the marked
        words are rendered here; the others are escaped already.
        """
        if stop == start + 1 and len(self.words[start]) > SNIPPET_CHARS:  # one long word
            return render_text(self.words[start][:SNIPPET_CHARS], terms, self.terms_of, decorate)
        pieces = self.escaped[start:stop]
        if decorate:
            for i in marked[bisect_left(marked, start) : bisect_left(marked, stop)]:
                pieces[i - start] = self._decorated(i, terms)
        return " ".join(pieces)

    def _decorated(self, position: int, terms: frozenset[str]) -> str:
        """One word HTML-escaped, each run whose analysis holds a query term in ``<strong>``;
        a word with one such run always reads the same, so it is made once."""
        word = self._distinct[position]
        runs = self._runs[word]
        if len(runs) == 1:
            found = self._strong.get(word)
            if found is None:
                found = _decorate(self.words[position], runs, terms)
                self._strong[word] = found
            return found
        return _decorate(self.words[position], runs, terms)


def _firsts(values: Ints) -> npt.NDArray[np.bool_]:
    """Where each run of equal values begins."""
    change = np.empty(len(values), dtype=bool)
    change[:1] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    return change


def _once(ascending: Ints) -> Ints:
    """The distinct values of an ascending array (``np.unique`` without its sort)."""
    return ascending[_firsts(ascending)]


def _pairs(word_ids: Ints, lists: list[list[int]]) -> tuple[Ints, Ints]:
    """``(position, value)`` for each value of ``lists[word_ids[position]]``, by position."""
    sizes = np.array([len(values) for values in lists], dtype=np.int64)
    flat = np.array([value for values in lists for value in values], dtype=np.int64)
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    counts = sizes[word_ids]
    before = np.cumsum(counts) - counts
    positions = np.repeat(np.arange(len(word_ids), dtype=np.int64), counts)
    return positions, flat[np.repeat(ptr[word_ids] - before, counts) + np.arange(counts.sum())]


def _gather(
    words: Ints, terms: Ints, starts: Ints, docs: Ints, query: npt.NDArray[np.bool_]
) -> tuple[Ints, Ints]:
    """The pairs of documents ``docs`` (ascending) whose term is a query term, by position."""
    lo, hi = starts[docs], starts[docs + 1]
    sizes = hi - lo
    index = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(sizes.sum())
    picked = terms[index]
    keep = query[picked] if len(query) else np.zeros(len(picked), dtype=bool)
    return words[index[keep]], picked[keep]


def _split_gap(gap: tuple[int, int], lo: int, hi: int) -> list[tuple[int, int]]:
    if not gap[0] <= lo < gap[1]:
        return [gap]
    return [g for g in ((gap[0], lo), (hi, gap[1])) if g[0] < g[1]]


def _best_window(
    fits: list[int], base: int, at: list[int], held: list[set[int]], lo: int, hi: int
) -> tuple[tuple[int, int], int, int]:
    """The best ``(score, start, end)`` window within words lo..hi-1 (``fits[s - base]``:
    where start s's window ends before it is cut at ``hi``).

    Each start's score is (distinct query terms, term hits) in its window, from the words
    with hits (``at``, each holding the terms ``held``); the first start with the highest
    score wins. The score changes only where a word with hits leaves the window (the start
    passes it) or enters it (the end passes it), so the first best start is ``lo`` or one
    of those places.
    """
    first, last = bisect_left(at, lo), bisect_left(at, hi)
    starts = {lo}
    for position in at[first:last]:
        if position + 1 < hi:
            starts.add(position + 1)  # it leaves
        # it enters at the first start whose window reaches it (fits only grows)
        starts.add(max(lo, base + bisect_right(fits, position)))
    best: tuple[tuple[int, int], int, int] | None = None
    counts: dict[int, int] = {}  # the window's query terms, with their hits
    total = 0
    entered = left = first  # the hits the window has reached, and those it has passed
    for start in sorted(starts):  # both ends only move forward: each hit enters, leaves once
        stop = min(fits[start - base], hi)
        while entered < last and at[entered] < stop:
            for term in held[entered]:
                counts[term] = counts.get(term, 0) + 1
            total += len(held[entered])
            entered += 1
        while left < entered and at[left] < start:
            for term in held[left]:
                counts[term] -= 1
                if not counts[term]:
                    del counts[term]
            total -= len(held[left])
            left += 1
        score = (len(counts), total)
        if best is None or score > best[0]:
            best = (score, start, stop)
    assert best is not None  # lo is a start
    return best


def _decorate(text: str, runs: Runs, terms: frozenset[str]) -> str:
    """One word HTML-escaped, each run whose analysis holds a query term in ``<strong>``."""
    parts: list[str] = []
    position = 0
    for start, end, run_terms in runs:
        if not terms.isdisjoint(run_terms):
            parts.append(html.escape(text[position:start]))
            parts.append(f"<strong>{html.escape(text[start:end])}</strong>")
            position = end
    parts.append(html.escape(text[position:]))
    return "".join(parts)


def render_text(
    text: str, terms: frozenset[str], terms_of: Callable[[str], frozenset[str]], decorate: bool
) -> str:
    """``text`` HTML-escaped, each run whose analysis holds a query term in ``<strong>``."""
    if not decorate:
        return html.escape(text)
    parts: list[str] = []
    position = 0
    for match in _SPAN.finditer(text):
        if not terms.isdisjoint(terms_of(match.group())):
            parts.append(html.escape(text[position : match.start()]))
            parts.append(f"<strong>{html.escape(match.group())}</strong>")
            position = match.end()
    parts.append(html.escape(text[position:]))
    return "".join(parts)
