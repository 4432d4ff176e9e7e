"""Issue 15's full-text Rocchio reference, rebuilt: what one oracle expansion round of
full-text Rocchio buys over BM25's ranks 11-20 (residual nDCG@10), on Cranfield or CACM.

    python benchmarks/bench_page_reference.py [cranfield|cacm] [--queries N]

The reference (the issue's words): BM25's top 20 for each query from the simulator's own
index (title + text, k1 = 0.9, b = 0.4); the oracle examines the top 10 (judged relevant:
pull; anything else: push, the TREC assumption); the Rocchio query

    q' = alpha * q + beta * mean(pull) - gamma * mean(push),  alpha, beta, gamma = 1, 0.75, 0.15

over SMART ``ltc`` vectors of the full text (1 + ln tf, idf ln(N / df) over the whole
collection, cosine-normalized; Rocchio 1971, Salton & Buckley 1990), Porter-stemmed, with
negative weights clamped to 0; its 4 heaviest new terms are sent with the query to BM25,
whose top 20 are merged with the 20 held; residual nDCG@10 (the 10 examined documents
removed from the ranking and the qrels, Salton & Buckley 1990) of that merged list ranked
by cos(q', d), against BM25's ranks 11-20.

The reference reads the collection (the engine, a web-search client, may not): this is a
yardstick, printed beside the variants that say which of its ingredients carries the gain:

* ``merge``: the reference as above;
* ``merge, pool idf``: the same, but idf from the merged candidates alone (the engine's
  situation: it only sees what the search engine returned);
* ``merge, pool smooth idf``: the engine's idf (``ln((N + 1) / (df + 1)) + 1``) and sublinear
  tf over the candidates, the engine's default stemmer (Snowball english);
* ``merge 40``: the expanded query fetching 40 instead of 20;
* ``first-page idf``: idf (ltc's ln(N / df)) over the first 20 results of every query of
  the collection, not the collection: the engine's ``idf=background`` sample;
* ``collection``: q' ranking the whole collection (full-text Rocchio at its most generous).

Every figure is the mean over the queries with a relevant document left after the top 10,
and the gain is mean(after) / mean(BM25's ranks 11-20) - 1, as the report's "gain over the
initial ranking" is.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evidence_bench.collections.queryset import load_query_set
from evidence_bench.engine.text import Analyzer
from evidence_bench.evaluation.measures import evaluate, parse_measure, prepare
from evidence_bench.web.bm25 import BM25Index
from evidence_bench.web.simulator import _index_for

NDCG10 = [parse_measure("nDCG@10")]
ALPHA, BETA, GAMMA = 1.0, 0.75, 0.15
TERMS = 4
DEPTH, EXAMINED = 20, 10

Vector = dict[str, float]


def normalized(vector: Vector) -> Vector:
    norm = math.sqrt(sum(w * w for w in vector.values()))
    return {t: w / norm for t, w in vector.items()} if norm else {}


def cosine(q: Vector, d: Vector) -> float:
    return sum(w * q.get(t, 0.0) for t, w in d.items())


@dataclass(frozen=True)
class Weighting:
    """How a vector is built: the analyzer, the idf and the tf transform."""

    analyzer: Analyzer
    idf: Callable[[str], float]

    def vector(self, text: str) -> Vector:
        counts = Counter(self.analyzer(text))
        return normalized({t: (1.0 + math.log(tf)) * self.idf(t) for t, tf in counts.items()})


def collection_idf(analyzer: Analyzer, texts: Sequence[str]) -> Callable[[str], float]:
    df: Counter[str] = Counter()
    for text in texts:
        df.update(set(analyzer(text)))
    n = len(texts)
    return lambda t: math.log(n / df[t]) if df[t] else 0.0


def smooth_idf(analyzer: Analyzer, texts: Sequence[str]) -> Callable[[str], float]:
    df: Counter[str] = Counter()
    for text in texts:
        df.update(set(analyzer(text)))
    n = len(texts)
    return lambda t: math.log((n + 1) / (df[t] + 1)) + 1.0


def rocchio(q: Vector, pull: Sequence[Vector], push: Sequence[Vector]) -> Vector:
    """q' = alpha q + beta mean(pull) - gamma mean(push), clamped at 0 (Rocchio 1971)."""
    out = {t: ALPHA * w for t, w in q.items()}
    for vectors, coefficient in ((pull, BETA), (push, -GAMMA)):
        for vector in vectors:
            for t, w in vector.items():
                out[t] = out.get(t, 0.0) + coefficient * w / len(vectors)
    return {t: w for t, w in out.items() if w > 0}


def surface(analyzer: Analyzer, texts: Sequence[str]) -> dict[str, str]:
    """Each stem's most frequent word in ``texts`` (ties alphabetically): BM25 reads words."""
    seen: dict[str, Counter[str]] = {}
    for text in texts:
        for term, word in analyzer.words(text):
            seen.setdefault(term, Counter())[word] += 1
    return {t: min(c.items(), key=lambda p: (-p[1], p[0]))[0] for t, c in seen.items()}


def residual(ranking: Sequence[str], grades: Mapping[str, int], examined: set[str]) -> float | None:
    left = {d: g for d, g in grades.items() if d not in examined}
    if not any(g > 0 for g in left.values()):
        return None
    keys = [d for d in ranking if d not in examined]
    return evaluate(keys, prepare(left), NDCG10)["nDCG@10"]


def expanded(
    index: BM25Index,
    texts: Mapping[str, str],
    query: str,
    top: Sequence[str],
    marks: tuple[Sequence[str], Sequence[str]],
    weighting: Weighting,
    fetch: int,
    ids: Sequence[str] | None = None,
) -> list[str]:
    """One expansion round: Rocchio over ``weighting``, its 4 heaviest new terms sent with
    the query to BM25 (``fetch`` results), merged with the held ``top``, all ranked by
    cos(q', d); ``ids``: rank these instead of the merged list."""
    pull_ids, push_ids = marks
    own = {d: weighting.vector(texts[d]) for d in top}
    moved = rocchio(weighting.vector(query), [own[d] for d in pull_ids], [own[d] for d in push_ids])
    words = surface(weighting.analyzer, [texts[d] for d in pull_ids])
    held = set(weighting.analyzer(query))
    ordered = sorted(moved.items(), key=lambda p: (-p[1], p[0]))
    terms = [words.get(t, t) for t, _ in ordered if t not in held][:TERMS]
    found = [d for d, _ in index.search(f"{query} {' '.join(terms)}", fetch)]
    pool = list(ids) if ids is not None else list(dict.fromkeys([*top, *found]))
    scored = {d: cosine(moved, own.get(d) or weighting.vector(texts[d])) for d in pool}
    position = {d: i for i, d in enumerate(pool)}
    return sorted(pool, key=lambda d: (-round(scored[d], 12), position[d]))


def run(name: str, queries: int | None) -> None:
    conf = {"name": name, "path": f"collections/{name}", "cassettes": f"cassettes/{name}"}
    query_set = load_query_set(conf, limit=queries)
    collection = query_set.collection
    index, _ = _index_for(collection)
    texts = {d.doc_id: f"{d.title} {d.text}" for d in collection.documents.values()}
    porter = Analyzer(stemmer="porter")
    english = Analyzer()
    full = Weighting(porter, collection_idf(porter, list(texts.values())))
    # the engine's idf=background: every query's first 20 results (no judgment read)
    seen = dict.fromkeys(d for q in query_set.queries.values() for d, _ in index.search(q, DEPTH))
    sample = Weighting(porter, collection_idf(porter, [texts[d] for d in seen]))
    vectors: dict[str, Vector] = {}

    def vec(doc_id: str) -> Vector:
        if doc_id not in vectors:
            vectors[doc_id] = full.vector(texts[doc_id])
        return vectors[doc_id]

    rows: dict[str, list[float]] = {}

    def add(label: str, value: float) -> None:
        rows.setdefault(label, []).append(value)

    for query_id, query in query_set.queries.items():
        grades = collection.qrels.get(query_id, {})
        top = [d for d, _ in index.search(query, DEPTH)]
        examined = set(top[:EXAMINED])
        base = residual(top, grades, examined)
        if base is None:
            continue
        add("BM25 ranks 11-20", base)
        pull_ids = [d for d in top[:EXAMINED] if grades.get(d, 0) > 0]
        push_ids = [d for d in top[:EXAMINED] if grades.get(d, 0) <= 0]
        marks = (pull_ids, push_ids)

        for label, weighting, fetch in (
            ("merge", full, 20),
            ("merge 40", full, 40),
            ("merge, first-page idf", sample, 20),
            ("merge 40, first-page idf", sample, 40),
        ):
            value = residual(
                expanded(index, texts, query, top, marks, weighting, fetch), grades, examined
            )
            assert value is not None
            add(label, value)
        # idf from the candidates only: the initial 20 plus the expanded query's 20
        first = expanded(index, texts, query, top, marks, full, 20)
        pool_texts = [texts[d] for d in first]
        for label, weighting in (
            ("merge, pool idf", Weighting(porter, collection_idf(porter, pool_texts))),
            ("merge, pool smooth idf", Weighting(english, smooth_idf(english, pool_texts))),
        ):
            value = residual(
                expanded(index, texts, query, top, marks, weighting, 20, first), grades, examined
            )
            assert value is not None
            add(label, value)
        q = full.vector(query)
        moved = rocchio(q, [vec(d) for d in pull_ids], [vec(d) for d in push_ids])
        everything = sorted(texts, key=lambda d: -cosine(moved, vec(d)))[:200]
        value = residual(everything, grades, examined)
        assert value is not None
        add("collection", value)
        held = set(porter(query))
        new = [t for t, _ in sorted(moved.items(), key=lambda p: (-p[1], p[0])) if t not in held]
        keep = held | set(new[:TERMS])
        short = {t: w for t, w in moved.items() if t in keep}
        ranked = sorted(texts, key=lambda d: -cosine(short, vec(d)))[:200]
        add("collection, q+4 of q'", residual(ranked, grades, examined) or 0.0)
        words = surface(porter, [texts[d] for d in pull_ids])
        sent = f"{query} {' '.join(words.get(t, t) for t in new[:TERMS])}"
        found = [d for d, _ in index.search(sent, 200)]
        add("BM25 of q+4, collection", residual(found, grades, examined) or 0.0)
        pool = list(dict.fromkeys([*top, *found[:20]]))
        bm = dict(index.search(sent, 10**6))
        merged = sorted(pool, key=lambda d: -bm.get(d, 0.0))
        add("BM25 of q+4, merged 40", residual(merged, grades, examined) or 0.0)
        ranked = sorted(pool, key=lambda d: -cosine(short, vec(d)))
        add("merge, q+4 of q'", residual(ranked, grades, examined) or 0.0)

    base = sum(rows["BM25 ranks 11-20"]) / len(rows["BM25 ranks 11-20"])
    print(f"{name}: {len(rows['BM25 ranks 11-20'])} queries with a relevant document left")
    for label, values in rows.items():
        mean = sum(values) / len(values)
        print(f"  {label:<26} residual nDCG@10 {mean:.4f}  gain {mean / base - 1:+.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collection", nargs="?", default="cranfield")
    parser.add_argument("--queries", type=int, default=None)
    args = parser.parse_args()
    run(args.collection, args.queries)


if __name__ == "__main__":
    main()
