"""The report's tables: what feedback itself did, against controls at equal depth.

Everything is at the primary evaluation mode. A feedback stage is never compared with a
ranking of another shape (evaluation.attribution.BASELINES): ``rerank`` has ``initial`` (the
provider's order, as deep as the candidates) as its before and ``control`` (the same ranker,
feedback terms off, same candidates) as its control; ``expand`` has ``deep_initial`` (the
provider's list for the original query deepened to the expanded list's length) and
``deep_control`` (the no-feedback ranker over it). The gain attributable to feedback,
feedback − control, comes from one
:func:`~evidence_bench.evaluation.attribution.attribution` call; what the user's judgments
add, rerank − ``shuffled`` (the same labels dealt at random over the examined documents,
evaluation.attribution.JUDGMENT), from one more. The change against before is computed here
the same way, over the same queries (those scored in all three rankings): mean paired
difference with a t interval and a sign-flip randomization test (Smucker, Allan & Carterette
2007 recommend it for IR). p-values are Holm-corrected (Holm 1979) within each family of one
measure, user, stage and round, across the run's configurations: the question a family
answers is "which settings changed this measure", so that is where the multiplicity is.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
from scipy import stats

from evidence_bench.errors import DataError
from evidence_bench.evaluation.attribution import BASELINES, JUDGMENT, attribution
from evidence_bench.evaluation.statistics import holm, randomization_test
from evidence_bench.report.data import RunData

__all__ = [
    "ALPHA",
    "BASELINES",
    "JUDGMENT",
    "Analysis",
    "Best",
    "Verdict",
    "analyze",
    "exclusions",
    "query_deltas",
    "stage_means",
    "summary_rows",
    "sweep_table",
    "verdict",
]

#: Adjusted p below this marks a change as significant.
ALPHA = 0.05
#: Sign-matrix cells (trials × queries, summed over comparisons) worth a process pool:
#: about two seconds of work in one process.
_PARALLEL_CELLS = 200_000_000
_KEYS = ["config_id", "policy", "round", "stage", "measure"]
_PAIR = ["config_id", "policy", "round", "measure"]
_FAMILY = ["measure", "policy", "stage", "round"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Best:
    """The configuration and feedback stage with the largest attributable gain of the
    primary measure at the first feedback round, averaged over users."""

    config_id: str
    label: str
    stage: str
    round: int
    #: Summary rows of the primary measure for this config and stage at ``round``, per user.
    rows: pd.DataFrame
    last_round: int
    #: The same at the last round (later rounds build on earlier feedback, and lose the
    #: queries with no relevant document left unseen).
    last_rows: pd.DataFrame
    #: This config's ``rerank`` rows at ``round``, per user, for what the judgments add
    #: (``judgment_*`` columns: rerank − shuffled); empty when the run has no ``shuffled``.
    judgment: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass(frozen=True)
class Analysis:
    """A run and every table the report and the terminal summary show."""

    data: RunData
    #: Per config × user × round × feedback stage × measure: before, control, feedback, the
    #: attributable gain, what the judgments add (rerank only) and the change against before
    #: (see :func:`summary_rows`).
    summary: pd.DataFrame
    #: Round 0 means of the provider's order and the no-feedback control, per config × user.
    round0: pd.DataFrame
    best: Best | None
    exclusions: pd.DataFrame
    trials: int
    #: Feedback stages the run holds without their controls (a run from before controls).
    missing_controls: tuple[str, ...] = ()


def _primary(data: RunData) -> pd.DataFrame:
    pq = data.per_query
    return pq[pq["eval_mode"] == data.settings.primary_mode]


def _intervals(n: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Half-widths of Student's t 95% intervals, as ``statistics.summarize`` computes them:
    t(0.975, n − 1)·std/√n, and 0 for a single value."""
    n = np.asarray(n, dtype=np.float64)
    std = np.nan_to_num(np.asarray(std, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        half = stats.t.ppf(0.975, np.maximum(n - 1.0, 1.0)) * std / np.sqrt(n)
    return np.where(n > 1, half, 0.0)


def _means(frame: pd.DataFrame) -> pd.DataFrame:
    """n, mean and 95% CI per config × user × round × stage × measure, vectorized."""
    out = (
        frame.groupby(_KEYS, observed=True, sort=False)["value"]
        .agg(["count", "mean", "std"])
        .reset_index()
        .rename(columns={"count": "n"})
    )
    half = _intervals(out["n"].to_numpy(), out["std"].to_numpy())
    out["ci_low"] = out["mean"] - half
    out["ci_high"] = out["mean"] + half
    for column in ("config_id", "policy", "stage", "measure"):
        out[column] = out[column].astype(str)
    out["round"] = out["round"].astype("int64")
    return out.drop(columns="std")


def stage_means(data: RunData, config_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean [95% CI] of every stage at the primary mode, for ``config_ids`` (None: all)."""
    frame = _primary(data)
    if config_ids is not None:
        frame = frame[frame["config_id"].isin(list(config_ids))]
    return _means(frame)


def _wide(frame: pd.DataFrame) -> pd.DataFrame:
    """Stages as columns, one row per (config, user, round, measure, query) of round ≥ 1."""
    rounds = frame[frame["round"] > 0]
    try:
        return rounds.set_index([*_PAIR, "query_id", "stage"])["value"].unstack("stage")
    except ValueError as exc:
        raise DataError(
            f"per_query.csv: a (config_id, policy, query_id, round, stage, eval_mode, measure) "
            f"appears more than once: {exc}"
        ) from exc


#: (before, feedback) per comparison; numpy arrays serve where a sequence is asked for.
Pairs = list[tuple[Sequence[float], Sequence[float]]]


#: A per-query change smaller than this is a tie (as statistics.improved_degraded counts).
_TIE = 1e-9


def _versus_before(wide: pd.DataFrame) -> tuple[pd.DataFrame, Pairs]:
    """Each feedback stage against its before, over the queries scored in before, control and
    feedback (the queries :func:`attribution` pairs): mean change and its 95% CI, queries
    better, worse and unchanged, and the (before, feedback) arrays for the randomization
    tests, in row order."""
    keys: list[tuple[Any, ...]] = []
    sizes, means, stds, better, worse = [], [], [], [], []
    pairs: Pairs = []
    for stage, (before, control) in BASELINES.items():
        if not {stage, before, control} <= set(wide.columns):
            continue
        paired = wide[[before, control, stage]].dropna()
        b = paired[before].to_numpy(dtype=np.float64)
        f = paired[stage].to_numpy(dtype=np.float64)
        groups = paired.groupby(level=list(range(len(_PAIR))), observed=True, sort=False)
        for key, index in groups.indices.items():
            diff = f[index] - b[index]
            config_id, policy, round_, measure = cast(tuple[Any, ...], key)
            keys.append((str(config_id), str(policy), int(round_), stage, str(measure)))
            sizes.append(len(index))
            means.append(float(diff.mean()))
            stds.append(float(diff.std(ddof=1)) if len(index) > 1 else 0.0)
            better.append(int(np.count_nonzero(diff > _TIE)))
            worse.append(int(np.count_nonzero(diff < -_TIE)))
            pairs.append((cast(Sequence[float], b[index]), cast(Sequence[float], f[index])))
    table = pd.DataFrame(keys, columns=_KEYS)
    half = _intervals(np.asarray(sizes), np.asarray(stds))
    table["delta"] = means
    table["delta_ci_low"] = table["delta"] - half
    table["delta_ci_high"] = table["delta"] + half
    table["improved_before"] = better
    table["degraded_before"] = worse
    table["unchanged_before"] = np.asarray(sizes, dtype=np.int64) - table["improved_before"]
    table["unchanged_before"] -= table["degraded_before"]
    return table, pairs


def _context() -> Any:
    # forkserver (spawn where there is none): forking a process that may run threads is unsafe.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _alongside(
    work: Callable[[], _T], pairs: Pairs, trials: int, seed: int, workers: int | None
) -> tuple[_T, list[float]]:
    """``work()`` here while worker processes run the randomization tests of ``pairs``.

    The attribution call holds this process for most of a sweep's analysis, so the tests
    against before run beside it rather than after it. Each test draws its own seeded signs:
    the p-values do not depend on ``workers``. If the pool cannot run, the tests run here.
    """
    test = partial(randomization_test, trials=trials, seed=seed)
    if workers is None:
        cells = trials * sum(len(a) for a, _ in pairs)
        workers = min(os.cpu_count() or 1, 8) - 1 if cells > _PARALLEL_CELLS else 0
    pool: ProcessPoolExecutor | None = None
    pending: Iterator[float] | None = None
    if workers >= 1 and len(pairs) > 1:
        try:
            # One BLAS thread per worker: this process's tests use BLAS at the same time, and
            # a multithreaded BLAS on every process oversubscribes the cores (twice slower).
            # Set before the worker imports numpy, which it does when a test arrives.
            pool = ProcessPoolExecutor(
                workers,
                mp_context=_context(),
                initializer=os.putenv,
                initargs=("OPENBLAS_NUM_THREADS", "1"),
            )
            chunk = max(1, len(pairs) // (4 * workers))
            pending = pool.map(test, [a for a, _ in pairs], [b for _, b in pairs], chunksize=chunk)
        except (BrokenProcessPool, OSError):
            pending = None
    try:
        result = work()
        p_values: list[float] | None = None
        if pending is not None:
            try:
                p_values = list(pending)
            except (BrokenProcessPool, OSError):
                p_values = None
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if p_values is None:
        p_values = [test(a, b) for a, b in pairs]
    return result, p_values


def _holm(frame: pd.DataFrame, column: str) -> pd.Series:
    compared = frame[column].notna()
    adjusted = pd.Series(np.nan, index=frame.index, dtype="float64")
    for _, group in frame[compared].groupby(_FAMILY, observed=True, sort=False)[column]:
        adjusted.loc[group.index] = np.asarray(holm(group.tolist()), dtype=np.float64)
    return adjusted


_SUMMARY_COLUMNS = [
    *_KEYS,
    "n",
    "before",
    "control",
    "feedback",
    "gain",
    "gain_ci_low",
    "gain_ci_high",
    "improved",
    "degraded",
    "unchanged",
    "p_t",
    "p_rand",
    "p_holm",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "improved_before",
    "degraded_before",
    "unchanged_before",
    "p_rand_before",
    "shuffled",
    "judgment_n",
    "judgment_gain",
    "judgment_ci_low",
    "judgment_ci_high",
    "judgment_p_rand",
    "judgment_p_holm",
]
#: attribution(..., baselines=JUDGMENT) columns, as the summary names them: its control is
#: ``shuffled``, its gain what the judgments add.
_JUDGMENT_COLUMNS = {
    "control": "shuffled",
    "n": "judgment_n",
    "gain": "judgment_gain",
    "gain_ci_low": "judgment_ci_low",
    "gain_ci_high": "judgment_ci_high",
    "p_randomization": "judgment_p_rand",
    "p_holm": "judgment_p_holm",
}


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """attribution's rows with the summary's key types (it keeps the input's categories)."""
    frame = frame.drop(columns="eval_mode")
    for column in ("config_id", "policy", "stage", "measure"):
        frame[column] = frame[column].astype(str)
    frame["round"] = frame["round"].astype("int64")
    return frame


def _judgment(frame: pd.DataFrame, mode: str, trials: int, seed: int) -> pd.DataFrame:
    """What the user's judgments add: one attribution call with the shuffled-label control.

    Only the stages it pairs are passed, so its pivot is a fraction of the run's.
    """
    stages = {s for stage, pair in JUDGMENT.items() for s in (stage, *pair)}
    rows = attribution(
        frame[frame["stage"].isin(stages)],
        eval_modes=(mode,),
        trials=trials,
        seed=seed,
        baselines=JUDGMENT,
    )
    return _keyed(rows).rename(columns=_JUDGMENT_COLUMNS)[[*_KEYS, *_JUDGMENT_COLUMNS.values()]]


def _fixed(data: RunData, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``frame`` without the feedback-stage cells that cannot change in frozen mode, and a
    summary row (n and the means of before, control and feedback) for each of those.

    Such a cell's gain is 0 by construction (evaluation.frozen), so it is no evidence: it
    joins no test and no Holm family, and the report says it cannot change.
    """
    marked = data.fixed
    marked = marked[(marked["eval_mode"] == data.settings.primary_mode)]
    marked = marked[marked["stage"].isin(list(BASELINES))]
    if marked.empty or frame.empty:
        return frame, pd.DataFrame(columns=_KEYS)
    cells = set(marked[_KEYS].itertuples(index=False, name=None))
    out = pd.MultiIndex.from_frame(frame[_KEYS]).isin(list(cells))
    pairs = pd.MultiIndex.from_frame(frame[_PAIR]).isin([(c, p, r, m) for c, p, r, _, m in cells])
    wide = _wide(frame[pairs])
    rows = []
    for stage, (before, control) in BASELINES.items():
        if not {stage, before, control} <= set(wide.columns):
            continue
        paired = wide[[before, control, stage]].dropna()
        for key, group in paired.groupby(level=list(range(len(_PAIR))), observed=True):
            config_id, policy, round_, measure = (str(k) for k in cast(tuple[Any, ...], key))
            if (config_id, policy, int(round_), stage, measure) in cells:
                means = group.mean()
                row = (config_id, policy, int(round_), stage, measure, len(group))
                rows.append((*row, means[before], means[control], means[stage]))
    columns = [*_KEYS, "n", "before", "control", "feedback"]
    return frame[~out], pd.DataFrame(rows, columns=columns).assign(fixed=True)


def _summary(
    data: RunData, frame: pd.DataFrame, trials: int, seed: int, workers: int | None
) -> pd.DataFrame:
    frame, fixed = _fixed(data, frame)
    wide = _wide(frame)
    before, pairs = _versus_before(wide)
    del wide
    if before.empty:
        table = pd.DataFrame({c: pd.Series(dtype="float64") for c in _SUMMARY_COLUMNS})
        for column in _KEYS:
            table[column] = table[column].astype("int64" if column == "round" else str)
    else:
        mode = data.settings.primary_mode
        (gains, judgment), p_before = _alongside(
            lambda: (
                attribution(frame, eval_modes=(mode,), trials=trials, seed=seed),
                _judgment(frame, mode, trials, seed),
            ),
            pairs,
            trials,
            seed,
            workers,
        )
        before["p_rand_before"] = p_before
        gains = _keyed(gains).rename(columns={"initial": "before", "p_randomization": "p_rand"})
        table = gains.merge(before, on=_KEYS, how="left").merge(judgment, on=_KEYS, how="left")
        table = table[_SUMMARY_COLUMNS]
    if len(fixed):
        table = pd.concat([table.assign(fixed=False), fixed], ignore_index=True)
    table["fixed"] = table.get("fixed", pd.Series(False, index=table.index)).astype(bool)
    table["significant"] = table["p_holm"] < ALPHA
    table["judgment_significant"] = table["judgment_p_holm"] < ALPHA
    # Relative change against before: (feedback − before) / before, over the same queries.
    ratio = table["delta"] / table["before"].where(table["before"] > 0)
    table["delta_pct"] = 100.0 * ratio
    table["p_holm_before"] = _holm(table, "p_rand_before")
    table["significant_before"] = table["p_holm_before"] < ALPHA
    table["before_stage"] = table["stage"].map({s: b for s, (b, _) in BASELINES.items()})
    table["control_stage"] = table["stage"].map({s: c for s, (_, c) in BASELINES.items()})
    configs = data.configs.set_index("config_id")
    table["label"] = table["config_id"].map(configs["label"])
    table["role"] = table["config_id"].map(configs["role"])
    return _sorted(data, table)


def _sorted(data: RunData, table: pd.DataFrame) -> pd.DataFrame:
    order = {
        "config_id": list(data.configs["config_id"]),
        "policy": list(data.policies),
        "stage": [*data.stages, *BASELINES],
        "measure": list(data.settings.measures),
    }
    sort_keys = pd.DataFrame(
        {c: table[c].map({v: i for i, v in enumerate(dict.fromkeys(o))}) for c, o in order.items()}
    )
    sort_keys["round"] = table["round"]
    ordered = sort_keys.sort_values(["measure", "round", "config_id", "policy", "stage"]).index
    return table.loc[ordered].reset_index(drop=True)


def summary_rows(
    data: RunData, *, trials: int = 5000, seed: int = 0, workers: int | None = None
) -> pd.DataFrame:
    """Per config × user × round ≥ 1 × feedback stage × measure, at the primary mode.

    Columns: the keys, ``n`` (queries scored in before, control and feedback), the means
    ``before``, ``control``, ``feedback``; the attributable gain (feedback − control) with
    ``gain_ci_low/high``, ``improved/degraded/unchanged`` against control, ``p_t``,
    ``p_rand``, ``p_holm`` and ``significant`` (``p_holm`` < :data:`ALPHA`); the change
    against before ``delta`` with ``delta_ci_low/high``, ``delta_pct`` (percent of before),
    ``improved/degraded/unchanged_before``, ``p_rand_before``, ``p_holm_before``,
    ``significant_before``; what the judgments add (rerank rows; NaN elsewhere), from
    :data:`JUDGMENT`: the ``shuffled`` mean, ``judgment_n``, ``judgment_gain`` (rerank −
    shuffled) with ``judgment_ci_low/high``, ``judgment_p_rand``, ``judgment_p_holm``,
    ``judgment_significant``; ``before_stage``, ``control_stage``, ``label``, ``role``;
    ``fixed``: the cell cannot change in frozen mode (summary.csv), so it has its means and
    no gain, test or Holm family.
    ``workers``: processes for the tests against before (None: one per core but one when
    the run is large, else none).
    """
    return _summary(data, _primary(data), trials, seed, workers)


def _best(data: RunData, summary: pd.DataFrame) -> Best | None:
    compared = summary[
        summary["gain"].notna() & (summary["measure"] == data.settings.primary_measure)
    ]
    if compared.empty:
        return None
    first, last = int(compared["round"].min()), int(compared["round"].max())
    candidates = compared[compared["round"] == first]
    feedback = candidates[candidates["role"] != "baseline"]
    candidates = feedback if len(feedback) else candidates
    # Mean over users of each user's gain: every user counts once, whatever its n.
    scores = candidates.groupby(["config_id", "stage"], sort=False)["gain"].mean()
    config_id, stage = cast(tuple[str, str], scores.idxmax())

    def rows(round_: int) -> pd.DataFrame:
        mine = compared[
            (compared["config_id"] == config_id)
            & (compared["stage"] == stage)
            & (compared["round"] == round_)
        ]
        return mine.reset_index(drop=True)

    chosen = rows(first)
    label = str(chosen["label"].iloc[0])
    judged = summary[
        (summary["config_id"] == config_id)
        & (summary["stage"] == "rerank")
        & (summary["round"] == first)
        & (summary["measure"] == data.settings.primary_measure)
        & summary["judgment_gain"].notna()
    ].reset_index(drop=True)
    return Best(str(config_id), label, str(stage), first, chosen, last, rows(last), judged)


def _exclusions(data: RunData, frame: pd.DataFrame) -> pd.DataFrame:
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


def exclusions(data: RunData) -> pd.DataFrame:
    """Per round: the fewest and most queries left out at the primary mode, over configs × users.

    A query is left out of a round when it has a round-0 score but no score for the initial
    ranking of that round: in residual evaluation, no relevant document is left unseen. Round 0
    counts the queries of queries.csv that have no score at all (no relevant judgment).
    """
    return _exclusions(data, _primary(data))


_DELTA_COLUMNS = [
    "policy",
    "query_id",
    "query",
    "before",
    "control",
    "after",
    "delta",
    "delta_before",
]


def query_deltas(data: RunData, config_id: str, stage: str, round_: int) -> pd.DataFrame:
    """Per user and query: the primary measure before, in the control and after ``stage``.

    ``delta`` is after − control (what feedback did), ``delta_before`` after − before; only
    queries scored in all three count, as in the summary.
    """
    before, control = BASELINES[stage]
    pq = data.per_query
    frame = pq[(pq["config_id"] == config_id) & (pq["round"] == round_)]
    frame = frame[
        (frame["eval_mode"] == data.settings.primary_mode)
        & (frame["measure"] == data.settings.primary_measure)
        & frame["stage"].isin([before, control, stage])
    ]
    wide = frame.pivot_table(
        index=["policy", "query_id"], columns="stage", values="value", observed=True
    )
    if not {before, control, stage} <= set(wide.columns):
        return pd.DataFrame(columns=_DELTA_COLUMNS)
    wide = wide[[before, control, stage]].dropna().reset_index()
    wide.columns = pd.Index(["policy", "query_id", "before", "control", "after"])
    wide["policy"] = wide["policy"].astype(str)
    wide["query_id"] = wide["query_id"].astype(str)
    wide["delta"] = wide["after"] - wide["control"]
    wide["delta_before"] = wide["after"] - wide["before"]
    texts = data.queries.drop_duplicates("query_id").set_index("query_id")["query"]
    wide["query"] = wide["query_id"].map(texts).fillna("")
    return wide.sort_values(["policy", "delta", "query_id"]).reset_index(drop=True)[_DELTA_COLUMNS]


def sweep_table(data: RunData, summary: pd.DataFrame, best: Best | None) -> pd.DataFrame | None:
    """Attributable gain of the primary measure for each swept feedback config, at the best
    stage and the first round, with its parameters. None when fewer than two parameters were
    swept: a heatmap needs two axes.

    An alias (configs.csv ``alias_of``) has no rows of its own: it gets its target's, with
    its own parameters and ``alias_of`` set, so the heatmap can mark it.
    """
    if best is None or len(data.swept) < 2:
        return None
    rows = summary[
        (summary["measure"] == data.settings.primary_measure)
        & (summary["stage"] == best.stage)
        & (summary["round"] == best.round)
        & (summary["role"] != "baseline")
    ]
    aliases = pd.DataFrame(
        [(target, alias) for alias, target in data.aliases.items()],
        columns=["config_id", "alias"],
    )
    shared = rows.merge(aliases, on="config_id")
    shared = shared.rename(columns={"config_id": "alias_of", "alias": "config_id"})
    rows = pd.concat([rows.assign(alias_of=""), shared], ignore_index=True)
    params = data.configs.set_index("config_id")[list(data.swept)]
    table = rows.join(params, on="config_id")
    table = table.dropna(subset=list(data.swept))
    return table if len(table) else None


@dataclass(frozen=True)
class Verdict:
    """The answers the report opens with: did feedback help (its own gain over the control,
    at equal depth), where best, how sure, where it hurt.

    ``outcome``: ``yes`` (the best setting's gain is significant for every user), ``partly``
    (for some users), ``unclear`` (a gain, not significant), ``no`` (no setting gained),
    ``fixed`` (the primary measure cannot change in frozen mode anywhere), or ``none`` (the
    run has no feedback stage with its controls).
    """

    outcome: str
    best: Best | None
    #: Over every config × user × feedback stage at the best's (first) round, primary measure.
    comparisons: int
    significant_gains: int
    significant_losses: int
    #: (label, policy, stage) of the significant losses at that round.
    hurt: tuple[tuple[str, str, str], ...]
    #: The best setting's largest per-query losses against its control (policy, query_id,
    #: query, delta).
    worst: pd.DataFrame
    #: Significant gains and losses at the last round (equal to the above with one round).
    last_gains: int = 0
    last_losses: int = 0


def _significant(rows: pd.DataFrame, sign: int) -> pd.DataFrame:
    return cast(pd.DataFrame, rows[rows["significant"] & (np.sign(rows["gain"]) == sign)])


def verdict(analysis: Analysis, deltas: pd.DataFrame, worst: int = 3) -> Verdict:
    """Answer from the attributable gain of the primary measure at the best's round.

    ``deltas``: the best setting's per-query changes, from :func:`query_deltas`.
    """
    best = analysis.best
    s = analysis.summary
    if best is None:
        fixed = s[s["measure"] == analysis.data.settings.primary_measure]["fixed"].any()
        return Verdict("fixed" if fixed else "none", None, 0, 0, 0, (), deltas.head(0))
    primary = s[(s["measure"] == analysis.data.settings.primary_measure) & s["gain"].notna()]
    first = primary[primary["round"] == best.round]
    last = primary[primary["round"] == best.last_round]
    losses = _significant(first, -1)
    rows = best.rows
    won = len(_significant(rows, 1))
    if won == len(rows):
        outcome = "yes"
    elif won:
        outcome = "partly"
    elif float(rows["gain"].mean()) > 0:
        outcome = "unclear"
    else:
        outcome = "no"
    hurt = tuple(
        (str(r.label), str(r.policy), str(r.stage)) for r in losses.itertuples(index=False)
    )
    lost = deltas[deltas["delta"] < 0].sort_values(["delta", "policy", "query_id"])
    return Verdict(
        outcome,
        best,
        len(first),
        len(_significant(first, 1)),
        len(losses),
        hurt,
        lost.head(worst),
        len(_significant(last, 1)),
        len(_significant(last, -1)),
    )


def _missing_controls(data: RunData) -> tuple[str, ...]:
    present = set(data.stages)
    return tuple(
        stage
        for stage, needed in BASELINES.items()
        if stage in present and not set(needed) <= present
    )


def analyze(
    data: RunData, *, trials: int = 5000, seed: int = 0, workers: int | None = None
) -> Analysis:
    """Compute every table of the report once, for the HTML and the terminal to share."""
    frame = _primary(data)
    summary = _summary(data, frame, trials, seed, workers)
    start = frame[(frame["round"] == 0) & frame["stage"].isin(["initial", "control"])]
    return Analysis(
        data,
        summary,
        _means(start),
        _best(data, summary),
        _exclusions(data, frame),
        trials,
        _missing_controls(data),
    )
