"""What the simulated users gave: label counts per config, policy and round, and warnings.

A run records in ``manifest.json``, under ``labels``, how many examined results each policy
marked with each label, and how many it only saw, per engine config and round, summed over
queries. A policy that gave none of a kind of label it declares
(:attr:`~evidence_bench.users.policies.UserPolicy.expects`) over the whole run is listed
under ``labels.missing`` and warned about in the terminal summary and the report (an oracle
on qrels of relevant documents only gives no negative label, and then every γ gives the
same numbers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evidence_bench._lazy import module
from evidence_bench.users.policies import LabelKind, UserPolicy

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = module("pandas")


__all__ = ["COUNTED", "describe_missing", "label_counts", "label_summary", "label_warnings"]

#: The labels counted, and ``seen``: examined, not marked.
COUNTED = ("more", "relevant", "less", "irrelevant", "unsure", "seen")


def label_counts(rows: Iterable[tuple[str, str, int, str]] | pd.DataFrame) -> list[dict[str, Any]]:
    """Per (config_id, policy, round), a count for each :data:`COUNTED` label.

    ``rows``: one ``(config_id, policy, round, label)`` per examined result, ``label`` as in
    ``feedback.csv``, or a frame of those four columns. Records come config by config, then
    policy, in the order first met, then by round; a label never given counts 0.
    """
    if isinstance(rows, pd.DataFrame):
        frame = rows
    else:
        frame = pd.DataFrame(list(rows), columns=["config_id", "policy", "round", "label"])
    config, config_names = pd.factorize(frame["config_id"])
    policy, policy_names = pd.factorize(frame["policy"])
    label, label_names = pd.factorize(frame["label"])
    for name in label_names:
        if name not in COUNTED:
            raise ValueError(_unknown(name))
    if (label < 0).any():  # factorize codes a missing label -1, which would index the last
        raise ValueError(_unknown(None))
    if not len(frame):
        return []
    rounds = frame["round"].to_numpy(np.int64)
    # one int64 per row ordered as its (config, policy, round): the distinct rows of the
    # three columns, sorted (np.unique's axis=0 would sort them as records, slowly)
    low = int(rounds.min())
    span = int(rounds.max()) - low + 1
    policies_n = max(len(policy_names), 1)
    key = (config.astype(np.int64) * policies_n + policy) * span + (rounds - low)
    cells, cell = np.unique(key, return_inverse=True)
    column = np.asarray([COUNTED.index(n) for n in label_names], dtype=np.int64)[label]
    table = np.bincount(
        cell.ravel() * len(COUNTED) + column, minlength=len(cells) * len(COUNTED)
    ).reshape(len(cells), len(COUNTED))
    configs, policies = config_names.tolist(), policy_names.tolist()
    pair, round_ = np.divmod(cells, span)
    config_of, policy_of = np.divmod(pair, policies_n)
    return [
        {
            "config_id": configs[c],
            "policy": policies[p],
            "round": r + low,
            **{name: int(n) for name, n in zip(COUNTED, counts.tolist(), strict=True)},
        }
        for c, p, r, counts in zip(
            config_of.tolist(), policy_of.tolist(), round_.tolist(), table, strict=True
        )
    ]


def _unknown(label: object) -> str:
    return f"unknown label {label!r} (valid: {', '.join(COUNTED)})"


def _missing(
    counts: Sequence[Mapping[str, Any]], users: Sequence[tuple[str, UserPolicy]]
) -> list[dict[str, Any]]:
    """Each kind a policy is expected to give and gave none of, over every config and round."""
    missing: list[dict[str, Any]] = []
    for name, user in users:
        mine = [c for c in counts if c["policy"] == name]
        examined = sum(int(c[label]) for c in mine for label in COUNTED)
        for kind in (k for k in LabelKind if k in user.expects):
            labels = [label.value for label in kind.labels]
            if any(int(c[label]) for c in mine for label in labels):
                continue
            hint = ""
            unjudged = getattr(user, "unjudged", "irrelevant")
            if kind is LabelKind.NEGATIVE and unjudged != "irrelevant":
                hint = (
                    f"unjudged={unjudged} gives unjudged results no negative label; "
                    "unjudged=irrelevant counts them non-relevant (the TREC assumption)"
                )
            missing.append(
                {
                    "policy": name,
                    "kind": kind.value,
                    "labels": labels,
                    "examined": examined,
                    "hint": hint,
                }
            )
    return missing


def label_summary(
    rows: Iterable[tuple[str, str, int, str]] | pd.DataFrame,
    users: Sequence[tuple[str, UserPolicy]],
) -> dict[str, Any]:
    """The manifest's ``labels`` entry: what each policy is expected to give (``expected``),
    its counts (:func:`label_counts`) and the kinds it should have given but did not
    (``missing``)."""
    counts = label_counts(rows)
    return {
        "expected": {
            name: [k.value for k in LabelKind if k in user.expects] for name, user in users
        },
        "counts": counts,
        "missing": _missing(counts, users),
    }


def describe_missing(entry: Mapping[str, Any]) -> str:
    """One line for a ``labels.missing`` entry, for the terminal and the report."""
    job = str(entry.get("job") or "")
    labels = ", ".join(str(label) for label in entry.get("labels") or [])
    text = (
        f"policy '{job}{entry.get('policy')}' should give {entry.get('kind')} labels "
        f"({labels}) but gave none in {entry.get('examined', '?')} examined results"
    )
    hint = entry.get("hint")
    return f"{text}: {hint}" if hint else text


def label_warnings(labels: object) -> list[str]:
    """``warning: ...`` lines for a manifest's ``labels`` entry (none for a run without one)."""
    missing = labels.get("missing") if isinstance(labels, Mapping) else None
    if not isinstance(missing, list):
        return []
    return [f"warning: {describe_missing(m)}" for m in missing if isinstance(m, Mapping)]
