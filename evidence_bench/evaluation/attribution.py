"""How much of a change is feedback's own: each feedback stage against its no-feedback
control, at equal depth, with paired tests.

Reranking with a different scorer moves the numbers even with no feedback at all, and an
expanded list scores higher on AP and recall from its length alone. So ``rerank`` is
compared with ``control`` (the same ranker, feedback terms off, same candidates) and
``expand`` with ``deep_control`` (the same, over the provider's list deepened to the
expanded length). The gain attributable to feedback is the paired difference; p-values
come from a paired t-test and a randomization test, Holm-corrected across the configs of
the run within each (policy, round, stage, mode, measure) family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from evidence_bench.evaluation.statistics import (
    holm,
    improved_degraded,
    paired_t_test,
    randomization_test,
    summarize,
)

__all__ = ["BASELINES", "JUDGMENT", "attribution"]

#: feedback stage -> (the ranking before feedback, the no-feedback control) at equal depth
BASELINES = {"rerank": ("initial", "control"), "expand": ("deep_initial", "deep_control")}
#: feedback stage -> (before, the same marks with their labels shuffled): what the user's
#: judgments add beyond marking any documents at all (Rocchio's pseudo-relevance effect)
JUDGMENT = {"rerank": ("initial", "shuffled")}
COLUMNS = [
    "config_id", "policy", "round", "stage", "eval_mode", "measure", "n",
    "initial", "control", "feedback", "gain", "gain_ci_low", "gain_ci_high",
    "improved", "degraded", "unchanged", "p_t", "p_randomization", "p_holm",
]  # fmt: skip


def attribution(
    per_query: pd.DataFrame,
    *,
    eval_modes: Sequence[str] = ("residual",),
    trials: int = 5000,
    seed: int = 0,
    baselines: Mapping[str, tuple[str, str]] = BASELINES,
) -> pd.DataFrame:
    """One row per config × policy × round × feedback stage × mode × measure (``COLUMNS``).

    Only queries present in all three stages count (a query excluded by residual
    evaluation, or whose expand was skipped, drops out of the pair).
    """
    frame = per_query[per_query["eval_mode"].isin(eval_modes) & (per_query["round"] > 0)]
    keys = ["config_id", "policy", "round", "eval_mode", "measure"]
    wide = frame.pivot_table(
        index=[*keys, "query_id"], columns="stage", values="value", aggfunc="first"
    )
    rows = []
    for stage, (before, control) in baselines.items():
        needed = [stage, before, control]
        if not set(needed) <= set(wide.columns):
            continue
        paired = wide[needed].dropna()
        for key, group in paired.groupby(level=keys, sort=True):
            feedback = group[stage].to_numpy().tolist()
            baseline = group[control].to_numpy().tolist()
            gains = [f - c for f, c in zip(feedback, baseline, strict=True)]
            summary = summarize(gains)
            up, down, same = improved_degraded(baseline, feedback)
            config_id, policy, round_, mode, measure = key
            rows.append(
                [
                    config_id,
                    policy,
                    round_,
                    stage,
                    mode,
                    measure,
                    len(gains),
                    float(group[before].mean()),
                    float(group[control].mean()),
                    float(group[stage].mean()),
                    summary.mean,
                    summary.ci_low,
                    summary.ci_high,
                    up,
                    down,
                    same,
                    paired_t_test(baseline, feedback),
                    randomization_test(baseline, feedback, trials=trials, seed=seed),
                    1.0,
                ]
            )
    result = pd.DataFrame(rows, columns=COLUMNS)
    if not result.empty:
        family = ["policy", "round", "stage", "eval_mode", "measure"]
        result["p_holm"] = result.groupby(family, sort=False)["p_randomization"].transform(
            lambda p: pd.Series(holm(p.tolist()), index=p.index)
        )
    return result
