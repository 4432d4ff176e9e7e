"""Turning result text into terms: the one analyzer the ranker and the refiner share.

Both must analyze text the same way, or the refiner would add words the ranker cannot
match (the refiners also read ``extra_snippets``, which the ranker does not score). The
analyzer is a frozen dataclass so it can sit in a config, be compared and be hashed (the
ranker caches term counts per analyzer and text). Stemming (Snowball's algorithms, Porter
1980 among them) is the last step of the same per-token pipeline.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence_bench.errors import ConfigurationError

__all__ = ["STOP_WORDS", "Analyzer", "Lexicon", "lexicon", "term_counts", "tokenize"]

_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are as at
    be because been before being below between both but by
    can could did do does doing down during each few for from further
    had has have having he her here hers him his how
    i if in into is it its itself just me more most my
    no nor not of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they
    this those through to too under until up very
    was we were what when where which while who whom why will with would
    you your yours
"""
#: A small English stop-word list: articles, prepositions, conjunctions, pronouns,
#: auxiliaries and question words. Deliberately short: on 20-60 snippets a long list would
#: remove words that still tell results apart.
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())

# A token is a run of letters or digits in any script; everything else separates tokens.
_TOKEN = re.compile(r"[^\W_]+")
#: Every ASCII character but a letter or a digit, as a space: in ASCII text the tokens are
#: then what ``str.split`` gives, faster than the regex.
_ASCII_GAPS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})


def _tokens(source: str) -> list[str]:
    r"""``_TOKEN.findall(source)``; in ASCII, ``[^\W_]`` is exactly ``[A-Za-z0-9]``."""
    if source.isascii():
        return source.translate(_ASCII_GAPS).split()
    return _TOKEN.findall(source)


@dataclass(frozen=True, slots=True)
class Analyzer:
    """Splits text into terms: optional lowercasing, stop words, a minimum length, stemming.

    Stop words are matched case-insensitively, so ``lowercase=False`` keeps the case of the
    terms but still drops "The". ``stop_words=None`` keeps every word. ``stemmer`` names a
    Snowball algorithm (``"english"``, ``"porter"``, ...) or None for no stemming.
    """

    lowercase: bool = True
    stop_words: frozenset[str] | None = STOP_WORDS
    min_length: int = 2
    stemmer: str | None = "english"

    def __post_init__(self) -> None:
        if self.stemmer is not None:
            _stemmer(self.stemmer)  # fails now, naming the valid algorithms

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text`` in order of appearance, repeats kept (they are the tf)."""
        return list(_analyze(self, text))

    def terms(self, text: str) -> tuple[str, ...]:
        return tuple(term for term, _ in self._words(text))

    def _term(self, token: str) -> str | None:
        """A token's term, or None where it is dropped (too short, a stop word)."""
        if not self._keep(token):
            return None
        return token if self.stemmer is None else _stem(self.stemmer, token)

    def words(self, text: str) -> list[tuple[str, str]]:
        """(term, the word it came from) pairs: a stemmed term's readable surface form."""
        return list(_analyze_words(self, text))

    def _words(self, text: str) -> tuple[tuple[str, str], ...]:
        source = text.lower() if self.lowercase else text
        table = self._table()
        pairs = []
        for token in _tokens(source):
            term = table.get(token, _UNSEEN)
            if term is _UNSEEN:
                term = table[token] = self._term(token)
            if term is not None:
                pairs.append((term, token))
        return tuple(pairs)

    def _table(self) -> dict[str, str | None]:
        table = _TOKEN_TERMS.get(self)
        if table is None or len(table) > _TOKENS_KEPT:
            table = _TOKEN_TERMS[self] = {}
        return table

    def _keep(self, token: str) -> bool:
        if len(token) < self.min_length:
            return False
        return self.stop_words is None or token.lower() not in self.stop_words


#: Per analyzer, each token's term (None: dropped) as :meth:`Analyzer.terms` found it: a
#: collection's words are few next to its text, and a token's term depends on it alone.
_TOKEN_TERMS: dict[Analyzer, dict[str, str | None]] = {}
#: Tokens remembered per analyzer before its table starts again (bounds the memory).
_TOKENS_KEPT = 1 << 18
_UNSEEN: Any = object()


@functools.cache
def _stemmer(name: str) -> Any:
    import snowballstemmer

    try:
        return snowballstemmer.stemmer(name)
    except KeyError:
        valid = ", ".join(snowballstemmer.algorithms())
        raise ConfigurationError(f"unknown stemmer {name!r} (valid: {valid})") from None


@functools.lru_cache(maxsize=1 << 17)
def _stem(name: str, word: str) -> str:
    """One word's stem, memoized: a collection's vocabulary is small next to its text."""
    return str(_stemmer(name).stemWord(word))


@functools.lru_cache(maxsize=1 << 16)
def _analyze(analyzer: Analyzer, text: str) -> tuple[str, ...]:
    """Memoized: a sweep analyzes the same titles and snippets once per config otherwise."""
    return analyzer.terms(text)


@functools.lru_cache(maxsize=1 << 15)
def _analyze_words(analyzer: Analyzer, text: str) -> tuple[tuple[str, str], ...]:
    return analyzer._words(text)


@dataclass(slots=True)
class Lexicon:
    """An analyzer's terms numbered in the order this process met them, for array code: a
    text's terms become a row of numbers once, and a candidate set's columns are found by
    numpy over those numbers instead of a dict per term and text.

    ``spelled[numbers[term]] == term``. ``tokens`` maps each token met to its term's number
    (-1: dropped), so a new text costs one regex pass and a lookup per token; it starts
    again past ``_TOKENS_KEPT`` tokens, the numbering never does (the numbers held in
    ``texts`` and in callers' arrays stay valid). ``texts`` holds :func:`term_counts` of the
    texts met, up to ``_TEXTS_KEPT`` before it starts again.
    """

    analyzer: Analyzer
    numbers: dict[str, int] = field(default_factory=dict)
    spelled: list[str] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=dict)
    texts: dict[str, npt.NDArray[np.intp]] = field(default_factory=dict)

    def number(self, token: str) -> int:
        """The number of ``token``'s term (-1: the analyzer drops it), remembered."""
        term = self.analyzer._term(token)
        if term is None:
            number = -1
        else:
            number = self.numbers.get(term, -1)
            if number < 0:
                number = self.numbers[term] = len(self.spelled)
                self.spelled.append(term)
        if len(self.tokens) >= _TOKENS_KEPT:
            self.tokens = {}
        self.tokens[token] = number
        return number


_LEXICONS: dict[Analyzer, Lexicon] = {}
#: Texts whose counts a lexicon remembers before its table starts again (bounds the memory).
_TEXTS_KEPT = 1 << 16


def lexicon(analyzer: Analyzer) -> Lexicon:
    """``analyzer``'s :class:`Lexicon` in this process (one per equal analyzer)."""
    found = _LEXICONS.get(analyzer)
    if found is None:
        found = _LEXICONS[analyzer] = Lexicon(analyzer)
    return found


def term_counts(analyzer: Analyzer, text: str) -> npt.NDArray[np.intp]:
    """``text``'s distinct terms and how often each occurs, as the shape-(2, k) array of
    their numbers in :func:`lexicon` (row 0) and counts (row 1), in order of first
    occurrence: ``Counter(analyzer(text))`` by number. Remembered per text (not to be
    changed: it is shared)."""
    found = lexicon(analyzer)
    known = found.texts.get(text)
    if known is not None:
        return known
    source = text.lower() if analyzer.lowercase else text
    tokens = _tokens(source)
    table = found.tokens
    try:
        numbers = list(map(table.__getitem__, tokens))
    except KeyError:
        numbers = [table[t] if t in table else found.number(t) for t in tokens]
    counted = Counter(numbers)  # first occurrence first (dicts keep insertion order)
    counted.pop(-1, None)
    pairs = np.array([list(counted), list(counted.values())], dtype=np.intp).reshape(2, -1)
    if len(found.texts) >= _TEXTS_KEPT:
        found.texts = {}
    found.texts[text] = pairs
    return pairs


#: The default analyzer; ``tokenize("What is TF-IDF?") == ["tf", "idf"]``.
tokenize = Analyzer()
