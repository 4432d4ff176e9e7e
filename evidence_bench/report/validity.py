"""The report's Validity panel, shaped from :mod:`evidence_bench.evaluation.validity`.

Shown in every run with more than one user or more than one seed: would the conclusion
change with a less careful user, another seed or another evaluation mode? Nothing here
computes a statistic; it picks what the panel shows and words the verdict's sentence.

A multirun over query sets (``ranker_compare``'s layout) is one group per job: settings of
different collections are never ranked against each other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from evidence_bench.evaluation.validity import (
    Agreement,
    Robustness,
    UserLabel,
    agreements,
    budget_curve,
    labels_by_user,
    ordering,
    per_query_gains,
    robustness,
    saturation,
    setting_gains,
    user_labels,
    variance_components,
)
from evidence_bench.report import charts
from evidence_bench.report.numbers import missing
from evidence_bench.runs.data import RunData

__all__ = [
    "Validity",
    "ValidityGroup",
    "ValidityTables",
    "run_labels",
    "setting_name",
    "shows_validity",
    "validity",
    "validity_sentence",
    "validity_tables",
    "validity_view",
]


@dataclass(frozen=True)
class ValidityGroup:
    """One collection's validity tables (a single run is one group, named "")."""

    name: str
    prefix: str
    agreements: tuple[Agreement, ...]
    #: variance_components rows (user, stage, ..., source, df, ss, share)
    variance: pd.DataFrame
    #: budget_curve rows and where each curve stops paying (saturation)
    curve: pd.DataFrame
    saturation: pd.DataFrame
    robustness: Robustness | None
    #: config_id -> label, for the settings this group ranks
    labels: Mapping[str, str]


@dataclass(frozen=True)
class Validity:
    """The panel's groups and what they were measured at."""

    groups: tuple[ValidityGroup, ...]
    measure: str
    mode: str
    round: int


def run_labels(data: RunData) -> list[UserLabel]:
    """The run's user labels, with the user, seed and depth its manifest gives each."""
    return user_labels(list(data.policies), data.manifest.get("variants"))


def shows_validity(data: RunData) -> bool:
    """Whether a run gets the panel: two users or more, or a user under two seeds or more."""
    labels = run_labels(data)
    users = {label.user for label in labels if not label.budget}
    seeds = {label.seed for label in labels if label.seed is not None}
    return len(users) > 1 or len(seeds) > 1


def _prefixes(data: RunData) -> list[tuple[str, str]]:
    """(config prefix, query set) of each merged run; one ("", query set) for a run."""
    seen: dict[str, str] = {}
    for source in data.sources:
        name = data.settings.query_set
        if source.config_prefix:
            try:
                manifest = json.loads((source.path / "manifest.json").read_text("utf-8"))
                name = str(manifest.get("query_set", name))
            except (OSError, json.JSONDecodeError):
                pass
        seen.setdefault(source.config_prefix, name)
    return list(seen.items())


@dataclass(frozen=True)
class _Measured:
    """A group's tables before its best setting is known (:func:`validity_tables`)."""

    group: ValidityGroup
    #: the group's own top setting, for a best setting it does not hold
    top: tuple[str, str] | None


@dataclass(frozen=True)
class ValidityTables:
    """What the Validity panel measures of a run, apart from its best setting's robustness:
    :func:`validity_tables`, then :func:`validity`."""

    groups: tuple[_Measured, ...]
    measure: str
    mode: str
    round: int


def validity_tables(data: RunData) -> ValidityTables | None:
    """The Validity panel's tables of a run, each group's robustness left out (it needs the
    report's best setting), or None when it has one user under one seed."""
    if not shows_validity(data):
        return None
    settings = data.settings
    labels = run_labels(data)
    baselines = list(data.configs.loc[data.configs["role"] == "baseline", "config_id"])
    gains = per_query_gains(data.per_query, fixed=data.fixed)
    round_ = int(gains["round"].min()) if len(gains) else 1
    names = dict(zip(data.configs["config_id"], data.configs["label"], strict=True))
    groups = []
    for prefix, name in _prefixes(data):
        mine = gains[gains["config_id"].str.startswith(prefix)] if prefix else gains
        if mine.empty:
            continue
        means = setting_gains(mine)
        at = {"eval_mode": settings.primary_mode, "measure": settings.primary_measure}
        found = agreements(
            means,
            labels,
            primary_mode=settings.primary_mode,
            primary_measure=settings.primary_measure,
            modes=settings.modes,
            round_=round_,
            exclude=baselines,
        )
        curve = budget_curve(mine, labels, **at, round_=round_, exclude=baselines)
        group = ValidityGroup(
            name=name if prefix else "",
            prefix=prefix,
            agreements=tuple(found),
            variance=variance_components(mine, labels, **at, round_=round_, exclude=baselines),
            curve=curve,
            saturation=saturation(curve),
            robustness=None,
            labels=names,
        )
        top = _top(means, labels, settings.primary_mode, settings.primary_measure, round_)
        groups.append(_Measured(group, top))
    return ValidityTables(tuple(groups), settings.primary_measure, settings.primary_mode, round_)


def validity(
    data: RunData,
    best: tuple[str, str] | None = None,
    *,
    tables: ValidityTables | None = None,
) -> Validity | None:
    """The Validity panel of a run, or None when it has one user under one seed.

    ``best``: the report's best setting (config_id, stage); a group that does not hold it
    is judged by its own top setting (the mean over users of each user's gain).
    ``tables``: the run's :func:`validity_tables`, when computed already."""
    measured = validity_tables(data) if tables is None else tables
    if measured is None:
        return None
    groups = []
    for found in measured.groups:
        group = found.group
        top = best if best is not None and best[0].startswith(group.prefix) else found.top
        robust = robustness(group.agreements, top) if top is not None else None
        groups.append(replace(group, robustness=robust))
    return Validity(tuple(groups), measured.measure, measured.mode, measured.round)


def _top(
    means: pd.DataFrame, labels: Sequence[UserLabel], mode: str, measure: str, round_: int
) -> tuple[str, str] | None:
    """The setting with the largest mean over users of each user's gain."""
    per_user = [
        ordering(means, own, eval_mode=mode, measure=measure, round_=round_)
        for own in labels_by_user(labels).values()
    ]
    per_user = [o for o in per_user if len(o)]
    if not per_user:
        return None
    pooled = pd.concat(per_user, axis=1).dropna().mean(axis=1)
    if pooled.empty:
        return None
    config_id, stage = pooled.index[int(np.argmax(pooled.to_numpy(float)))]
    return (str(config_id), str(stage))


def setting_name(group: ValidityGroup, setting: tuple[str, str] | None) -> str:
    """``label stage`` of a setting, for the panel and the sentence."""
    if setting is None:
        return "–"
    config_id, stage = setting
    return f"{group.labels.get(config_id, config_id)} {stage}"


def _share(variance: pd.DataFrame, stage: str, source: str) -> float | None:
    rows = variance[(variance["stage"] == stage) & (variance["source"] == source)]
    return float(rows["share"].mean()) if len(rows) else None


def validity_sentence(group: ValidityGroup) -> str:
    """One sentence: does the best setting stay on top across users and seeds, and across
    evaluation modes? Each part says its own answer and what it counted, so a mode
    comparison at another measure (where frozen evaluation pins the primary one) does not
    pass for a verdict on the users."""
    r = group.robustness
    if r is None or not (r.orderings or r.modes):
        return "Not answerable: no two orderings of the settings could be compared."
    where = f"On {group.name}, the" if group.name else "The"
    name = setting_name(group, r.setting)
    parts = []
    if r.orderings:
        if r.first == r.orderings:
            text = f"it comes first for every user and seed ({r.first} of {r.orderings})"
        else:
            shown = [side for _, _, side, _ in r.not_first[:3]]
            more = f" and {len(r.not_first) - 3} more" if len(r.not_first) > 3 else ""
            text = (
                f"it comes first for only {r.first} of {r.orderings} users and seeds "
                f"(not for {', '.join(shown)}{more})"
            )
        parts.append(text)
    if r.modes:
        if r.modes_agree == r.modes:
            text = f"the evaluation modes agree on the top setting ({r.modes} of {r.modes})"
        else:
            user, modes, measure, _, _ = r.mode_changes[0]
            text = (
                f"the evaluation modes disagree on the top setting in "
                f"{r.modes - r.modes_agree} of {r.modes} comparisons "
                f"(first: {user} at {measure}, {modes})"
            )
        parts.append(text)
    if r.lowest is not None:
        low = r.lowest
        flips = f"{len(low.flips)} flip{'s' if len(low.flips) != 1 else ''}"
        whose = f"{low.user}, {low.measure}, " if low.factor == "mode" else ""
        parts.append(f"the lowest τ is {low.tau:.2f} ({whose}{low.a} vs {low.b}, {flips})")
    config = _share(group.variance, r.setting[1], "config")
    by_seed = _share(group.variance, r.setting[1], "config × seed")
    if config is not None and by_seed is not None:
        parts.append(
            f"configs explain {100 * config:.1f}% of the per-query gain's variance "
            f"and their interaction with the seed {100 * by_seed:.1f}%"
        )
    users_ok = r.first == r.orderings
    modes_ok = r.modes_agree == r.modes
    if users_ok and modes_ok:
        answer = "stays on top across users, seeds and evaluation modes"
    elif users_ok:
        answer = "stays on top across users and seeds, not across evaluation modes"
    elif modes_ok:
        answer = "does not stay on top across users and seeds"
    else:
        answer = "does not stay on top across users, seeds or evaluation modes"
    return f"{where} best setting, {name}, {answer}: " + "; ".join(parts) + "."


def _named(group: ValidityGroup, frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``frame`` with each row's setting (config_id, stage) named in ``column``."""
    settings = zip(frame["config_id"], frame["stage"], strict=True)
    return frame.assign(**{column: [setting_name(group, setting) for setting in settings]})


def validity_view(panel: Validity) -> dict[str, Any]:
    """Plain records for the template (every string is escaped there)."""
    groups = []
    for index, group in enumerate(panel.groups):
        rows = [
            {
                "factor": a.factor,
                "a": a.a,
                "b": a.b,
                "user": a.user,
                "measure": a.measure,
                "mode": a.eval_mode,
                "settings": a.items,
                "tau": None if missing(a.tau) else a.tau,
                "best_a": setting_name(group, a.best_a),
                "best_b": setting_name(group, a.best_b),
                "flips": [
                    {
                        "first": setting_name(group, f.first),
                        "second": setting_name(group, f.second),
                        "a": (f.a_first, f.a_second),
                        "b": (f.b_first, f.b_second),
                    }
                    for f in a.flips
                ],
            }
            for a in group.agreements
        ]
        curve = _named(group, group.curve, "label")
        stops = _named(group, group.saturation, "setting")
        key = f"validity{index}"
        groups.append(
            {
                "name": group.name,
                "sentence": validity_sentence(group),
                "robust": bool(group.robustness and group.robustness.robust),
                "agreements": rows,
                "variance": group.variance.to_dict("records"),
                "variance_chart": charts.variance_chart(group.variance, f"{key}-var")
                if len(group.variance)
                else None,
                "curve": curve.to_dict("records"),
                "curve_chart": charts.budget_chart(curve, panel.measure, f"{key}-budget")
                if len(curve)
                else None,
                "saturation": stops.to_dict("records"),
            }
        )
    return {"measure": panel.measure, "mode": panel.mode, "round": panel.round, "groups": groups}
