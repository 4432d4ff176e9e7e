"""What reading the page buys: each configuration that reads pages beside its snippet twin.

A run with configurations that read pages (``evidence=page|both``, configs.csv's
``evidence`` and ``refiner_evidence``) beside ones that read snippets gets a table per
feedback stage of the first round, in the primary measure and mode: the mean
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
from evidence_bench.runs.data import RunData

__all__ = ["EVIDENCE_COLUMNS", "evidence_table"]

_CONTROLS = {"rerank": "control", "expand": "deep_control"}
_NOT_TWIN = frozenset({"config_id", "label", "alias_of", "evidence", "refiner_evidence"})
EVIDENCE_COLUMNS = [
    "group", "snippet_label", "config_id", "label", "evidence", "policy", "stage", "n", "initial",
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
    loose = [c for c in ("prefix", "ranker", "refiner", "boost_relevant") if c in configs.columns]
    configs["mode"] = [_mode(row) for _, row in configs.iterrows()]
    configs["exact"] = ["|".join(map(str, r)) for r in configs[twin].itertuples(index=False)]
    configs["loose"] = ["|".join(map(str, r)) for r in configs[loose].itertuples(index=False)]
    snippets = configs[configs["mode"] == "snippet"]
    # each configuration that reads pages, under its snippet twin: the configuration equal
    # in every other setting, else the first snippet one of the same ranker and refiner
    members: dict[str, list[str]] = {str(cid): [str(cid)] for cid in snippets["config_id"]}
    for row in configs[configs["mode"] != "snippet"].itertuples(index=False):
        exact = snippets[snippets["exact"] == row.exact]
        same = exact if len(exact) else snippets[snippets["loose"] == row.loose]
        if len(same):
            members[str(same["config_id"].iloc[0])].append(str(row.config_id))
    modes = dict(zip(configs["config_id"].astype(str), configs["mode"], strict=True))
    labels = dict(zip(configs["config_id"].astype(str), configs["label"], strict=True))
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
    for base, group in members.items():
        if len(group) < 2:
            continue
        for policy in map(str, data.policies):
            for stage, control in _CONTROLS.items():
                for cid in group:
                    rows.append(
                        _row(wide, cid, base, policy, stage, control)
                        | {
                            "group": base,
                            "snippet_label": labels[base],
                            "label": labels[cid],
                            "evidence": modes[cid],
                        }
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
            diff = summarize(list(paired["a"] - paired["b"]), differences=True)
            row |= {
                "vs_snippet": diff.mean,
                "vs_snippet_low": diff.ci_low,
                "vs_snippet_high": diff.ci_high,
                "vs_snippet_n": diff.n,
            }
    return row
