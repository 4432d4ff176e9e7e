"""LiveFetch-style ranking: relevance, freshness and source trust, with redundancy penalized
(:class:`LiveFetchRanker`). What depends only on the candidate set (similarities, base
relevance, host lookups) is cached: an experiment reranks the same candidates under many
feedback states.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from evidence_bench.engine.base import Feedback
from evidence_bench.engine.params import TIE_DIGITS, require_weights, scale_free
from evidence_bench.engine.ranking import marked_positions
from evidence_bench.engine.text import Analyzer, term_counts, tokenize
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence, renumber

if TYPE_CHECKING:
    import tldextract

__all__ = [
    "DEFAULT_TRUST", "LiveFetchRanker", "ScoreBreakdown", "ScoreRow", "domain_list", "domain_tier",
]  # fmt: skip

#: Public suffix (or registered domain) -> trust prior in [0, 1]. Judgment, not learned:
#: government, education and international bodies above the 0.5 default, .org a little.
DEFAULT_TRUST: tuple[tuple[str, float], ...] = (
    ("gov", 0.9), ("edu", 0.85), ("org", 0.7), ("int", 0.8), ("mil", 0.85), ("ac.uk", 0.85),
    ("gov.uk", 0.9), ("nhs.uk", 0.85), ("edu.au", 0.85), ("gov.au", 0.9), ("ac.jp", 0.85),
    ("go.jp", 0.9), ("gc.ca", 0.9), ("ac.nz", 0.85), ("govt.nz", 0.9),
)  # fmt: skip

_SECONDS_PER_DAY = 86400.0


class ScoreBreakdown(NamedTuple):
    """A result's score components, each in [0, 1]: relevance, freshness, trust and
    redundancy (D as it was when the result was placed)."""

    R: float
    F: float
    T: float
    D: float


class ScoreRow(NamedTuple):
    """One ranked result: its URL, its score S and the components S is made of."""

    url: str
    score: float
    breakdown: ScoreBreakdown

    def record(self) -> dict[str, Any]:
        """``url``, ``R``, ``F``, ``T``, ``D`` and ``S``, as an episode's record stores them."""
        return {"url": self.url, **self.breakdown._asdict(), "S": self.score}


# --- hosts and the public suffix list ------------------------------------------------------


@functools.cache
def _extractor() -> tldextract.TLDExtract:
    """Built once, on first use, on the bundled suffix list: nothing downloaded, no cache."""
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def _host(item: Evidence) -> str:
    """``Evidence.domain`` if set, else the URL's host; lowercase, no port, no final dot."""
    raw = item.domain.strip() or item.url.strip()
    if "/" in raw or ":" in raw:
        try:
            raw = urlsplit(raw if "//" in raw else f"//{raw}").hostname or ""
        except ValueError:
            raw = ""
    return raw.lower().rstrip(".")


@functools.lru_cache(maxsize=1 << 14)
def _trust_keys(host: str) -> tuple[str, ...]:
    """Table keys to try for a host, longest first: registered domain, then the public
    suffix and its shorter tails (``ox.ac.uk``, ``ac.uk``, ``uk``). A host without a public
    suffix (``localhost``, an IP, ``*.test``) has none and gets the default prior."""
    parts = _extractor()(host)
    if not parts.suffix:
        return ()
    labels = [parts.domain, *parts.suffix.split(".")] if parts.domain else parts.suffix.split(".")
    return tuple(".".join(labels[i:]) for i in range(len(labels)))


@functools.lru_cache(maxsize=64)
def _table(trust: tuple[tuple[str, float], ...]) -> dict[str, float]:
    """The trust table as a dict (callers must not mutate it)."""
    return dict(trust)


def _on_list(host: str, entries: tuple[str, ...]) -> bool:
    """An entry names a host and everything under it, on label boundaries: ``nasa.gov``
    matches ``www.nasa.gov`` but not ``notnasa.gov``; ``gov`` matches every .gov host."""
    return any(host == entry or host.endswith(f".{entry}") for entry in entries)


def domain_tier(host: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> int:
    """0 admitted, 1 not on a non-empty ``allow`` list, 2 on the ``deny`` list (an entry
    covers its subdomains)."""
    if deny and _on_list(host, deny):
        return 2
    if allow and not _on_list(host, allow):
        return 1
    return 0


def _clean_domain(entry: str) -> str:
    return entry.strip().lower().strip(".")


def domain_list(name: str, entries: str | Iterable[str]) -> tuple[str, ...]:
    """``entries`` (one domain or several) lowercased, without outer dots; an empty one is
    a ConfigurationError naming ``name``."""
    cleaned = tuple(
        _clean_domain(str(entry)) for entry in ([entries] if isinstance(entries, str) else entries)
    )
    if not all(cleaned):
        raise ConfigurationError(f"{name} holds an empty domain: {cleaned!r}")
    return cleaned


# --- text similarity and relevance ---------------------------------------------------------


def _unit(analyzer: Analyzer, text: str) -> dict[int, float]:
    """``text``'s raw term counts (:func:`term_counts`, by term number), L2-normalized."""
    numbers, counts = term_counts(analyzer, text).tolist()
    norm = math.sqrt(sum(tf * tf for tf in counts))
    return {term: tf / norm for term, tf in zip(numbers, counts, strict=True)} if norm else {}


@functools.lru_cache(maxsize=512)
def _similarities(analyzer: Analyzer, texts: tuple[str, ...]) -> tuple[tuple[float, ...], ...]:
    """Pairwise cosine over raw term counts of the candidates' title and snippet; cached
    per candidate set (a sweep reranks the same set under many feedback states)."""
    vectors = [_unit(analyzer, text) for text in texts]
    n = len(vectors)
    matrix = [[0.0] * n for _ in range(n)]
    for i in range(n):
        vi = vectors[i]
        matrix[i][i] = 1.0 if vi else 0.0
        for j in range(i + 1, n):
            vj = vectors[j]
            small, large = (vi, vj) if len(vi) <= len(vj) else (vj, vi)
            value = sum(weight * large.get(term, 0.0) for term, weight in small.items())
            matrix[i][j] = matrix[j][i] = value
    return tuple(tuple(row) for row in matrix)


@functools.lru_cache(maxsize=512)
def _base_relevance(analyzer: Analyzer, query: str, texts: tuple[str, ...]) -> tuple[float, ...]:
    """R = mean of term overlap |q ∩ d| / |q| (distinct analyzer terms; 0 for a query with
    no terms) and rapidfuzz's token_set_ratio / 100 on lowercased, punctuation-free text."""
    from rapidfuzz import fuzz, utils  # here: every run imports this module before forking

    query_terms = set(analyzer(query))
    values = []
    for text in texts:
        overlap = len(query_terms & set(analyzer(text))) / len(query_terms) if query_terms else 0.0
        fuzzy = fuzz.token_set_ratio(query, text, processor=utils.default_process) / 100.0
        values.append((overlap + fuzzy) / 2.0)
    return tuple(values)


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items)


# --- dates ---------------------------------------------------------------------------------


def _naive_utc(moment: datetime) -> datetime:
    """Aware datetimes to naive UTC; naive ones (Brave's ``page_age``) are taken as UTC."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


@functools.lru_cache(maxsize=64)
def _reference_date(as_of: str) -> datetime:
    try:
        return _naive_utc(datetime.fromisoformat(as_of))
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"as_of must be an ISO-8601 date such as '2026-01-01', got {as_of!r}"
        ) from None


# --- the ranker ----------------------------------------------------------------------------


def _check_unit(name: str, value: object) -> None:
    if not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise ConfigurationError(f"{name} must be a number in [0, 1], got {value!r}")


@dataclass(frozen=True)
class LiveFetchRanker:
    """Greedy multi-factor ranking: S(d|q) = w_r·R + w_f·F + w_t·T − w_dup·D.

    * R, relevance: the mean of query-term overlap and ``fuzz.token_set_ratio / 100`` over
      title and snippet. Feedback applies Rocchio's (1971) update to it, with similarity in
      place of the vector sum: R'(d) = alpha·R(d) + beta·mean_{p∈pull} sim(d, p)
      − gamma·mean_{n∈push} sim(d, n); pull are candidates marked MORE or RELEVANT, push
      LESS or IRRELEVANT (canonical URL; UNSURE ignored). R' is divided by the largest value
      its positive part can reach, alpha + beta when some result is pulled and alpha
      otherwise, then clamped to [0, 1]; so without feedback R' = R.
    * F, freshness: 2^(−age_days / half_life_days) with age measured from ``as_of`` (an
      exponential recency prior, as in Li & Croft 2003, "Time-based language models");
      dates after ``as_of`` count as age 0; no ``page_age`` scores ``neutral_freshness``.
    * T, trust: the ``trust`` entry for the host's registered domain or the longest matching
      tail of its public suffix (``ac.uk`` before ``uk``), via tldextract's bundled list;
      else ``default_trust``. The host is ``Evidence.domain`` if set, else the URL's.
    * D, redundancy: the highest cosine (raw term counts of title and snippet) between d
      and the results already ranked. The ranking is built one result at a time, each step
      taking the highest S, as in Maximal Marginal Relevance (Carbonell & Goldstein 1998,
      "The use of MMR, diversity-based reranking..."), here with an additive penalty.

    Domain lists (entries match a host and its subdomains): with ``allow_domains`` set,
    results from other hosts come after all allowed ones; results on ``deny_domains`` come
    last, even when also allowed. Each group is ranked greedily as above (the penalty counts
    results of earlier groups), so a ranker keeps every candidate. Ties keep candidate order.
    """

    w_r: float = 0.55
    w_f: float = 0.25
    w_t: float = 0.20
    w_dup: float = 0.35
    half_life_days: float = 7.0
    as_of: str = "2026-01-01"
    neutral_freshness: float = 0.5
    trust: tuple[tuple[str, float], ...] = DEFAULT_TRUST
    default_trust: float = 0.5
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()
    alpha: float = 1.0
    beta: float = 0.75
    gamma: float = 0.15
    analyzer: Analyzer = field(default=tokenize)

    name = "livefetch"

    def __post_init__(self) -> None:
        require_weights(self, "w_r", "w_f", "w_t", "w_dup", "alpha", "beta", "gamma")
        days = self.half_life_days
        if not (isinstance(days, int | float) and math.isfinite(days) and days > 0):
            raise ConfigurationError(f"half_life_days must be a finite number > 0, got {days!r}")
        _check_unit("neutral_freshness", self.neutral_freshness)
        _check_unit("default_trust", self.default_trust)
        _reference_date(self.as_of)
        # Configs may hand over lists; tuples keep the ranker hashable (it keys caches).
        table: dict[str, float] = {}
        for entry in self.trust:
            try:
                suffix, prior = entry
            except (TypeError, ValueError):
                raise ConfigurationError(
                    f"trust entries are (suffix, prior) pairs, got {entry!r}"
                ) from None
            key = _clean_domain(str(suffix))
            _check_unit(f"trust[{suffix!r}]", prior)
            if not key or key in table:
                raise ConfigurationError(f"trust lists {suffix!r} twice or names no suffix")
            table[key] = float(prior)
        object.__setattr__(self, "trust", tuple(table.items()))
        for param in ("allow_domains", "deny_domains"):
            object.__setattr__(self, param, domain_list(param, getattr(self, param)))

    def effective_params(self) -> dict[str, Any]:
        """Every setting, (alpha, beta, gamma) in canonical form: rankers with equal
        effective params rank any candidates alike under any feedback.

        R' = (alpha·R + beta·pull − gamma·push) / (alpha + beta·[pull]) is unchanged by a
        common factor on (alpha, beta, gamma), so they are divided by alpha, or by beta where
        alpha = 0 (:func:`scale_free`); alpha = beta = 0 (R' = 0 under feedback) and w_r = 0
        (R' never reaches S) are (0, 0, 0). S's own weights are kept as given: scaling them
        scales S, whose 12-digit rounding decides ties.
        """
        rocchio: tuple[float, ...] = (0.0, 0.0, 0.0)
        if self.w_r != 0 and (self.alpha != 0 or self.beta != 0):
            rocchio = scale_free(self.alpha, self.beta, self.gamma)
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**params, **dict(zip(("alpha", "beta", "gamma"), rocchio, strict=True))}

    # -- components

    def freshness(self, page_age: datetime | None) -> float:
        """F = 2^(−age_days / half_life_days); age from ``as_of``, never the clock."""
        if page_age is None:
            return float(self.neutral_freshness)
        seconds = (_reference_date(self.as_of) - _naive_utc(page_age)).total_seconds()
        age_days = max(seconds / _SECONDS_PER_DAY, 0.0)
        return float(2.0 ** (-age_days / self.half_life_days))

    def trust_of(self, item: Evidence) -> float:
        """T: the prior of the longest table entry matching the item's host."""
        table = _table(self.trust)
        for key in _trust_keys(_host(item)):
            prior = table.get(key)
            if prior is not None:
                return prior
        return float(self.default_trust)

    def relevance(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[float]:
        """R' per candidate, in the candidates' order (R when there is no feedback)."""
        texts = tuple(item.text for item in candidates)
        base = _base_relevance(self.analyzer, query, texts)
        if not feedback:
            return list(base)
        sims = _similarities(self.analyzer, texts)
        pull, push = marked_positions([item.key for item in candidates], feedback)
        if not pull and not push:
            return list(base)
        # Rocchio (1971) on the relevance score: alpha·R + beta·mean sim(pull) −
        # gamma·mean sim(push), over the positive part's maximum, clamped to [0, 1].
        denominator = self.alpha + (self.beta if pull else 0.0)
        values = []
        for i, r in enumerate(base):
            value = self.alpha * r
            if pull:
                value += self.beta * _mean(sims[i][p] for p in pull)
            if push:
                value -= self.gamma * _mean(sims[i][n] for n in push)
            values.append(min(max(value / denominator, 0.0), 1.0) if denominator > 0 else 0.0)
        return values

    # -- ranking

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """The greedy ranking; a permutation of ``candidates`` with rank renumbered 1..n."""
        order, _ = self._select(query, candidates, feedback)
        return renumber(candidates[i] for i in order)

    def score_breakdown(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[ScoreRow]:
        """Each result's score and its components, in the final ranked order (D and S as
        they were when the result was placed)."""
        _, rows = self._select(query, candidates, feedback)
        return rows

    def _select(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> tuple[list[int], list[ScoreRow]]:
        n = len(candidates)
        if n == 0:
            return [], []
        sims = _similarities(self.analyzer, tuple(item.text for item in candidates))
        relevance = self.relevance(query, candidates, feedback)
        fresh = [self.freshness(item.page_age) for item in candidates]
        trusted = [self.trust_of(item) for item in candidates]
        hosts = [_host(item) for item in candidates]
        tiers = [domain_tier(host, self.allow_domains, self.deny_domains) for host in hosts]
        base = [
            self.w_r * relevance[i] + self.w_f * fresh[i] + self.w_t * trusted[i] for i in range(n)
        ]
        redundancy = [0.0] * n
        remaining = list(range(n))
        order: list[int] = []
        rows: list[ScoreRow] = []
        # MMR-style greedy selection (Carbonell & Goldstein 1998): at each step take
        # argmax S(d) with D(d) = max sim(d, s) over the selected s; ties by candidate order.
        while remaining:
            best = min(
                remaining,
                key=lambda i: (
                    tiers[i],
                    -round(base[i] - self.w_dup * redundancy[i], TIE_DIGITS),
                    i,
                ),
            )
            remaining.remove(best)
            order.append(best)
            rows.append(
                ScoreRow(
                    candidates[best].url,
                    base[best] - self.w_dup * redundancy[best],
                    ScoreBreakdown(relevance[best], fresh[best], trusted[best], redundancy[best]),
                )
            )
            row = sims[best]
            for i in remaining:
                if row[i] > redundancy[i]:
                    redundancy[i] = row[i]
        return order, rows
