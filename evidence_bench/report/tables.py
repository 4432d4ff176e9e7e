"""The report's tables: what feedback itself did, against controls at equal depth, shaped
from what :mod:`evidence_bench.evaluation` computes. Nothing here pairs, tests or corrects.

Everything is at the primary evaluation mode. Each feedback stage is compared with its
before and its control of the same shape (evaluation.attribution.BASELINES) and, for
rerank, with ``shuffled`` (evaluation.attribution.JUDGMENT), all in one
:func:`~evidence_bench.evaluation.comparisons.compare` call.

A row's own numbers (n, means, gain and its CI, counts, p) are over the queries its config
keeps. Whatever sets configs side by side uses the queries every config of the family keeps
(``n_common``): the Holm correction (Holm 1979; a family is one measure, user, stage and
round across the run's configurations, the question "which settings changed this
measure"), the best setting, the sweep's heatmap and the rounds chart. The best setting is
picked as the largest of many gains, so its interval is a simultaneous one over every
candidate (Bonferroni; Dunn 1961), not the plain 95% interval a pre-chosen setting would get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from evidence_bench._forked import both
from evidence_bench._trim import release_memory
from evidence_bench.evaluation.attribution import BASELINES, JUDGMENT, comparisons
from evidence_bench.evaluation.comparisons import Comparisons, common_queries, compare, strings
from evidence_bench.evaluation.oracle_share import REFERENCE, SHARE_COLUMNS, oracle_share
from evidence_bench.evaluation.statistics import MIN_TRIALS, selection_intervals, summarize_groups
from evidence_bench.report.validity import (
    Validity,
    ValidityTables,
    run_labels,
    validity,
    validity_tables,
)
from evidence_bench.runs.data import Cell, RunData, judged_by_cell

__all__ = [
    "ALPHA",
    "BASELINES",
    "CONTROLS",
    "JUDGMENT",
    "Analysis",
    "Best",
    "Verdict",
    "analyze",
    "oracle_shares",
    "query_deltas",
    "rounds_means",
    "summary_rows",
    "sweep_table",
    "verdict",
]

#: Adjusted p below this marks a change as significant.
ALPHA = 0.05
_KEYS = ["config_id", "policy", "round", "stage", "measure"]
#: feedback stage -> its before, its no-feedback control, its shuffled-labels control
_BEFORES = {stage: pair[0] for stage, pair in BASELINES.items()}
CONTROLS = {stage: pair[1] for stage, pair in BASELINES.items()}
_SHUFFLED = {stage: pair[1] for stage, pair in JUDGMENT.items()}


@dataclass(frozen=True)
class Best:
    """The configuration and feedback stage with the largest attributable gain of the
    primary measure at the first feedback round, averaged over users, each user's gain over
    the queries every configuration keeps."""

    config_id: str
    label: str
    stage: str
    round: int
    #: Summary rows of the primary measure for this config and stage at ``round``, per user;
    #: ``best_ci_low/high``: the selection-adjusted interval of ``gain_common``, ``best_p``
    #: its p adjusted the same way (Bonferroni over the candidates).
    rows: pd.DataFrame
    last_round: int
    #: The same at the last round (later rounds build on earlier feedback, and lose the
    #: queries with no relevant document left unseen).
    last_rows: pd.DataFrame
    #: This config's ``rerank`` rows at ``round``, per user, for what the judgments add
    #: (``judgment_*`` columns: rerank − shuffled); empty when the run has no ``shuffled``.
    judgment: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: How many config × stage × user gains the best was picked from (the intervals' m).
    candidates: int = 1


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
    #: Randomization trials per test (at least 100 per configuration of a Holm family).
    trials: int
    #: Feedback stages the run holds without their controls (a run from before controls).
    missing_controls: tuple[str, ...] = ()
    #: The seed the randomization tests' signs derive from (the run's ``seed``).
    seed: int = 0
    #: Configurations in the largest Holm family (the m the trials were scaled to).
    family: int = 0
    #: Each user's gain as a share of the oracle's, primary measure and mode, per config ×
    #: user × round × stage (:func:`oracle_shares`); empty without an oracle and another user.
    shares: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SHARE_COLUMNS))
    #: The Validity panel (report/validity.py): a run with several users or seeds; else None.
    validity: Validity | None = None
    #: Judged@10 of each (config_id, policy, round, stage) cell (runs.data.judged_by_cell).
    judged: Mapping[Cell, float] = field(default_factory=dict)


def _at_primary(data: RunData) -> npt.NDArray[np.bool_]:
    """Which rows of ``data.per_query`` are at the primary evaluation mode."""
    return (data.per_query["eval_mode"] == data.settings.primary_mode).to_numpy()


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The summary's key types (evaluation keeps the input's categories)."""
    for column in ("config_id", "policy", "stage", "measure"):
        frame[column] = strings(frame[column])  # astype(str), by category
    frame["round"] = frame["round"].astype("int64")
    return frame


def _means(frame: pd.DataFrame) -> pd.DataFrame:
    """n, mean and 95% CI per config × user × round × stage × measure."""
    return _typed(summarize_groups(frame, _KEYS).drop(columns="std"))


def rounds_means(data: RunData, config_ids: Sequence[str], stage: str) -> pd.DataFrame:
    """Mean [95% CI] over rounds of ``stage`` and its control (round 0: the provider's order
    and the control) for ``config_ids``, at the primary mode: per user, round and measure
    over the queries all of them keep in both rankings, so the lines compare like with
    like. ``n``: those queries."""
    control = BASELINES[stage][1]
    frame = data.per_query[_at_primary(data)]
    frame = frame[frame["config_id"].isin(list(config_ids))]
    start = (frame["round"] == 0) & frame["stage"].isin(["initial", "control"])
    later = (frame["round"] > 0) & frame["stage"].isin([stage, control])
    shared = common_queries(
        frame[start | later], within=["policy", "round", "measure"], across=["config_id", "stage"]
    )
    return _means(shared)


#: The comparison's columns, renamed for a feedback stage's row against its control ...
_ROW = {
    "n": "n", "diff": "gain", "diff_ci_low": "gain_ci_low", "diff_ci_high": "gain_ci_high",
    "improved": "improved", "degraded": "degraded", "unchanged": "unchanged", "p_t": "p_t",
    "p_rand": "p_rand", "p_holm": "p_holm", "fixed": "fixed", "n_common": "n_common",
    "diff_common": "gain_common", "diff_std_common": "gain_std_common",
    "diff_spread_common": "gain_spread_common", "p_rand_common": "p_rand_common",
}  # fmt: skip
#: ... against its before ...
_BEFORE = {
    "diff": "delta", "diff_ci_low": "delta_ci_low", "diff_ci_high": "delta_ci_high",
    "improved": "improved_before", "degraded": "degraded_before",
    "unchanged": "unchanged_before", "p_rand": "p_rand_before",
    "p_rand_common": "p_rand_before_common", "p_holm": "p_holm_before",
}  # fmt: skip
#: ... and rerank's against ``shuffled`` (what the judgments add).
_JUDGED = {
    "n": "judgment_n", "diff": "judgment_gain", "diff_ci_low": "judgment_ci_low",
    "diff_ci_high": "judgment_ci_high", "p_rand": "judgment_p_rand",
    "n_common": "judgment_n_common", "p_rand_common": "judgment_p_rand_common",
    "p_holm": "judgment_p_holm",
}  # fmt: skip
_SUMMARY_COLUMNS = [
    *_KEYS, "n", "before", "control", "feedback", *list(_ROW.values())[1:], *_BEFORE.values(),
    "shuffled", *_JUDGED.values(),
]  # fmt: skip


def _means_of(rows: pd.DataFrame, role: dict[str, str]) -> pd.Series:
    """Per row, the mean of the stage that ``role`` names for the row's feedback stage."""
    out = pd.Series(np.nan, index=rows.index, dtype="float64")
    for stage, source in role.items():
        mine = rows["stage"] == stage
        if f"mean_{source}" in rows:
            out[mine] = rows.loc[mine, f"mean_{source}"]
    return out


def _summary(
    data: RunData, primary: npt.NDArray[np.bool_], trials: int
) -> tuple[pd.DataFrame, Comparisons]:
    """The summary table of the rows ``primary`` marks (those at the primary mode), and
    what made its tests (trials, seed, largest family)."""
    wanted = [
        *comparisons(BASELINES),
        *comparisons(BASELINES, against="before"),
        *comparisons(JUDGMENT),
    ]
    result = compare(
        data.per_query,
        wanted,
        seed=data.settings.seed,
        trials=trials,
        fixed=data.fixed,
        strata=data.strata,
        where=primary & (data.per_query["round"].to_numpy() > 0),
    )
    rows = result.rows
    if rows.empty:
        table = pd.DataFrame({c: pd.Series(dtype="float64") for c in _SUMMARY_COLUMNS})
        for column in _KEYS:
            table[column] = table[column].astype("int64" if column == "round" else str)
        table["fixed"] = table["fixed"].astype(bool)
    else:
        rows = _typed(rows.drop(columns="eval_mode"))
        is_control = rows["reference"] == rows["stage"].map(CONTROLS)
        is_before = rows["reference"] == rows["stage"].map(_BEFORES)
        is_judged = rows["reference"] == rows["stage"].map(_SHUFFLED)
        gains = rows[is_control]
        table = gains[_KEYS].copy()
        table["before"] = _means_of(gains, _BEFORES)
        table["control"] = _means_of(gains, CONTROLS)
        table["feedback"] = _means_of(gains, {s: s for s in BASELINES})
        for source, name in _ROW.items():
            table[name] = gains[source]
        before = rows[is_before].rename(columns=_BEFORE)[[*_KEYS, *_BEFORE.values()]]
        judged = rows[is_judged].copy()
        judged["shuffled"] = _means_of(judged, _SHUFFLED)
        judged = judged.rename(columns=_JUDGED)[[*_KEYS, "shuffled", *_JUDGED.values()]]
        table = table.merge(before, on=_KEYS, how="left").merge(judged, on=_KEYS, how="left")
        table = table[_SUMMARY_COLUMNS]
    table["fixed"] = table["fixed"].fillna(False).astype(bool)
    table["significant"] = table["p_holm"] < ALPHA
    table["judgment_significant"] = table["judgment_p_holm"] < ALPHA
    # Relative change against before: (feedback − before) / before, over the same queries.
    ratio = table["delta"] / table["before"].where(table["before"] > 0)
    table["delta_pct"] = 100.0 * ratio
    table["significant_before"] = table["p_holm_before"] < ALPHA
    table["before_stage"] = table["stage"].map(_BEFORES)
    table["control_stage"] = table["stage"].map(CONTROLS)
    configs = data.configs.set_index("config_id")
    table["label"] = table["config_id"].map(configs["label"])
    table["role"] = table["config_id"].map(configs["role"])
    return _sorted(data, table), result


def _in_run_order(
    table: pd.DataFrame, order: Mapping[str, Sequence[str]], by: Sequence[str]
) -> pd.DataFrame:
    """``table``'s rows sorted by ``by``: each column of ``order`` by the position of its
    value there (its first), ``round`` by its value."""
    rank = pd.DataFrame(
        {c: table[c].map({v: i for i, v in enumerate(dict.fromkeys(o))}) for c, o in order.items()}
    )
    rank["round"] = table["round"]
    return table.loc[rank.sort_values(list(by)).index].reset_index(drop=True)


def _sorted(data: RunData, table: pd.DataFrame) -> pd.DataFrame:
    order = {
        "config_id": list(data.configs["config_id"]),
        "policy": list(data.policies),
        "stage": [*data.stages, *BASELINES],
        "measure": list(data.settings.measures),
    }
    return _in_run_order(table, order, ["measure", "round", "config_id", "policy", "stage"])


def summary_rows(data: RunData, *, trials: int = MIN_TRIALS) -> pd.DataFrame:
    """Per config × user × round ≥ 1 × feedback stage × measure, at the primary mode.

    Over the row's own queries: ``n`` (queries scored in before, control and feedback), the
    means ``before``, ``control``, ``feedback``; the attributable gain (feedback − control)
    with ``gain_ci_low/high`` (NaN for one query, and for gains all equal and non-zero: no
    t, see :mod:`~evidence_bench.evaluation.statistics`), ``improved/degraded/unchanged``
    against control, ``p_t``, ``p_rand``; the change against before ``delta`` with
    ``delta_ci_low/high``, ``delta_pct`` (percent of before),
    ``improved/degraded/unchanged_before``, ``p_rand_before``; what the judgments add
    (rerank rows; NaN elsewhere), from :data:`JUDGMENT`: the ``shuffled`` mean,
    ``judgment_n``, ``judgment_gain`` (rerank − shuffled) with ``judgment_ci_low/high``,
    ``judgment_p_rand``. Across the configs, over the queries all of them keep:
    ``n_common``, ``gain_common``, ``gain_std_common``, ``gain_spread_common`` (max − min),
    ``p_rand_common`` and its Holm adjustment ``p_holm``, ``significant`` (``p_holm`` <
    :data:`ALPHA`); likewise
    ``p_rand_before_common``, ``p_holm_before``, ``significant_before``,
    ``judgment_n_common``, ``judgment_p_rand_common``, ``judgment_p_holm``,
    ``judgment_significant``. ``fixed``: the cell cannot change (frozen mode), so it has no
    test. Then ``before_stage``, ``control_stage``, ``label``, ``role``. ``trials``: at
    least this many randomization trials (more for large families).
    """
    return _summary(data, _at_primary(data), trials)[0]


def _best(data: RunData, summary: pd.DataFrame) -> Best | None:
    # A judgment-budget variant (``oracle@d3``) is another budget, not another user: the
    # best setting is picked at each user's own depth.
    budgets = [label.label for label in run_labels(data) if label.budget]
    compared = summary[
        summary["gain_common"].notna()
        & ~summary["fixed"].astype(bool)
        & (summary["measure"] == data.settings.primary_measure)
        & ~summary["policy"].isin(budgets)
    ]
    if compared.empty:
        return None
    first, last = int(compared["round"].min()), int(compared["round"].max())

    def candidates(round_: int) -> pd.DataFrame:
        rows = compared[compared["round"] == round_]
        feedback = rows[rows["role"] != "baseline"]
        return feedback if len(feedback) else rows

    pool = candidates(first)
    # Mean over users of each user's gain on the common queries: every user counts once (a
    # user run under several seeds: the mean over its seeds, so it too counts once).
    user_of = {label.label: label.user for label in run_labels(data)}
    per_user = pool.assign(_user=pool["policy"].map(lambda p: user_of.get(str(p), str(p))))
    by_user = per_user.groupby(["config_id", "stage", "_user"], sort=False)["gain_common"].mean()
    scores = by_user.groupby(level=["config_id", "stage"], sort=False).mean()
    config_id, stage = cast(tuple[str, str], scores.idxmax())

    def rows(round_: int) -> pd.DataFrame:
        mine = compared[
            (compared["config_id"] == config_id)
            & (compared["stage"] == stage)
            & (compared["round"] == round_)
        ].reset_index(drop=True)
        m = max(1, len(candidates(round_)))
        mine["best_ci_low"], mine["best_ci_high"] = selection_intervals(
            mine["n_common"],
            mine["gain_common"],
            mine["gain_std_common"],
            m,
            spread=mine["gain_spread_common"],
        )
        # the p that goes with those intervals: Bonferroni's over the same m candidates
        # (Holm's step-down p can be significant where the simultaneous interval spans 0)
        mine["best_p"] = np.minimum(1.0, m * mine["p_rand_common"])
        return mine

    chosen = rows(first)
    label = str(chosen["label"].iloc[0])
    judged = summary[
        (summary["config_id"] == config_id)
        & (summary["stage"] == "rerank")
        & (summary["round"] == first)
        & (summary["measure"] == data.settings.primary_measure)
        & summary["judgment_gain"].notna()
    ].reset_index(drop=True)
    return Best(
        str(config_id), label, str(stage), first, chosen, last, rows(last), judged, len(pool)
    )


def _exclusions(data: RunData, frame: pd.DataFrame) -> pd.DataFrame:
    """Per round: the fewest and most queries left out of ``frame`` (the primary mode), over
    configs × users. A query is left out of a round when it has a round-0 score but no score
    for the initial ranking of that round: in residual evaluation, no relevant document is
    left unseen. Round 0 counts the queries of queries.csv that have no score at all (no
    relevant judgment)."""
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


_DELTA_COLUMNS = [
    "policy", "query_id", "query", "before", "control", "after", "delta", "delta_before",
]  # fmt: skip


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
    """Summary rows of the primary measure for each swept feedback config, at the best
    stage and the first round, with its parameters: the heatmap shows ``gain_common`` (over
    the ``n_common`` queries every config keeps) and Holm's ``significant``. None when fewer
    than two parameters were swept: a heatmap needs two axes.

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
    #: A multirun over several query sets: per query set, its own best setting and its
    #: outcome, as that query set's run alone would answer (families never span two).
    by_query_set: tuple[tuple[str, str, Best | None], ...] = ()


def _significant(rows: pd.DataFrame, sign: int) -> pd.DataFrame:
    """Rows whose Holm test is significant, by the sign of the gain it tested (the gain over
    the family's common queries)."""
    direction = np.sign(rows["gain_common"])
    return cast(pd.DataFrame, rows[rows["significant"] & (direction == sign)])


def verdict(analysis: Analysis, deltas: pd.DataFrame, worst: int = 3) -> Verdict:
    """Answer from the attributable gain of the primary measure at the best's round.

    ``deltas``: the best setting's per-query changes, from :func:`query_deltas`.
    """
    best = analysis.best
    s = analysis.summary
    if best is None:
        fixed = s[s["measure"] == analysis.data.settings.primary_measure]["fixed"].any()
        return Verdict("fixed" if fixed else "none", None, 0, 0, 0, (), deltas.head(0))
    primary = s[
        (s["measure"] == analysis.data.settings.primary_measure)
        & s["gain"].notna()
        & ~s["fixed"].astype(bool)
    ]
    first = primary[primary["round"] == best.round]
    last = primary[primary["round"] == best.last_round]
    losses = _significant(first, -1)
    by_query_set = _by_query_set(analysis)
    outcomes = [found for _, found, _ in by_query_set]
    outcome = _combined(outcomes) if outcomes else _outcome(best)
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
        by_query_set,
    )


def _outcome(best: Best | None) -> str:
    """``yes``, ``partly``, ``unclear`` or ``no`` for a best setting (see :class:`Verdict`)."""
    if best is None:
        return "none"
    rows = best.rows
    won = len(_significant(rows, 1))
    if won == len(rows):
        return "yes"
    if won:
        return "partly"
    return "unclear" if float(rows["gain_common"].mean()) > 0 else "no"


def _combined(outcomes: Sequence[str]) -> str:
    """Several query sets' outcomes as one: ``yes`` on every one, ``no`` on every one,
    ``partly`` where some (not all) show a significant gain, else ``unclear``."""
    if all(o == "yes" for o in outcomes):
        return "yes"
    if all(o in ("no", "none") for o in outcomes):
        return "no"
    return "partly" if any(o in ("yes", "partly") for o in outcomes) else "unclear"


def _by_query_set(analysis: Analysis) -> tuple[tuple[str, str, Best | None], ...]:
    """(query set, outcome, best setting) of each query set of a multirun over several."""
    strata = analysis.data.strata
    names = list(dict.fromkeys(strata.values()))
    if len(names) < 2:
        return ()
    s = analysis.summary
    out = []
    for name in names:
        mine = s[s["config_id"].map(strata) == name]
        best = _best(analysis.data, mine)
        out.append((name, _outcome(best), best))
    return tuple(out)


def _missing_controls(data: RunData) -> tuple[str, ...]:
    present = set(data.stages)
    return tuple(
        stage
        for stage, needed in BASELINES.items()
        if stage in present and not set(needed) <= present
    )


def oracle_shares(data: RunData) -> pd.DataFrame:
    """Per config × user × round × feedback stage, at the primary mode and measure: the
    user's attributable gain as a share of the oracle's (the user named ``oracle``), with
    Fieller's interval, as :func:`~evidence_bench.evaluation.oracle_share.oracle_share`
    computes it; rows in the run's config, user and stage order."""
    settings = data.settings
    pq = data.per_query
    # Only the primary mode and measure are shown; each share is computed within its own
    # mode and measure, so the others need not be computed at all.
    frame = pq[
        (pq["eval_mode"] == settings.primary_mode) & (pq["measure"] == settings.primary_measure)
    ]
    shares = oracle_share(frame, reference=REFERENCE, eval_modes=[settings.primary_mode])
    shares = shares[shares["measure"] == settings.primary_measure]
    if shares.empty:
        return pd.DataFrame(columns=SHARE_COLUMNS)
    order = {
        "config_id": list(data.configs["config_id"]),
        "policy": list(data.policies),
        "stage": list(BASELINES),
    }
    return _in_run_order(shares, order, ["config_id", "round", "policy", "stage"])


def analyze(data: RunData, *, trials: int = MIN_TRIALS, processes: int = 1) -> Analysis:
    """Compute every table of the report once, for the HTML and the terminal to share.

    ``trials``: at least this many randomization trials per test; the run's Holm families
    may ask for more (:func:`~evidence_bench.evaluation.statistics.trials_for`). The signs
    derive from the run's ``seed``. ``processes`` above 1: the summary's comparisons here
    while a process forked from this one measures the Validity panel, the oracle shares
    and the Judged@10 cells (:func:`~evidence_bench._forked.in_parallel`); the tables are
    the same either way.
    """
    if processes > 1:
        summary_part, rest = both(
            lambda: _summary_part(data, trials), lambda: _independent(data), processes=processes
        )
        summary, tests, start_means, excluded = summary_part
        panel, shares, judged = rest
    else:
        summary, tests, start_means, excluded = _summary_part(data, trials)
        release_memory()  # the primary mode's rows: freed before the Validity panel's gains
        panel, shares, judged = _independent(data)
    best = _best(data, summary)
    return Analysis(
        data,
        summary,
        start_means,
        best,
        excluded,
        tests.trials,
        _missing_controls(data),
        tests.seed,
        tests.family,
        shares,
        validity(data, (best.config_id, best.stage) if best is not None else None, tables=panel),
        judged,
    )


def _summary_part(
    data: RunData, trials: int
) -> tuple[pd.DataFrame, Comparisons, pd.DataFrame, pd.DataFrame]:
    """:func:`analyze`'s tables of the primary mode's rows: the summary and its tests, the
    round 0 means and the exclusions."""
    primary = _at_primary(data)
    summary, tests = _summary(data, primary, trials)
    pq = data.per_query
    stage = pq["stage"]
    start = pq[
        primary
        & (pq["round"].to_numpy() == 0)
        & ((stage == "initial") | (stage == "control")).to_numpy()
    ]
    return summary, tests, _means(start), _exclusions(data, pq[primary & (stage == "initial")])


def _independent(
    data: RunData,
) -> tuple[ValidityTables | None, pd.DataFrame, dict[Cell, float]]:
    """:func:`analyze`'s tables that need no summary: the Validity panel's (but for its
    best setting's robustness), the oracle shares and the Judged@10 cells."""
    return validity_tables(data), oracle_shares(data), judged_by_cell(data)
