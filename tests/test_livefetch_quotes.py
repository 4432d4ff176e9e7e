"""Quotes: supporting sentences, each an exact substring of the text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.livefetch.quotes import MAX_QUOTE_CHARS, quotes_for, sentence_spans
from tests.livefetch_pages import collection_docs

TEXT = (
    "Slab heating\n"
    "The heat transfer in a slab is governed by conduction. "
    "Wind tunnels were used (see Fig. 2.) for the tests. "
    "Heat transfer to the slab surface rises with Mach number! "
    "Nothing here mentions the topic at all."
)


def test_sentences_split_at_stops_and_line_breaks_but_not_before_lowercase() -> None:
    assert [TEXT[a:b] for a, b in sentence_spans(TEXT)] == [
        "Slab heating",
        "The heat transfer in a slab is governed by conduction.",
        "Wind tunnels were used (see Fig. 2.) for the tests.",
        "Heat transfer to the slab surface rises with Mach number!",
        "Nothing here mentions the topic at all.",
    ]


def test_the_best_supporting_sentences_come_first() -> None:
    # Query terms (stemmed): heat, transfer, slab. Both sentences below hold all three;
    # after stop words, "The heat transfer ... conduction." has 5 terms (heat transfer slab
    # govern conduct: density 3/5) and "Heat transfer to ... number!" 7 (heat transfer slab
    # surfac rise mach number: 3/7), so the first comes first. "Slab heating" is under 20
    # characters, no sentence; the other two hold no query term.
    quotes = quotes_for("heat transfer slabs", TEXT)
    assert quotes == (
        "The heat transfer in a slab is governed by conduction.",
        "Heat transfer to the slab surface rises with Mach number!",
    )


def test_no_query_term_no_quote() -> None:
    assert quotes_for("supersonic nozzle", TEXT) == ()
    assert quotes_for("the of and", TEXT) == ()  # only stop words: no terms


def test_at_most_three_and_a_long_sentence_is_cut_to_a_prefix() -> None:
    long = "Heat " + "and more heat " * 60 + "end."
    text = f"{long}\nHeat one is here today.\nHeat two is here today.\nHeat three is here."
    quotes = quotes_for("heat", text)
    assert len(quotes) == 3
    for quote in quotes:
        assert quote in text and len(quote) <= MAX_QUOTE_CHARS


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("abc heat slab.!?\n\"')ÉéX1")), max_size=400),
    query=st.text(alphabet=st.sampled_from(list("abc heat slab")), min_size=1, max_size=20),
)
def test_every_quote_is_an_exact_substring(text: str, query: str) -> None:
    quotes = quotes_for(query, text)
    assert len(quotes) <= 3
    for quote in quotes:
        assert quote and quote in text and quote == quote.strip()


def test_quotes_on_cranfield_documents_are_substrings_holding_a_query_term() -> None:
    for doc in collection_docs("cranfield", 30):
        quotes = quotes_for("boundary layer heat transfer", doc["text"])
        for quote in quotes:
            assert quote in doc["text"]
            assert any(word in quote for word in ("boundary", "layer", "heat", "transfer"))


def test_cranfield_spaced_stops_end_sentences() -> None:
    """Cranfield's doc 1 is lowercase with " . " between sentences: its second sentence is
    the only one holding both "propeller" and "slipstream"."""
    (doc,) = [d for d in collection_docs("cranfield", 1) if d["_id"] == "1"]
    quotes = quotes_for("propeller slipstream", doc["text"])
    assert quotes[0].startswith("an experimental study of a wing in a propeller slipstream")
    assert quotes[0].endswith(" .")
    assert all(quote in doc["text"] for quote in quotes)


def test_a_long_sentence_is_quoted_from_its_first_query_term() -> None:
    text = "filler " * 100 + "the nozzle shock stands here " + "more words " * 50
    (quote,) = quotes_for("nozzle", text)
    assert quote.startswith("nozzle shock stands here")
    assert quote in text and len(quote) <= MAX_QUOTE_CHARS


def test_a_sentence_that_ends_in_a_stop_beats_a_heading() -> None:
    """The heading holds all four query terms, the sentence three ("European" is not
    "EU"); a heading is no claim to cite, so the sentence comes first."""
    text = (
        "EU opens first AI Act enforcement case\n"
        "The European AI Office opened its first enforcement case under the AI Act."
    )
    assert quotes_for("EU AI Act enforcement", text) == (
        "The European AI Office opened its first enforcement case under the AI Act.",
        "EU opens first AI Act enforcement case",
    )


def test_an_abbreviation_or_an_initial_does_not_end_a_sentence() -> None:
    """A sentence goes on past "Dr. Smith", "the U.S. Senate", "J. Doe" (the quote "Senate
    passed..." lost its subject); "etc." and "no." end one, as they mostly do."""
    text = (
        "The U.S. Senate passed the AI Act on Monday. Dr. Smith said enforcement begins "
        "in March. It was drafted by J. Doe. We saw apples, pears, etc. Then we left. "
        "The answer was no. Then came the vote."
    )
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "The U.S. Senate passed the AI Act on Monday.",
        "Dr. Smith said enforcement begins in March.",
        "It was drafted by J. Doe.",
        "We saw apples, pears, etc.",
        "Then we left.",
        "The answer was no.",
        "Then came the vote.",
    ]
