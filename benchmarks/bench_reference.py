"""Benchmark: ``rocchio_sweep``'s run beside an independent reference of its reranking, timed
in one session, and how many of the run's scores the reference reproduces.

    python benchmarks/bench_reference.py [--queries N] [--workers 1,2] [--run-dir DIR]

The reference is written from the docs (docs/concepts/episodes.rst, controls.rst,
evaluation.rst, users.rst, sweeps.rst) and the shipped files, in plain numpy, with the
measures from pytrec_eval (trec_eval itself). It imports nothing from ``evidence_bench``:
it reads the collection (``queries.jsonl``, ``qrels.tsv``) and the recorded Brave answers
(``cassettes/cranfield/<query id>.json``) itself, and the sweep's grid from
``conf/experiment/rocchio_sweep.yaml``.

What it covers, for every query, both users (oracle, noisy) and every (alpha, beta, gamma)
of the grid: round 0 (``initial``, ``control``) and round 1's stages over the replayed
first page (``initial``, ``control``, ``shuffled``, ``rerank``: TF-IDF Rocchio reranking the
page with the user's marks), in the modes ``full``, ``residual`` and ``frozen``, on every
measure of ``conf/eval/default.yaml``. What it does not: ``expand`` and the equal-depth
controls (``deep_initial``, ``deep_control``), which need the refiner and the simulator's
answers to searches no cassette holds, and round 2, which starts from the expanded list.

So the reference does a part of the run's work (it prints how much), and the ratio (the
run's time over the reference's) is then an upper bound on the run's against a reference of
all of it, not a verdict on issue 27's target (run <= 2.0x the reference).
Every run is ``python -m evidence_bench run +experiment=rocchio_sweep`` in a fresh process,
report included, as a user types it; the reference runs in this process. The figures are
wall times on a shared machine, printed beside its load.
"""

from __future__ import annotations

import argparse
import csv
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
COLLECTION = ROOT / "collections" / "cranfield"
CASSETTES = ROOT / "cassettes" / "cranfield"
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


def analyze(text: str) -> list[str]:
    """The terms of ``text`` in order, repeats kept."""
    terms = []
    for token in _TOKEN.findall(text.lower()):
        if len(token) < 2 or token in STOP_WORDS:
            continue
        stem = _STEMS.get(token)
        if stem is None:
            stem = _STEMS[token] = str(_STEM.stemWord(token))  # type: ignore[attr-defined]
        terms.append(stem)
    return terms


# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One replayed result: its document, address and the text a ranker scores."""

    doc_id: str
    url: str
    text: str


def load_queries(collection: Path = COLLECTION) -> dict[str, str]:
    """Query id -> text, in the file's order, judged queries only."""
    judged = set(load_qrels(collection))
    queries = {}
    for line in (collection / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["_id"] in judged:
                queries[row["_id"]] = row["text"].strip()
    return queries


def load_qrels(collection: Path = COLLECTION) -> dict[str, dict[str, int]]:
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


def first_page(cassette: Path, query: str, depth: int) -> list[Result]:
    """The recorded answer to ``query``'s first search (``count=depth``, ``offset=0``), one
    result per address, in the provider's order."""
    recorded = json.loads(cassette.read_text(encoding="utf-8"))
    for interaction in recorded["interactions"]:
        asked = parse_qs(urlsplit(interaction["request"]["uri"]).query)
        first = asked.get("offset", ["0"]) == ["0"]
        if asked.get("q") == [query] and asked.get("count") == [str(depth)] and first:
            break
    else:
        raise SystemExit(f"{cassette}: no recorded first page for {query!r}")
    answer = json.loads(interaction["response"]["body"]["string"])
    results: dict[str, Result] = {}
    for item in answer["web"]["results"]:
        url = item["url"].strip()
        text = f"{_plain(item['title'])} {_plain(item.get('description') or '')}"
        doc_id = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        results.setdefault(url, Result(doc_id, url, text))
    return list(results.values())


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


# --- one query's rankings ----------------------------------------------------------------------

#: (config index or -1 for what every config shares, policy, round, stage) -> doc ids in order
Rankings = dict[tuple[int, str, int, str], list[str]]


def query_rankings(
    query_id: str,
    query: str,
    page: list[Result],
    grades: Mapping[str, int],
    grid: Sequence[tuple[float, float, float]],
    *,
    seed: int = 0,
    depth: int = 10,
) -> tuple[Rankings, list[str]]:
    """Round 0's and round 1's rankings before ``expand``, and the documents examined in
    round 1 (the first ``depth`` of the provider's order), for both users."""
    docs, q = tfidf([item.text for item in page], query)
    ids = [item.doc_id for item in page]
    weights = np.array(grid, dtype=float)
    (control,) = rocchio_orders(docs, q, np.array([[1.0, 0.0, 0.0]]), [], [])
    rankings: Rankings = {}
    for round_ in (0, 1):
        rankings[(-1, "", round_, "initial")] = ids
        rankings[(-1, "", round_, "control")] = [ids[d] for d in control]
    examined = page[:depth]
    for policy in ("oracle", "noisy"):
        if policy == "oracle":
            labels = {item.url: oracle_label(grades.get(item.doc_id)) for item in examined}
        else:
            labels = {
                item.url: noisy_label(
                    grades.get(item.doc_id), seed=seed, query_id=query_id, round_=1, url=item.url
                )
                for item in examined
            }
        dealt = shuffled(labels, seed=seed, policy=policy, query_id=query_id, round_=1)
        for stage, marks in (("rerank", labels), ("shuffled", dealt)):
            pull = [d for d, item in enumerate(page) if marks.get(item.url) in PULL]
            push = [d for d, item in enumerate(page) if marks.get(item.url) in PUSH]
            for c, order in enumerate(rocchio_orders(docs, q, weights, pull, push)):
                rankings[(c, policy, 1, stage)] = [ids[d] for d in order]
    return rankings, [item.doc_id for item in examined]


def in_mode(ranking: list[str], examined: list[str], mode: str) -> list[str]:
    """The list a mode scores: as it is, without the examined documents (residual), or with
    them at the positions they were shown at, 1.. (frozen)."""
    if mode == "full" or not examined:
        return ranking
    rest = [doc for doc in ranking if doc not in set(examined)]
    return rest if mode == "residual" else [*examined, *rest]


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


def reference(queries: int | None = None, *, seed: int = 0) -> Reference:
    """The reference for the first ``queries`` judged queries (all: None)."""
    times: dict[str, float] = {}
    ranked: Ranked = {}
    start = time.perf_counter()
    texts = load_queries()
    qrels = load_qrels()
    chosen = list(texts)[:queries]
    pages = {qid: first_page(CASSETTES / f"{qid}.json", texts[qid], 20) for qid in chosen}
    grid = sweep_grid()
    times["read"] = time.perf_counter() - start
    start = time.perf_counter()
    lists: dict[str, tuple[list[str], Mapping[str, int]]] = {}
    keys: dict[str, list[tuple[str, str, str, int, str, str]]] = {}
    for qid in chosen:
        rankings, examined = query_rankings(
            qid, texts[qid], pages[qid], qrels[qid], grid, seed=seed
        )
        residual = {doc: g for doc, g in qrels[qid].items() if doc not in set(examined)}
        url = {item.doc_id: item.url for item in pages[qid]}
        for (c, policy, round_, stage), ranking in rankings.items():
            urls = [url[doc] for doc in ranking]
            for cid in range(len(grid)) if c < 0 else (c,):
                for who in ("oracle", "noisy") if c < 0 else (policy,):
                    ranked[(f"c{cid:02d}", who, qid, round_, stage)] = urls
            seen = examined if round_ else []
            for mode in ("full", "residual", "frozen"):
                judged = residual if mode == "residual" and round_ else qrels[qid]
                listed = in_mode(ranking, seen, mode)
                name = f"{qid}|{mode}|{round_}|{'|'.join(listed)}"
                lists[name] = (listed, judged)
                for cid in range(len(grid)) if c < 0 else (c,):
                    for who in ("oracle", "noisy") if c < 0 else (policy,):
                        keys.setdefault(name, []).append(
                            (f"c{cid:02d}", who, qid, round_, stage, mode)
                        )
    times["rank"] = time.perf_counter() - start
    start = time.perf_counter()
    values = evaluate(lists)
    scores: Scores = {}
    for name, measured in values.items():
        for key in keys[name]:
            for measure, trec in MEASURES.items():
                scores[(*key, measure)] = measured[trec]
    times["evaluate"] = time.perf_counter() - start
    return Reference(scores, ranked, times)


# --- the run, and the comparison ---------------------------------------------------------------


def harness_run(runs_dir: Path, workers: int, queries: int | None) -> tuple[float, Path]:
    """``python -m evidence_bench run +experiment=rocchio_sweep``: its wall time and run dir."""
    command = [sys.executable, "-m", "evidence_bench", "run", "+experiment=rocchio_sweep",
               f"workers={workers}", f"runs_dir={runs_dir}", "progress=false"]  # fmt: skip
    if queries is not None:
        command.append(f"experiment.queries={queries}")
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    (run_dir,) = [p for p in (runs_dir / "rocchio_sweep").iterdir() if p.name != "latest"]
    return wall, run_dir


COVERED = ["initial", "control", "shuffled", "rerank"]


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
    runs = runs[(runs["round"] <= 1) & runs["stage"].isin(COVERED)]
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
    table = table[(table["round"] <= 1) & table["stage"].isin(COVERED)]
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


def _timed_reference(queries: int | None) -> tuple[Reference, float, float]:
    """The reference, its wall and CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = reference(queries)
    return found, time.perf_counter() - wall, time.process_time() - cpu


def _ratio(name: str, run: float, ref: float, whole: bool) -> str:
    verdict = ("met" if run / ref <= TARGET else "NOT met") if whole else "an upper bound"
    return f"{name} {run:.2f} s = {run / ref:.2f}x the reference's ({verdict})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, help="the first N judged queries (default: all)")
    parser.add_argument("--workers", default="1,2", help="the run's worker counts (default 1,2)")
    parser.add_argument("--run-dir", type=Path, help="compare with this run instead of timing one")
    args = parser.parse_args()
    print(f"start: {load()}")
    # the reference before and after the runs: the faster of the two is the one compared,
    # so load that comes and goes makes the ratio larger, not smaller
    ref, ref_wall, ref_cpu = _timed_reference(args.queries)
    runs: dict[int, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        run_dir = args.run_dir
        if run_dir is None:
            for workers in [int(w) for w in args.workers.split(",")]:
                cpu = _children_cpu()
                wall, run_dir = harness_run(Path(tmp) / f"w{workers}", workers, args.queries)
                manifest = json.loads((run_dir / "manifest.json").read_text())
                runs[workers] = (wall, _children_cpu() - cpu, float(manifest["episodes_time_s"]))
                print(f"run workers={workers} done: {load()}")
        assert run_dir is not None
        (run_scores, total), run_rankings = harness_scores(run_dir), harness_rankings(run_dir)
    again, wall2, cpu2 = _timed_reference(args.queries)
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
    print("covered: round 0 (initial, control) and round 1 (initial, control, shuffled, rerank)")
    print("  over the replayed first page: oracle and noisy users, every grid point, modes full,")
    print("  residual and frozen, measures " + ", ".join(MEASURES))
    print("not covered: expand, deep_initial, deep_control (the refiner, simulated searches), and")
    print("  round 2 (it starts from the expanded list)")
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
