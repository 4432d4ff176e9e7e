"""How much of the benefit of judgments survives another user: each user's attributable
gain as a share of the oracle's, with Fieller intervals.

The attributable gain of a feedback stage is feedback − control at equal depth
(:data:`~evidence_bench.evaluation.attribution.BASELINES`: ``rerank − control``,
``expand − deep_control``). For a user U (a click model, a noisy assessor) and the
reference user, the oracle, both are taken per query on the same config, round, stage, mode
and measure, over the queries both keep (residual evaluation drops a query with nothing
relevant left unseen, and that depends on what the user examined). The share is

    share = mean_q gain_U(q) / mean_q gain_oracle(q),

1 when the user's clicks help as much as the oracle's judgments, 0 when they do not help,
negative when they hurt. Its 95% interval is Fieller's for a ratio of paired means
(:func:`~evidence_bench.evaluation.statistics.fieller_intervals`): unbounded (NaN bounds)
when the oracle's own gain is not significantly different from zero, where no share can
be stated. In residual mode each user's gain is measured on its own residual collection
(the documents it examined are removed), as each user would experience it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from evidence_bench.evaluation.attribution import BASELINES
from evidence_bench.evaluation.comparisons import strings
from evidence_bench.evaluation.statistics import fieller_intervals
from evidence_bench.evaluation.validity import per_query_gains

__all__ = ["REFERENCE", "SHARE_COLUMNS", "oracle_share"]

#: The reference user's name in a run: every shipped experiment calls its oracle ``oracle``.
REFERENCE = "oracle"
_KEYS = ["config_id", "round", "stage", "eval_mode", "measure"]
SHARE_COLUMNS = [
    "config_id", "policy", "round", "stage", "eval_mode", "measure", "n",
    "gain", "oracle_gain", "share", "share_ci_low", "share_ci_high",
]  # fmt: skip


def oracle_share(
    per_query: pd.DataFrame,
    *,
    reference: str = REFERENCE,
    eval_modes: Sequence[str] | None = None,
    baselines: Mapping[str, tuple[str, str]] = BASELINES,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per config × user (other than ``reference``) × round ≥ 1 × feedback stage ×
    mode × measure (:data:`SHARE_COLUMNS`), over the queries both users keep: ``n``, the
    user's mean ``gain``, the ``oracle_gain``, ``share`` = gain / oracle_gain and Fieller's
    ``share_ci_low/high``. Empty when the run has no ``reference`` user or no other.

    ``per_query``: a run's per-query scores (config_id, policy, round, stage, eval_mode,
    measure, query_id, value); ``eval_modes``: the modes to keep (None: all).
    """
    frame = per_query
    if eval_modes is not None:
        frame = frame[strings(frame["eval_mode"]).isin(list(eval_modes))]
    gains = per_query_gains(frame, baselines=baselines)
    mine = gains["policy"] == reference
    if not mine.any() or mine.all():
        return pd.DataFrame(columns=SHARE_COLUMNS)
    oracle = gains[mine].drop(columns="policy").rename(columns={"gain": "oracle_gain"})
    paired = gains[~mine].merge(oracle, on=[*_KEYS, "query_id"], how="inner")
    paired["xy"] = paired["gain"] * paired["oracle_gain"]
    keys = ["config_id", "policy", "round", "stage", "eval_mode", "measure"]
    grouped = paired.groupby(keys, sort=False)
    out = grouped.agg(
        n=("gain", "size"),
        gain=("gain", "mean"),
        oracle_gain=("oracle_gain", "mean"),
        var_x=("gain", "var"),
        var_y=("oracle_gain", "var"),
        sum_xy=("xy", "sum"),
    ).reset_index()
    n = out["n"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = (out["sum_xy"] - n * out["gain"] * out["oracle_gain"]) / (n - 1.0)
    out["share"], out["share_ci_low"], out["share_ci_high"] = fieller_intervals(
        n, out["gain"], out["oracle_gain"], out["var_x"], out["var_y"], cov, confidence
    )
    return out[SHARE_COLUMNS].reset_index(drop=True)
