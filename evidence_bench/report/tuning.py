"""The tuning section of a report: each fold's choice and the held-out gain over the default.

Read from a tuning run's own files (``folds.csv``, ``tuning.csv``, ``heldout.csv``, the
manifest's ``tuning``), so re-rendering needs nothing else. The pooled comparison is the
tuned system against the default weights, query by query, every query scored in the fold
that held it out: the paired difference of the objective (feedback's gain over its
no-feedback control), with a Student's t 95% interval, a paired t-test and a sign-flip
randomization test (:mod:`evidence_bench.evaluation.statistics`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evidence_bench.evaluation.statistics import (
    TIE,
    improved_degraded,
    paired_t_test,
    randomization_test,
    summarize,
)
from evidence_bench.report.numbers import number
from evidence_bench.report.numbers import signed_ascii as _signed
from evidence_bench.runs.data import read_csv

__all__ = ["Tuning", "load_tuning", "tuning_table", "tuning_view"]

_FOLD_SCORES = [
    "train_score", "heldout_n", "heldout_score", "default_heldout_score", "heldout_gain",
]  # fmt: skip
_HELDOUT = ["fold", "query_id", "default_control", "default", "tuned_control", "tuned"]


@dataclass(frozen=True)
class Tuning:
    """A tuning run's files."""

    settings: Mapping[str, Any]
    seed: int
    trials: pd.DataFrame
    folds: pd.DataFrame
    heldout: pd.DataFrame


def _csv(path: Path, required: list[str]) -> pd.DataFrame:
    return read_csv(path, required, dtype={"query_id": str})


def load_tuning(run_dir: Path, manifest: Mapping[str, Any]) -> Tuning | None:
    """The tuning files of ``run_dir``, or None where it is not a tuning run."""
    run_dir = Path(run_dir)
    settings = manifest.get("tuning")
    if not isinstance(settings, Mapping) or not (run_dir / "folds.csv").is_file():
        return None
    names = [str(n) for n in settings.get("space", {})]
    seeds = manifest.get("seeds")
    seed = seeds.get("seed", 0) if isinstance(seeds, Mapping) else 0
    return Tuning(
        settings=settings,
        seed=int(seed),
        trials=_csv(run_dir / "tuning.csv", ["fold", "trial", *names, "train_score", "chosen"]),
        folds=_csv(run_dir / "folds.csv", ["fold", "trial", *names, *_FOLD_SCORES]),
        heldout=_csv(run_dir / "heldout.csv", _HELDOUT),
    )


def _number(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


def _optimism(fold: Mapping[Any, Any], gains: pd.DataFrame) -> float:
    """How much better the chosen weights look on the training queries than on the held-out
    ones, beyond what the default weights show on the same two sets: (train − held out) −
    (default's train − default's held out). The raw gap is mostly which queries each side
    holds (the default, chosen by nobody, showed nearly the same per fold), and the
    default's gap, a control as the no-feedback ranker is one, takes it out. ``gains``: the
    default's per-query gain, each query in the fold that held it out."""
    mine = gains["fold"] == int(fold["fold"])
    if not mine.any() or mine.all() or math.isnan(float(fold["heldout_score"])):
        return math.nan
    default_gap = float(gains.loc[~mine, "gain"].mean() - gains.loc[mine, "gain"].mean())
    return float(fold["train_score"]) - float(fold["heldout_score"]) - default_gap


def _tied(trials: pd.DataFrame, fold: int) -> int:
    """How many of ``fold``'s trials reach its best training score (within :data:`TIE`):
    the earliest of them is chosen, so where every trial ties the choice says nothing (a
    measure the objective's mode cannot change: frozen nDCG@10 with 10 results examined)."""
    scores = trials.loc[trials["fold"] == fold, "train_score"].dropna()
    return int((scores >= scores.max() - TIE).sum()) if len(scores) else 0


def _at_bound(fold: Mapping[Any, Any], settings: Mapping[str, Any]) -> list[str]:
    """The parameters a fold chose at an end of their interval, or within one grid step or
    2% of the width (whichever is more; 2% when continuous) of it: unless that end is a
    hard limit (gamma >= 0), the best may lie beyond."""
    step = float(settings.get("step") or 0.0)
    edge = []
    for name, (low, high) in settings.get("space", {}).items():
        near = max(step, 0.02 * (high - low)) + 1e-9
        if min(abs(float(fold[name]) - low), abs(float(fold[name]) - high)) <= near:
            edge.append(str(name))
    return edge


def tuning_view(tuning: Tuning, *, trials: int = 5000) -> dict[str, Any]:
    """The numbers the report shows: per fold, pooled over folds, and every trial."""
    settings = tuning.settings
    names = [str(n) for n in settings.get("space", {})]
    paired = tuning.heldout.dropna(subset=_HELDOUT[2:])
    default = (paired["default"] - paired["default_control"]).to_numpy().tolist()
    tuned = (paired["tuned"] - paired["tuned_control"]).to_numpy().tolist()
    difference = summarize([t - d for t, d in zip(tuned, default, strict=True)], differences=True)
    up, down, same = improved_degraded(default, tuned)
    # (gains over each one's control: paired differences too)
    tuned_summary = summarize(tuned, differences=True)
    default_summary = summarize(default, differences=True)
    folds = tuning.folds.to_dict("records")
    gains = tuning.heldout.dropna(subset=["default", "default_control"])
    gains = gains.assign(gain=gains["default"] - gains["default_control"])
    for f in folds:
        f["optimism"] = _optimism(f, gains)
    optimism = [f["optimism"] for f in folds if not math.isnan(f["optimism"])]
    tied = {int(f["fold"]): _tied(tuning.trials, int(f["fold"])) for f in folds}
    per_fold = int(settings.get("trials") or 0)
    return {
        "names": names,
        "settings": settings,
        "objective": settings.get("objective", {}),
        "folds": [
            {
                **{k: _number(v) if k not in ("fold", "trial") else int(v) for k, v in f.items()},
                "params": {n: float(f[n]) for n in names},
                "at_bound": _at_bound(f, settings),
                "tied": tied[int(f["fold"])],
            }
            for f in folds
        ],
        #: the folds whose every trial tied: their choice (the earliest) is arbitrary
        "flat": [fold for fold, n in tied.items() if per_fold and n >= per_fold],
        "pooled": {
            "n": difference.n,
            "gain": difference.mean,
            "ci_low": difference.ci_low,
            "ci_high": difference.ci_high,
            "tuned": tuned_summary.mean,
            "tuned_ci_low": tuned_summary.ci_low,
            "tuned_ci_high": tuned_summary.ci_high,
            "default": default_summary.mean,
            "default_ci_low": default_summary.ci_low,
            "default_ci_high": default_summary.ci_high,
            "improved": up,
            "degraded": down,
            "unchanged": same,
            "p_t": paired_t_test(default, tuned),
            "p_randomization": randomization_test(default, tuned, trials=trials, seed=tuning.seed),
            "randomization_trials": trials,
            "optimism": math.fsum(optimism) / len(optimism) if optimism else math.nan,
        },
        "trials": tuning.trials.to_dict("records"),
        "default_params": settings.get("default", {}),
    }


def tuning_table(run_dir: Path) -> str:
    """Plain text for the terminal: each fold's choice, then the pooled held-out gain."""
    import json

    manifest = json.loads((Path(run_dir) / "manifest.json").read_text("utf-8"))
    tuning = load_tuning(run_dir, manifest)
    if tuning is None:
        return ""
    view = tuning_view(tuning, trials=1000)
    names = view["names"]
    objective = view["objective"]
    lines = [
        "",
        f"Tuning: {len(view['folds'])}-fold cross-validation, "
        f"{view['settings'].get('trials')} TPE trials per fold; objective "
        f"{objective.get('measure')} {objective.get('stage')} − {objective.get('control')}, "
        f"round {objective.get('round')}, {objective.get('eval_mode')}",
        "fold  " + "  ".join(f"{n:>6}" for n in names) + "   train  held-out  default  gain",
    ]
    for f in view["folds"]:
        lines.append(
            f"{f['fold']:>4}  "
            + "  ".join(f"{f['params'][n]:>6.3g}" for n in names)
            + f"  {number(f['train_score']):>6}  {number(f['heldout_score']):>8}"
            + f"  {number(f['default_heldout_score']):>7}  {_signed(f['heldout_gain'])}"
        )
    if view["flat"]:
        lines.append(
            f"every trial of fold {', '.join(map(str, view['flat']))} reached the same "
            "training score: its choice (the earliest trial) is arbitrary"
        )
    edge = sorted({n for f in view["folds"] for n in f["at_bound"]})
    if edge:
        lines.append(
            f"chosen at or next to an end of its interval: {', '.join(edge)} "
            "(unless that end is a hard limit, widen experiment.tune.space)"
        )
    p = view["pooled"]
    lines.append(
        f"held-out gain over the default, pooled over {p['n']} queries: "
        f"{_signed(p['gain'])} [{_signed(p['ci_low'])}, {_signed(p['ci_high'])}], "
        f"paired t p = {p['p_t']:.3g}; mean optimism (train − held-out beyond the default "
        f"weights' own) {_signed(p['optimism'])}"
    )
    return "\n".join(lines) + "\n"
