"""Quotes for citation: the one to three sentences of a page that best support a query.

Each quote is an exact substring of the text it was taken from (``text[start:end]``), so a
reader can find it on the page. A sentence ends at ``.``, ``!`` or ``?`` followed by
whitespace and no lowercase letter or digit, but for the stop of a common abbreviation or an
initial ("Dr. Smith", "the U.S. Senate", "J. Smith"), or at a line break (extracted text
keeps one paragraph a line). A sentence that ends in a stop comes before any fragment without one
(a heading, a menu item: no claim to cite); then by the share of the query's distinct
terms it holds (the engine's analyzer, so "slabs" matches "slab"), then by the density of
query-term occurrences among its terms (a short sentence about the query beats a long one
that mentions it), then by position. A sentence with no query term is never quoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from evidence_bench.engine.text import Analyzer, tokenize

__all__ = ["MAX_QUOTES", "MAX_QUOTE_CHARS", "quotes_for", "sentence_spans"]

#: At most this many quotes per page.
MAX_QUOTES = 3
#: A longer sentence is quoted from its first query term, up to the last word that fits.
MAX_QUOTE_CHARS = 400
#: Fragments shorter than this (a heading's "Abstract", a stray "1.") are not sentences.
_MIN_CHARS = 20

# Not before a lowercase letter or a digit: "e.g. the", "Fig. 2" do not end a sentence; but
# a stop after a space (" . ", as in the Cranfield and CACM texts) always does.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?![a-z0-9])|(?<=\s[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_]+")
# A stop inside a closing quote or bracket still ends a sentence: ."  !)  ?'
_CLOSED = frozenset(f"{stop}{close}" for stop in ".!?" for close in "\"')]")


#: Abbreviations a stop ends without ending the sentence before a capital ("Dr. Smith",
#: "the U.S. Senate"), lowercased; a single capital's initial ("J. Smith") is one too. As
#: abbreviation-aware splitters (Kiss & Strunk 2006's Punkt) do for the common ones.
#: (Not "etc." nor "no.", which end sentences as often as not.)
_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "inc", "ltd", "co",
        "corp", "dept", "gen", "gov", "sen", "rep", "rev", "fig", "figs", "vol", "pp", "eds",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
        "u.s", "u.k", "u.n", "e.u", "e.g", "i.e",
    }
)  # fmt: skip


def _after_abbreviation(text: str, stop: int) -> bool:
    """Whether the ``.`` at ``stop`` ends an abbreviation (the word before it, back to the
    previous white space or opening bracket or quote)."""
    if stop >= len(text) or text[stop] != ".":
        return False
    begin = stop
    while begin > 0 and not text[begin - 1].isspace() and text[begin - 1] not in "(\"'[":
        begin -= 1
    word = text[begin:stop]
    return word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper())


def sentence_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each sentence, surrounding whitespace excluded."""
    start = 0
    for match in _BOUNDARY.finditer(text):
        if match.group(0)[0] != "\n" and _after_abbreviation(text, match.start() - 1):
            continue  # "Dr. Smith": the sentence goes on
        end = match.start() + len(match.group(0).rstrip())  # keep a closing quote/bracket
        yield from _trimmed(text, start, end)
        start = match.end()
    yield from _trimmed(text, start, len(text))


def _trimmed(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start:
        yield start, end


def _window(
    text: str, start: int, end: int, query_terms: set[str], analyzer: Analyzer
) -> tuple[int, int]:
    """A sentence longer than MAX_QUOTE_CHARS is quoted from its first query term (or its
    start, when that term is within reach), up to MAX_QUOTE_CHARS, cut at a space."""
    if end - start <= MAX_QUOTE_CHARS:
        return start, end
    for word in _WORD.finditer(text, start, end):
        if set(analyzer(word.group(0))) & query_terms:
            if word.end() - start > MAX_QUOTE_CHARS:
                start = word.start()
            break
    return start, _shorten(text, start, end)


def _shorten(text: str, start: int, end: int) -> int:
    """The end of the longest prefix of ``text[start:end]`` of at most MAX_QUOTE_CHARS,
    cut at a space when there is one."""
    if end - start <= MAX_QUOTE_CHARS:
        return end
    limit = start + MAX_QUOTE_CHARS
    space = text.rfind(" ", start, limit)
    cut = space if space > start else limit
    while cut > start and text[cut - 1] in " ,;:":
        cut -= 1
    return cut


def quotes_for(
    query: str, text: str, *, limit: int = MAX_QUOTES, analyzer: Analyzer = tokenize
) -> tuple[str, ...]:
    """Up to ``limit`` sentences of ``text`` that best support ``query``, best first;
    each one ``text[start:end]`` for some span. Empty when no sentence holds a query term."""
    query_terms = set(analyzer(query))
    if not query_terms or limit < 1:
        return ()
    scored: list[tuple[bool, float, float, int, int, int]] = []
    for position, (start, end) in enumerate(sentence_spans(text)):
        if end - start < _MIN_CHARS:
            continue
        terms = analyzer(text[start:end])
        if not terms:
            continue
        hits = [term for term in terms if term in query_terms]
        if not hits:
            continue
        coverage = len(set(hits)) / len(query_terms)
        density = len(hits) / len(terms)
        unended = text[end - 1] not in ".!?" and text[end - 2 : end] not in _CLOSED
        scored.append((unended, -coverage, -density, position, start, end))
    scored.sort()
    quotes: list[str] = []
    for *_, start, end in scored[:limit]:
        first, last = _window(text, start, end, query_terms, analyzer)
        quotes.append(text[first:last])
    return tuple(quotes)
