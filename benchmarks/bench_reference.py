"""Benchmark: ``rocchio_sweep``'s run beside an independent reference of it, timed in one
session, and how many of the run's rankings and scores the reference reproduces.

    python benchmarks/bench_reference.py [--queries N] [--workers 1,2] [--query-set cacm]
                                         [--run-dir DIR]

The reference is written from the docs (docs/concepts/episodes.rst, controls.rst,
evaluation.rst, users.rst, sweeps.rst) and the contracts in the docstrings, in plain numpy,
with the measures from pytrec_eval (trec_eval itself). It reads the collection
(``collections/<query set>/queries.jsonl``, ``qrels.tsv``), the recorded Brave answers
(``cassettes/<query set>/<query id>.json``) and the sweep's settings (``conf/``) itself.
Two parts of the package stand in for the web, as they do in the run
(``replay.on_miss=simulate``): its collection reader and its Brave simulator answer the
searches no cassette holds (the deeper pages and round 2's refined queries). Nothing else
is imported: the analyzer, TF-IDF Rocchio, the lexical refiner, the users, the shuffled
control, the episode's rounds and stages, the modes and their cuts are the reference's own.

It covers the whole sweep on Cranfield (or on CACM, ``--query-set cacm``, against the run
with ``query_set=cacm``): every query, both users (oracle, noisy), every (alpha, beta,
gamma) of the grid, rounds 0 to 2, every stage (``initial``, ``control``, ``shuffled``,
``rerank``, ``expand``, ``deep_initial``, ``deep_control``) in the modes ``full``,
``residual`` and ``frozen``, on every measure of ``conf/eval/default.yaml``. It does not
cover other rankers, refiners, users or query sets, nor pins at positions other than 1..p
(it stops, saying so).

The run (``python -m evidence_bench run +experiment=rocchio_sweep``, a fresh process,
report included, as a user types it) is timed with ``workers=1`` and ``workers=2``, the
reference in this process before and after the runs (the faster of the two is compared, so
load that comes and goes makes the ratio larger, not smaller); issue 27's target is the
run within 2.0x of the reference. Wall and CPU times on a shared machine, printed beside
its load.
"""

from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import html
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import numpy.typing as npt
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Brave's limits on a query: a query is cut to them, a refined query keeps them.
MAX_QUERY_CHARS, MAX_QUERY_WORDS = 400, 50
#: The shipped query sets the reference reads: ``collections/NAME``, ``cassettes/NAME``.
QUERY_SETS = ("cranfield", "cacm")
TARGET = 2.0

# --- the analyzer (engine/text.py's contract: lowercase, letter-or-digit runs, stop words,
# --- at least 2 characters, Snowball's English stemmer) --------------------------------------

#: The analyzer's stop words, as engine/text.py lists them (data, not code: a reference must
#: drop the same words to rank alike).
_STOP_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not of off on once only or other our ours out over
    own same she should so some such than that the their theirs them then there these they
    this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
_TOKEN = re.compile(r"[^\W_]+")


def _stemmer() -> object:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


_STEM = _stemmer()
_STEMS: dict[str, str] = {}


def _stem(token: str) -> str:
    stem = _STEMS.get(token)
    if stem is None:
        stem = _STEMS[token] = str(_STEM.stemWord(token))  # type: ignore[attr-defined]
    return stem


@functools.lru_cache(maxsize=1 << 16)
def analyze(text: str) -> tuple[str, ...]:
    """The terms of ``text`` in order, repeats kept (remembered: a sweep meets each result's
    text many times)."""
    return tuple(
        _stem(token)
        for token in _TOKEN.findall(text.lower())
        if len(token) >= 2 and token not in STOP_WORDS
    )


# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One replayed result: its document, address and the text a ranker scores."""

    doc_id: str
    url: str
    text: str


def load_queries(collection: Path) -> dict[str, str]:
    """Query id -> the query as sent, in the file's order, queries with a relevant judgment
    only: a text past Brave's limits cut to them on a word boundary
    (docs/tutorials/beir.rst)."""
    relevant = {qid for qid, grades in load_qrels(collection).items() if max(grades.values()) > 0}
    queries = {}
    for line in (collection / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["_id"] in relevant:
                words = row["text"].split()[:MAX_QUERY_WORDS]
                while len(" ".join(words)) > MAX_QUERY_CHARS:
                    words.pop()
                queries[row["_id"]] = " ".join(words)
    return queries


def load_qrels(collection: Path) -> dict[str, dict[str, int]]:
    """Query id -> doc id -> grade."""
    qrels: dict[str, dict[str, int]] = {}
    lines = (collection / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        if line.strip():
            query_id, doc_id, grade = line.split("\t")
            qrels.setdefault(query_id, {})[doc_id] = int(grade)
    return qrels


def _plain(value: str) -> str:
    """Brave's highlighting and entities removed, white space collapsed."""
    value = re.sub(r"</?strong>", "", value)
    return " ".join(html.unescape(value).split())


def _results(answer: Mapping[str, object]) -> list[Result]:
    """A Brave answer's results, in its order."""
    web = answer.get("web")
    items = web.get("results", []) if isinstance(web, dict) else []
    found = []
    for item in items:
        url = item["url"].strip()
        text = f"{_plain(item['title'])} {_plain(item.get('description') or '')}"
        found.append(Result(doc_of(url), url, text))
    return found


def _deduped(results: Iterable[Result]) -> list[Result]:
    """The first result per address, in order."""
    kept: dict[str, Result] = {}
    for item in results:
        kept.setdefault(item.url, item)
    return list(kept.values())


class Provider:
    """Brave's search for one query's session: answers from the query's cassette, and a
    request no cassette holds from the package's Brave simulator (the run's ``replay.on_miss
    = simulate``: the one part of the package the reference asks, as the run asks it, for
    the searches it never recorded)."""

    def __init__(self, cassette: Path, simulator: object) -> None:
        recorded = json.loads(cassette.read_text(encoding="utf-8"))
        self.recorded: dict[tuple[str, str, str], str] = {}
        for interaction in recorded["interactions"]:
            asked = parse_qs(urlsplit(interaction["request"]["uri"]).query)
            key = (asked["q"][0], asked["count"][0], asked.get("offset", ["0"])[0])
            self.recorded.setdefault(key, interaction["response"]["body"]["string"])
        self.simulator = simulator
        self.searches: dict[tuple[str, int], list[Result]] = {}
        self.counts = Counter[str]()

    def _page(self, query: str, count: int, offset: int) -> Mapping[str, object]:
        body = self.recorded.get((query, str(count), str(offset)))
        if body is not None:
            self.counts["replayed"] += 1
            answer: Mapping[str, object] = json.loads(body)
            return answer
        self.counts["simulated"] += 1
        params = {"q": query, "count": str(count), "offset": str(offset)}
        asked = self.simulator.handle(  # type: ignore[attr-defined]
            "GET", "/res/v1/web/search", params, {"X-Subscription-Token": "reference"}
        )
        if asked.status != 200:
            raise SystemExit(f"the simulator refused {params}: {asked.status} {asked.body[:200]!r}")
        answer = json.loads(asked.body)
        return answer

    def search(self, query: str, limit: int) -> list[Result]:
        """Up to ``limit`` results, one per address: pages of ``min(limit, 20)`` (Brave's
        ``offset`` is a page number, 0-9) while fewer are held and Brave says there are more
        (a full page where it does not say)."""
        query = query.strip()
        known = self.searches.get((query, limit))
        if known is not None:
            return known
        count = min(limit, 20)
        found: list[Result] = []
        for offset in range(10):
            answer = self._page(query, count, offset)
            page = _results(answer)
            found = _deduped([*found, *page])
            about = answer.get("query")
            more = about.get("more_results_available") if isinstance(about, dict) else None
            if more is None:
                more = len(page) >= count
            if len(found) >= limit or not page or not more:
                break
        self.searches[(query, limit)] = found[:limit]
        return found[:limit]


def sweep_grid() -> list[tuple[float, float, float]]:
    """The sweep's (alpha, beta, gamma) points, alpha slowest, gamma fastest."""
    conf = yaml.safe_load((ROOT / "conf/experiment/rocchio_sweep.yaml").read_text())
    grid = conf["experiment"]["grid"]
    return [
        (float(a), float(b), float(g))
        for a in grid["alpha"]
        for b in grid["beta"]
        for g in grid["gamma"]
    ]


# --- the ranker: TF-IDF cosine with Rocchio's update (Rocchio 1971) ---------------------------


def tfidf(
    texts: Sequence[str], query: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The candidates' L2-normalized tf-idf rows and the query's vector in their space.

    tf is ``1 + ln tf`` (Salton & Buckley 1988), idf ``ln((N + 1) / (df + 1)) + 1`` over the
    candidates (scikit-learn's smooth idf); the query keeps only the candidates' terms."""
    counts = [Counter(analyze(text)) for text in texts]
    vocabulary = {term: i for i, term in enumerate(sorted(set().union(*counts)))}
    tf = np.zeros((len(texts), len(vocabulary)))
    for d, counted in enumerate(counts):
        for term, count in counted.items():
            tf[d, vocabulary[term]] = count
    df = (tf > 0).sum(axis=0)
    idf = np.log((len(texts) + 1) / (df + 1)) + 1.0
    docs = np.where(tf > 0, 1.0 + np.log(np.where(tf > 0, tf, 1.0)), 0.0) * idf
    norms = np.linalg.norm(docs, axis=1, keepdims=True)
    docs = np.divide(docs, norms, out=np.zeros_like(docs), where=norms > 0)
    q = np.zeros(len(vocabulary))
    for term, count in Counter(analyze(query)).items():
        if term in vocabulary:
            q[vocabulary[term]] = (1.0 + math.log(count)) * idf[vocabulary[term]]
    norm = np.linalg.norm(q)
    return docs, (q / norm if norm > 0 else q)


def rocchio_orders(
    docs: npt.NDArray[np.float64],
    q: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    pull: list[int],
    push: list[int],
) -> list[list[int]]:
    """For each (alpha, beta, gamma) row of ``weights``: the candidates by cos(q', d), rounded
    to 12 digits, descending, ties in the candidates' order.

    q' = alpha q + beta mean(pull) - gamma mean(push), negative weights set to 0 (Salton &
    Buckley 1990); a q' of nothing scores every candidate 0."""
    width = docs.shape[1]
    rel = docs[pull].mean(axis=0) if pull else np.zeros(width)
    irr = docs[push].mean(axis=0) if push else np.zeros(width)
    modified = np.maximum(np.outer(weights[:, 0], q) + np.outer(weights[:, 1], rel)
                          - np.outer(weights[:, 2], irr), 0.0)  # fmt: skip
    norms = np.linalg.norm(modified, axis=1, keepdims=True)
    scores = np.divide(modified @ docs.T, norms, out=np.zeros((len(weights), len(docs))),
                       where=norms > 0)  # fmt: skip
    return [
        sorted(range(len(docs)), key=lambda d: (-round(float(row[d]), 12), d)) for row in scores
    ]


# --- the users (docs/concepts/users.rst) and the shuffled control (controls.rst) --------------

PULL, PUSH = {"more", "relevant"}, {"less", "irrelevant"}


def _random(*parts: str | int) -> random.Random:
    """The documented derivation: SHA-256 of the JSON list of ``parts``, its first 8 bytes
    big-endian as the seed."""
    digest = hashlib.sha256(json.dumps(list(parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def oracle_label(grade: int | None) -> str:
    if grade is None or grade <= 0:
        return "irrelevant"
    return "more" if grade >= 2 else "relevant"


def noisy_label(grade: int | None, *, seed: int, query_id: str, round_: int, url: str) -> str:
    p = 0.8 if grade is not None and grade > 0 else 0.1
    return "relevant" if _random(seed, query_id, round_, url).random() < p else "irrelevant"


def shuffled(
    labels: Mapping[str, str], *, seed: int, policy: str, query_id: str, round_: int
) -> dict[str, str]:
    """The labels dealt at random over the examined documents (here all marked)."""
    keys = sorted(labels)
    order = list(range(len(keys)))
    _random(seed, policy, query_id, round_).shuffle(order)
    return {key: labels[keys[at]] for key, at in zip(keys, order, strict=True)}


# --- the refiner (the lexical one: engine/refiner.py's contract) ------------------------------


def refine(query: str, pool: Sequence[Result], labels: Mapping[str, str], max_terms: int) -> str:
    """``query`` with up to ``max_terms`` terms of the positively marked results added.

    A term scores its tf summed over the pulled results times its idf over the candidates
    (as the ranker's); it is eligible where that tf exceeds its tf in the pushed results and
    the query does not hold it; by score (12 digits), descending, ties alphabetically; sent
    as its most frequent word in the pulled results (ties alphabetically); a word that would
    break Brave's limits is skipped."""
    query = query.strip()
    pull = [item for item in pool if labels.get(item.url) in PULL]
    if not pull:
        return query
    push = [item for item in pool if labels.get(item.url) in PUSH]
    counts = {item.url: Counter(analyze(item.text)) for item in pool}
    df = Counter(term for counted in counts.values() for term in counted)
    positive = Counter[str]()
    for item in pull:
        positive.update(counts[item.url])
    negative = Counter[str]()
    for item in push:
        negative.update(counts[item.url])
    own = set(analyze(query))
    scored = [
        (term, tf * (math.log((len(pool) + 1) / (df[term] + 1)) + 1.0))
        for term, tf in positive.items()
        if tf > negative[term] and term not in own
    ]
    scored.sort(key=lambda pair: (-round(pair[1], 12), pair[0]))
    words: dict[str, Counter[str]] = {}
    for item in pull:
        for token in _TOKEN.findall(item.text.lower()):
            if len(token) >= 2 and token not in STOP_WORDS:
                words.setdefault(_stem(token), Counter())[token] += 1
    chars, length, added = len(query), len(query.split()), list[str]()
    for term, _ in scored:
        if len(added) == max_terms:
            break
        word = min(words[term].items(), key=lambda pair: (-pair[1], pair[0]))[0]
        if chars + 1 + len(word) > MAX_QUERY_CHARS or length + 1 > MAX_QUERY_WORDS:
            continue
        added.append(word)
        chars, length = chars + 1 + len(word), length + 1
    return f"{query} {' '.join(added)}" if added else query


# --- one query's episodes (docs/concepts/episodes.rst, controls.rst) ---------------------------


@dataclass
class State:
    """A user's state after a round: the documents examined, at the positions they were
    first shown at, and the last label of each (by address)."""

    pinned: dict[str, int]
    labels: dict[str, str]


def frozen_order(ranking: Sequence[str], pinned: Mapping[str, int]) -> list[str]:
    """The pinned addresses at their positions 1..p, then the others in ``ranking``'s order
    (full freezing, Chang, Cirillo & Razon 1971); pins at other positions are not covered."""
    ordered = sorted(pinned, key=pinned.__getitem__)
    if [pinned[key] for key in ordered] != list(range(1, len(pinned) + 1)):
        raise SystemExit(f"pins at {sorted(pinned.values())}, not 1..p: not covered")
    return [*ordered, *[key for key in ranking if key not in pinned]]


#: (round, stage) -> the ranked results, per episode
Stages = dict[tuple[int, str], Sequence[Result]]


#: A ranking asked for: the candidates, the labels, the (alpha, beta, gamma)
Asked = tuple[Sequence[Result], Mapping[str, str], tuple[float, float, float]]


class Query:
    """One query's session parts: its provider, tf-idf spaces, refined queries and
    rankings, each computed once for every episode that asks for the same (the configs of a
    sweep share most of them), the rankings of one candidate list and labels in one numpy
    product for every (alpha, beta, gamma) asked at once."""

    def __init__(self, query_id: str, query: str, provider: Provider, depth: int) -> None:
        self.query_id, self.query, self.provider = query_id, query, provider
        self.page = provider.search(query, depth)
        self.spaces: dict[tuple[tuple[str, str], ...], tuple[npt.NDArray[np.float64], ...]] = {}
        self.orders: dict[tuple[object, ...], list[Result]] = {}
        self.refined: dict[tuple[object, ...], str] = {}

    def refine(self, pool: Sequence[Result], labels: Mapping[str, str], max_terms: int) -> str:
        """:func:`refine` of the query, remembered per candidates and labels."""
        key = (_content(pool), frozenset(labels.items()))
        found = self.refined.get(key)
        if found is None:
            found = self.refined[key] = refine(self.query, pool, labels, max_terms)
        return found

    def rank(self, asked: Sequence[Asked]) -> list[list[Result]]:
        """Each asked candidate list by TF-IDF Rocchio under its weights with its labels."""
        keys = [(_content(pool), frozenset(labels.items()), w) for pool, labels, w in asked]
        missing: dict[tuple[object, ...], tuple[Asked, list[tuple[float, float, float]]]] = {}
        for key, one in zip(keys, asked, strict=True):
            if key not in self.orders:
                rows = missing.setdefault(key[:2], (one, []))[1]
                if one[2] not in rows:
                    rows.append(one[2])
        for (content, marks), ((pool, labels, _), rows) in missing.items():
            space = self.spaces.get(content)  # type: ignore[call-overload]
            if space is None:
                space = self.spaces[content] = tfidf([item.text for item in pool], self.query)  # type: ignore[index]
            docs, q = space
            pull = [d for d, item in enumerate(pool) if labels.get(item.url) in PULL]
            push = [d for d, item in enumerate(pool) if labels.get(item.url) in PUSH]
            orders = rocchio_orders(docs, q, np.array(rows), pull, push)
            for weights, order in zip(rows, orders, strict=True):
                self.orders[(content, marks, weights)] = [pool[d] for d in order]
        return [self.orders[key] for key in keys]


def _content(pool: Sequence[Result]) -> tuple[tuple[str, str], ...]:
    """What a ranking of ``pool`` depends on: its addresses and texts, in order (by text
    too: a document's snippet depends on the search that brought it)."""
    return tuple((item.url, item.text) for item in pool)


def judge(
    session: Query, grades: Mapping[str, int], policy: str, displayed: Sequence[Result],
    state: State, round_: int, seed: int, depth: int,
) -> State:  # fmt: skip
    """The user's round: the displayed list held in the frozen frame, its first ``depth``
    results not examined before each examined and labeled."""
    shown = frozen_order([item.url for item in displayed], state.pinned)
    pinned, labels = dict(state.pinned), dict(state.labels)
    fresh = [(at, url) for at, url in enumerate(shown, 1) if url not in state.pinned][:depth]
    for position, url in fresh:
        grade = grades.get(doc_of(url))
        if policy == "oracle":
            labels[url] = oracle_label(grade)
        else:
            query_id = session.query_id
            labels[url] = noisy_label(grade, seed=seed, query_id=query_id, round_=round_, url=url)
        pinned[url] = position
    return State(pinned, labels)


@functools.lru_cache(maxsize=1 << 16)
def doc_of(url: str) -> str:
    """The document a collection's address serves (``https://<host>/doc/<id>``)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def episodes(
    session: Query,
    grades: Mapping[str, int],
    policy: str,
    grid: Sequence[tuple[float, float, float]],
    *,
    rounds: int,
    depth: int,
    deep: Sequence[Result],
    seed: int,
    max_terms: int,
    user_depth: int,
) -> list[tuple[Stages, list[State]]]:
    """One user's episode with each (alpha, beta, gamma) of ``grid``, round by round: every
    stage's ranking, and the user's state after each round (round 0: nothing examined)."""
    controls = [(1.0, 0.0, 0.0) if weights[0] > 0 else weights for weights in grid]
    n = len(grid)
    page = list(session.page)
    pools, displayed = [page] * n, [page] * n
    states = [[State({}, {})] for _ in grid]
    stages: list[Stages] = [{(0, "initial"): page} for _ in grid]
    for c, ranked in enumerate(session.rank([(page, {}, w) for w in controls])):
        stages[c][(0, "control")] = ranked
    source = deep if len(deep) >= len(page) else page
    for round_ in range(1, rounds + 1):
        judged: dict[tuple[object, ...], tuple[State, dict[str, str]]] = {}
        dealt: list[dict[str, str]] = []
        for c in range(n):
            before = states[c][-1]
            key = (tuple(item.url for item in displayed[c]), frozenset(before.pinned.items()))
            if key not in judged:
                after = judge(
                    session, grades, policy, displayed[c], before, round_, seed, user_depth
                )
                deal = shuffled(
                    after.labels, seed=seed, policy=policy, query_id=session.query_id,
                    round_=round_,
                )  # fmt: skip
                judged[key] = (after, deal)
            states[c].append(judged[key][0])
            dealt.append(judged[key][1])
        labels = [states[c][-1].labels for c in range(n)]
        asked: dict[str, list[Asked]] = {
            "control": [(pools[c], {}, controls[c]) for c in range(n)],
            "shuffled": [(pools[c], dealt[c], grid[c]) for c in range(n)],
            "rerank": [(pools[c], labels[c], grid[c]) for c in range(n)],
        }
        for stage, wanted in asked.items():
            for c, ranked in enumerate(session.rank(wanted)):
                stages[c][(round_, stage)] = ranked
        for c in range(n):
            stages[c][(round_, "initial")] = source[: len(pools[c])]
            refined = session.refine(pools[c], labels[c], max_terms)
            held = {item.url for item in pools[c]}
            found = session.provider.search(refined, depth)
            pools[c] = [*pools[c], *[item for item in found if item.url not in held]]
        expanded = session.rank([(pools[c], labels[c], grid[c]) for c in range(n)])
        deep_control = session.rank([(deep[: len(pools[c])], {}, controls[c]) for c in range(n)])
        for c in range(n):
            displayed[c] = stages[c][(round_, "expand")] = expanded[c]
            stages[c][(round_, "deep_initial")] = list(deep[: len(pools[c])])
            stages[c][(round_, "deep_control")] = deep_control[c]
    return list(zip(stages, states, strict=True))


#: Each control stage and the feedback stage it is cut to the length of.
PARTNERS = {"initial": "rerank", "control": "rerank", "shuffled": "rerank",
            "deep_initial": "expand", "deep_control": "expand"}  # fmt: skip


def scored_lists(
    stages: Stages, states: Sequence[State], grades: Mapping[str, int]
) -> dict[tuple[int, str, str], tuple[list[str], dict[str, int]]]:
    """(round, stage, mode) -> the list scored (doc ids) and its judgments: as it is
    (``full``), without the documents examined up to the round (``residual``: on judgments
    without them, left out where nothing relevant is left), with them at their positions
    (``frozen``); a control cut to its feedback stage's length in each mode."""
    scored: dict[tuple[int, str, str], tuple[list[str], dict[str, int]]] = {}
    for (round_, stage), ranked in stages.items():
        state = states[round_]
        ids = [item.doc_id for item in ranked]
        examined = {doc_of(url) for url in state.pinned}
        partner = stages.get((round_, PARTNERS.get(stage, stage)), ranked)
        other = [item.doc_id for item in partner]
        full = ids[: len(other)]
        rest = [doc for doc in ids if doc not in examined]
        rest = rest[: len([doc for doc in other if doc not in examined])]
        residual = {doc: g for doc, g in grades.items() if doc not in examined}
        pins = frozen_order([], state.pinned)
        by_id = [doc_of(url) for url in pins]
        scored[(round_, stage, "full")] = (full, dict(grades))
        if any(g > 0 for g in residual.values()):
            scored[(round_, stage, "residual")] = (rest, residual)
        scored[(round_, stage, "frozen")] = ([*by_id, *rest], dict(grades))
    return scored


# --- measures (pytrec_eval: trec_eval's own code) ----------------------------------------------

MEASURES = {"nDCG@10": "ndcg_cut_10", "P@10": "P_10", "R@20": "recall_20", "AP": "map",
            "RR": "recip_rank"}  # fmt: skip


def evaluate(
    lists: Mapping[str, tuple[list[str], Mapping[str, int]]],
) -> dict[str, dict[str, float]]:
    """Each named (ranking, qrels) pair's measures; a pair whose qrels hold nothing relevant
    is left out (as the run leaves such a query out of its means)."""
    import pytrec_eval

    qrels = {
        name: dict(grades)
        for name, (_, grades) in lists.items()
        if any(g > 0 for g in grades.values())
    }
    run = {
        name: {doc: float(len(ranking) - r) for r, doc in enumerate(ranking)}
        for name, (ranking, _) in lists.items()
        if name in qrels
    }
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "P.10", "recall.20", "map",
                                                       "recip_rank"})  # fmt: skip
    found: dict[str, dict[str, float]] = evaluator.evaluate(run)
    for name in run.keys() - found.keys():  # an empty ranking: trec_eval scores nothing
        found[name] = dict.fromkeys(MEASURES.values(), 0.0)
    return found


#: (config_id, policy, query_id, round, stage, eval_mode, measure) -> value
Scores = dict[tuple[str, str, str, int, str, str, str], float]
#: (config_id, policy, query_id, round, stage) -> the documents' addresses in ranked order
#: (the full mode's list)
Ranked = dict[tuple[str, str, str, int, str], list[str]]


@dataclass
class Reference:
    """The reference's scores and rankings, and its time by part (seconds)."""

    scores: Scores
    rankings: Ranked
    times: dict[str, float]


def _setting(path: str, *keys: str) -> object:
    found: object = yaml.safe_load((ROOT / "conf" / path).read_text(encoding="utf-8"))
    for key in keys:
        assert isinstance(found, dict)
        found = found[key]
    return found


#: ``experiment.depth``'s default: results of the first search and of each expand.
DEPTH = 20


def reference(
    queries: int | None = None, *, query_set: str = "cranfield", seed: int = 0
) -> Reference:
    """The reference for the first ``queries`` judged queries (all: None) of ``query_set``
    (one of :data:`QUERY_SETS`)."""
    from evidence_bench.collections.beir import load_collection
    from evidence_bench.web.simulator import BraveSimulator

    times: dict[str, float] = {}
    start = time.perf_counter()
    collection = ROOT / "collections" / query_set
    texts = load_queries(collection)
    qrels = load_qrels(collection)
    chosen = list(texts)[:queries]
    grid = sweep_grid()
    rounds = int(_setting("experiment/rocchio_sweep.yaml", "experiment", "rounds"))  # type: ignore[call-overload]
    max_terms = int(_setting("refiner/lexical.yaml", "max_terms"))  # type: ignore[call-overload]
    user_depth = int(_setting("policy/oracle.yaml", "depth"))  # type: ignore[call-overload]
    if user_depth != _setting("policy/noisy.yaml", "depth"):
        raise SystemExit("the oracle and the noisy user examine to different depths")
    simulator = BraveSimulator(load_collection(collection))
    times["read"] = time.perf_counter() - start
    start = time.perf_counter()
    ranked: Ranked = {}
    lists: dict[tuple[object, ...], tuple[list[str], dict[str, int]]] = {}
    keys: dict[tuple[object, ...], list[tuple[str, str, str, int, str, str]]] = {}
    for qid in chosen:
        provider = Provider(ROOT / "cassettes" / query_set / f"{qid}.json", simulator)
        session = Query(qid, texts[qid], provider, DEPTH)
        deep = provider.search(texts[qid], min(DEPTH + rounds * DEPTH, 200))
        for policy in ("oracle", "noisy"):
            played = episodes(
                session, qrels[qid], policy, grid, rounds=rounds, depth=DEPTH, deep=deep,
                seed=seed, max_terms=max_terms, user_depth=user_depth,
            )  # fmt: skip
            for c, (stages, states) in enumerate(played):
                config = f"c{c:02d}"
                for (round_, stage), items in stages.items():
                    ranked[(config, policy, qid, round_, stage)] = [item.url for item in items]
                for (round_, stage, mode), (listed, judged) in scored_lists(
                    stages, states, qrels[qid]
                ).items():
                    examined = frozenset(states[round_].pinned) if mode == "residual" else None
                    name = (qid, examined, tuple(listed))
                    lists.setdefault(name, (listed, judged))
                    keys.setdefault(name, []).append((config, policy, qid, round_, stage, mode))
    times["episodes"] = time.perf_counter() - start
    start = time.perf_counter()
    numbered = {f"q{n}": name for n, name in enumerate(lists)}
    values = evaluate({number: lists[name] for number, name in numbered.items()})
    scores: Scores = {}
    for number, measured in values.items():
        for key in keys[numbered[number]]:
            for measure, trec in MEASURES.items():
                scores[(*key, measure)] = measured[trec]
    times["evaluate"] = time.perf_counter() - start
    return Reference(scores, ranked, times)


# --- the run, and the comparison ---------------------------------------------------------------


def harness_run(
    runs_dir: Path, workers: int, queries: int | None, query_set: str
) -> tuple[float, Path]:
    """``python -m evidence_bench run +experiment=rocchio_sweep``: its wall time and run dir."""
    command = [sys.executable, "-m", "evidence_bench", "run", "+experiment=rocchio_sweep",
               f"query_set={query_set}", f"workers={workers}", f"runs_dir={runs_dir}",
               "progress=false"]  # fmt: skip
    if queries is not None:
        command.append(f"experiment.queries={queries}")
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    (run_dir,) = [p for p in (runs_dir / "rocchio_sweep").iterdir() if p.name != "latest"]
    return wall, run_dir


#: The stages the reference covers, in every round.
COVERED = ["initial", "control", "shuffled", "rerank", "expand", "deep_initial", "deep_control"]


def _config_ids(run_dir: Path) -> dict[str, str]:
    """The run's config ids -> the grid's (``c00`` .. in the yaml's order), by their weights."""
    grid = {point: f"c{i:02d}" for i, point in enumerate(sweep_grid())}
    with open(run_dir / "configs.csv", newline="", encoding="utf-8") as handle:
        return {
            row["config_id"]: grid[(float(row["alpha"]), float(row["beta"]), float(row["gamma"]))]
            for row in csv.DictReader(handle)
        }


def harness_rankings(run_dir: Path) -> Ranked:
    """The run's rankings of the covered stages (``runs.parquet``, ``rankings.parquet``)."""
    import pandas as pd

    rename = _config_ids(run_dir)
    runs = pd.read_parquet(run_dir / "runs.parquet")
    runs = runs[runs["stage"].isin(COVERED)]
    items = pd.read_parquet(run_dir / "rankings.parquet")["items"].tolist()
    return {
        (rename[c], p, q, int(r), s): list(items[k])
        for c, p, q, r, s, k in zip(
            runs["config_id"], runs["policy"], runs["query_id"], runs["round"], runs["stage"],
            runs["ranking"], strict=True,
        )
    }  # fmt: skip


def harness_scores(run_dir: Path) -> tuple[Scores, int]:
    """The run's scores (``scores.parquet``) of the covered stages, configs renamed to the
    grid's order, and how many scores the run has in all."""
    import pandas as pd

    rename = _config_ids(run_dir)
    table = pd.read_parquet(run_dir / "scores.parquet")
    total = len(table)
    table = table[table["stage"].isin(COVERED)]
    return {
        (rename[c], p, q, int(r), s, m, name): float(v)
        for c, p, q, r, s, m, name, v in zip(
            table["config_id"], table["policy"], table["query_id"], table["round"],
            table["stage"], table["eval_mode"], table["measure"], table["value"], strict=True,
        )
    }, total  # fmt: skip


#: Significant digits the run stores a per-query value with (``%.10g``).
STORED_DIGITS = 10


def stored(value: float) -> float:
    """``value`` as the run stores it."""
    return float(f"{value:.{STORED_DIGITS}g}")


@dataclass
class Agreement:
    exact: int = 0  # equal to the reference's value as the run stores it (%.10g)
    close: int = 0  # within 1e-9 of it, not exact
    differ: int = 0
    only_run: int = 0
    only_reference: int = 0


def compare(run: Scores, ref: Scores) -> tuple[Agreement, list[tuple[object, ...]]]:
    """How many scores agree exactly (at the stored digits) and to 1e-9, and the first
    disagreements."""
    found = Agreement(
        only_run=len(run.keys() - ref.keys()), only_reference=len(ref.keys() - run.keys())
    )
    worst: list[tuple[object, ...]] = []
    for key in run.keys() & ref.keys():
        a, b = run[key], ref[key]
        if a == stored(b):
            found.exact += 1
        elif abs(a - b) <= 1e-9:
            found.close += 1
        else:
            found.differ += 1
            worst.append((*key, a, b))
    return found, sorted(worst, key=lambda row: str(row))[:20]


def _groups(keys: Iterable[tuple[str, str, str, int, str, str, str]]) -> int:
    return len({(k[0], k[2], k[4]) for k in keys})


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def _timed_reference(queries: int | None, query_set: str) -> tuple[Reference, float, float]:
    """The reference, its wall and CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = reference(queries, query_set=query_set)
    return found, time.perf_counter() - wall, time.process_time() - cpu


def _ratio(name: str, run: float, ref: float, whole: bool) -> str:
    verdict = ("met" if run / ref <= TARGET else "NOT met") if whole else "an upper bound"
    return f"{name} {run:.2f} s = {run / ref:.2f}x the reference's ({verdict})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, help="the first N judged queries (default: all)")
    parser.add_argument("--workers", default="1,2", help="the run's worker counts (default 1,2)")
    parser.add_argument("--query-set", choices=QUERY_SETS, default="cranfield")
    parser.add_argument("--run-dir", type=Path, help="compare with this run instead of timing one")
    args = parser.parse_args()
    print(f"start: {load()}")
    # the reference before and after the runs: the faster of the two is the one compared,
    # so load that comes and goes makes the ratio larger, not smaller
    ref, ref_wall, ref_cpu = _timed_reference(args.queries, args.query_set)
    runs: dict[int, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        run_dir = args.run_dir
        if run_dir is None:
            for workers in [int(w) for w in args.workers.split(",")]:
                cpu = _children_cpu()
                wall, run_dir = harness_run(
                    Path(tmp) / f"w{workers}", workers, args.queries, args.query_set
                )
                manifest = json.loads((run_dir / "manifest.json").read_text())
                runs[workers] = (wall, _children_cpu() - cpu, float(manifest["episodes_time_s"]))
                print(f"run workers={workers} done: {load()}")
        assert run_dir is not None
        (run_scores, total), run_rankings = harness_scores(run_dir), harness_rankings(run_dir)
    again, wall2, cpu2 = _timed_reference(args.queries, args.query_set)
    print(f"end:   {load()}")
    print()
    print(f"reference (in this process): {ref_wall:.2f} s, then {wall2:.2f} s wall; "
          f"CPU {ref_cpu:.2f} s, then {cpu2:.2f} s (" + ", ".join(
              f"{name} {t:.2f} s" for name, t in ref.times.items()) + ")")  # fmt: skip
    ref_wall, ref_cpu = min(ref_wall, wall2), min(ref_cpu, cpu2)
    whole = len(run_scores) == total
    print(f"the reference computes {len(run_scores)} of the run's {total} scores "
          f"({len(run_scores) / total:.0%})" + ("" if whole else ": each ratio below is an upper "
          "bound on the run's against a reference of all its work, not a verdict"))  # fmt: skip
    for workers, (wall, cpu, episodes) in runs.items():
        print(f"run workers={workers} (a fresh process, report included), target <= {TARGET}x:")
        print(f"  {_ratio('wall', wall, ref_wall, whole)}; {_ratio('CPU', cpu, ref_cpu, whole)}")
        print("  its episodes (manifest's episodes_time_s): "
              + _ratio("wall", episodes, ref_wall, whole))  # fmt: skip
    print()
    print("covered: the whole sweep: rounds 0-2, every stage, user and grid point, the modes")
    print("  full, residual and frozen, measures " + ", ".join(MEASURES))
    same = sum(again.rankings.get(key) == ranking for key, ranking in ref.rankings.items())
    print(
        f"reference deterministic: {same} of {len(ref.rankings)} rankings equal in its two passes"
    )
    both = run_rankings.keys() & ref.rankings.keys()
    equal = sum(run_rankings[key] == ref.rankings[key] for key in both)
    print(f"rankings (config, user, query, round, stage): {len(both)} compared, {equal} identical;"
          f" only in the run {len(run_rankings.keys() - both)}, only in the reference "
          f"{len(ref.rankings.keys() - both)}")  # fmt: skip
    for key in sorted(key for key in both if run_rankings[key] != ref.rankings[key])[:10]:
        print(f"  ranking differs: {key}: run {run_rankings[key]} reference {ref.rankings[key]}")
    agreement, differing = compare(run_scores, ref.scores)
    common = run_scores.keys() & ref.scores.keys()
    print(f"scores (x mode x measure): {len(common)} compared, in "
          f"{_groups(common)} (query, config, stage) groups")  # fmt: skip
    print(f"  exact (as stored, %.{STORED_DIGITS}g): {agreement.exact}; within 1e-9 only: "
          f"{agreement.close}; differ: {agreement.differ}")  # fmt: skip
    print(f"  only in the run: {agreement.only_run}; only in the reference: "
          f"{agreement.only_reference}")  # fmt: skip
    for row in differing:
        print("  score differs:", row)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
