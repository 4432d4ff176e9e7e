"""A text's terms by number (``term_counts``, ``lexicon``): the terms and counts the analyzer
gives, on hand-checked text and on every document of the shipped collections."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evidence_bench.collections.beir import load_collection
from evidence_bench.engine.text import (
    _TOKEN,
    Analyzer,
    _stemmer,
    _tokens,
    lexicon,
    term_counts,
)

ROOT = Path(__file__).resolve().parents[1]

ANALYZERS = [
    Analyzer(),
    Analyzer(stemmer=None),
    Analyzer(stop_words=None, stemmer=None),
    Analyzer(lowercase=False, stemmer=None),
    Analyzer(min_length=6, stemmer="porter"),
]


def _spelled(analyzer: Analyzer, text: str) -> list[tuple[str, int]]:
    pairs = term_counts(analyzer, text)
    spelled = lexicon(analyzer).spelled
    return [(spelled[number], count) for number, count in pairs.T.tolist()]


def test_a_texts_terms_are_numbered_and_counted_in_order_of_first_occurrence() -> None:
    text = "The wings were heated; THE WINGS"
    expected = [
        [("wing", 2), ("heat", 1)],
        [("wings", 2), ("heated", 1)],
        [("the", 2), ("wings", 2), ("were", 1), ("heated", 1)],
        [("wings", 1), ("heated", 1), ("WINGS", 1)],
        [("heat", 1)],
    ]
    for _ in range(2):  # the second time from what each lexicon remembers
        for analyzer, pairs in zip(ANALYZERS, expected, strict=True):
            assert _spelled(analyzer, text) == pairs
    assert term_counts(Analyzer(), "").shape == (2, 0)
    assert term_counts(Analyzer(), "the of a").shape == (2, 0)


def test_equal_analyzers_share_one_lexicon_and_a_term_keeps_its_number() -> None:
    first = lexicon(Analyzer(stemmer="porter"))
    assert lexicon(Analyzer(stemmer="porter")) is first
    (number,) = term_counts(Analyzer(stemmer="porter"), "generalizations")[0].tolist()
    assert first.spelled[number] == "gener" and first.numbers["gener"] == number
    # "generalized" stems to the same term: the same number
    assert term_counts(Analyzer(stemmer="porter"), "generalized")[0].tolist() == [number]


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_term_counts_are_the_analyzers_counts_on_every_document(name: str) -> None:
    collection = load_collection(ROOT / "collections" / name, name=name)
    for analyzer in (Analyzer(), Analyzer(stop_words=None, stemmer=None)):
        for document in collection.documents.values():
            text = f"{document.title} {document.text}"
            assert _spelled(analyzer, text) == list(Counter(analyzer(text)).items())


def test_tokens_are_the_regexs_runs_of_letters_and_digits() -> None:
    # ASCII text is split without the regex: every ASCII character must separate tokens or
    # join them exactly as [^\W_]+ does (the underscore separates); other text uses it
    assert _tokens("TF-IDF, x_2 and 3.5") == ["TF", "IDF", "x", "2", "and", "3", "5"]
    assert _tokens("naïve café_x2") == ["naïve", "café", "x2"]
    for code in range(128):
        text = f"a{chr(code)}b {chr(code)}{chr(code)}9"
        assert _tokens(text) == _TOKEN.findall(text), code


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_tokens_of_every_document_and_query_are_the_regexs(name: str) -> None:
    collection = load_collection(ROOT / "collections" / name, name=name)
    texts = [f"{d.title} {d.text}" for d in collection.documents.values()]
    texts += [query.text for query in collection.queries.values()]
    for text in texts:
        assert _tokens(text) == _TOKEN.findall(text)
        assert _tokens(text.lower()) == _TOKEN.findall(text.lower())


@pytest.mark.parametrize("algorithm", ["english", "porter"])
def test_the_c_stemmer_stems_every_collection_word_as_snowballs_python(algorithm: str) -> None:
    # snowballstemmer hands its work to PyStemmer (the Snowball project's C binding) when
    # it is installed: the stems must be those of its own Python algorithms, word for word.
    stemmer = pytest.importorskip("Stemmer", reason="PyStemmer (requirements.lock) missing")
    from snowballstemmer import english_stemmer, porter_stemmer

    python = {
        "english": english_stemmer.EnglishStemmer,
        "porter": porter_stemmer.PorterStemmer,
    }[algorithm]()
    fast = stemmer.Stemmer(algorithm)
    words: set[str] = set()
    for name in ("cranfield", "cacm"):
        collection = load_collection(ROOT / "collections" / name, name=name)
        texts = [f"{d.title} {d.text}" for d in collection.documents.values()]
        texts += [query.text for query in collection.queries.values()]
        for text in texts:
            words.update(_TOKEN.findall(text))
            words.update(_TOKEN.findall(text.lower()))
    assert len(words) > 15_000
    assert [fast.stemWord(w) for w in sorted(words)] == [python.stemWord(w) for w in sorted(words)]
    assert type(_stemmer(algorithm)).__module__ == "Stemmer"  # the analyzer uses it
