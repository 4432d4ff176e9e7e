"""Synthetic run directories in the runner's format (notes/RUNDIR.md), for the report's tests.

The numbers are made up but shaped like a real run: graded measures in [0, 1], the seven
stages (initial, control, shuffled, rerank, expand, deep_initial, deep_control; shuffled from
round 1 on), residual and frozen modes that drop exhausted queries, a baseline whose control,
shuffled and rerank equal its initial ranking, one expand skipped on a replay miss (with no
equal-depth controls), one shuffled ranking missing (so the judgment comparison must pair its
own queries), LiveFetch-style score breakdowns, a manifest with the run's command-line
overrides, and web text carrying markup payloads, so the report is tested against what a
hostile page could put in a title, snippet, URL or query.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

__all__ = [
    "MEASURES",
    "MODES",
    "NO_SHUFFLED",
    "PAYLOAD_IMG",
    "PAYLOAD_SCRIPT",
    "STAGES",
    "write_multirun",
    "write_run_dir",
]

MEASURES = ("nDCG@10", "P@10", "R@20", "AP", "RR")
MODES = ("full", "residual", "frozen")
STAGES = ("initial", "control", "shuffled", "rerank", "expand", "deep_initial", "deep_control")
#: (config_id, policy, query_id, round) whose shuffled ranking is missing, in every mode.
NO_SHUFFLED = ("c02", "oracle", "005", 1)
PAYLOAD_SCRIPT = "<script>alert(1)</script>"
PAYLOAD_IMG = '"><img src=x onerror=alert(1)>'

_VOCABULARY = (
    "boundary layer flow heat transfer supersonic wing pressure shock wave turbulent laminar "
    "nozzle skin friction hypersonic cone buckling shell panel flutter jet mixing slender body "
    "viscous wake airfoil compressible stagnation point ablation cylinder vortex"
)
_WORDS = tuple(_VOCABULARY.split())
_DEFAULT_GRID: Mapping[str, Sequence[float]] = {
    "alpha": (1.0,),
    "beta": (0.5, 0.75),
    "gamma": (0.0, 0.15),
}


def _text(rng: np.random.Generator, n: int) -> str:
    return " ".join(str(w) for w in rng.choice(_WORDS, size=n))


def _configs(grid: Mapping[str, Sequence[float]]) -> pd.DataFrame:
    rows: list[dict[str, object]] = [
        {
            "config_id": "c00",
            "label": "provider order",
            "ranker": "provider_order",
            "refiner": "lexical",
            **{name: None for name in grid},
            "max_terms": 4,
            "role": "baseline",
        }
    ]
    for i, values in enumerate(itertools.product(*grid.values()), start=1):
        params = dict(zip(grid, values, strict=True))
        greek = {"alpha": "α", "beta": "β", "gamma": "γ"}
        label = " ".join(f"{greek.get(k, k)}={v:g}" for k, v in params.items())
        rows.append(
            {
                "config_id": f"c{i:02d}",
                "label": f"tfidf_rocchio {label}",
                "ranker": "tfidf_rocchio",
                "refiner": "lexical",
                **params,
                "max_terms": 4,
                "role": "feedback",
            }
        )
    return pd.DataFrame(rows)


def _shape(values: np.ndarray, measure: str) -> np.ndarray:
    """Make a [0, 1] score look like the measure: P@10 in tenths, RR a reciprocal rank."""
    clipped = np.clip(values, 0.0, 1.0)
    if measure.startswith("P@"):
        return np.round(clipped * 10) / 10
    if measure == "RR":
        return 1.0 / np.ceil(1.0 / np.maximum(clipped, 0.05))
    return np.round(clipped, 6)


def _per_query(
    configs: pd.DataFrame,
    policies: Sequence[str],
    query_ids: Sequence[str],
    rounds: int,
    rng: np.random.Generator,
    skipped: tuple[str, str, str, int],
) -> tuple[pd.DataFrame, dict[str, int]]:
    n_c, n_p, n_q, n_m = len(configs), len(policies), len(query_ids), len(MEASURES)
    grid = np.stack(
        np.meshgrid(np.arange(n_c), np.arange(n_p), np.arange(n_q), np.arange(n_m), indexing="ij"),
        axis=-1,
    ).reshape(-1, 4)
    ci, pi, qi, mi = grid.T
    quality = rng.uniform(0.15, 0.85, size=(n_q, n_m))[qi, mi]
    beta = configs.get("beta", pd.Series(0.75, index=configs.index)).fillna(0.75).to_numpy()
    gamma = configs.get("gamma", pd.Series(0.15, index=configs.index)).fillna(0.15).to_numpy()
    alpha = configs.get("alpha", pd.Series(1.0, index=configs.index)).fillna(1.0).to_numpy()
    effect = 0.12 * (beta - 0.5) - 0.15 * gamma - 0.02 * np.abs(alpha - 1.0)
    baseline = (configs["role"].to_numpy() == "baseline")[ci]
    effect = effect[ci]
    user = np.array([0.03 if p == "oracle" else -0.01 for p in policies])[pi]
    blocks: list[pd.DataFrame] = []
    excluded: dict[str, int] = {}
    config_ids = configs["config_id"].to_numpy()
    skip_mask = (
        (config_ids[ci] == skipped[0])
        & (np.asarray(policies)[pi] == skipped[1])
        & (np.asarray(query_ids)[qi] == skipped[2])
    )

    def block(round_: int, stage: str, mode: str, values: np.ndarray, keep: np.ndarray) -> None:
        shaped = np.empty_like(values)
        for m, measure in enumerate(MEASURES):
            sel = mi == m
            shaped[sel] = _shape(values[sel], measure)
        blocks.append(
            pd.DataFrame(
                {
                    "config_id": config_ids[ci[keep]],
                    "policy": np.asarray(policies)[pi[keep]],
                    "query_id": np.asarray(query_ids)[qi[keep]],
                    "round": round_,
                    "stage": stage,
                    "eval_mode": mode,
                    "measure": np.asarray(MEASURES)[mi[keep]],
                    "value": shaped[keep],
                }
            )
        )

    # The no-feedback ranker scores differently from the provider's order (none for the
    # provider-order baseline): the scorer switch that ``control`` isolates.
    switch = np.where(baseline, 0.0, 0.03 - 0.04 * (alpha[ci] - 1.0) ** 2)
    everything = np.ones(len(grid), dtype=bool)
    for mode in MODES:
        block(0, "initial", mode, quality, everything)
        block(0, "control", mode, np.where(baseline, quality, quality + switch), everything)
    for r in range(1, rounds + 1):
        # Queries whose relevant documents the user has all seen: none left to find.
        exhausted = qi >= n_q - r
        if r >= 2:
            exhausted |= (qi == 1) & (pi == 0)
        for mode in MODES:
            residual = mode != "full"
            noise = rng.normal(0.0, 0.04, size=len(grid))
            initial = quality * (0.75**r if residual else 1.0) + (noise if residual else 0.0)
            control = np.where(
                baseline, initial, initial + switch + rng.normal(0.0, 0.03, size=len(grid))
            )
            rerank = np.where(
                baseline,
                initial,
                control + effect + user + rng.normal(0.0, 0.08, size=len(grid)),
            )
            # The provider's list deepened to the expanded length: more unseen candidates.
            deep_initial = initial + np.abs(rng.normal(0.0, 0.03, size=len(grid)))
            deep_control = np.where(
                baseline,
                deep_initial,
                deep_initial + switch + rng.normal(0.0, 0.03, size=len(grid)),
            )
            expand = deep_control + 1.3 * effect + user + 0.01 + rng.normal(0.0, 0.1, len(grid))
            # Labels dealt at random: half the effect comes from marking anything (Rocchio's
            # pseudo-relevance), the rest, and the user's skill, from the judgments.
            shuffled = np.where(
                baseline, initial, control + 0.5 * effect + rng.normal(0.0, 0.03, len(grid))
            )
            keep = ~exhausted if residual else everything
            skip = skip_mask if r == rounds else np.zeros(len(grid), dtype=bool)
            block(r, "initial", mode, initial, keep)
            block(r, "control", mode, control, keep)
            lost = (
                (config_ids[ci] == NO_SHUFFLED[0])
                & (np.asarray(policies)[pi] == NO_SHUFFLED[1])
                & (np.asarray(query_ids)[qi] == NO_SHUFFLED[2])
                & (r == NO_SHUFFLED[3])
            )
            block(r, "shuffled", mode, shuffled, keep & ~lost)
            block(r, "rerank", mode, rerank, keep)
            # A skipped expand (replay miss) has no expanded list, so no equal-depth controls.
            block(r, "expand", mode, expand, keep & ~skip)
            block(r, "deep_initial", mode, deep_initial, keep & ~skip)
            block(r, "deep_control", mode, deep_control, keep & ~skip)
            if residual:
                for (c, p), n in (
                    pd.Series(exhausted[mi == 0]).groupby([ci[mi == 0], pi[mi == 0]]).sum().items()
                ):
                    if n:
                        for stage in STAGES:
                            key = f"{config_ids[c]}|{policies[p]}|{r}|{stage}|{mode}"
                            excluded[key] = int(n)
    return pd.concat(blocks, ignore_index=True), excluded


def _summary(per_query: pd.DataFrame) -> pd.DataFrame:
    keys = ["config_id", "policy", "round", "stage", "eval_mode", "measure"]
    agg = per_query.groupby(keys, sort=False)["value"].agg(["count", "mean", "std"]).reset_index()
    agg = agg.rename(columns={"count": "n"})
    half = stats.t.ppf(0.975, np.maximum(agg["n"] - 1, 1)) * agg["std"] / np.sqrt(agg["n"])
    agg["ci_low"] = agg["mean"] - half
    agg["ci_high"] = agg["mean"] + half
    return agg


def write_run_dir(
    root: Path,
    *,
    n_queries: int = 12,
    policies: Sequence[str] = ("oracle", "noisy"),
    rounds: int = 2,
    grid: Mapping[str, Sequence[float]] | None = None,
    seed: int = 0,
    experiment: str = "rocchio_sweep",
    run_id: str = "20261130T031500Z-1a2b3c",
    query_set: str = "cranfield",
    run_dir: Path | None = None,
    breakdown: bool = True,
    missing_dates: int | None = 7,
) -> Path:
    """Write ``root/runs/<experiment>/<run_id>/`` and return that run directory.

    Query ``001`` carries a ``<script>`` payload and ``002`` an ``<img onerror>`` one; the first
    documents of query ``001`` carry payloads in their title, snippet and URL; one refined
    query adds a payload term. Query ids are zero-padded so reading them as numbers shows.
    ``breakdown``: every round records a LiveFetch-style score breakdown of its rerank;
    ``missing_dates``: the manifest's count of results without a date (None: not recorded).
    """
    grid = dict(grid if grid is not None else _DEFAULT_GRID)
    rng = np.random.default_rng(seed)
    run_dir = run_dir or root / "runs" / experiment / run_id
    (run_dir / "trec").mkdir(parents=True)
    configs = _configs(grid)
    query_ids = [f"{i:03d}" for i in range(1, n_queries + 1)]
    queries = {qid: _text(rng, 5) for qid in query_ids}
    queries["001"] = f"boundary layer {PAYLOAD_SCRIPT} transition"
    if n_queries > 1:
        queries["002"] = f"{PAYLOAD_IMG} heat transfer"
    skipped = ("c01", policies[-1], query_ids[min(3, n_queries - 1)], rounds)
    per_query, excluded = _per_query(configs, policies, query_ids, rounds, rng, skipped)

    documents: dict[str, dict[str, str]] = {}
    qrels: list[tuple[str, str, int]] = []
    pools: dict[str, list[str]] = {}
    grades: dict[tuple[str, str], int] = {}
    for qid in query_ids:
        pool = [str(d) for d in rng.choice(np.arange(1, 1401), size=30, replace=False)]
        pools[qid] = pool
        for doc_id in pool:
            documents.setdefault(
                doc_id,
                {
                    "doc_id": doc_id,
                    "url": f"https://cranfield.invalid/doc/{doc_id}",
                    "title": _text(rng, 6).capitalize(),
                    "snippet": _text(rng, 24) + ".",
                },
            )
            grade = int(rng.choice([-1, 0, 0, 1, 2]))
            if grade >= 0:
                qrels.append((qid, doc_id, grade))
                grades[(qid, doc_id)] = grade
    first = pools["001"]
    documents[first[0]].update(title=f"{PAYLOAD_SCRIPT} Shock waves", url="javascript:alert(1)")
    documents[first[1]].update(snippet=f"Skin friction {PAYLOAD_IMG} measurements")
    documents[first[2]].update(url=f"https://evil.example/{PAYLOAD_IMG}", title=PAYLOAD_IMG)

    episodes: list[dict[str, object]] = []
    feedback: list[tuple[str, str, str, int, str, str]] = []
    for config_id, policy, qid in itertools.product(configs["config_id"], policies, query_ids):
        pool = pools[qid]
        shown = pool[:10]
        rounds_out = []
        for r in range(1, rounds + 1):
            marked = [str(d) for d in rng.choice(shown, size=3, replace=False)]
            marks = []
            for doc_id in marked:
                grade = grades.get((qid, doc_id))
                if policy == "oracle":
                    label = {None: "unsure", 0: "irrelevant", 1: "relevant", 2: "more"}[grade]
                else:
                    label = str(rng.choice(["more", "relevant", "irrelevant", "less", "unsure"]))
                marks.append({"doc_id": doc_id, "label": label})
                feedback.append((config_id, policy, qid, r, doc_id, label))
            after_rerank = [str(d) for d in rng.permutation(pool[:20])[:10]]
            skip = (config_id, policy, qid, r) == skipped
            added = [str(w) for w in rng.choice(_WORDS, size=2, replace=False)]
            if qid == "001" and r == 1:
                added = [PAYLOAD_SCRIPT, *added[:1]]
            after_expand = None if skip else [str(d) for d in rng.permutation(pool)[:10]]
            record: dict[str, object] = {
                "round": r,
                "refined_query": None if skip else f"{queries[qid]} {' '.join(added)}",
                "added_terms": [] if skip else added,
                "added": 0 if skip else int(rng.integers(0, 6)),
                "before": shown,
                "after_rerank": after_rerank,
                "after_expand": after_expand,
                "marks": marks,
            }
            if breakdown:
                # LiveFetch-style: S = 0.6·R + 0.25·F + 0.15·T − 0.2·D, in ranked order.
                parts = rng.uniform(0.0, 1.0, size=(len(after_rerank), 4)).round(4)
                record["breakdown"] = [
                    {
                        "doc_id": doc_id,
                        "R": float(rf[0]),
                        "F": float(rf[1]),
                        "T": float(rf[2]),
                        "D": float(rf[3]),
                        "S": round(0.6 * rf[0] + 0.25 * rf[1] + 0.15 * rf[2] - 0.2 * rf[3], 4),
                    }
                    for doc_id, rf in zip(after_rerank, parts, strict=True)
                ]
            rounds_out.append(record)
            shown = after_expand or after_rerank
        episodes.append(
            {
                "config_id": config_id,
                "policy": policy,
                "query_id": qid,
                "query": queries[qid],
                "rounds": rounds_out,
            }
        )

    config = {
        "experiment": {
            "name": experiment,
            "rounds": rounds,
            "grid": {k: list(v) for k, v in grid.items()},
        },
        "query_set": {"name": query_set, "path": f"collections/{query_set}"},
        "eval": {
            "measures": list(MEASURES),
            "modes": list(MODES),
            "primary_mode": "residual",
            "primary_measure": "nDCG@10",
        },
        "seed": seed,
    }
    manifest = {
        "package_version": "0.1.0",
        "git_commit": "43b870d0c0ffee0123456789abcdef0123456789",
        "experiment": experiment,
        "query_set": query_set,
        "cassette_manifest_sha256": "9f2c" + "ab" * 30,
        "collection_checksum": "sha256:" + "cd" * 32,
        "seeds": [seed],
        "wall_time_s": 12.5,
        "episodes": len(episodes),
        "queries": n_queries,
        "created": "2026-11-30T03:15:00Z",
        "replay": {"replayed": len(episodes) * rounds - 1, "simulated": 0, "skipped": 1},
        "excluded": excluded,
        "sweep": {"params": list(grid)},
        "overrides": [f"+experiment={experiment}", f"query_set={query_set}", f"seed={seed}"],
        "git_dirty": False,
        **({} if missing_dates is None else {"missing_dates": missing_dates}),
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), "utf-8")
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), "utf-8")
    configs.to_csv(run_dir / "configs.csv", index=False)
    per_query.to_csv(run_dir / "per_query.csv", index=False)
    _summary(per_query).to_csv(run_dir / "summary.csv", index=False)
    pd.DataFrame(
        feedback, columns=["config_id", "policy", "query_id", "round", "doc_id", "label"]
    ).to_csv(run_dir / "feedback.csv", index=False)
    with (run_dir / "episodes.jsonl").open("w", encoding="utf-8") as out:
        for episode in episodes:
            out.write(json.dumps(episode, ensure_ascii=False) + "\n")
    with (run_dir / "documents.jsonl").open("w", encoding="utf-8") as out:
        for doc in documents.values():
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    qrels_df = pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance"])
    qrels_df.to_csv(run_dir / "qrels.csv", index=False)
    pd.DataFrame({"query_id": list(queries), "query": list(queries.values())}).to_csv(
        run_dir / "queries.csv", index=False
    )
    (run_dir / "trec" / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels), "utf-8"
    )
    return run_dir


def write_multirun(root: Path, jobs: int = 2, **kwargs: object) -> Path:
    """A Hydra multirun directory ``root/multirun/<date>/<time>/<job>/run/``; returns its root."""
    sweep_dir = root / "multirun" / "2026-11-30" / "03-15-00"
    for job in range(jobs):
        write_run_dir(root, seed=job, run_dir=sweep_dir / str(job) / "run", **kwargs)  # type: ignore[arg-type]
    return sweep_dir
