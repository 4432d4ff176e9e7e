"""How much of a change is feedback's own: each feedback stage against its no-feedback
control, at equal depth, with paired tests.

Reranking with a different scorer moves the numbers even with no feedback at all, and an
expanded list scores higher on AP and recall from its length alone. So ``rerank`` is
compared with ``control`` (the same ranker, feedback terms off, same candidates) and
``expand`` with ``deep_control`` (the same, over the provider's list deepened to the
expanded length). The gain attributable to feedback is the paired difference; p-values
come from a paired t-test and a randomization test, Holm-corrected across the configs of
the run within each (policy, round, stage, mode, measure) family, over the queries they all
keep (:mod:`evidence_bench.evaluation.comparisons` computes all of it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from evidence_bench.evaluation.comparisons import KEYS, Comparison, compare
from evidence_bench.evaluation.statistics import MIN_TRIALS

__all__ = ["BASELINES", "JUDGMENT", "attribution", "comparisons"]

#: feedback stage -> (the ranking before feedback, the no-feedback control) at equal depth
BASELINES = {"rerank": ("initial", "control"), "expand": ("deep_initial", "deep_control")}
#: feedback stage -> (before, the same marks with their labels shuffled): what the user's
#: judgments add beyond marking any documents at all (Rocchio's pseudo-relevance effect)
JUDGMENT = {"rerank": ("initial", "shuffled")}
COLUMNS = [
    "config_id", "policy", "round", "stage", "eval_mode", "measure", "n",
    "initial", "control", "feedback", "gain", "gain_ci_low", "gain_ci_high",
    "improved", "degraded", "unchanged", "p_t", "p_randomization", "fixed",
    "n_common", "gain_common", "p_randomization_common", "p_holm",
]  # fmt: skip


def comparisons(
    baselines: Mapping[str, tuple[str, str]] = BASELINES, *, against: str = "control"
) -> list[Comparison]:
    """Each feedback stage against its control (``against="control"``) or its before
    (``"before"``), over the queries scored in all three."""
    pick = 1 if against == "control" else 0
    return [
        Comparison(stage, pair[pick], (pair[0], pair[1], stage))
        for stage, pair in baselines.items()
    ]


def attribution(
    per_query: pd.DataFrame,
    *,
    eval_modes: Sequence[str] = ("residual",),
    trials: int = MIN_TRIALS,
    seed: int = 0,
    baselines: Mapping[str, tuple[str, str]] = BASELINES,
    fixed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per config × policy × round × feedback stage × mode × measure (``COLUMNS``).

    Within the config, over its own queries (those scored in all three stages: a query
    excluded by residual evaluation, or whose expand was skipped, drops out of the pair):
    ``n``, the means, ``gain`` = feedback − control with its CI, the counts, ``p_t`` and
    ``p_randomization``. Across the configs of each (policy, round, stage, mode, measure),
    over the queries all of them keep: ``n_common``, ``gain_common``,
    ``p_randomization_common`` and its Holm adjustment ``p_holm``
    (:mod:`evidence_bench.evaluation.comparisons`). ``trials`` is a floor: at least 100 per
    config of a family. ``fixed``: cells that cannot change, left untested.
    """
    frame = per_query[per_query["eval_mode"].isin(eval_modes) & (per_query["round"] > 0)]
    rows = compare(frame, comparisons(baselines), seed=seed, trials=trials, fixed=fixed).rows
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    out = rows[list(KEYS)].copy()
    out["stage"] = rows["stage"]
    for column in ("initial", "control", "feedback"):
        out[column] = float("nan")
    for stage, (before, control) in baselines.items():
        mine = rows["stage"] == stage
        for column, source in (("initial", before), ("control", control), ("feedback", stage)):
            if f"mean_{source}" in rows:  # (a run without expansions has no deep stages)
                out.loc[mine, column] = rows.loc[mine, f"mean_{source}"]
    renamed = {
        "diff": "gain",
        "diff_ci_low": "gain_ci_low",
        "diff_ci_high": "gain_ci_high",
        "p_rand": "p_randomization",
        "diff_common": "gain_common",
        "p_rand_common": "p_randomization_common",
    }
    for column in COLUMNS:
        if column not in out:
            out[column] = rows[next((k for k, v in renamed.items() if v == column), column)]
    return out[COLUMNS]
