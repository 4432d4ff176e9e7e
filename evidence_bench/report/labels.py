"""The report's view of what the simulated users marked, from the manifest's ``labels``.

One row per user and round: how many examined results got each label, summed over queries.
Round 1 shows every configuration the same list, so its counts agree across configurations;
where they differ (later rounds, or the jobs of a multirun) a cell shows the range across
configurations, and ``manifest.json`` holds each configuration's counts. The warnings are
the manifest's ``labels.missing``: a user that gave no label of a kind it should give.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evidence_bench.users.labels import COUNTED, describe_missing

__all__ = ["labels_view"]


def _cell(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}–{high}"


def labels_view(manifest: Mapping[str, Any], policies: Sequence[str]) -> dict[str, Any] | None:
    """Rows, columns and warnings for the template; None for a run without ``labels``."""
    labels = manifest.get("labels")
    if not isinstance(labels, Mapping):
        return None
    counts = [c for c in labels.get("counts") or [] if isinstance(c, Mapping)]
    grouped: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for record in counts:
        grouped.setdefault((str(record.get("policy")), int(record.get("round", 0))), []).append(
            record
        )
    missing = [m for m in labels.get("missing") or [] if isinstance(m, Mapping)]
    #: per user, the labels of the kinds it should have given and did not (highlighted)
    lacking: dict[str, set[str]] = {}
    for m in missing:
        lacking.setdefault(str(m.get("policy")), set()).update(str(x) for x in m.get("labels", []))
    order = {p: i for i, p in enumerate(policies)}
    rows = []
    for (policy, round_), records in sorted(
        grouped.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0])
    ):
        values = {label: [int(r.get(label, 0) or 0) for r in records] for label in COUNTED}
        rows.append(
            {
                "policy": policy,
                "round": round_,
                "configs": len(records),
                "varies": any(min(v) != max(v) for v in values.values()),
                "cells": {label: _cell(v) for label, v in values.items()},
                "missing": sorted(lacking.get(policy, set())),
            }
        )
    expected = labels.get("expected") or {}
    return {
        "columns": list(COUNTED),
        "rows": rows,
        "expected": {str(p): [str(k) for k in kinds] for p, kinds in expected.items()},
        "warnings": [
            {
                "policy": str(m.get("policy")),
                "kind": str(m.get("kind")),
                "text": describe_missing(m),
            }
            for m in missing
        ],
    }
