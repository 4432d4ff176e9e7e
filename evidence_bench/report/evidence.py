"""What reading the page buys: each configuration that reads pages beside its snippet twin.

A run whose configurations differ only in what the ranker and refiner read
(``evidence=snippet|page|both``, configs.csv's ``evidence`` and ``refiner_evidence``) gets
a table per feedback stage of the first round, in the primary measure and mode: the mean
with feedback, its no-feedback control (``rerank``: ``control``; ``expand``:
``deep_control``, at equal depth), feedback's own gain (the difference), the relative
gain over the initial ranking (the provider's order, residual: its ranks 11-20 for a
depth-10 user), and the paired difference from the snippet twin with a 95% t interval, on
the queries both keep. Data only; :mod:`evidence_bench.report.render` shows it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evidence_bench.evaluation.statistics import summarize
from evidence_bench.report.data import RunData

__all__ = ["EVIDENCE_COLUMNS", "evidence_table"]

_CONTROLS = {"rerank": "control", "expand": "deep_control"}
_NOT_TWIN = frozenset({"config_id", "label", "alias_of", "evidence", "refiner_evidence"})
EVIDENCE_COLUMNS = [
    "group", "snippet_label", "config_id", "evidence", "policy", "stage", "n", "initial",
    "control", "feedback", "gain", "relative_gain", "vs_snippet", "vs_snippet_low",
    "vs_snippet_high", "vs_snippet_n",
]  # fmt: skip


def _mode(row: pd.Series) -> str:
    ranker, refiner = str(row["evidence"]), str(row["refiner_evidence"])
    return ranker if ranker == refiner else f"ranker {ranker}, refiner {refiner}"


def evidence_table(data: RunData, *, round_: int = 1) -> pd.DataFrame | None:
    """The comparison table (:data:`EVIDENCE_COLUMNS`), or None when no configuration of
    the run reads pages beside a twin that reads snippets."""
    configs = data.configs
    if "evidence" not in configs.columns:
        return None
    configs = configs[configs["alias_of"].fillna("") == ""].copy()
    configs["refiner_evidence"] = configs.get("refiner_evidence", "snippet")
    configs["prefix"] = [c.rpartition(":")[0] for c in configs["config_id"]]
    twin = [c for c in configs.columns if c not in _NOT_TWIN]
    configs["group"] = [
        "|".join(str(v) for v in row) for row in configs[twin].itertuples(index=False)
    ]
    s = data.settings
    pq = data.per_query
    pq = pq[
        (pq["eval_mode"] == s.primary_mode)
        & (pq["measure"] == s.primary_measure)
        & (pq["round"] == round_)
    ]
    wide = pq.pivot_table(
        index=["config_id", "policy", "query_id"], columns="stage", values="value", aggfunc="first"
    )
    rows: list[dict[str, Any]] = []
    for _group, members in configs.groupby("group", sort=False):
        modes = {str(cid): _mode(row) for cid, row in members.set_index("config_id").iterrows()}
        base = next((cid for cid, mode in modes.items() if mode == "snippet"), None)
        if base is None or len(modes) < 2:
            continue
        base_label = str(members.loc[members["config_id"] == base, "label"].iloc[0])
        for policy in map(str, data.policies):
            for stage, control in _CONTROLS.items():
                for cid, mode in modes.items():
                    rows.append(
                        _row(wide, cid, base, policy, stage, control)
                        | {"group": base, "snippet_label": base_label, "evidence": mode}
                    )
    if not rows:
        return None
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS)


def _frame(wide: pd.DataFrame, cid: str, policy: str) -> pd.DataFrame:
    try:
        found = wide.loc[(cid, policy)]
    except KeyError:
        return pd.DataFrame(columns=wide.columns)
    return found if isinstance(found, pd.DataFrame) else pd.DataFrame(columns=wide.columns)


def _row(
    wide: pd.DataFrame, cid: str, base: str, policy: str, stage: str, control: str
) -> dict[str, Any]:
    mine = _frame(wide, cid, policy)
    row: dict[str, Any] = {"config_id": cid, "policy": policy, "stage": stage}
    if stage not in mine.columns or control not in mine.columns:
        return row | {"n": 0}
    both = mine[[stage, control, "initial"]].dropna()
    initial = float(both["initial"].mean()) if len(both) else float("nan")
    feedback = float(both[stage].mean()) if len(both) else float("nan")
    row |= {
        "n": len(both),
        "initial": initial,
        "control": float(both[control].mean()) if len(both) else float("nan"),
        "feedback": feedback,
        "gain": float((both[stage] - both[control]).mean()) if len(both) else float("nan"),
        # relative to the initial ranking's mean over the same queries
        "relative_gain": feedback / initial - 1.0 if initial > 0 else float("nan"),
    }
    if cid != base:
        theirs = _frame(wide, base, policy)
        if stage in theirs.columns:
            paired = pd.concat([mine[stage], theirs[stage]], axis=1, keys=["a", "b"]).dropna()
            diff = summarize(list(paired["a"] - paired["b"]))
            row |= {
                "vs_snippet": diff.mean,
                "vs_snippet_low": diff.ci_low,
                "vs_snippet_high": diff.ci_high,
                "vs_snippet_n": diff.n,
            }
    return row
