"""The simulator's query-biased snippets: which windows of a document's text it shows, and how.

A document's snippet text (its text, or its title when it has none) is split on white space
into words. A window is a run of words that joined by spaces fits in ``SNIPPET_CHARS``
(at least one word: a word longer than a snippet is cut when rendered). Up to ``n`` disjoint
windows are chosen, best first: the best has the most distinct query terms, then the most
term hits (a word's hits: the query terms its analysis holds), then starts first; each next
one is the best among the words no earlier window holds, each start's window cut where the
next chosen window begins. A window is shown HTML-escaped, words joined by spaces, and in the
first one each run of letters or digits whose analysis holds a query term is in ``<strong>``.

:class:`SnippetIndex` prepares a whole collection at once, with numpy, the text escaped
once for HTML and then for a JSON string (character by character, so a window's text is a
slice of it); a page's best windows are found for all its documents together.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from json.encoder import encode_basestring

import numpy as np
import numpy.typing as npt

from evidence_bench.collections.beir import Document
from evidence_bench.web.bm25 import Words, tokenize

__all__ = ["SNIPPET_CHARS", "SnippetIndex"]

SNIPPET_CHARS = 300

_SPAN = re.compile(r"[^\W_]+")

Ints = npt.NDArray[np.int64]
#: A word's runs of letters or digits: (start, end, the terms its analysis holds).
Runs = tuple[tuple[int, int, frozenset[str]], ...]
#: What a word's pair says of its term: held by the word's analysis and by one of its runs'
#: (what a decorated snippet marks), by the word's only, or by a run's only.
_BOTH, _HELD, _MARKED = 0, 1, 2
#: How many decorations of words with several runs are kept (each ~100 bytes).
_STRONG_RUNS_KEPT = 1 << 13


class SnippetIndex:
    """Every document's snippet words, each distinct word analyzed once (:class:`Words`).

    Word positions run over the whole collection, document after document in ``documents``
    order: document ``d`` holds words ``starts[d]`` to ``starts[d + 1] - 1``.
    """

    def __init__(self, documents: Sequence[Document], words: tuple[Words, Sequence[int]]):
        """``words``: the words of texts numbered already, and which of them is each
        document's snippet text. A word's terms are its :class:`Words` tokens, so words and
        their runs are analyzed by :func:`~evidence_bench.web.bm25.tokenize`, the analyzer
        of the simulator's BM25 index (built from the same :class:`Words`)."""
        self._terms_of: dict[str, frozenset[str]] = {}
        self._term_ids: dict[str, int] = {}
        #: doc id -> its place in ``documents``
        self.doc_index = {doc.doc_id: i for i, doc in enumerate(documents)}
        split, texts = words
        #: each distinct word, and each position's word (its number)
        self.vocabulary = split.vocabulary
        for word, tokens in zip(split.vocabulary, split.tokens, strict=True):
            self._terms_of[word] = frozenset(tokens)
        chosen = np.zeros(len(split.counts), dtype=bool)
        chosen[list(texts)] = True
        self.word_ids = split.numbers[np.repeat(chosen, split.counts)]
        counts = [split.counts[i] for i in texts]
        lengths = np.array(counts, dtype=np.int64)
        self.starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        self._doc_starts: list[int] = self.starts.tolist()
        self._pair_starts: list[int] = []
        self._strong: dict[int, str] = {}
        self._strong_runs: dict[tuple[int, int], str] = {}
        #: the runs of each word with more than one (the others' decorations are kept)
        self._runs: dict[int, Runs] = {}
        codes: list[list[int]] = []
        ids = self._term_ids
        one_run = _SPAN.fullmatch
        for number_, word in enumerate(self.vocabulary):
            held = self.terms_of(word)
            if one_run(word):  # most words: what its one run marks is what it holds
                codes.append(sorted([ids.setdefault(t, len(ids)) * 3 + _BOTH for t in held]))
                continue
            runs = self._runs_of(word)
            marked = runs[0][2] if len(runs) == 1 else frozenset().union(*(r[2] for r in runs))
            if len(runs) > 1:
                self._runs[number_] = runs
            if held == marked:
                pairs = sorted([ids.setdefault(t, len(ids)) * 3 + _BOTH for t in held])
            else:
                pairs = sorted(
                    ids.setdefault(t, len(ids)) * 3
                    + (_BOTH if t in held and t in marked else _HELD if t in held else _MARKED)
                    for t in held | marked
                )
            codes.append(pairs)
        #: one key per (position, code): position * stride + term id * 3 + what holds it,
        #: ascending (by position, then code)
        self._stride = 3 * max(len(ids), 1)
        sizes = np.array([len(c) for c in codes], dtype=np.int64)
        flat = np.array([c for word in codes for c in word], dtype=np.int64)
        ptr = np.zeros(len(codes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        per_position = sizes[self.word_ids]
        total = int(per_position.sum())
        before = np.cumsum(per_position) - per_position
        owner = np.repeat(np.arange(len(self.word_ids), dtype=np.int64), per_position)
        picked = np.repeat(ptr[self.word_ids] - before, per_position) + np.arange(total)
        self._keys = owner * self._stride + flat[picked]
        del owner, picked, before
        self._pair_starts = np.searchsorted(self._keys, self.starts * self._stride).tolist()
        # The text of every position, HTML- then JSON-escaped, words joined by spaces:
        # position i is text[offsets[i]:offsets[i + 1] - 1].
        escaped = [encode_basestring(html.escape(word))[1:-1] for word in self.vocabulary]
        self._text = " ".join(map(escaped.__getitem__, self.word_ids.tolist()))
        widths = np.array([len(e) + 1 for e in escaped], dtype=np.int64)[self.word_ids]
        self._offsets = np.zeros(len(self.word_ids) + 1, dtype=np.int64)
        np.cumsum(widths, out=self._offsets[1:])
        # chars[i] = Σ_{j < i} (len(words[j]) + 1): words[a:b] joined is
        # chars[b] - chars[a] - 1 characters long. fits[s]: the most words from word s on
        # (as an end) that fit in SNIPPET_CHARS, within the document; at least s + 1.
        self._long = np.array([len(w) > SNIPPET_CHARS for w in self.vocabulary], dtype=bool)
        sizes = np.array([len(w) + 1 for w in self.vocabulary], dtype=np.int64)[self.word_ids]
        chars = np.zeros(len(self.word_ids) + 1, dtype=np.int64)
        np.cumsum(sizes, out=chars[1:])
        fits = np.searchsorted(chars, chars[:-1] + SNIPPET_CHARS + 1, side="right") - 1
        fits = np.minimum(fits, np.repeat(self.starts[1:], lengths))
        #: ascending over the whole collection, as within each document
        self.fits = np.maximum(fits, np.arange(1, len(self.word_ids) + 1)).astype(np.int32)
        #: enters[p]: the first start whose window reaches word p (fits only grows)
        self.enters = np.searchsorted(self.fits, np.arange(len(self.word_ids)), side="right")
        self.enters = self.enters.astype(np.int32)

    @classmethod
    def of(cls, documents: Sequence[Document]) -> SnippetIndex:
        """The snippet words of ``documents`` (those of a page), from their stored text: a
        document's text, or its title when it has none. A document's windows are its own
        words', so they are the same whichever documents are indexed beside it."""
        distinct = list({doc.doc_id: doc for doc in documents}.values())
        words = Words.of(doc.text.split() if doc.text else doc.title.split() for doc in distinct)
        return cls(distinct, (words, range(len(distinct))))

    def terms_of(self, text: str) -> frozenset[str]:
        """The distinct terms of one word or run, remembered."""
        terms = self._terms_of.get(text)
        if terms is None:
            terms = frozenset(tokenize(text))
            self._terms_of[text] = terms
        return terms

    def _runs_of(self, word: str) -> Runs:
        if _SPAN.fullmatch(word):  # most words are one run
            return ((0, len(word), self.terms_of(word)),)
        return tuple((m.start(), m.end(), self.terms_of(m.group())) for m in _SPAN.finditer(word))

    def snippets(
        self, doc_ids: Sequence[str], terms: frozenset[str], n: int, decorate: bool
    ) -> list[list[str]]:
        """Each document's up to ``n`` snippets, best window first, HTML-escaped and then
        JSON-escaped (a JSON string's content, without its quotes); query terms in
        ``<strong>`` in the first if ``decorate``.

        The page's query-term hits are listed in word order (a word holding two query terms
        makes two hits). A window's score only changes where a hit enters it (its end passes
        the hit) or leaves it (its start passes the hit), and it can only grow where one
        enters: a document's first best start is its first word or the first start whose
        window reaches a hit, so only those starts are scored. A window's distinct terms are
        the terms whose running count of hits differs between its two ends.
        """
        found: list[list[str]] = [[] for _ in doc_ids]
        if not doc_ids or n < 1:
            return found
        index = self.doc_index
        page = [index[doc_id] for doc_id in doc_ids]
        docs = sorted(set(page))  # in word order
        stride = self._stride
        ptr = self._pair_starts
        keys = self._keys
        pairs = np.concatenate([keys[ptr[d] : ptr[d + 1]] for d in docs])
        ids = self._term_ids
        query = [ids[t] for t in terms if t in ids]
        local = np.zeros(stride, dtype=np.int16)  # a query term's code -> its number + 1
        if query:  # at most MAX_QUERY_CHARS / 2 terms
            numbers = np.arange(1, len(query) + 1, dtype=np.int16)
            first_code = np.array(query, dtype=np.int64) * 3
            local[first_code] = local[first_code + 1] = local[first_code + 2] = numbers
        codes = pairs % stride
        keep = local[codes] > 0
        pairs, codes = pairs[keep], codes[keep]
        positions = pairs // stride
        kinds = codes % 3
        is_hit = kinds != _MARKED
        hits = positions[is_hit]
        hit_terms = local[codes[is_hit]] - 1
        marks = _once(positions[kinds != _HELD])
        count = len(hits)
        bounds = self._doc_starts
        docs = [d for d in docs if bounds[d + 1] > bounds[d]]  # those with words
        if not docs:
            return found
        begins = np.array([bounds[d] for d in docs], dtype=np.int64)
        fits = self.fits
        starts = np.concatenate([begins, self.enters[hits]])
        starts.sort()
        starts = _once(starts)
        stops = fits[starts]
        first, last = np.searchsorted(hits, starts), np.searchsorted(hits, stops)
        # seen[i, t]: how many of the first i hits are of query term t
        seen = np.zeros((count + 1, len(query)), dtype=np.int32)
        seen[np.arange(1, count + 1), hit_terms] = 1
        np.cumsum(seen, axis=0, out=seen)
        distinct = np.count_nonzero(seen[last] != seen[first], axis=1)
        # The best start of each document: the most distinct terms, then hits, then first.
        size = len(self.word_ids)
        score = (distinct * (count + 1) + (last - first)) * size + (size - 1 - starts)
        best = np.maximum.reduceat(score, np.searchsorted(starts, begins))
        leads = size - 1 - best % size
        lead_stops = fits[leads]
        # What rendering needs of the leading windows and the marked words, looked up at once:
        # where each marked word and the word after it begin, and each window's ends.
        marked, kept = len(marks), len(leads)
        at = self._offsets[np.concatenate([marks, marks + 1, leads, lead_stops])].tolist()
        mark_begins, mark_ends = at[:marked], at[marked : 2 * marked]
        text, made, words = self._text, self._strong, self.word_ids
        marks_list = marks.tolist()
        mark_words = words[marks].tolist()
        rendered: dict[int, list[str]] = {}
        for doc, start, stop, begin, end in zip(
            docs,
            leads.tolist(),
            lead_stops.tolist(),
            at[2 * marked : 2 * marked + kept],
            at[2 * marked + kept :],
            strict=True,
        ):
            end -= 1
            if stop == start + 1 and self._long[words[start]]:  # one word, cut when rendered
                shown = [self._render(start, stop, terms, decorate)]
            elif decorate:
                low = bisect_left(marks_list, start)
                high = bisect_left(marks_list, stop, low)
                parts: list[str] = []
                for i in range(low, high):
                    word = mark_words[i]
                    strong = made.get(word)
                    if strong is None:
                        strong = self._decorated(word, terms)
                    parts += (text[begin : mark_begins[i]], strong)
                    begin = mark_ends[i] - 1
                parts.append(text[begin:end])
                shown = ["".join(parts)]
            else:
                shown = [text[begin:end]]
            if n > 1:
                lo, hi = bounds[doc], bounds[doc + 1]
                a, b = np.searchsorted(hits, [lo, hi])
                windows = self._more_windows(
                    lo, hi, hits[a:b].tolist(), hit_terms[a:b].tolist(), [(start, stop)], n
                )
                shown.extend(self._render(lo, hi, terms) for lo, hi in windows[1:])
            rendered[doc] = shown
        for slot, doc in enumerate(page):
            if doc in rendered:
                found[slot] = rendered[doc]
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

    def _render(self, start: int, stop: int, terms: frozenset[str], decorate: bool = False) -> str:
        """Words start..stop-1 HTML-escaped, joined by spaces, JSON-escaped: a slice of the
        escaped text, or one long word cut and rendered (decorated if ``decorate``)."""
        words = self.word_ids
        if stop == start + 1 and self._long[words[start]]:
            word = self.vocabulary[int(words[start])][:SNIPPET_CHARS]
            shown = _decorate(word, self._runs_of(word), terms) if decorate else html.escape(word)
            return encode_basestring(shown)[1:-1]
        return self._text[int(self._offsets[start]) : int(self._offsets[stop]) - 1]

    def _decorated(self, word: int, terms: frozenset[str]) -> str:
        """Word number ``word`` HTML- and JSON-escaped, each run whose analysis holds a query
        term in ``<strong>``, made once for each set of such runs (a word with one run
        always reads the same).

        Runs never cross a space and escaping is character by character, so a window's
        other words are slices of the escaped text."""
        runs = self._runs.get(word)
        if runs is None:
            found = self._strong.get(word)
            if found is None:
                text = self.vocabulary[word]
                found = encode_basestring(_decorate(text, self._runs_of(text), terms))[1:-1]
                self._strong[word] = found
            return found
        marked = 0  # which runs hold a query term, as bits
        for bit, run in enumerate(runs):
            if not terms.isdisjoint(run[2]):
                marked |= 1 << bit
        key = (word, marked)
        found = self._strong_runs.get(key)
        if found is None:
            found = encode_basestring(_decorate(self.vocabulary[word], runs, terms))[1:-1]
            if len(self._strong_runs) >= _STRONG_RUNS_KEPT:
                self._strong_runs.clear()
            self._strong_runs[key] = found
        return found


def _firsts(values: Ints) -> npt.NDArray[np.bool_]:
    """Where each run of equal values begins."""
    change = np.empty(len(values), dtype=bool)
    change[:1] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    return change


def _once(ascending: Ints) -> Ints:
    """The distinct values of an ascending array (``np.unique`` without its sort)."""
    return ascending[_firsts(ascending)]


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
