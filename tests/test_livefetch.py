"""The LiveFetch ranker: each score component by hand, the greedy redundancy penalty, feedback,
domain lists, invariants, and that neither the clock nor the network is consulted."""

from __future__ import annotations

import math
import socket
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine import livefetch
from evidence_bench.engine.base import Label, Ranker
from evidence_bench.engine.livefetch import DEFAULT_TRUST, LiveFetchRanker
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence

AS_OF = datetime(2026, 1, 1)


def _ev(
    n: int,
    title: str,
    snippet: str = "",
    *,
    host: str = "example.com",
    page_age: datetime | None = None,
    domain: str = "",
) -> Evidence:
    return Evidence(
        title=title,
        url=f"https://{host}/doc/{n}",
        snippet=snippet,
        rank=n + 1,
        page_age=page_age,
        domain=domain,
    )


def _order(ranking: list[Evidence]) -> list[int]:
    return [int(item.url.rsplit("/", 1)[1]) for item in ranking]


def test_satisfies_the_ranker_protocol() -> None:
    ranker = LiveFetchRanker()
    assert isinstance(ranker, Ranker)
    assert ranker.name == "livefetch"
    assert ranker.rank("query", [], {}) == []
    assert ranker.score_breakdown("query", [], {}) == []


# --- F, freshness ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("page_age", "expected"),
    [
        (AS_OF, 1.0),
        (AS_OF - timedelta(days=7), 0.5),  # one half-life
        (AS_OF - timedelta(days=14), 0.25),  # two half-lives
        (AS_OF - timedelta(days=3.5), 2**-0.5),
        (AS_OF + timedelta(days=30), 1.0),  # after as_of: age clamped at 0
        # Aware dates are compared in UTC: 02:00 at +02:00 is midnight UTC, 7 days back.
        (datetime(2025, 12, 25, 2, 0, tzinfo=timezone(timedelta(hours=2))), 0.5),
    ],
)
def test_freshness_halves_every_half_life(page_age: datetime, expected: float) -> None:
    assert LiveFetchRanker().freshness(page_age) == pytest.approx(expected)


def test_missing_date_scores_neutral_freshness() -> None:
    assert LiveFetchRanker().freshness(None) == 0.5
    assert LiveFetchRanker(neutral_freshness=0.2).freshness(None) == 0.2


def test_half_life_and_as_of_are_parameters() -> None:
    assert LiveFetchRanker(half_life_days=14).freshness(AS_OF - timedelta(days=14)) == 0.5
    later = LiveFetchRanker(as_of="2026-01-08")
    assert later.freshness(AS_OF) == pytest.approx(0.5)


# --- T, trust -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("www.nasa.gov", 0.9),
        ("WWW.NASA.GOV", 0.9),
        ("web.mit.edu", 0.85),
        ("www.ox.ac.uk", 0.85),  # 'ac.uk' entry
        ("www.x.gov.uk", 0.9),  # 'gov.uk' entry, not the .gov TLD
        ("www.who.int", 0.8),
        ("en.wikipedia.org", 0.7),
        ("www.bbc.co.uk", 0.5),  # co.uk and uk not in the default table
        ("example.com", 0.5),
        ("cranfield.evidence-bench.test", 0.5),  # no public suffix
        ("localhost", 0.5),
        ("127.0.0.1", 0.5),
    ],
)
def test_default_trust_by_public_suffix(host: str, expected: float) -> None:
    assert LiveFetchRanker().trust_of(_ev(0, "t", host=host)) == expected


def test_longest_matching_entry_wins() -> None:
    ranker = LiveFetchRanker(
        trust=(("uk", 0.6), ("ac.uk", 0.95), ("gov", 0.9), ("nih.gov", 1.0)), default_trust=0.1
    )
    assert ranker.trust_of(_ev(0, "t", host="ox.ac.uk")) == 0.95
    assert ranker.trust_of(_ev(0, "t", host="www.bbc.co.uk")) == 0.6
    assert ranker.trust_of(_ev(0, "t", host="www.nih.gov")) == 1.0  # a registered domain
    assert ranker.trust_of(_ev(0, "t", host="www.nasa.gov")) == 0.9
    assert ranker.trust_of(_ev(0, "t", host="example.com")) == 0.1


def test_evidence_domain_takes_precedence_over_the_url_host() -> None:
    item = _ev(0, "t", host="mirror.example.com", domain="www.nasa.gov")
    assert LiveFetchRanker().trust_of(item) == 0.9


# --- R, relevance ---------------------------------------------------------------------------


def test_query_contained_in_the_title_scores_full_relevance() -> None:
    # overlap: {solar, panel, efficiency} all in the title -> 1.0. token_set_ratio is 100
    # when every query token (lowercased) is among the document's tokens.
    candidates = [_ev(0, "Solar panel efficiency in winter", "tests on rooftops")]
    assert LiveFetchRanker().relevance("solar panel efficiency", candidates, {}) == [1.0]


def test_relevance_of_a_fuzzy_near_miss() -> None:
    # overlap 0; token_set_ratio with no shared token = Indel ratio of "heat" vs "heap":
    # distance 2 (delete t, insert p) over 8 characters -> 0.75. R = (0 + 0.75) / 2.
    assert LiveFetchRanker().relevance("heat", [_ev(0, "heap")], {}) == [0.375]


def test_relevance_of_a_partial_match() -> None:
    # overlap: 1 of {solar, wind, power}. token_set_ratio: intersection "solar" (5 chars),
    # query rest "power wind" (10), doc rest "panels" (6). Best of three Indel ratios is
    # "solar" vs "solar panels": 1 - (1 + 6) / (5 + 12) = 10/17.
    expected = (1 / 3 + 10 / 17) / 2
    [value] = LiveFetchRanker().relevance("solar wind power", [_ev(0, "solar panels")], {})
    assert value == pytest.approx(expected)


def test_query_without_terms_still_gets_the_fuzzy_part() -> None:
    # Every query word is a stop word: overlap counts 0, token_set_ratio is 100 (subset).
    assert LiveFetchRanker().relevance("what is", [_ev(0, "what is new")], {}) == [0.5]


# Two identical documents "heap" for the query "heat": R = 0.375 each, similarity 1.
_HEAPS = [_ev(0, "heap"), _ev(1, "heap")]


def test_rocchio_pull_hand_computed() -> None:
    feedback = {_HEAPS[1].key: Label.RELEVANT}
    # (alpha·R + beta·sim) / (alpha + beta) = (0.375 + 0.75) / 1.75
    expected = (0.375 + 0.75 * 1.0) / 1.75
    assert LiveFetchRanker().relevance("heat", _HEAPS, feedback) == pytest.approx(
        [expected, expected]
    )


def test_rocchio_push_hand_computed_and_clamped() -> None:
    feedback = {_HEAPS[1].key: Label.IRRELEVANT}
    # No pull: divided by alpha only. 0.375 - 0.15 * 1.0 = 0.225.
    assert LiveFetchRanker().relevance("heat", _HEAPS, feedback) == pytest.approx([0.225] * 2)
    assert LiveFetchRanker(gamma=1.0).relevance("heat", _HEAPS, feedback) == [0.0, 0.0]


def test_unsure_and_unknown_urls_change_nothing() -> None:
    feedback = {_HEAPS[1].key: Label.UNSURE, "https://elsewhere.org/": Label.RELEVANT}
    assert LiveFetchRanker().relevance("heat", _HEAPS, feedback) == [0.375, 0.375]


def test_feedback_is_matched_by_canonical_url() -> None:
    tracked = Evidence(title="heap", url="https://example.com/doc/1?utm_source=x#top", snippet="")
    feedback = {"https://example.com/doc/1": Label.MORE}
    values = LiveFetchRanker().relevance("heat", [_HEAPS[0], tracked], feedback)
    assert values == pytest.approx([(0.375 + 0.75) / 1.75] * 2)


def test_relevant_feedback_moves_a_similar_result_up() -> None:
    # b and c tie on everything before feedback (same overlap 1/2 and token_set_ratio 10/16
    # from "solar" vs "solar power", same host, no dates), so b stays ahead by candidate
    # order. Marking m, which shares "battery storage" with c and nothing with b, lifts c.
    candidates = [
        _ev(0, "solar power plants"),
        _ev(1, "solar energy news"),  # b
        _ev(2, "solar battery storage"),  # c
        _ev(3, "battery storage systems"),  # m
    ]
    ranker = LiveFetchRanker(w_dup=0.0)
    before = _order(ranker.rank("solar power", candidates, {}))
    assert before.index(1) < before.index(2)
    after = _order(ranker.rank("solar power", candidates, {candidates[3].key: Label.RELEVANT}))
    assert after.index(2) < after.index(1)
    pushed = _order(ranker.rank("solar power", candidates, {candidates[3].key: Label.LESS}))
    assert pushed.index(1) < pushed.index(2)


# --- D, redundancy --------------------------------------------------------------------------

# Query "solar panels": every result holds both query words, so R = 1 for all. No dates:
# F = 0.5. A and B are the same text on .org hosts (T = 0.7); C is on .com (T = 0.5).
# S before the penalty: A = B = 0.55 + 0.125 + 0.14 = 0.815, C = 0.55 + 0.125 + 0.10 = 0.775.
# cos(A, B) = 1; cos(A, C) = 2 shared of 4 terms each = 0.5.
_DUPES = [
    _ev(0, "solar panels", "cost guide", host="example.org"),  # A
    _ev(1, "solar panels", "cost guide", host="mirror.example.org"),  # B, A's duplicate
    _ev(2, "solar panels", "roof installation", host="example.com"),  # C, distinct
]


def test_redundancy_demotes_a_near_duplicate_below_a_distinct_lower_scorer() -> None:
    ranker = LiveFetchRanker()
    assert _order(ranker.rank("solar panels", _DUPES, {})) == [0, 2, 1]
    rows = ranker.score_breakdown("solar panels", _DUPES, {})
    assert [row.url for row in rows] == [_DUPES[i].url for i in (0, 2, 1)]
    # After A: S(B) = 0.815 - 0.35 * 1 = 0.465, S(C) = 0.775 - 0.35 * 0.5 = 0.6.
    expected = [(0.815, 0.0), (0.6, 0.5), (0.465, 1.0)]
    for row, (score, redundancy) in zip(rows, expected, strict=True):
        assert row.score == pytest.approx(score)
        assert pytest.approx(redundancy) == row.breakdown.D
        assert row.breakdown.R == 1.0
        assert row.breakdown.F == 0.5
    assert [row.breakdown.T for row in rows] == [0.7, 0.5, 0.7]


def test_without_the_penalty_the_duplicate_keeps_its_place() -> None:
    assert _order(LiveFetchRanker(w_dup=0.0).rank("solar panels", _DUPES, {})) == [0, 1, 2]


# --- allow and deny lists -------------------------------------------------------------------

_HOSTS = [
    _ev(0, "mars rover", host="blog.example.com"),
    _ev(1, "mars", host="www.nasa.gov"),
    _ev(2, "mars rover landing", host="spam.example.net"),
    _ev(3, "rover news", host="science.nasa.gov"),
    _ev(4, "mars rover photos", host="notnasa.gov"),
]


def _groups_keep_order(ranking: list[int], reference: list[int], first: set[int]) -> None:
    head = [i for i in reference if i in first]
    tail = [i for i in reference if i not in first]
    assert ranking == head + tail


def test_allow_list_puts_other_hosts_last_in_order() -> None:
    ranker = LiveFetchRanker(w_dup=0.0)
    reference = _order(ranker.rank("mars rover", _HOSTS, {}))
    allowed = LiveFetchRanker(w_dup=0.0, allow_domains=("nasa.gov",))
    # nasa.gov covers www. and science. but not notnasa.gov.
    _groups_keep_order(_order(allowed.rank("mars rover", _HOSTS, {})), reference, {1, 3})


def test_deny_list_puts_denied_hosts_last() -> None:
    ranker = LiveFetchRanker(w_dup=0.0)
    reference = _order(ranker.rank("mars rover", _HOSTS, {}))
    denied = LiveFetchRanker(w_dup=0.0, deny_domains=("spam.example.net",))
    _groups_keep_order(_order(denied.rank("mars rover", _HOSTS, {})), reference, {0, 1, 3, 4})
    assert _order(denied.rank("mars rover", _HOSTS, {}))[-1] == 2


def test_deny_wins_over_allow() -> None:
    ranker = LiveFetchRanker(allow_domains=("nasa.gov",), deny_domains=("science.nasa.gov",))
    ranking = _order(ranker.rank("mars rover", _HOSTS, {}))
    assert ranking[0] == 1
    assert ranking[-1] == 3
    assert sorted(ranking) == [0, 1, 2, 3, 4]


def test_a_denied_duplicate_does_not_penalize_an_allowed_result() -> None:
    # A is denied and would be placed first (higher trust); B, its duplicate, is not.
    candidates = [
        _ev(0, "solar panels", "cost guide", host="www.energy.gov"),
        _ev(1, "solar panels", "cost guide", host="example.com"),
    ]
    ranker = LiveFetchRanker(deny_domains=("energy.gov",))
    rows = ranker.score_breakdown("solar panels", candidates, {})
    assert [row.url for row in rows] == [candidates[1].url, candidates[0].url]
    assert rows[0].breakdown.D == 0.0
    assert pytest.approx(1.0) == rows[1].breakdown.D


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"w_r": -0.1}, "w_r"),
        ({"w_dup": math.nan}, "w_dup"),
        ({"gamma": math.inf}, "gamma"),
        ({"half_life_days": 0}, "half_life_days"),
        ({"as_of": "yesterday"}, "as_of"),
        ({"neutral_freshness": 1.5}, "neutral_freshness"),
        ({"default_trust": -1}, "default_trust"),
        ({"trust": (("gov", 2.0),)}, "trust"),
        ({"trust": (("gov", 0.9), (".GOV", 0.8))}, "twice"),
        ({"trust": ("gov",)}, "pairs"),
        ({"allow_domains": ("",)}, "allow_domains"),
    ],
)
def test_invalid_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        LiveFetchRanker(**kwargs)


def test_lists_from_a_config_become_normalized_tuples() -> None:
    ranker = LiveFetchRanker(
        trust=[[".GOV", 0.9]],  # type: ignore[arg-type]
        allow_domains=["NASA.gov."],  # type: ignore[arg-type]
    )
    assert ranker.trust == (("gov", 0.9),)
    assert ranker.allow_domains == ("nasa.gov",)
    assert hash(ranker) == hash(LiveFetchRanker(trust=(("gov", 0.9),), allow_domains=("nasa.gov",)))
    assert dict(DEFAULT_TRUST)["gov"] == 0.9


# --- reproducibility: no clock, no network ---------------------------------------------------


def test_results_do_not_depend_on_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    candidates = [
        _ev(0, "solar panels", page_age=AS_OF - timedelta(days=7)),
        _ev(1, "solar panels", page_age=AS_OF - timedelta(days=400)),
        _ev(2, "solar", page_age=None, host="www.energy.gov"),
    ]
    ranker = LiveFetchRanker()
    before = ranker.score_breakdown("solar panels", candidates, {})

    class FarFuture(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> FarFuture:
            return cls(2099, 6, 1, tzinfo=tz)

        @classmethod
        def today(cls) -> FarFuture:
            return cls(2099, 6, 1)

        @classmethod
        def utcnow(cls) -> FarFuture:
            return cls(2099, 6, 1)

    monkeypatch.setattr(livefetch, "datetime", FarFuture)
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)
    monkeypatch.setattr(time, "time_ns", lambda: 4_000_000_000 * 10**9)
    livefetch._reference_date.cache_clear()  # parse as_of again under the patched clock
    try:
        after = LiveFetchRanker().score_breakdown("solar panels", candidates, {})
        assert after == before
        assert LiveFetchRanker().freshness(AS_OF - timedelta(days=7)) == pytest.approx(0.5)
    finally:
        livefetch._reference_date.cache_clear()


def test_suffix_lookup_makes_no_network_call_and_writes_no_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path / "tld"))
    # Build the extractor afresh under the patches (it is built once, lazily, and cached).
    livefetch._extractor.cache_clear()
    livefetch._trust_keys.cache_clear()
    ranker = LiveFetchRanker()
    assert ranker.trust_of(_ev(0, "t", host="www.nasa.gov")) == 0.9
    assert ranker.trust_of(_ev(0, "t", host="www.ox.ac.uk")) == 0.85
    assert livefetch._extractor() is livefetch._extractor()
    assert not (tmp_path / "xdg").exists()
    assert not (tmp_path / "tld").exists()


# --- invariants -----------------------------------------------------------------------------

_WORDS = ["solar", "panel", "wind", "power", "grid", "battery", "storage", "cost", "the"]
_HOST_POOL = ["www.nasa.gov", "example.com", "ox.ac.uk", "blog.example.org", "x.test"]
_texts = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=5).map(" ".join)
_dates = st.none() | st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2027, 1, 1))


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[str, list[Evidence], dict[str, Label]]:
    size = draw(st.integers(min_value=0, max_value=10))
    candidates = [
        _ev(
            n,
            draw(_texts),
            draw(_texts),
            host=draw(st.sampled_from(_HOST_POOL)),
            page_age=draw(_dates),
        )
        for n in range(size)
    ]
    keys = [item.key for item in candidates] or ["https://example.com/none"]
    feedback = draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(list(Label))))
    return draw(_texts), candidates, feedback


_unit = st.floats(min_value=0, max_value=1)


@settings(max_examples=150, deadline=None)
@given(_scenario(), _unit, _unit, _unit, _unit, st.sampled_from([(), ("nasa.gov",)]))
def test_ranking_is_a_deterministic_permutation_with_a_consistent_breakdown(
    scenario: tuple[str, list[Evidence], dict[str, Label]],
    w_r: float,
    w_f: float,
    w_t: float,
    w_dup: float,
    allow: tuple[str, ...],
) -> None:
    query, candidates, feedback = scenario
    ranker = LiveFetchRanker(w_r=w_r, w_f=w_f, w_t=w_t, w_dup=w_dup, allow_domains=allow)
    ranking = ranker.rank(query, candidates, feedback)
    assert sorted(item.url for item in ranking) == sorted(item.url for item in candidates)
    assert [item.rank for item in ranking] == list(range(1, len(candidates) + 1))
    assert ranking == ranker.rank(query, candidates, feedback)
    assert ranking == LiveFetchRanker(
        w_r=w_r, w_f=w_f, w_t=w_t, w_dup=w_dup, allow_domains=allow
    ).rank(query, list(candidates), dict(feedback))
    rows = ranker.score_breakdown(query, candidates, feedback)
    assert [row.url for row in rows] == [item.url for item in ranking]
    for row in rows:
        for component in row.breakdown:
            assert 0.0 <= component <= 1.0 + 1e-12
        r, f, t, d = row.breakdown
        assert row.score == pytest.approx(w_r * r + w_f * f + w_t * t - w_dup * d)
    if w_dup == 0.0 and not allow:
        scores = [round(row.score, 9) for row in rows]
        assert scores == sorted(scores, reverse=True)
