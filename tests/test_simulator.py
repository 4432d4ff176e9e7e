"""BM25 and the Brave-compatible simulator, exercised over real loopback HTTP."""

from __future__ import annotations

import html
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_bench.collections.beir import Collection, Document, Query, load_collection
from evidence_bench.errors import ConfigurationError
from evidence_bench.web.bm25 import STOP_WORDS, BM25Index, tokenize
from evidence_bench.web.simulator import (
    SEARCH_PATH,
    BraveSimulator,
    RunningSimulator,
    SimulatorTransport,
    serve,
)

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "sim-test-token"
NOW = 1_700_000_000.75


# -- BM25 ------------------------------------------------------------------------------------------


def test_tokenize_lowercases_splits_and_drops_short_and_stop_words() -> None:
    assert tokenize("The Boundary-layer of a 2D wing, at Mach 3.") == [
        "boundary",
        "layer",
        "2d",
        "wing",
        "mach",
    ]


def _regex_tokenize(text: str) -> list[str]:
    """The tokenizer as it was written first: the regex's runs of the lowercased text."""
    runs = re.findall(r"[^\W_]+", text.lower())
    return [t for t in runs if len(t) > 1 and t not in STOP_WORDS]


def test_tokenize_is_the_regexs_on_every_character_and_odd_words() -> None:
    """ASCII is split by translate, one alphanumeric word taken whole: the same tokens as
    the regex, for every code point alone and beside ASCII, and where lowercasing leaves
    ASCII (the Kelvin sign) or a word joins scripts."""
    texts = [chr(c) for c in range(0x20000) if not 0xD800 <= c <= 0xDFFF]  # BMP and SMP
    texts += [f"ab{chr(c)}cd x{chr(c)}" for c in range(0x3000)]
    texts += ["\u212aelvin", "İstanbul", "x²y", "½b", "snake_case", "A-B c.D", "", " ", "IS", "Of"]
    assert [tokenize(t) for t in texts] == [_regex_tokenize(t) for t in texts]


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_tokenize_every_document_and_its_words_as_the_regex(name: str) -> None:
    collection = load_collection(Path(__file__).resolve().parents[1] / "collections" / name)
    for doc in collection.documents.values():
        text = f"{doc.title} {doc.text}"
        assert tokenize(text) == _regex_tokenize(text), doc.doc_id
        assert [tokenize(w) for w in text.split()] == [_regex_tokenize(w) for w in text.split()]


def test_bm25_scores_match_a_hand_computation() -> None:
    # Lengths 3, 2, 4 -> avgdl 3; N = 3; k1 = 0.9, b = 0.4.
    index = BM25Index(
        {"d1": "apple banana apple", "d2": "banana cherry", "d3": "cherry date elderberry fig"}
    )
    k1, b, avgdl = 0.9, 0.4, 3.0

    def norm(length: int) -> float:
        return k1 * (1 - b + b * length / avgdl)

    idf_df1 = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # ln(8/3)
    idf_df2 = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # ln(1.6)
    [(doc_id, score)] = index.search("apple", 10)
    assert doc_id == "d1"
    assert score == pytest.approx(idf_df1 * 2 * (k1 + 1) / (2 + norm(3)))
    assert score == pytest.approx(math.log(8 / 3) * 2 * 1.9 / 2.9)  # tf 2, |D| = avgdl
    expected = {
        "d2": 2 * idf_df2 * (k1 + 1) / (1 + norm(2)),  # banana and cherry once each
        "d1": idf_df2 * (k1 + 1) / (1 + norm(3)),  # banana once
        "d3": idf_df2 * (k1 + 1) / (1 + norm(4)),  # cherry once
    }
    hits = index.search("banana cherry", 10)
    assert [doc_id for doc_id, _ in hits] == ["d2", "d1", "d3"]
    assert dict(hits) == pytest.approx(expected)
    assert index.search("banana cherry", 2) == hits[:2]


def test_bm25_only_returns_matching_documents() -> None:
    index = BM25Index({"d1": "apple", "d2": "banana"})
    assert index.search("kiwi", 5) == []
    assert index.search("the of and", 5) == []
    assert index.search("apple", 0) == []
    assert all(score > 0 for _, score in index.search("apple banana", 5))


def test_bm25_ties_break_by_doc_id_numbers_first() -> None:
    index = BM25Index({doc_id: "same words here" for doc_id in ["b", "10", "9", "a", "100"]})
    assert [doc_id for doc_id, _ in index.search("words", 10)] == ["9", "10", "100", "a", "b"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["7", "12", "x", "y2", "3"]), st.sampled_from(["ab cd", "cd ef"])
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda pair: pair[0],
    ),
    st.randoms(use_true_random=False),
)
def test_bm25_ranking_does_not_depend_on_insertion_order(
    docs: list[tuple[str, str]], rng: Any
) -> None:
    shuffled = list(docs)
    rng.shuffle(shuffled)
    first = BM25Index(dict(docs)).search("cd ef", 10)
    assert first == BM25Index(dict(shuffled)).search("cd ef", 10)
    assert [score for _, score in first] == sorted((score for _, score in first), reverse=True)


def test_bm25_by_word_finds_what_the_analyzer_finds_on_each_text(cranfield: Collection) -> None:
    """The default analyzer runs once per distinct word; any other runs on each text: the two
    give the same postings, so the same scores, on Cranfield and on awkward text."""
    texts = {d.doc_id: f"{d.title} {d.text}" for d in cranfield.documents.values()}
    texts |= {"x1": "Heat-FLUX\tof naïve Über\u00a0straße; ΟΔΟΣ x_y 1.5", "x2": "", "x3": " . "}
    by_word = BM25Index(texts)
    by_text = BM25Index(texts, analyzer=lambda text: tokenize(text))
    for query in [q.text for q in list(cranfield.queries.values())[:40]] + ["straße οδος flux"]:
        assert by_word.search(query, 30) == by_text.search(query, 30)
    # Lucene's idf from the documents that hold "heat" (counted with a regex, by hand).
    df = sum(1 for text in texts.values() if re.search(r"(?<![^\W_])heat(?![^\W_])", text.lower()))
    idf = math.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
    assert by_word.idf("heat") == by_text.idf("heat") == pytest.approx(idf)
    assert (len(texts), df) == (1403, 255)


# -- fixtures ------------------------------------------------------------------------------------


def tiny_collection() -> Collection:
    long_text = " ".join(
        f"Paragraph {n} discusses turbulence in the boundary layer over a flat plate at Mach {n}."
        for n in range(1, 30)
    )
    documents = {
        "1": Document("1", "Boundary layer transition", long_text),
        "2": Document("2", "", "Unsafe <script>alert(1)</script> text about boundary conditions"),
        "3": Document("3", 'Heat & mass "transfer"', "Heat transfer in composite slabs."),
    }
    return Collection("Tiny", documents, {"q": Query("q", "boundary")}, {"q": {"1": 1}})


@pytest.fixture(scope="module")
def cranfield() -> Collection:
    return load_collection(ROOT / "collections" / "cranfield")


@pytest.fixture(scope="module")
def cranfield_server(cranfield: Collection) -> Iterator[RunningSimulator]:
    simulator = BraveSimulator(cranfield, token=TOKEN, wall_clock=lambda: NOW)
    with serve(simulator) as running:
        yield running


@pytest.fixture(scope="module")
def tiny_server() -> Iterator[RunningSimulator]:
    with serve(BraveSimulator(tiny_collection(), token=TOKEN)) as running:
        yield running


def client(running: RunningSimulator, token: str | None = TOKEN) -> httpx.Client:
    headers = {"X-Subscription-Token": token} if token is not None else {}
    return httpx.Client(base_url=running.base_url, headers=headers, trust_env=False)


def plain(snippet: str) -> str:
    """The document text a snippet shows: decorations removed, entities unescaped."""
    return html.unescape(re.sub(r"</?strong>", "", snippet))


def search(running: RunningSimulator, **params: str) -> httpx.Response:
    with client(running) as http:
        return http.get("/web/search", params=params)


# -- the success body ----------------------------------------------------------------------------

QUERY_KEYS = {
    "original", "show_strict_warning", "is_navigational", "is_news_breaking", "spellcheck_off",
    "country", "bad_results", "should_fallback", "postal_code", "city", "header_country",
    "more_results_available", "state",
}  # fmt: skip
RESULT_KEYS = {
    "title", "url", "description", "type", "subtype", "is_source_local", "is_source_both",
    "is_live", "language", "family_friendly", "profile", "meta_url",
}  # fmt: skip


def test_body_has_brave_shape(cranfield_server: RunningSimulator, cranfield: Collection) -> None:
    response = search(cranfield_server, q="boundary layer heat transfer", count="5")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.url.path == SEARCH_PATH
    body = response.json()
    assert list(body) == ["query", "mixed", "type", "web"]
    assert set(body["query"]) == QUERY_KEYS
    assert body["query"]["original"] == "boundary layer heat transfer"
    assert body["query"]["spellcheck_off"] is True and body["query"]["country"] == "us"
    assert body["type"] == "search"
    assert body["mixed"] == {
        "type": "mixed",
        "main": [{"type": "web", "index": i, "all": False} for i in range(5)],
        "top": [],
        "side": [],
    }
    web = body["web"]
    assert (web["type"], web["family_friendly"], len(web["results"])) == ("search", True, 5)
    for result in web["results"]:
        assert set(result) == RESULT_KEYS
        doc_id = cranfield.doc_id_for(result["url"])
        assert doc_id is not None
        assert result["url"] == cranfield.url_for(doc_id)
        assert result["title"] == cranfield.documents[doc_id].title
        assert (result["type"], result["subtype"], result["language"]) == (
            "search_result",
            "generic",
            "en",
        )
        assert result["is_source_local"] is result["is_live"] is False
        assert result["meta_url"]["path"] == f"› doc › {doc_id}"
        assert result["meta_url"]["hostname"] == "cranfield.evidence-bench.test"
        assert set(result["profile"]) == {"name", "url", "long_name", "img"}
        assert 0 < len(plain(result["description"])) <= 300


def test_results_follow_bm25_over_title_and_text(
    cranfield_server: RunningSimulator, cranfield: Collection
) -> None:
    index = BM25Index({d.doc_id: f"{d.title} {d.text}" for d in cranfield.documents.values()})
    query = cranfield.queries["1"].text
    body = search(cranfield_server, q=query, count="10").json()
    urls = [result["url"] for result in body["web"]["results"]]
    assert urls == [cranfield.url_for(doc_id) for doc_id, _ in index.search(query, 10)]


def test_headers_are_brave_rate_limit_constants_when_unlimited(
    cranfield_server: RunningSimulator,
) -> None:
    headers = search(cranfield_server, q="wing").headers
    assert headers["x-ratelimit-limit"] == "1000, 15000"
    assert headers["x-ratelimit-policy"] == "1000;w=1, 15000;w=2592000"
    assert headers["x-ratelimit-remaining"] == "999, 14999"
    assert headers["x-ratelimit-reset"] == "1, 2592000"
    assert "date" not in headers  # a Date header would change every recorded cassette


def test_no_match_has_no_web_key(cranfield_server: RunningSimulator) -> None:
    for q in ("zzyzx qwertyuiop", "the of and"):
        body = search(cranfield_server, q=q).json()
        assert "web" not in body
        assert body["mixed"]["main"] == []
        assert body["query"]["more_results_available"] is False


def test_text_decorations_wrap_query_terms_in_strong(cranfield_server: RunningSimulator) -> None:
    decorated = search(cranfield_server, q="supersonic flutter", count="5").json()
    plain = search(cranfield_server, q="supersonic flutter", count="5", text_decorations="false")
    for with_tags, without in zip(
        decorated["web"]["results"], plain.json()["web"]["results"], strict=True
    ):
        strong = re.findall(r"<strong>(.*?)</strong>", with_tags["description"])
        assert strong and {word.lower() for word in strong} <= {"supersonic", "flutter"}
        assert "<strong>" not in without["description"]
        assert re.sub(r"</?strong>", "", with_tags["description"]) == without["description"]


def test_snippet_is_the_window_with_the_query_terms(tiny_server: RunningSimulator) -> None:
    body = search(tiny_server, q="mach 17", count="1").json()
    description = body["web"]["results"][0]["description"]
    assert "<strong>Mach</strong> <strong>17</strong>." in description
    assert len(plain(description)) <= 300
    assert not description.startswith("Paragraph 1 ")  # not simply the start of the text


def test_extra_snippets_only_when_asked(tiny_server: RunningSimulator) -> None:
    without = search(tiny_server, q="boundary").json()["web"]["results"]
    assert all("extra_snippets" not in result for result in without)
    with_extra = search(tiny_server, q="boundary", extra_snippets="true").json()["web"]["results"]
    long_doc = next(r for r in with_extra if r["url"].endswith("/doc/1"))
    extra = long_doc["extra_snippets"]
    assert len(extra) == 3  # extra_snippet_count's default
    assert len(set(extra)) == 3 and long_doc["description"] not in extra
    assert all(0 < len(s) <= 300 and "<strong>" not in s for s in extra)


def test_document_html_is_escaped_in_snippet_and_title(tiny_server: RunningSimulator) -> None:
    results = search(tiny_server, q="unsafe boundary conditions heat").json()["web"]["results"]
    by_url = {result["url"].rsplit("/", 1)[1]: result for result in results}
    description = by_url["2"]["description"]
    assert "<script>" not in description
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in description
    assert by_url["2"]["title"].startswith("Unsafe &lt;script&gt;")  # empty title: first words
    assert by_url["3"]["title"] == "Heat &amp; mass &quot;transfer&quot;"


# -- pagination ----------------------------------------------------------------------------------


def test_pages_are_disjoint_and_consecutive(cranfield_server: RunningSimulator) -> None:
    def urls(**params: str) -> list[str]:
        body = search(cranfield_server, q="boundary layer flow", **params).json()
        assert body["query"]["more_results_available"] is True
        return [result["url"] for result in body["web"]["results"]]

    first, second = urls(count="5", offset="0"), urls(count="5", offset="1")
    assert len(first) == len(second) == 5 and not set(first) & set(second)
    assert first + second == urls(count="10", offset="0")


def test_more_results_available_is_false_at_the_end_and_on_the_last_page(
    cranfield_server: RunningSimulator, tiny_server: RunningSimulator
) -> None:
    tiny = search(tiny_server, q="boundary", count="1").json()
    assert tiny["query"]["more_results_available"] is True
    tiny_end = search(tiny_server, q="boundary", count="2").json()
    assert len(tiny_end["web"]["results"]) == 2  # only two documents say "boundary"
    assert tiny_end["query"]["more_results_available"] is False
    last = search(cranfield_server, q="flow", count="20", offset="9").json()
    assert len(last["web"]["results"]) == 20  # "flow" matches far more than 200 documents
    assert last["query"]["more_results_available"] is False


# -- errors --------------------------------------------------------------------------------------

WORDS_51 = " ".join(["wing"] * 51)
ERROR_CASES = [
    pytest.param({"q": "wing"}, None, ["header", "x-subscription-token"], "missing", id="no-token"),
    pytest.param({"count": "5"}, TOKEN, ["query", "q"], "missing", id="no-q"),
    pytest.param({"q": ""}, TOKEN, ["query", "q"], "string_too_short", id="q-empty"),
    pytest.param({"q": "   "}, TOKEN, ["query", "q"], "string_too_short", id="q-blank"),
    pytest.param({"q": "w" * 401}, TOKEN, ["query", "q"], "string_too_long", id="q-401-chars"),
    pytest.param({"q": WORDS_51}, TOKEN, ["query", "q"], "value_error", id="q-51-words"),
    pytest.param(
        {"q": "w", "count": "0"}, TOKEN, ["query", "count"], "greater_than_equal", id="count-0"
    ),
    pytest.param(
        {"q": "w", "count": "21"}, TOKEN, ["query", "count"], "less_than_equal", id="count-21"
    ),
    pytest.param(
        {"q": "w", "count": "ten"}, TOKEN, ["query", "count"], "int_parsing", id="count-text"
    ),
    pytest.param(
        {"q": "w", "offset": "10"}, TOKEN, ["query", "offset"], "less_than_equal", id="offset-10"
    ),
    pytest.param(
        {"q": "w", "offset": "-1"},
        TOKEN,
        ["query", "offset"],
        "greater_than_equal",
        id="offset-neg",
    ),
    pytest.param(
        {"q": "w", "text_decorations": "yes"},
        TOKEN,
        ["query", "text_decorations"],
        "bool_parsing",
        id="bool",
    ),
]


@pytest.mark.parametrize(("params", "token", "loc", "kind"), ERROR_CASES)
def test_validation_errors_are_422_with_brave_error_body(
    cranfield_server: RunningSimulator,
    params: dict[str, str],
    token: str | None,
    loc: list[str],
    kind: str,
) -> None:
    with client(cranfield_server, token) as http:
        response = http.get("/web/search", params=params)
    assert response.status_code == 422
    body = response.json()
    assert body["type"] == "ErrorResponse"
    assert body["time"] == int(NOW)
    error = body["error"]
    uuid.UUID(error["id"])
    assert (error["status"], error["code"]) == (422, "VALIDATION")
    assert error["detail"] == "Unable to validate request parameter(s)"
    assert [(e["loc"], e["type"]) for e in error["meta"]["errors"]] == [(loc, kind)]
    assert all(e["msg"] for e in error["meta"]["errors"])
    assert "x-ratelimit-remaining" not in response.headers


def test_all_violations_are_listed_together(cranfield_server: RunningSimulator) -> None:
    with client(cranfield_server, None) as http:
        body = http.get("/web/search", params={"count": "0", "offset": "10"}).json()
    locs = [e["loc"] for e in body["error"]["meta"]["errors"]]
    assert locs == [
        ["header", "x-subscription-token"],
        ["query", "q"],
        ["query", "count"],
        ["query", "offset"],
    ]


def test_limits_are_inclusive(cranfield_server: RunningSimulator) -> None:
    for params in (
        {"q": "w" * 400},
        {"q": " ".join(["wing"] * 50)},
        {"q": "wing", "count": "1", "offset": "9"},
        {"q": "wing", "count": "20", "extra_snippets": "false", "spellcheck": "true"},
    ):
        assert search(cranfield_server, **params).status_code == 200, params


def test_invalid_token_is_422_subscription_token_invalid(
    cranfield_server: RunningSimulator,
) -> None:
    with client(cranfield_server, "wrong-token") as http:
        response = http.get("/web/search", params={"q": "wing"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "SUBSCRIPTION_TOKEN_INVALID"
    assert error["detail"] == "The provided subscription token is invalid."
    assert error["meta"] == {"component": "authentication"}


def test_unknown_path_is_404_error_response(cranfield_server: RunningSimulator) -> None:
    with client(cranfield_server) as http:
        response = http.get("/images/search", params={"q": "wing"})
    assert response.status_code == 404
    body = response.json()
    assert body["type"] == "ErrorResponse" and body["error"]["status"] == 404


def test_other_methods_are_405(cranfield_server: RunningSimulator) -> None:
    with client(cranfield_server) as http:
        response = http.post("/web/search", params={"q": "wing"}, content=b"{}")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"


def test_header_names_are_case_insensitive(cranfield: Collection) -> None:
    simulator = BraveSimulator(cranfield, token=TOKEN)
    for name in ("x-subscription-token", "X-SUBSCRIPTION-TOKEN"):
        assert simulator.handle("GET", SEARCH_PATH, {"q": "wing"}, {name: TOKEN}).status == 200


def test_any_non_empty_token_is_accepted_when_none_is_configured() -> None:
    simulator = BraveSimulator(tiny_collection())
    ok = simulator.handle("GET", SEARCH_PATH, {"q": "heat"}, {"X-Subscription-Token": "anything"})
    empty = simulator.handle("GET", SEARCH_PATH, {"q": "heat"}, {"X-Subscription-Token": ""})
    assert (ok.status, empty.status) == (200, 422)
    assert empty.json()["error"]["code"] == "SUBSCRIPTION_TOKEN_INVALID"


def test_rate_limit_answers_429_until_the_window_resets() -> None:
    now = [100.0]
    simulator = BraveSimulator(tiny_collection(), token=TOKEN, rate_limit=2, clock=lambda: now[0])
    with serve(simulator) as running, client(running) as http:

        def get() -> httpx.Response:
            return http.get("/web/search", params={"q": "heat"})

        bad = http.get("/web/search", params={"q": ""})  # invalid requests do not count
        assert bad.status_code == 422
        first, second = get(), get()
        assert [r.headers["x-ratelimit-remaining"] for r in (first, second)] == [
            "1, 14999",
            "0, 14999",
        ]
        assert first.headers["x-ratelimit-limit"] == "2, 15000"
        assert first.headers["x-ratelimit-policy"] == "2;w=1, 15000;w=2592000"
        now[0] += 0.4
        limited = get()
        assert limited.status_code == 429
        assert limited.headers["x-ratelimit-remaining"] == "0, 14999"
        assert limited.headers["x-ratelimit-reset"] == "1, 2592000"
        error = limited.json()["error"]
        assert (error["status"], error["code"]) == (429, "RATE_LIMITED")
        assert error["meta"]["component"] == "rate_limiter"
        assert error["meta"]["rate_limit"] == 2
        now[0] += 0.6  # a new 1-second window
        assert get().status_code == 200


def test_simulators_of_one_collection_share_the_index(cranfield: Collection) -> None:
    assert BraveSimulator(cranfield)._index is BraveSimulator(cranfield)._index
    assert BraveSimulator(cranfield)._index is not BraveSimulator(tiny_collection())._index


def test_simulator_rejects_bad_settings() -> None:
    with pytest.raises(ConfigurationError, match="rate_limit"):
        BraveSimulator(tiny_collection(), rate_limit=0)
    with pytest.raises(ConfigurationError, match="extra_snippet_count"):
        BraveSimulator(tiny_collection(), extra_snippet_count=6)
    assert TOKEN not in repr(BraveSimulator(tiny_collection(), token=TOKEN))


# -- determinism and the in-process transport ----------------------------------------------------


def test_identical_requests_give_byte_identical_bodies(
    cranfield_server: RunningSimulator, cranfield: Collection
) -> None:
    params = {"q": "heat transfer", "count": "20", "offset": "1", "extra_snippets": "true"}
    first, second = search(cranfield_server, **params), search(cranfield_server, **params)
    assert first.content == second.content
    assert first.headers == second.headers
    fresh = BraveSimulator(cranfield).handle(
        "GET", SEARCH_PATH, params, {"X-Subscription-Token": "t"}
    )
    assert fresh.body == first.content


def test_body_is_compact_json(cranfield_server: RunningSimulator) -> None:
    content = search(cranfield_server, q="wing").content
    compact = json.dumps(json.loads(content), separators=(",", ":"), ensure_ascii=False)
    assert content == compact.encode()
    assert "›".encode() in content  # UTF-8, not \u escapes


TRANSPORT_CASES = [
    ({"q": "shock wave interaction", "count": "7", "offset": "2"}, TOKEN),
    ({"q": "supersonic", "text_decorations": "false", "extra_snippets": "true"}, TOKEN),
    ({"q": "qwertyuiop"}, TOKEN),
    ({"q": "wing", "count": "21"}, TOKEN),
    ({"q": "wing"}, "wrong"),
]


@pytest.mark.parametrize(("params", "token"), TRANSPORT_CASES)
def test_transport_answers_like_the_http_server(
    cranfield_server: RunningSimulator, cranfield: Collection, params: dict[str, str], token: str
) -> None:
    with client(cranfield_server, token) as http:
        over_http = http.get("/web/search", params=params)
    simulator = BraveSimulator(cranfield, token=TOKEN, wall_clock=lambda: NOW)
    with httpx.Client(
        transport=SimulatorTransport(simulator),
        base_url=cranfield_server.base_url,
        headers={"X-Subscription-Token": token},
    ) as http:
        in_process = http.get("/web/search", params=params)
    assert in_process.status_code == over_http.status_code
    assert dict(in_process.headers) == dict(over_http.headers)
    if over_http.status_code == 200:
        assert in_process.content == over_http.content
    else:  # error ids are random; all else must agree
        bodies = [in_process.json(), over_http.json()]
        for body in bodies:
            uuid.UUID(body["error"].pop("id"))
        assert bodies[0] == bodies[1]


# -- serving ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "localhost"])
def test_serve_refuses_any_host_but_loopback(host: str) -> None:
    with (
        pytest.raises(ConfigurationError, match=r"127\.0\.0\.1 only"),
        serve(BraveSimulator(tiny_collection()), host=host),
    ):
        pass  # pragma: no cover


def test_serve_reports_a_busy_port(tiny_server: RunningSimulator) -> None:
    with (
        pytest.raises(ConfigurationError, match=f"127.0.0.1:{tiny_server.port}"),
        serve(BraveSimulator(tiny_collection()), port=tiny_server.port),
    ):
        pass  # pragma: no cover


def test_serve_is_quiet_and_stops_on_exit(capfd: pytest.CaptureFixture[str]) -> None:
    with serve(BraveSimulator(tiny_collection(), token=TOKEN)) as running:
        assert running.base_url == f"http://127.0.0.1:{running.port}/res/v1"
        assert running.search_url.endswith(SEARCH_PATH)
        with client(running) as http:
            assert http.get("/web/search", params={"q": "heat"}).status_code == 200
            assert http.get("/nowhere").status_code == 404
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""
    with pytest.raises(httpx.ConnectError), client(running) as http:
        http.get("/web/search", params={"q": "heat"})


def test_run_server_prints_one_line_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    root = tmp_path / "mini"
    root.mkdir()
    (root / "corpus.jsonl").write_text('{"_id": "1", "title": "Heat", "text": "heat flux"}\n')
    (root / "queries.jsonl").write_text('{"_id": "1", "text": "heat"}\n')
    (root / "qrels.tsv").write_text("1\t1\t1\n")
    # A terminal's Ctrl-C: a job started in the background (`make test &`, nohup) inherits
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so the server
    # never sees the signal (the test hung and timed out); the child takes the default one.
    script = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from evidence_bench.collections import load_collection
        from evidence_bench.web import BraveSimulator, run_server
        run_server(BraveSimulator(load_collection({str(root)!r})), port=0)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        match = re.fullmatch(
            r"Brave-compatible simulator for mini at http://127\.0\.0\.1:(\d+)/res/v1 "
            r"\(Ctrl-C to stop\)",
            line,
        )
        assert match, line
        running = RunningSimulator(f"http://127.0.0.1:{match[1]}/res/v1", int(match[1]))
        assert search(running, q="heat").json()["web"]["results"][0]["title"] == "Heat"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()  # reaps it and closes its pipes (no ResourceWarning later)
    assert process.returncode == 0
    assert (stdout, stderr) == ("", "")


def test_snippet_window_by_hand() -> None:
    # Words: heat, 60 fillers, flux, 60 fillers, heat, flux (positions 0, 61, 122, 123).
    # A window holds at most 60 five-character words (60 · 5 − 1 = 299 ≤ 300 characters),
    # so no window holds heat@0 with flux@61, or flux@61 with heat@122. The most distinct
    # terms (2) are first reached by the window starting at 64, which ends with heat, flux
    # at 122, 123: 58 fillers, then the two terms. The next best window (an extra snippet)
    # holds one term and comes first among those: start 0, heat and 59 fillers.
    fillers = ["abcd"] * 60
    text = " ".join(["heat", *fillers, "flux", *fillers, "heat", "flux"])
    documents = {"1": Document("1", "Heat flux", text)}
    collection = Collection("Window", documents, {"q": Query("q", "heat flux")}, {"q": {"1": 1}})
    simulator = BraveSimulator(collection, extra_snippet_count=1)
    params = {"q": "heat flux", "count": "1", "extra_snippets": "true"}
    body = simulator.handle("GET", SEARCH_PATH, params, {"X-Subscription-Token": "t"}).json()
    result = body["web"]["results"][0]
    assert result["description"] == " ".join(
        ["abcd"] * 58 + ["<strong>heat</strong>", "<strong>flux</strong>"]
    )
    assert result["extra_snippets"] == [" ".join(["heat", *["abcd"] * 59])]
