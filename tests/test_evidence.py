"""normalize_text, canonical_url, dedupe and validate_query: cases and Hypothesis properties."""

from __future__ import annotations

import dataclasses
import html
import re
from datetime import datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from evidence_bench.errors import QueryError
from evidence_bench.evidence import (
    Evidence,
    canonical_url,
    dedupe,
    normalize_text,
    validate_query,
)

# --- normalize_text -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The <strong>New</strong> <strong>York</strong> Times", "The New York Times"),
        ("Tom &amp; Jerry&#39;s &quot;show&quot;", 'Tom & Jerry\'s "show"'),
        ("caf&eacute; &#x2014; bar", "café — bar"),
        ("&lt;b&gt;escaped tags stay text&lt;/b&gt;", "<b>escaped tags stay text</b>"),
        ("line one<br/>line two", "line one line two"),
        ("  spaced\n\tout \u00a0 text  ", "spaced out text"),
        ("<p></p>", ""),
        ("", ""),
        ("a > b", "a > b"),
        # every "<" opens a <strong> or </strong>, and not
        ("<strong>a</strong>&amp;<strong>b</strong>\u00a0c", "a&b c"),
        ("</<strong>strong>x", "x"),
        ("a<strong>b</STRONG>c", "abc"),
        ("<strong>a</strong> <i>b</i> <p>c", "a b c"),
        ("a <strong >b</strong> <strong>", "a b"),
    ],
)
def test_normalize_text_cases(raw: str, expected: str) -> None:
    assert normalize_text(raw) == expected


def test_normalize_text_decoration_before_punctuation_leaves_no_space() -> None:
    assert normalize_text("by The <strong>Times</strong>. Read") == "by The Times. Read"


@given(st.text())
def test_normalize_text_never_raises_and_is_trimmed_single_spaced(raw: str) -> None:
    text = normalize_text(raw)

    assert text == text.strip()
    assert "  " not in text
    assert all(char == " " or not char.isspace() for char in text)


@given(st.text().filter(lambda raw: "&" not in raw and "<" not in raw))
def test_normalize_text_is_idempotent_without_markup(raw: str) -> None:
    once = normalize_text(raw)

    assert normalize_text(once) == once


# --- canonical_url ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTPS://Example.COM/Guide/", "https://example.com/Guide"),
        ("https://example.com/a/ #section", "https://example.com/a"),  # as without the fragment
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),
        ("https://example.com/a?utm_source=x&id=3&UTM_Medium=y", "https://example.com/a?id=3"),
        ("https://example.com/a?gclid=1&b=2&fbclid=3&a=1", "https://example.com/a?b=2&a=1"),
        ("https://example.com/a?utm_term=x", "https://example.com/a"),
        ("https://example.com/a#section-2", "https://example.com/a"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/", "https://example.com/"),
        ("https://example.com/a///", "https://example.com/a"),
        ("  https://example.com/a \n", "https://example.com/a"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ("http://user:pw@Example.com/", "http://user:pw@example.com/"),
        ("https://example.com/search?q=a+b&flag", "https://example.com/search?q=a+b&flag="),
        ("http://example.com:notaport/", "http://example.com:notaport/"),
        ("http://[::1/broken", "http://[::1/broken"),
        ("", ""),
    ],
)
def test_canonical_url_cases(url: str, expected: str) -> None:
    assert canonical_url(url) == expected


@given(st.text())
def test_canonical_url_never_raises_on_any_text(raw: str) -> None:
    assert isinstance(canonical_url(raw), str)


@example("\x08\xa00")
@example("0 #")
@example("https://example.com/a/ #section")  # the fragment hid the space: "/a/" was kept
@example("https://example.com/a/ ?utm_source=x")  # so did a tracking parameter
@example("https://example.com/a/ /#x")  # white space between two trailing slashes
@given(st.text())
def test_canonical_url_is_idempotent_on_any_text(raw: str) -> None:
    once = canonical_url(raw)

    assert canonical_url(once) == once


_SEGMENT = st.text(alphabet="abcXYZ019-._~%", min_size=1, max_size=8)
_HOST = st.from_regex(
    r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,10}[a-zA-Z0-9])?(\.[a-zA-Z]{2,6}){1,2}", fullmatch=True
)
_PARAMS = st.lists(
    st.tuples(
        st.sampled_from(
            ["q", "id", "page", "utm_source", "UTM_Campaign", "gclid", "fbclid", "ref"]
        ),
        st.text(alphabet="abc123+&=/?%é", max_size=6),
    ),
    max_size=4,
)


@st.composite
def urls(draw: st.DrawFn) -> str:
    """Web addresses as Brave returns them: scheme, host, optional port, path, query, fragment."""
    scheme = draw(st.sampled_from(["http", "https", "HTTPS"]))
    host = draw(_HOST)
    port = draw(st.sampled_from(["", ":80", ":443", ":8080"]))
    path = "".join(f"/{segment}" for segment in draw(st.lists(_SEGMENT, max_size=3)))
    if draw(st.booleans()):
        path += "/"
    params = draw(_PARAMS)
    query = "?" + "&".join(f"{k}={v}" for k, v in params) if params else ""
    fragment = "#" + draw(st.text(alphabet="abc-1/?", max_size=5)) if draw(st.booleans()) else ""
    return f"{scheme}://{host}{port}{path}{query}{fragment}"


@given(urls())
def test_canonical_url_is_idempotent_on_web_addresses(url: str) -> None:
    once = canonical_url(url)

    assert canonical_url(once) == once


@given(urls(), st.sampled_from(["utm_source=news", "gclid=Cj0KCQ", "fbclid=IwAR3"]))
def test_tracking_fragment_and_host_case_do_not_change_the_identity(url: str, tracker: str) -> None:
    base, _, _ = url.partition("#")
    scheme, _, rest = base.partition("://")
    host = re.split(r"[/?]", rest, maxsplit=1)[0]
    variant = f"{scheme}://{host.upper()}{rest[len(host) :]}"
    variant += ("&" if "?" in variant else "?") + tracker + "#frag"

    assert canonical_url(variant) == canonical_url(url)


# --- dedupe ---------------------------------------------------------------------------------------


def _evidence(title: str, url: str, rank: int = 0) -> Evidence:
    return Evidence(title=title, url=url, snippet=f"about {title}", rank=rank)


def test_dedupe_keeps_the_first_of_each_page_and_renumbers() -> None:
    results = [
        _evidence("guide", "https://Example.org/guide/?utm_source=mail", rank=1),
        _evidence("other", "https://example.org/other", rank=2),
        _evidence("guide via ad", "https://example.org/guide?gclid=1", rank=3),
        _evidence("guide anchor", "https://example.org:443/guide#install", rank=4),
        _evidence("guide page 2", "https://example.org/guide?page=2", rank=5),
        _evidence("other slash", "https://example.org/other/", rank=6),
    ]

    kept = dedupe(results)

    assert [(e.rank, e.title) for e in kept] == [(1, "guide"), (2, "other"), (3, "guide page 2")]
    assert kept[0].url == "https://Example.org/guide/?utm_source=mail"


def test_dedupe_of_nothing_is_nothing() -> None:
    assert dedupe([]) == []


@given(st.lists(urls(), max_size=12))
def test_dedupe_keeps_one_per_key_in_first_seen_order(addresses: list[str]) -> None:
    items = [_evidence(f"r{i}", url) for i, url in enumerate(addresses)]

    kept = dedupe(items)

    keys = [e.key for e in kept]
    assert len(keys) == len(set(keys)) == len({e.key for e in items})
    first_seen = list(dict.fromkeys(e.key for e in items))
    assert keys == first_seen
    assert [e.rank for e in kept] == list(range(1, len(kept) + 1))


def test_dedupe_of_the_same_results_gives_the_same_copies_in_a_new_list() -> None:
    # A merge of held results and new ones renumbers the new ones; merging the same objects
    # again gives the very same copies (so every episode of a query shares them), in a list
    # of its own each time. Equal results that are other objects give equal copies.
    held = [_evidence("a", "https://example.org/a", rank=1)]
    found = [_evidence("a", "https://example.org/a", rank=1), _evidence("b", "https://b.org/")]
    first = dedupe([*held, *found])
    assert [(e.title, e.url, e.rank) for e in first] == [
        ("a", "https://example.org/a", 1),
        ("b", "https://b.org/", 2),
    ]
    assert first[0] is held[0] and first[1] is not found[1]
    first.append(found[0])
    again = dedupe([*held, *found])
    assert again is not first and len(again) == 2
    assert all(x is y for x, y in zip(again, first, strict=False))
    other = dedupe(
        [_evidence("a", "https://example.org/a", rank=1), _evidence("b", "https://b.org/")]
    )
    assert other == again and other[0] is not again[0]
    # a generator is read once, as a list would be
    assert dedupe(item for item in found) == again


def test_with_rank_copies_every_field_but_the_rank() -> None:
    item = Evidence(
        "t", "https://Example.org/a/?utm_source=x", "s", "brave", 3, datetime(2025, 6, 30),
        "1 day", "example.org", "en", ("more",),
    )  # fmt: skip
    copy = item.with_rank(7)
    for name in (f.name for f in dataclasses.fields(Evidence)):
        assert getattr(copy, name) == (7 if name == "rank" else getattr(item, name)), name
    assert copy == dataclasses.replace(item, rank=7)


def test_evidence_to_dict_writes_page_age_as_iso() -> None:
    item = Evidence("t", "https://example.org/", "s", page_age=datetime(2025, 6, 30, 5, 41))

    assert item.to_dict()["page_age"] == "2025-06-30T05:41:00"
    assert Evidence("t", "https://example.org/", "s").to_dict()["page_age"] is None


# --- validate_query -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "query is empty"),
        (" \n\t ", "query is empty"),
        ("x" * 401, "401 characters; Brave allows at most 400"),
        (" ".join(["w"] * 51), "51 words; Brave allows at most 50"),
    ],
)
def test_validate_query_refuses(query: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        validate_query(query)


def test_validate_query_strips_and_accepts_the_limits() -> None:
    assert validate_query("  rocchio feedback \n") == "rocchio feedback"
    assert validate_query("x" * 400) == "x" * 400
    assert validate_query(" ".join(["w"] * 50)) == " ".join(["w"] * 50)


_ENTITY_SOUP = st.lists(
    st.sampled_from(
        ["&amp;", "&lt;", "&gt;", "&quot;", "&#x27;", "&#39;", "&amp;lt;", "&nbsp;", "&ampx",
         "&", ";", "amp;", "lt", "#x27;", "&#x", "a", " ", "<strong>", "</strong>", "é"]
    )
).map("".join)  # fmt: skip


@given(_ENTITY_SOUP)
@example("&amp;lt;b&amp;gt; &#x27;x&#x27; &quot;")
@example("&&lt;gt;")
def test_normalize_text_unescapes_as_html_unescape_does(raw: str) -> None:
    """Its fast path for html.escape's five entities against html.unescape itself."""
    stripped = raw.replace("<strong>", "").replace("</strong>", "")
    assert normalize_text(raw) == " ".join(html.unescape(stripped).split())
