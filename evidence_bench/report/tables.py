"""The report's tables, computed from a run's per-query scores: data first, rendering second.

Everything is at the primary evaluation mode. A feedback stage is compared with the initial
ranking of the same round and mode, paired on query_id (the inner join of the queries both
have), with a paired t-test and a sign-flip randomization test (Smucker, Allan & Carterette
2007 recommend the latter for IR). p-values are Holm-corrected (Holm 1979) within each family
of one measure, user, stage and round, across the run's configurations: the question a family
answers is "which settings changed this measure", so that is where the multiplicity lies.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import numpy as np
import pandas as pd

from evidence_bench.errors import DataError
from evidence_bench.evaluation.statistics import (
    holm,
    improved_degraded,
    paired_t_test,
    randomization_test,
    summarize,
)
from evidence_bench.report.data import RunData

__all__ = [
    "ALPHA",
    "Analysis",
    "Best",
    "Verdict",
    "analyze",
    "exclusions",
    "query_deltas",
    "summary_rows",
    "sweep_table",
    "verdict",
]

#: Adjusted p below this marks a change as significant.
ALPHA = 0.05
#: Sign-matrix cells (trials × queries, summed over comparisons) worth a process pool:
#: about two seconds of work in one process.
_PARALLEL_CELLS = 200_000_000
_GROUP = ["config_id", "policy", "round", "stage", "measure"]
_PAIR = ["config_id", "policy", "round", "measure"]


@dataclass(frozen=True)
class Best:
    """The configuration and stage with the largest mean change of the primary measure."""

    config_id: str
    label: str
    stage: str
    round: int
    #: Summary rows of the primary measure for this config, stage and round, one per user.
    rows: pd.DataFrame


@dataclass(frozen=True)
class Analysis:
    """A run and every table the report and the terminal summary show."""

    data: RunData
    summary: pd.DataFrame
    best: Best | None
    exclusions: pd.DataFrame
    trials: int


def _floats(values: np.ndarray) -> Sequence[float]:
    """An array where the statistics functions ask for a sequence: numpy arrays serve."""
    return cast(Sequence[float], values)


def _primary(data: RunData) -> pd.DataFrame:
    pq = data.per_query
    return pq[pq["eval_mode"] == data.settings.primary_mode]


def _summaries(frame: pd.DataFrame) -> pd.DataFrame:
    values = frame["value"].to_numpy(dtype=np.float64)
    rows = []
    for key, index in frame.groupby(_GROUP, observed=True, sort=False).indices.items():
        s = summarize(_floats(values[index]))
        rows.append((*cast(tuple[Any, ...], key), s.n, s.mean, s.std, s.ci_low, s.ci_high))
    return pd.DataFrame(rows, columns=[*_GROUP, "n", "mean", "std", "ci_low", "ci_high"])


def _wide(frame: pd.DataFrame) -> pd.DataFrame:
    """Stages as columns, one row per (config, user, round, measure, query)."""
    try:
        return frame.set_index([*_PAIR, "query_id", "stage"])["value"].unstack("stage")
    except ValueError as exc:
        raise DataError(
            f"per_query.csv: a (config_id, policy, query_id, round, stage, eval_mode, measure) "
            f"appears more than once: {exc}"
        ) from exc


def _randomization(
    pairs: list[tuple[Sequence[float], Sequence[float]]],
    trials: int,
    seed: int,
    workers: int | None,
) -> list[float]:
    """p-values of the randomization test for every pair, in order, in worker processes
    when there is enough work: a 27-config sweep holds about a thousand comparisons.

    Each test draws its own seeded signs, so the p-values do not depend on ``workers``. The
    pool uses forkserver (spawn where there is none): forking a process that may run threads
    is unsafe. If the pool cannot run, the tests run here.
    """
    test = partial(randomization_test, trials=trials, seed=seed)
    if workers is None:
        cells = trials * sum(len(a) for a, _ in pairs)
        workers = min(os.cpu_count() or 1, 8) if cells > _PARALLEL_CELLS else 1
    if workers > 1 and len(pairs) > 1:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        chunk = max(1, len(pairs) // (4 * workers))
        firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
        try:
            with ProcessPoolExecutor(workers, mp_context=context) as pool:
                return list(pool.map(test, firsts, seconds, chunksize=chunk))
        except (BrokenProcessPool, OSError):
            pass
    return [test(a, b) for a, b in pairs]


def _comparisons(
    wide: pd.DataFrame, stages: list[str], trials: int, seed: int, workers: int | None
) -> pd.DataFrame:
    rows = []
    pairs: list[tuple[Sequence[float], Sequence[float]]] = []
    for stage in stages:
        if stage not in wide or "initial" not in wide:
            continue
        pair = wide[["initial", stage]].dropna()
        before = pair["initial"].to_numpy(dtype=np.float64)
        after = pair[stage].to_numpy(dtype=np.float64)
        groups = pair.groupby(level=list(range(len(_PAIR))), observed=True, sort=False)
        for key, index in groups.indices.items():
            a, b = _floats(before[index]), _floats(after[index])
            delta = summarize(_floats(after[index] - before[index]))
            base = float(before[index].mean())
            improved, degraded, unchanged = improved_degraded(a, b)
            config_id, policy, round_, measure = cast(tuple[Any, ...], key)
            rows.append(
                {
                    "config_id": config_id,
                    "policy": policy,
                    "round": round_,
                    "stage": stage,
                    "measure": measure,
                    "n_paired": len(index),
                    "base_mean": base,
                    "delta": delta.mean,
                    "delta_ci_low": delta.ci_low,
                    "delta_ci_high": delta.ci_high,
                    "delta_pct": 100.0 * delta.mean / base if base else math.nan,
                    "improved": improved,
                    "degraded": degraded,
                    "unchanged": unchanged,
                    "p_t": paired_t_test(a, b),
                }
            )
            pairs.append((a, b))
    frame = pd.DataFrame(rows)
    frame["p_rand"] = _randomization(pairs, trials, seed, workers) if pairs else []
    return frame


def _holm(frame: pd.DataFrame, column: str) -> pd.Series:
    compared = frame[column].notna()
    adjusted = pd.Series(np.nan, index=frame.index, dtype="float64")
    family = ["measure", "policy", "stage", "round"]
    for _, group in frame[compared].groupby(family, observed=True, sort=False)[column]:
        adjusted.loc[group.index] = np.asarray(holm(group.tolist()), dtype=np.float64)
    return adjusted


def summary_rows(
    data: RunData, *, trials: int = 5000, seed: int = 0, workers: int | None = None
) -> pd.DataFrame:
    """Per config × user × round × stage × measure: mean ± CI and the comparison with initial.

    Rows of the initial stage have NaN comparison columns. ``significant`` is the Holm-adjusted
    randomization-test p below :data:`ALPHA`. ``workers``: processes for the randomization
    tests (None: one per core when the run is large, else none).
    """
    frame = _primary(data)
    summaries = _summaries(frame)
    stages = [s for s in data.stages if s != "initial"]
    compared = _comparisons(_wide(frame), stages, trials, seed, workers)
    keys = _GROUP
    for column in keys:
        summaries[column] = summaries[column].astype(str if column != "round" else "int64")
        if len(compared):
            compared[column] = compared[column].astype(str if column != "round" else "int64")
    table = summaries.merge(compared, on=keys, how="left") if len(compared) else summaries
    for column in ("p_t", "p_rand", "delta", "n_paired", "improved", "degraded", "unchanged"):
        if column not in table:
            table[column] = np.nan
    table["p_t_holm"] = _holm(table, "p_t")
    table["p_rand_holm"] = _holm(table, "p_rand")
    table["significant"] = table["p_rand_holm"] < ALPHA
    configs = data.configs.set_index("config_id")
    table["label"] = table["config_id"].map(configs["label"])
    table["role"] = table["config_id"].map(configs["role"])
    order = {
        "config_id": list(data.configs["config_id"]),
        "policy": list(data.policies),
        "stage": list(data.stages),
        "measure": list(data.settings.measures),
    }
    sort_keys = pd.DataFrame(
        {c: table[c].map({v: i for i, v in enumerate(o)}) for c, o in order.items()}
    )
    sort_keys["round"] = table["round"]
    ordered = sort_keys.sort_values(["measure", "round", "config_id", "policy", "stage"]).index
    return table.loc[ordered].reset_index(drop=True)


def _best(data: RunData, summary: pd.DataFrame) -> Best | None:
    compared = summary[
        summary["delta"].notna() & (summary["measure"] == data.settings.primary_measure)
    ]
    if compared.empty:
        return None
    last = int(compared["round"].max())
    candidates = compared[compared["round"] == last]
    feedback = candidates[candidates["role"] != "baseline"]
    candidates = feedback if len(feedback) else candidates
    # Mean over users of each user's mean change: every user counts once, whatever its n.
    scores = candidates.groupby(["config_id", "stage"], sort=False)["delta"].mean()
    config_id, stage = cast(tuple[str, str], scores.idxmax())
    rows = candidates[(candidates["config_id"] == config_id) & (candidates["stage"] == stage)]
    label = str(rows["label"].iloc[0])
    return Best(str(config_id), label, str(stage), last, rows.reset_index(drop=True))


def exclusions(data: RunData) -> pd.DataFrame:
    """Per round: the fewest and most queries left out at the primary mode, over configs × users.

    A query is left out of a round when it has a round-0 score but no score for the initial
    ranking of that round: in residual evaluation, no relevant document is left unseen. Round 0
    counts the queries of queries.csv that have no score at all (no relevant judgment).
    """
    frame = _primary(data)
    frame = frame[
        (frame["stage"] == "initial") & (frame["measure"] == data.settings.primary_measure)
    ]
    per_group = frame.groupby(["config_id", "policy", "round"], observed=True)["query_id"]
    counts: pd.DataFrame = per_group.nunique().pipe(lambda c: c[c > 0]).unstack("round")
    rows = []
    if 0 in counts:
        present = data.per_query["query_id"].nunique()
        total = max(int(data.manifest.get("queries", 0) or 0), len(data.queries), present)
        rows.append({"round": 0, "min": total - present, "max": total - present})
        for round_ in [int(r) for r in counts.columns if int(r) != 0]:
            missing = (counts[0] - counts[round_]).dropna()
            rows.append(
                {"round": int(round_), "min": int(missing.min()), "max": int(missing.max())}
            )
    return pd.DataFrame(rows, columns=["round", "min", "max"])


def query_deltas(data: RunData, config_id: str, stage: str, round_: int) -> pd.DataFrame:
    """Per user and query: the primary measure before (initial) and after ``stage``, and Δ."""
    frame = _primary(data)
    frame = frame[
        (frame["config_id"] == config_id)
        & (frame["round"] == round_)
        & (frame["measure"] == data.settings.primary_measure)
        & frame["stage"].isin(["initial", stage])
    ]
    wide = frame.pivot_table(
        index=["policy", "query_id"], columns="stage", values="value", observed=True
    )
    if "initial" not in wide or stage not in wide:
        return pd.DataFrame(columns=["policy", "query_id", "query", "before", "after", "delta"])
    wide = wide[["initial", stage]].dropna().reset_index()
    wide.columns = pd.Index(["policy", "query_id", "before", "after"])
    wide["policy"] = wide["policy"].astype(str)
    wide["query_id"] = wide["query_id"].astype(str)
    wide["delta"] = wide["after"] - wide["before"]
    texts = data.queries.drop_duplicates("query_id").set_index("query_id")["query"]
    wide["query"] = wide["query_id"].map(texts).fillna("")
    return wide.sort_values(["policy", "delta", "query_id"]).reset_index(drop=True)


def sweep_table(data: RunData, summary: pd.DataFrame, best: Best | None) -> pd.DataFrame | None:
    """Primary-measure change of each swept feedback config at the best stage and last round.

    None when fewer than two parameters were swept: a heatmap needs two axes.
    """
    if best is None or len(data.swept) < 2:
        return None
    rows = summary[
        (summary["measure"] == data.settings.primary_measure)
        & (summary["stage"] == best.stage)
        & (summary["round"] == best.round)
        & (summary["role"] != "baseline")
    ]
    params = data.configs.set_index("config_id")[list(data.swept)]
    table = rows.join(params, on="config_id")
    table = table.dropna(subset=list(data.swept))
    return table if len(table) else None


@dataclass(frozen=True)
class Verdict:
    """The answers the report opens with: did feedback help, where best, how sure, where not.

    ``outcome``: ``yes`` (the best setting's gain is significant for every user), ``partly``
    (for some users), ``unclear`` (a gain, not significant), ``no`` (no setting gained), or
    ``none`` (the run has no feedback round to compare).
    """

    outcome: str
    best: Best | None
    #: Over every config × user × feedback stage at the last round, primary measure.
    comparisons: int
    significant_gains: int
    significant_losses: int
    #: (label, policy, stage) of the significant losses.
    hurt: tuple[tuple[str, str, str], ...]
    #: The best setting's largest per-query losses (policy, query_id, query, delta).
    worst: pd.DataFrame


def verdict(analysis: Analysis, deltas: pd.DataFrame, worst: int = 3) -> Verdict:
    """Summarize the primary measure's comparisons at the last round into a :class:`Verdict`.

    ``deltas``: the best setting's per-query changes, from :func:`query_deltas`.
    """
    best = analysis.best
    if best is None:
        return Verdict("none", None, 0, 0, 0, (), deltas.head(0))
    s = analysis.summary
    last = s[
        (s["measure"] == analysis.data.settings.primary_measure)
        & (s["round"] == best.round)
        & s["delta"].notna()
    ]
    gains = last[last["significant"] & (last["delta"] > 0)]
    losses = last[last["significant"] & (last["delta"] < 0)]
    rows = best.rows
    won = int((rows["significant"] & (rows["delta"] > 0)).sum())
    if won == len(rows):
        outcome = "yes"
    elif won:
        outcome = "partly"
    elif float(rows["delta"].mean()) > 0:
        outcome = "unclear"
    else:
        outcome = "no"
    hurt = tuple(
        (str(r.label), str(r.policy), str(r.stage)) for r in losses.itertuples(index=False)
    )
    lost = deltas[deltas["delta"] < 0].sort_values(["delta", "policy", "query_id"])
    return Verdict(outcome, best, len(last), len(gains), len(losses), hurt, lost.head(worst))


def analyze(
    data: RunData, *, trials: int = 5000, seed: int = 0, workers: int | None = None
) -> Analysis:
    """Compute every table of the report once, for the HTML and the terminal to share."""
    summary = summary_rows(data, trials=trials, seed=seed, workers=workers)
    return Analysis(data, summary, _best(data, summary), exclusions(data), trials)
