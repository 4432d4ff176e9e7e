"""Randomness follows the run's seed: the derivation, the shuffled control dealt from
(seed, policy, query, round), and on the shipped Cranfield collection a new ``seed=``
resamples the shuffled control and the noisy user while the same seed repeats itself in
another process."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

import evidence_bench
from evidence_bench.engine.base import Label
from evidence_bench.evaluation.comparisons import RANDOMIZATION_SEED
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.protocol.episode import _shuffled
from evidence_bench.seeding import derivation, derived_random, derived_seed
from tests.conftest import exported

ROOT = Path(evidence_bench.__file__).resolve().parents[1]


def test_derived_seed_is_the_documented_sha256_of_the_json_parts() -> None:
    # what the manifest says: sha256(json.dumps([seed, policy, query_id, round]))[:8], big-endian
    digest = hashlib.sha256(b'[0, "oracle", "001", 1]').digest()
    assert derived_seed(0, "oracle", "001", 1) == int.from_bytes(digest[:8], "big")
    assert derivation("seed", "policy", "query_id", "round") == (
        "sha256(json.dumps([seed, policy, query_id, round]))[:8], big-endian"
    )
    # no field can leak into its neighbour, unlike a "|"-joined string
    assert derived_seed(0, "a|b", "c", 1) != derived_seed(0, "a", "b|c", 1)
    assert derived_random(3, "x").random() == derived_random(3, "x").random()


FEEDBACK = {
    f"k{i}": label for i, label in enumerate([Label.MORE, Label.RELEVANT, Label.IRRELEVANT])
}
EXAMINED = frozenset(f"k{i}" for i in range(10))


def dealt(
    seed: int, policy: str = "oracle", query_id: str = "1", round_: int = 1
) -> dict[str, Label]:
    return _shuffled(FEEDBACK, EXAMINED, seed=seed, policy=policy, query_id=query_id, round_=round_)


def test_shuffled_deals_the_same_labels_over_the_examined_documents() -> None:
    for seed in range(20):
        labels = dealt(seed)
        assert set(labels) <= EXAMINED
        assert Counter(labels.values()) == Counter(FEEDBACK.values())


def test_shuffled_follows_seed_policy_query_and_round() -> None:
    base = dealt(0)
    assert dealt(0) == base
    assert len({tuple(sorted(dealt(s).items())) for s in range(10)}) > 5  # of 720 deals
    assert any(dealt(0, policy=p) != base for p in ("noisy", "random", "budget"))
    assert any(dealt(0, query_id=q) != base for q in ("2", "3", "4"))
    assert any(dealt(0, round_=r) != base for r in (2, 3, 4))


def test_shuffled_is_random_shuffle_of_the_labels_in_key_order() -> None:
    # the definition: the examined keys sorted, their labels (None: only seen) shuffled in
    # place by the seeded generator, the None ones dropped; for every size and seed
    for size in (0, 1, 2, 3, 10, 25):
        examined = frozenset(f"d{i:02d}" for i in range(size))
        feedback = {key: (Label.RELEVANT, Label.IRRELEVANT)[i % 2]
                    for i, key in enumerate(sorted(examined)) if i % 3}  # fmt: skip
        for seed in range(5):
            keys = sorted(examined)
            labels = [feedback.get(key) for key in keys]
            derived_random(seed, "noisy", "7", 2).shuffle(labels)
            expected = {k: v for k, v in zip(keys, labels, strict=True) if v is not None}
            found = _shuffled(feedback, examined, seed=seed, policy="noisy", query_id="7", round_=2)
            assert list(found.items()) == list(expected.items())


#: The first 10 Cranfield queries, oracle and noisy, one round.
TEN = ["+experiment=ci", "experiment.queries=10", "experiment.rounds=1", "workers=1",
       "progress=false", "report=false"]  # fmt: skip


def _run(runs: Path, seed: int, hash_seed: str) -> Path:
    """:data:`TEN` with ``seed`` in a fresh process whose ``PYTHONHASHSEED`` is ``hash_seed``."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evidence_bench", "run", *TEN, f"seed={seed}", f"runs_dir={runs}"],
        capture_output=True, text=True, env=env, check=True, cwd=ROOT,
    )  # fmt: skip
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("run: "))
    return exported(Path(line.removeprefix("run: ")))


def _run_here(runs: Path, seed: int) -> Path:
    """:data:`TEN` with ``seed`` in this process (its own hash seed)."""
    cfg, text = compose([*TEN, f"seed={seed}", f"runs_dir={runs}"])
    return exported(perform_run(cfg, text).path)


def _ranking(path: Path, policy: str, stage: str) -> dict[str, list[str]]:
    with gzip.open(path / "trec" / f"c00.{policy}.r1.{stage}.run.gz", "rt") as lines:
        ranked: dict[str, list[str]] = {}
        for line in lines:
            query_id, _q0, doc, *_rest = line.split()
            ranked.setdefault(query_id, []).append(doc)
    return ranked


def test_on_cranfield_the_seed_resamples_shuffled_and_repeats_across_processes(
    tmp_path: Path,
) -> None:
    # the same seed in this process and in another one with another hash seed (sets and
    # dicts of str iterate in another order there); another seed needs no other process
    first = _run_here(tmp_path / "a", seed=0)
    here = os.environ.get("PYTHONHASHSEED")
    again = _run(tmp_path / "b", seed=0, hash_seed="3" if here == "2" else "2")
    other = _run_here(tmp_path / "c", seed=1)
    for name in ("scores.parquet", "feedback.parquet", "per_query.csv", "feedback.csv",
                 "trec/c00.oracle.r1.shuffled.run.gz"):  # fmt: skip
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    # the oracle judges without chance: its marks and its rerank do not move with the seed
    assert _ranking(first, "oracle", "rerank") == _ranking(other, "oracle", "rerank")
    shuffled, reshuffled = (_ranking(p, "oracle", "shuffled") for p in (first, other))
    assert shuffled.keys() == reshuffled.keys()
    assert sum(shuffled[q] != reshuffled[q] for q in shuffled) >= 3
    # the noisy user's draws follow the seed too
    feedback = [pd.read_csv(p / "feedback.csv", dtype=str) for p in (first, other)]
    noisy = [f[f["policy"] == "noisy"]["label"].tolist() for f in feedback]
    assert len(noisy[0]) == len(noisy[1]) and noisy[0] != noisy[1]
    seeds = [json.loads((p / "manifest.json").read_text())["seeds"] for p in (first, other)]
    assert seeds[0] == {
        "seed": 0,
        "users": {"noisy": 0},
        "user_draws": "sha256(json.dumps([user seed, query_id, round, url]))[:8], big-endian",
        "shuffled": "sha256(json.dumps([seed, policy, query_id, round]))[:8], big-endian",
        "randomization": RANDOMIZATION_SEED,
    }
    assert (seeds[1]["seed"], seeds[1]["users"]) == (1, {"noisy": 1})
