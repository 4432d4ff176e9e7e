"""BraveProvider and fetch_evidence against a fake Brave (httpx.MockTransport), no network."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import httpx
import pytest

from evidence_bench.api import fetch_evidence
from evidence_bench.engine.base import Feedback, SearchProvider
from evidence_bench.errors import (
    ConfigurationError,
    ProviderStatusError,
    QueryError,
    RateLimitError,
    RequestError,
    ResponseFormatError,
)
from evidence_bench.evidence import Evidence
from evidence_bench.web import BraveProvider, RetryPolicy
from tests.brave_bodies import (
    RATE_LIMIT_HEADERS,
    brave_body,
    brave_error,
    brave_result,
    brave_results,
)

KEY = "BSAq7Zt3-test-subscription-key-9f8e7d"
Answer = httpx.Response | Exception
Respond = Callable[[httpx.Request], httpx.Response]


class FakeBrave:
    """A MockTransport router that records each request and answers with ``respond``."""

    def __init__(self, respond: Respond) -> None:
        self.requests: list[httpx.Request] = []
        self._respond = respond
        self.client = httpx.Client(transport=httpx.MockTransport(self._handle))

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self._respond(request)

    @property
    def offsets(self) -> list[str]:
        return [request.url.params["offset"] for request in self.requests]


def ok(body: object, **headers: str) -> httpx.Response:
    return httpx.Response(200, json=body, headers={**RATE_LIMIT_HEADERS, **headers})


def answers(*items: Answer) -> Respond:
    """Answer the requests in turn; an exception item is raised, as a transport would."""
    queue = list(items)

    def respond(request: httpx.Request) -> httpx.Response:
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    return respond


def pages(*bodies: dict[str, Any]) -> Respond:
    """Answer by the ``offset`` page number: ``bodies[offset]``."""
    return lambda request: ok(bodies[int(request.url.params["offset"])])


@pytest.fixture(autouse=True)
def _no_brave_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_SEARCH_API_KEY", raising=False)
    monkeypatch.delenv("BRAVE_SEARCH_BASE_URL", raising=False)


@pytest.fixture
def fake() -> Iterator[Callable[[Respond], FakeBrave]]:
    made: list[FakeBrave] = []

    def make(respond: Respond) -> FakeBrave:
        made.append(FakeBrave(respond))
        return made[-1]

    yield make
    for brave in made:
        brave.client.close()


@pytest.fixture
def waits() -> list[float]:
    """The seconds the provider asked to sleep, in order (no real sleeping)."""
    return []


@pytest.fixture
def provider(waits: list[float]) -> Callable[..., BraveProvider]:
    def make(brave: FakeBrave, **kwargs: Any) -> BraveProvider:
        return BraveProvider(KEY, http_client=brave.client, sleep=waits.append, **kwargs)

    return make


NYT = brave_result(
    "The New York Times - Breaking News, US News &amp; World News",
    "https://www.nytimes.com/",
    "Live news by The <strong>New</strong> <strong>York</strong> <strong>Times</strong> with "
    "investigations,\n analysis &amp; the world&#39;s   news.",
    extra_snippets=["Today&#39;s <strong>paper</strong>", "  ", "Opinion &amp; analysis"],
    deep_results={"buttons": [{"type": "button_result", "title": "Games", "url": "https://x"}]},
    schemas=[["Organization", {"name": "NYT"}]],
    some_future_key={"nested": [1, 2, 3]},
)
WIKI = brave_result(
    "Relevance feedback - Wikipedia",
    "https://en.wikipedia.org/wiki/Relevance_feedback",
    "Rocchio&#39;s algorithm moves the query vector towards relevant documents.",
    page_age="2024-02-11T17:20:33",
    age="1 year ago",
    language="de",
    subtype="article",
)


# --- the request ----------------------------------------------------------------------------


def test_request_has_brave_path_params_and_headers(fake, provider) -> None:
    brave = fake(answers(ok(brave_body([NYT]))))
    provider(brave).search("  rocchio  feedback ", limit=7)

    [request] = brave.requests
    assert request.method == "GET"
    assert str(request.url.copy_with(query=None)) == (
        "https://api.search.brave.com/res/v1/web/search"
    )
    assert request.url.params.multi_items() == [
        ("q", "rocchio  feedback"),
        ("count", "7"),
        ("offset", "0"),
    ]
    assert request.headers["X-Subscription-Token"] == KEY
    assert request.headers["Accept"] == "application/json"
    assert request.headers["Accept-Encoding"] == "gzip"


@pytest.mark.parametrize(
    "query",
    ["a+b & c=d", "100% #1?", "café — 日本 😀", "x/y:z;@!$'()*,[]~", 'tab\tquote" <b>'],
)
def test_request_url_is_the_one_httpx_builds_from_the_params(fake, provider, query) -> None:
    brave = fake(answers(ok(brave_body([NYT]))))
    provider(brave, params={"country": "d e"}).search(query, limit=5)

    [request] = brave.requests
    params = {"q": query, "count": "5", "offset": "0", "country": "d e"}
    expected = httpx.Request("GET", "https://api.search.brave.com/res/v1/web/search", params=params)
    assert request.url.raw_path == expected.url.raw_path
    assert request.url.params.multi_items() == list(params.items())


def test_a_client_with_params_of_its_own_still_adds_them(provider) -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=brave_body([NYT]))

    client = httpx.Client(transport=httpx.MockTransport(handle), params={"ui_lang": "en-US"})
    BraveProvider(KEY, http_client=client).search("news", limit=3)

    assert seen[0].url.params.multi_items() == [
        ("ui_lang", "en-US"),
        ("q", "news"),
        ("count", "3"),
        ("offset", "0"),
    ]


def test_extra_snippets_and_params_follow_the_providers_own(fake, provider) -> None:
    brave = fake(answers(ok(brave_body([NYT]))))
    provider(brave, extra_snippets=True, params={"country": "us", "safesearch": "off"}).search(
        "news"
    )

    assert brave.requests[0].url.params.multi_items() == [
        ("q", "news"),
        ("count", "10"),
        ("offset", "0"),
        ("extra_snippets", "true"),
        ("country", "us"),
        ("safesearch", "off"),
    ]


def test_key_and_base_url_come_from_the_environment(fake, monkeypatch) -> None:
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", KEY)
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", "http://127.0.0.1:8765/res/v1/")
    brave = fake(answers(ok(brave_body([NYT]))))
    BraveProvider(http_client=brave.client).search("news")

    [request] = brave.requests
    assert str(request.url.copy_with(query=None)) == "http://127.0.0.1:8765/res/v1/web/search"
    assert request.headers["X-Subscription-Token"] == KEY


def test_arguments_win_over_the_environment(fake, monkeypatch) -> None:
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "env-key-should-lose")
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", "http://127.0.0.1:1/env")
    brave = fake(answers(ok(brave_body([NYT]))))
    BraveProvider(KEY, base_url="http://127.0.0.1:2/arg", http_client=brave.client).search("x")

    assert brave.requests[0].url.host == "127.0.0.1"
    assert brave.requests[0].url.port == 2
    assert brave.requests[0].headers["X-Subscription-Token"] == KEY


def test_gzip_encoded_answer_is_decoded(fake, provider) -> None:
    raw = gzip.compress(json.dumps(brave_body([WIKI])).encode())
    brave = fake(answers(httpx.Response(200, content=raw, headers={"Content-Encoding": "gzip"})))

    [result] = provider(brave).search("rocchio")

    assert result.url == "https://en.wikipedia.org/wiki/Relevance_feedback"


# --- parsing ----------------------------------------------------------------------------------


def test_results_are_normalized_evidence_in_brave_order(fake, provider) -> None:
    brave = fake(answers(ok(brave_body([NYT, WIKI]))))
    nyt, wiki = provider(brave).search("news")

    assert nyt == Evidence(
        title="The New York Times - Breaking News, US News & World News",
        url="https://www.nytimes.com/",
        snippet="Live news by The New York Times with investigations, analysis & the world's news.",
        source="brave",
        rank=1,
        page_age=datetime(2025, 6, 30, 5, 41),
        age="June 30, 2025",
        domain="www.nytimes.com",
        language="en",
        extra_snippets=("Today's paper", "Opinion & analysis"),
    )
    assert wiki.rank == 2
    assert wiki.snippet == "Rocchio's algorithm moves the query vector towards relevant documents."
    assert wiki.page_age == datetime(2024, 2, 11, 17, 20, 33)
    assert (wiki.age, wiki.language, wiki.extra_snippets) == ("1 year ago", "de", ())


@pytest.mark.parametrize(
    ("page_age", "expected"),
    [
        ("2025-06-30T05:41:00", datetime(2025, 6, 30, 5, 41)),
        ("2025-06-30", datetime(2025, 6, 30)),
        ("2025-06-30T07:41:00+02:00", datetime(2025, 6, 30, 5, 41)),
        ("last Tuesday", None),
        ("", None),
        (None, None),
    ],
)
def test_page_age_is_parsed_or_none(fake, provider, page_age, expected) -> None:
    item = brave_result("T", "https://example.org/a", "d", page_age=page_age)
    brave = fake(answers(ok(brave_body([item]))))

    assert provider(brave).search("x")[0].page_age == expected


def test_domain_falls_back_to_the_url_host_without_meta_url(fake, provider) -> None:
    item = brave_result("T", "https://Docs.Example.org:8443/a", "d", meta_url=None)
    brave = fake(answers(ok(brave_body([item]))))

    assert provider(brave).search("x")[0].domain == "docs.example.org"


def test_minimal_result_gets_defaults(fake, provider) -> None:
    item = {"title": "Bare", "url": "https://example.org/bare"}
    brave = fake(answers(ok({"type": "search", "web": {"type": "search", "results": [item]}})))

    [result] = provider(brave).search("x")

    assert (result.snippet, result.age, result.language, result.page_age) == ("", "", "", None)
    assert result.domain == "example.org"


def test_no_web_key_means_no_results(fake, provider) -> None:
    brave = fake(answers(ok(brave_body(None))))

    assert provider(brave).search("zzqxv nothing matches", limit=45) == []
    assert len(brave.requests) == 1


def test_provider_satisfies_the_search_provider_protocol(fake, provider) -> None:
    assert isinstance(provider(fake(answers())), SearchProvider)


# --- pagination -------------------------------------------------------------------------------


def test_limit_45_fetches_three_pages_by_page_number(fake, provider) -> None:
    brave = fake(
        pages(*(brave_body(brave_results(20, start=20 * page), more=True) for page in range(10)))
    )

    results = provider(brave).search("documents", limit=45)

    assert brave.offsets == ["0", "1", "2"]
    assert [request.url.params["count"] for request in brave.requests] == ["20", "20", "20"]
    assert [item.url for item in results] == [f"https://example.org/doc/{n}" for n in range(45)]
    assert [item.rank for item in results] == list(range(1, 46))


def test_pagination_stops_when_brave_has_no_more_results(fake, provider) -> None:
    brave = fake(
        pages(
            brave_body(brave_results(20), more=True),
            brave_body(brave_results(7, start=20), more=False),
        )
    )

    results = provider(brave).search("documents", limit=45)

    assert brave.offsets == ["0", "1"]
    assert len(results) == 27


def test_pagination_stops_after_offset_9(fake, provider) -> None:
    brave = fake(
        pages(*(brave_body(brave_results(20, start=20 * page), more=True) for page in range(10)))
    )

    results = provider(brave).search("documents", limit=500)

    assert brave.offsets == [str(page) for page in range(10)]
    assert len(results) == 200


def test_limit_at_most_20_sends_one_request(fake, provider) -> None:
    brave = fake(pages(brave_body(brave_results(20), more=True)))

    results = provider(brave).search("documents", limit=20)

    assert brave.offsets == ["0"]
    assert len(results) == 20


def test_missing_more_flag_continues_only_after_a_full_page(fake, provider) -> None:
    full = brave_body(brave_results(20), more=True)
    del full["query"]
    short = brave_body(brave_results(3, start=20))
    del short["query"]
    brave = fake(pages(full, short))

    assert len(provider(brave).search("documents", limit=45)) == 23
    assert brave.offsets == ["0", "1"]


# --- dedup --------------------------------------------------------------------------------------

VARIANTS = [
    "https://Example.org/guide/?utm_source=news&utm_medium=email",
    "https://example.org/guide?gclid=abc123",
    "https://example.org/guide?fbclid=xyz",
    "https://example.org/guide#install",
    "https://example.org:443/guide",
    "https://EXAMPLE.ORG/guide",
    "https://example.org/guide/",
]


def test_url_variants_of_one_page_collapse_to_the_first(fake, provider) -> None:
    items = [brave_result(f"Variant {i}", url, "d") for i, url in enumerate(VARIANTS)]
    items.insert(3, brave_result("Other", "https://example.org/other", "d"))
    items.append(brave_result("Kept query", "https://example.org/guide?page=2", "d"))
    brave = fake(answers(ok(brave_body(items))))

    results = provider(brave).search("guide")

    assert [(r.rank, r.title, r.url) for r in results] == [
        (1, "Variant 0", VARIANTS[0]),
        (2, "Other", "https://example.org/other"),
        (3, "Kept query", "https://example.org/guide?page=2"),
    ]


def test_duplicates_do_not_count_towards_the_limit(fake, provider) -> None:
    first = [
        brave_result("A", "https://example.org/a", "d"),
        brave_result("A again", "https://example.org/a?utm_campaign=x", "d"),
        brave_result("B", "https://example.org/b", "d"),
    ]
    second = [
        brave_result("B again", "https://example.org/b#top", "d"),
        brave_result("C", "https://example.org/c", "d"),
        brave_result("D", "https://example.org/d", "d"),
    ]
    brave = fake(pages(brave_body(first, more=True), brave_body(second, more=True)))

    results = provider(brave).search("letters", limit=3)

    assert brave.offsets == ["0", "1"]
    assert [r.title for r in results] == ["A", "B", "C"]
    assert [r.rank for r in results] == [1, 2, 3]


# --- errors -------------------------------------------------------------------------------------


def test_missing_key_fails_before_any_request(fake) -> None:
    brave = fake(answers(ok(brave_body([NYT]))))

    with pytest.raises(ConfigurationError, match="BRAVE_SEARCH_API_KEY"):
        BraveProvider(http_client=brave.client)
    with pytest.raises(ConfigurationError, match="BRAVE_SEARCH_API_KEY"):
        BraveProvider("   ", http_client=brave.client)
    assert brave.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "api.search.brave.com/res/v1"}, "not an http"),
        ({"base_url": "ftp://api.search.brave.com"}, "not an http"),
        ({"timeout": 0}, "timeout"),
        ({"params": {"q": "other", "count": "5"}}, "params may not set q, count"),
    ],
)
def test_invalid_settings_fail_at_construction(fake, provider, kwargs, message) -> None:
    brave = fake(answers())

    with pytest.raises(ConfigurationError, match=message):
        provider(brave, **kwargs)


@pytest.mark.parametrize(
    ("attempts", "backoff", "max_wait"), [(0, 0.5, 30.0), (3, -1.0, 30.0), (3, 0.5, -1.0)]
)
def test_invalid_retry_policy(attempts, backoff, max_wait) -> None:
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        RetryPolicy(attempts=attempts, backoff=backoff, max_wait=max_wait)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            422,
            brave_error(
                422,
                "VALIDATION",
                "Unable to validate request parameter(s)",
                errors=[
                    {
                        "type": "missing",
                        "loc": ["header", "x-subscription-token"],
                        "msg": "Field required",
                    }
                ],
            ),
        ),
        (
            422,
            brave_error(
                422,
                "SUBSCRIPTION_TOKEN_INVALID",
                "The provided subscription token is invalid.",
                component="authentication",
            ),
        ),
        (404, brave_error(404, "SUBSCRIPTION_NOT_FOUND", "Subscription not found.")),
        (
            400,
            brave_error(400, "OPTION_NOT_IN_PLAN", "The option is not subscribed in the plan."),
        ),
    ],
)
def test_client_errors_carry_brave_code_and_are_not_retried(
    fake, provider, waits, status, body
) -> None:
    brave = fake(answers(httpx.Response(status, json=body)))

    with pytest.raises(ProviderStatusError) as caught:
        provider(brave).search("news")

    error = caught.value
    assert not isinstance(error, RateLimitError)
    assert (error.status, error.code) == (status, body["error"]["code"])
    assert error.detail is not None and error.detail.startswith(body["error"]["detail"])
    assert body["error"]["code"] in str(error)
    assert "\n" not in str(error)
    if body["error"]["code"].startswith("SUBSCRIPTION"):  # the user's key is at fault
        assert "check BRAVE_SEARCH_API_KEY" in str(error)
    for problem in body["error"]["meta"].get("errors", []):  # which parameter, and why
        assert f"{'.'.join(problem['loc'])}: {problem['msg']}" in str(error)
    assert error.url == "https://api.search.brave.com/res/v1/web/search"
    assert len(brave.requests) == 1
    assert waits == []
    assert KEY not in str(error)


def test_status_without_error_body_has_no_code(fake, provider) -> None:
    html = httpx.Response(403, text="<html>Forbidden by proxy</html>")
    brave = fake(answers(html))

    with pytest.raises(ProviderStatusError) as caught:
        provider(brave).search("news")

    assert (caught.value.status, caught.value.code, caught.value.detail) == (403, None, None)


def test_server_error_is_retried_with_backoff_then_raised(fake, provider, waits) -> None:
    failure = brave_error(500, "INTERNAL", "Internal server error")
    brave = fake(answers(*(httpx.Response(500, json=failure) for _ in range(3))))

    with pytest.raises(ProviderStatusError) as caught:
        provider(brave).search("news")

    assert caught.value.status == 500
    assert caught.value.code == "INTERNAL"
    assert len(brave.requests) == 3
    assert waits == [0.5, 1.0]


def test_backoff_is_capped_by_max_wait(fake, provider, waits) -> None:
    brave = fake(answers(*(httpx.Response(503) for _ in range(4)), ok(brave_body([NYT]))))

    results = provider(brave, retry=RetryPolicy(attempts=5, backoff=1.0, max_wait=3.0)).search(
        "news"
    )

    assert len(results) == 1
    assert waits == [1.0, 2.0, 3.0, 3.0]


def test_rate_limit_waits_for_the_reset_then_succeeds(fake, provider, waits) -> None:
    limited = httpx.Response(
        429,
        json=brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan"),
        headers={"X-RateLimit-Reset": "2, 1419704", "X-RateLimit-Remaining": "0, 1000"},
    )
    brave = fake(answers(limited, ok(brave_body([NYT]))))

    results = provider(brave).search("news")

    assert [r.url for r in results] == ["https://www.nytimes.com/"]
    assert waits == [2.0]
    assert brave.offsets == ["0", "0"]


def test_rate_limit_reset_beyond_max_wait_gives_up_at_once(fake, provider, waits) -> None:
    quota = httpx.Response(
        429,
        json=brave_error(429, "QUOTA_LIMITED", "Request quota limit exceeded for plan"),
        headers={"X-RateLimit-Reset": "1419704, 1419704"},
    )
    brave = fake(answers(quota))

    with pytest.raises(RateLimitError) as caught:
        provider(brave, retry=RetryPolicy(max_wait=30.0)).search("news")

    assert caught.value.retry_after == 1419704.0
    assert caught.value.code == "QUOTA_LIMITED"
    assert len(brave.requests) == 1
    assert waits == []


def test_rate_limit_that_persists_raises_after_the_attempts(fake, provider, waits) -> None:
    def limited() -> httpx.Response:
        return httpx.Response(
            429,
            json=brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan"),
            headers={"X-RateLimit-Reset": "1, 1419704"},
        )

    brave = fake(answers(limited(), limited(), limited()))

    with pytest.raises(RateLimitError) as caught:
        provider(brave).search("news")

    assert caught.value.retry_after == 1.0
    assert waits == [1.0, 1.0]
    assert len(brave.requests) == 3


def test_rate_limit_without_reset_header_backs_off(fake, provider, waits) -> None:
    brave = fake(answers(httpx.Response(429), ok(brave_body([NYT]))))

    assert len(provider(brave).search("news")) == 1
    assert waits == [0.5]


def test_timeout_becomes_request_error_after_retries(fake, provider, waits) -> None:
    brave = fake(answers(*(httpx.ReadTimeout("timed out") for _ in range(3))))

    with pytest.raises(RequestError) as caught:
        provider(brave).search("news")

    assert type(caught.value) is RequestError
    assert str(caught.value) == (
        "could not reach Brave at https://api.search.brave.com/res/v1: ReadTimeout: timed out"
    )
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert waits == [0.5, 1.0]


def test_one_attempt_policy_does_not_retry(fake, provider, waits) -> None:
    brave = fake(answers(httpx.ConnectError("connection refused")))

    with pytest.raises(RequestError, match="connection refused"):
        provider(brave, retry=RetryPolicy(attempts=1)).search("news")

    assert len(brave.requests) == 1
    assert waits == []


def test_transport_error_text_never_shows_the_key(fake, provider) -> None:
    brave = fake(answers(httpx.ProxyError(f"proxy rejected header token {KEY}")))

    with pytest.raises(RequestError) as caught:
        provider(brave, retry=RetryPolicy(attempts=1)).search("news")

    assert KEY not in str(caught.value)
    assert "REDACTED-API-KEY" in str(caught.value)


def test_key_is_masked_in_repr(fake, provider) -> None:
    text = repr(provider(fake(answers())))

    assert KEY not in text
    assert KEY[:8] not in text
    assert text.startswith("BraveProvider(api_key='****'")


def test_body_that_is_not_json(fake, provider) -> None:
    page = httpx.Response(
        200, text="<html>captive portal</html>", headers={"Content-Type": "text/html"}
    )
    brave = fake(answers(page))

    with pytest.raises(ResponseFormatError, match=r"not JSON \(text/html\)"):
        provider(brave).search("news")


def test_body_that_is_not_an_object(fake, provider) -> None:
    brave = fake(answers(ok([brave_result("T", "https://example.org/", "d")])))

    with pytest.raises(ResponseFormatError, match="is a JSON array, expected a JSON object"):
        provider(brave).search("news")


def _results_body(*items: Any) -> dict[str, Any]:
    return brave_body(list(items))


GOOD = brave_result("Good", "https://example.org/good", "fine")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "search", "web": [GOOD]}, "web is a JSON array"),
        ({"type": "search", "web": {"results": {"0": GOOD}}}, "web.results is a JSON object"),
        (_results_body(GOOD, "https://example.org/"), r"web.results\[1\] is a JSON string"),
        (
            _results_body(GOOD, GOOD, GOOD, {k: v for k, v in GOOD.items() if k != "url"}),
            r"web.results\[3\].url missing",
        ),
        (_results_body(brave_result("T", "   ")), r"web.results\[0\].url is empty"),
        (_results_body({**GOOD, "url": 42}), r"web.results\[0\].url is a JSON number"),
        (_results_body({**GOOD, "title": 7}), r"web.results\[0\].title is a JSON number"),
        (_results_body({**GOOD, "title": None}), r"web.results\[0\].title missing"),
        (
            _results_body({**GOOD, "description": ["a"]}),
            r"web.results\[0\].description is a JSON array, expected a JSON string",
        ),
        (
            _results_body({**GOOD, "extra_snippets": ["ok", 3]}),
            r"web.results\[0\].extra_snippets\[1\] is a JSON number",
        ),
        (
            _results_body({**GOOD, "meta_url": {"hostname": 5}}),
            r"web.results\[0\].meta_url.hostname is a JSON number",
        ),
        # falsy values of the wrong type (the quick read of a result must not let them by)
        (
            _results_body({**GOOD, "extra_snippets": ""}),
            r"web.results\[0\].extra_snippets is a JSON string, expected a JSON array",
        ),
        (
            _results_body({**GOOD, "meta_url": []}),
            r"web.results\[0\].meta_url is a JSON array, expected a JSON object",
        ),
        (
            _results_body({**GOOD, "page_age": 0}),
            r"web.results\[0\].page_age is a JSON number, expected a JSON string",
        ),
        (
            _results_body({**GOOD, "language": False}),
            r"web.results\[0\].language is a JSON boolean, expected a JSON string",
        ),
        (_results_body({**GOOD, "age": {}}), r"web.results\[0\].age is a JSON object"),
        (
            {**brave_body([GOOD]), "query": {"more_results_available": "yes"}},
            "query.more_results_available is a JSON string, expected a JSON boolean",
        ),
    ],
)
def test_wrong_shape_names_the_field(fake, provider, body, field) -> None:
    brave = fake(answers(ok(body)))

    with pytest.raises(ResponseFormatError, match=field) as caught:
        provider(brave).search("news")

    assert "offset 0" in str(caught.value)


# --- query validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "limit", "message"),
    [
        ("", 10, "query is empty"),
        ("   \t", 10, "query is empty"),
        ("x" * 401, 10, "401 characters"),
        (" ".join(["w"] * 51), 10, "51 words"),
        ("fine query", 0, "limit must be at least 1"),
    ],
)
def test_invalid_query_sends_no_request(fake, provider, query, limit, message) -> None:
    brave = fake(answers(ok(brave_body([NYT]))))

    with pytest.raises(QueryError, match=message):
        provider(brave).search(query, limit=limit)

    assert brave.requests == []


def test_query_at_the_limits_is_sent(fake, provider) -> None:
    brave = fake(answers(ok(brave_body([NYT])), ok(brave_body([NYT]))))
    search = provider(brave).search

    search("x" * 400)
    search(" ".join(["w"] * 50))

    assert len(brave.requests) == 2


# --- fetch_evidence ---------------------------------------------------------------------------


class ReverseRanker:
    """A stand-in ranker that reverses the candidates and records what it was given."""

    name = "reverse"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Evidence], Feedback]] = []

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        self.calls.append((query, list(candidates), dict(feedback)))
        return [replace(e, rank=i) for i, e in enumerate(reversed(candidates), start=1)]


def test_fetch_evidence_without_ranker_keeps_brave_order(fake) -> None:
    brave = fake(answers(ok(brave_body([NYT, WIKI]))))

    results = fetch_evidence("news", limit=5, api_key=KEY, http_client=brave.client)

    assert [(r.rank, r.domain) for r in results] == [
        (1, "www.nytimes.com"),
        (2, "en.wikipedia.org"),
    ]
    assert brave.requests[0].url.params["count"] == "5"


def test_fetch_evidence_with_ranker_returns_its_order(fake) -> None:
    brave = fake(answers(ok(brave_body([NYT, WIKI]))))
    ranker = ReverseRanker()

    results = fetch_evidence("news", api_key=KEY, http_client=brave.client, ranker=ranker)

    assert [(r.rank, r.domain) for r in results] == [
        (1, "en.wikipedia.org"),
        (2, "www.nytimes.com"),
    ]
    [(query, candidates, feedback)] = ranker.calls
    assert query == "news"
    assert [c.domain for c in candidates] == ["www.nytimes.com", "en.wikipedia.org"]
    assert feedback == {}


def test_fetch_evidence_opens_and_closes_its_own_client(monkeypatch) -> None:
    seen: list[httpx.Request] = []
    made: list[httpx.Client] = []
    real_client = httpx.Client

    def client(**kwargs: Any) -> httpx.Client:
        def handle(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return ok(brave_body([WIKI]))

        kwargs.pop("transport", None)
        made.append(real_client(transport=httpx.MockTransport(handle), **kwargs))
        return made[-1]

    monkeypatch.setattr(httpx, "Client", client)
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", KEY)

    results = fetch_evidence("rocchio", base_url="http://127.0.0.1:9/res/v1")

    assert [r.domain for r in results] == ["en.wikipedia.org"]
    assert len(seen) == 1
    assert seen[0].url.path == "/res/v1/web/search"
    assert len(made) == 1
    assert made[0].is_closed
    assert made[0].timeout.read == 10.0


def test_fetch_evidence_without_key_fails_before_any_request(monkeypatch) -> None:
    made: list[object] = []
    monkeypatch.setattr(httpx, "Client", lambda **kwargs: made.append(kwargs))

    with pytest.raises(ConfigurationError, match="BRAVE_SEARCH_API_KEY"):
        fetch_evidence("news")

    assert made == []


def test_quota_exhausted_is_not_retried(fake, provider, waits) -> None:
    body = brave_error(429, "QUOTA_LIMITED", "Request quota limit exceeded for plan")
    brave = fake(answers(httpx.Response(429, json=body, headers={"X-RateLimit-Reset": "1, 9"})))
    with pytest.raises(RateLimitError):
        provider(brave).search("news")
    assert len(brave.requests) == 1 and waits == []


@pytest.mark.parametrize("key", ["sec\nret", "secé", "two words"])
def test_a_key_no_header_can_carry_is_refused_without_echoing_it(key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        BraveProvider(key)
    assert key not in str(caught.value) and "BRAVE_SEARCH_API_KEY" in str(caught.value)


def test_an_unparseable_base_url_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="is not an http"):
        BraveProvider("k", base_url="http://[::1/res/v1")
