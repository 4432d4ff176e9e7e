"""Print what reading the page buys, from a page_evidence multirun: per tfidf_rocchio
configuration and user, after one expand in the run's leading measure and mode, the gain
over the initial ranking and feedback's own gain over deep_control with its 95% interval,
one column per query set.

    python docs/tutorials/pages/measured.py runs/page_evidence/multirun-*

Of several directories, the newest (the last in name order) is read.
"""

from __future__ import annotations

import sys
from pathlib import Path

from evidence_bench.report import analyze, gather_multirun
from evidence_bench.report.numbers import signed as _signed


def _cell(row: dict[str, float]) -> str:
    low, high = _signed(row["gain_ci_low"]), _signed(row["gain_ci_high"])
    return f"{_signed(row['delta_pct'], 0)}% / {_signed(row['gain'])} [{low}, {high}]"


def _setting(label: str, default: list[str]) -> str:
    """What sets a configuration apart from the default reading snippets: its weights
    that differ from the default's, and its other settings ("page evidence", ...)."""
    weights, *others = label.split(" · ")[1:]
    changed = [w for w in weights.split() if w not in default]
    return ", ".join([*changed, *others]) or "snippet"


def main(directories: list[str]) -> None:
    analysis = analyze(gather_multirun(Path(sorted(directories)[-1])))
    settings = analysis.data.settings
    s = analysis.summary
    s = s[
        (s["measure"] == settings.primary_measure)
        & (s["stage"] == "expand")
        & (s["round"] == 1)
        & s["label"].str.contains("· tfidf_rocchio ")
    ]
    query_sets = list(dict.fromkeys(label.partition(" · ")[0] for label in s["label"]))
    default = s["label"].iloc[0].split(" · ")[1].split()
    rows: dict[tuple[str, str], dict[str, str]] = {}
    counts: dict[str, int] = {}
    for row in s.to_dict("records"):
        query_set = row["label"].partition(" · ")[0]
        key = (row["policy"], _setting(row["label"], default))
        rows.setdefault(key, {})[query_set] = _cell(row)
        counts[query_set] = int(row["n"])
    heads = [f"{q} ({counts[q]} queries)" for q in query_sets]
    width = max(len(setting) for _, setting in rows) + 2
    print(
        f"{settings.primary_mode} {settings.primary_measure} after one expand: gain over the "
        "initial ranking / feedback's own gain over deep_control [95% CI]"
    )
    print(f"{'tfidf_rocchio':<{width}}{'user':<8}" + "".join(f"{h:<34}" for h in heads).rstrip())
    for (policy, setting), cells in sorted(rows.items(), key=lambda r: r[0][0] != "oracle"):
        line = f"{setting:<{width}}{policy:<8}" + "".join(f"{cells[q]:<34}" for q in query_sets)
        print(line.rstrip())


if __name__ == "__main__":
    main(sys.argv[1:])
