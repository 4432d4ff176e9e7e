"""Would the conclusion change with another user, seed or evaluation mode?

A run's conclusion is an ordering: settings (a config and a feedback stage) ranked by the
gain attributable to feedback, ``stage − control`` per query (:data:`BASELINES`), averaged
over the queries every setting keeps. :func:`agreements` compares two orderings by
Kendall's τ-b and lists the pairs that flip, :func:`variance_components` splits the
per-query gain's variance between queries, seeds and configs, :func:`budget_curve` plots
the gain against the judgment budget, and :func:`robustness` says whether the best setting
comes first in every ordering (docs/concepts/validity.rst).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from evidence_bench.evaluation.attribution import BASELINES
from evidence_bench.evaluation.comparisons import (
    common_queries,
    complete_rows,
    key_tuples,
    stage_values,
    strings,
)
from evidence_bench.evaluation.statistics import TIE, first_met, ngroups, summarize_groups

__all__ = [
    "BUDGET_COLUMNS",
    "GAIN_COLUMNS",
    "Agreement",
    "Flip",
    "Robustness",
    "UserLabel",
    "agreements",
    "budget_curve",
    "kendall_tau_b",
    "labels_by_user",
    "ordering",
    "per_query_gains",
    "robustness",
    "saturation",
    "setting_gains",
    "sums_of_squares",
    "user_labels",
    "variance_components",
]

GAIN_COLUMNS = [
    "config_id", "policy", "round", "eval_mode", "measure", "stage", "query_id", "gain",
]  # fmt: skip
BUDGET_COLUMNS = [
    "user", "depth", "label", "config_id", "stage", "n", "mean", "ci_low", "ci_high",
]  # fmt: skip

Setting = tuple[str, str]  # (config_id, stage)


class UserLabel(NamedTuple):
    """One user label of a run: the user it is, its seed (None: the run's one seed), its
    depth (None: not recorded) and whether it is a judgment-budget variant (``@d<N>``)."""

    label: str
    user: str
    seed: int | None
    depth: int | None
    budget: bool


def user_labels(policies: Sequence[str], variants: Mapping[str, Any] | None) -> list[UserLabel]:
    """The run's user labels, each with its user, seed and depth from the manifest's
    ``variants`` (a run over ``seeds`` or ``experiment.budgets``); a label the manifest
    does not list is a user of its own."""
    out = []
    for label in policies:
        entry = (variants or {}).get(label)
        if isinstance(entry, Mapping):
            out.append(
                UserLabel(
                    label,
                    str(entry.get("user", label)),
                    int(entry["seed"]) if entry.get("seed") is not None else None,
                    int(entry["depth"]) if entry.get("depth") is not None else None,
                    bool(entry.get("budget", False)),
                )
            )
        else:
            out.append(UserLabel(label, label, None, None, False))
    return out


def per_query_gains(
    per_query: pd.DataFrame,
    *,
    baselines: Mapping[str, tuple[str, str]] = BASELINES,
    fixed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The gain attributable to feedback per query (:data:`GAIN_COLUMNS`): each feedback
    stage minus its no-feedback control at equal depth, for every config × user × round ≥ 1
    × mode × measure, over the queries scored in both; differences within :data:`TIE` are 0.
    Cells that cannot change (``fixed``: frozen evaluation's pinned prefix) are left out."""
    # the later rounds marked, not copied
    later = per_query["round"].to_numpy() > 0
    parts = []
    for stage, (_, control) in baselines.items():
        wide = stage_values(per_query, [stage, control], used_levels=False, where=later)
        gain = wide.values[stage] - wide.values[control]
        kept = np.flatnonzero(~np.isnan(gain))
        if not len(kept):
            continue
        out = wide.rows.iloc[kept].reset_index(drop=True)
        out["gain"] = gain[kept]
        out["stage"] = stage
        out = _without_fixed(out, fixed, (stage, control))
        parts.append(out)
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in GAIN_COLUMNS})
    gains = pd.concat(parts, ignore_index=True)
    for column in GAIN_COLUMNS:
        if column not in ("round", "gain"):
            gains[column] = strings(gains[column])
    gains["round"] = gains["round"].astype("int64")
    values = gains["gain"].to_numpy(np.float64, copy=True)
    values[np.abs(values) <= TIE] = 0.0
    gains["gain"] = values
    return gains[GAIN_COLUMNS]


def _without_fixed(
    gains: pd.DataFrame, fixed: pd.DataFrame | None, stages: tuple[str, str]
) -> pd.DataFrame:
    if fixed is None or fixed.empty:
        return gains
    keys = ["config_id", "policy", "round", "eval_mode", "measure"]
    marked = set(key_tuples(fixed[strings(fixed["stage"]).isin(stages)], keys))
    if not marked or gains.empty:
        return gains
    # Each distinct key once, not each row's: the groups are numbered as first met.
    group, first = first_met(ngroups(gains, keys).astype(np.int64, copy=False))
    cells = key_tuples(gains.iloc[first], keys)
    hit = np.fromiter((cell in marked for cell in cells), bool, len(cells))
    return gains[~hit[group]] if hit.any() else gains  # (no copy of every row)


def setting_gains(gains: pd.DataFrame) -> pd.DataFrame:
    """Per user × round × mode × measure, each setting's (config × stage) mean gain over the
    queries every setting of that user keeps (``n``): what the user's ordering is made of."""
    within = ["policy", "round", "eval_mode", "measure"]
    keys = [*within, "config_id", "stage"]
    coded = _setting_codes(gains, keys)
    if coded is None:
        shared = common_queries(gains, within=within, across=["config_id", "stage"])
        out = shared.groupby(keys, sort=False)["gain"].agg(["count", "mean"]).reset_index()
        return out.rename(columns={"count": "n", "mean": "gain"})
    # by codes, each key factorized once (common_queries and the groupby would each
    # factorize them again): the queries every setting of a group keeps, as common_queries
    # keeps them, then pandas' count and mean over one code per setting (the same rows in
    # the same order: the same floats)
    group, setting, query = coded
    keep = complete_rows(group, setting, query)
    rows = np.arange(len(gains)) if keep.all() else np.flatnonzero(keep)
    cell, first = first_met(group[rows] * (int(setting.max()) + 1) + setting[rows])
    values = pd.Series(gains["gain"].to_numpy()[rows])
    stats = values.groupby(cell, sort=False).agg(["count", "mean"])
    out = gains.iloc[rows[first]][keys].reset_index(drop=True)
    out["n"] = stats["count"].to_numpy()
    out["gain"] = stats["mean"].to_numpy()
    return out


def _setting_codes(
    gains: pd.DataFrame, keys: Sequence[str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """Each row's (policy, round, mode, measure) group, its (config, stage) setting within
    it and its query, as codes (``keys``: the group's four and the setting's two); None
    where a key is missing somewhere (pandas' grouping then drops the row)."""
    if not len(gains):
        return None
    codes = {}
    space = 1
    for column in [*keys, "query_id"]:
        found, uniques = pd.factorize(gains[column])
        if found.min() < 0:
            return None
        codes[column] = (found.astype(np.int64), max(len(uniques), 1))
        space *= codes[column][1]
    if space >= 1 << 62:  # every code below fits in an int64
        return None
    group = np.zeros(len(gains), dtype=np.int64)
    for column in keys[:4]:
        found, size = codes[column]
        group = group * size + found
    (config, _), (stage, stages) = codes[keys[4]], codes[keys[5]]
    return group, config * stages + stage, codes["query_id"][0]


def ordering(
    means: pd.DataFrame, labels: Sequence[str], *, eval_mode: str, measure: str, round_: int
) -> pd.Series:
    """Each setting's gain for ``labels`` (one user's seeds, say: the mean over them of
    each label's gain), indexed by (config_id, stage); settings all labels have."""
    mine = means[
        means["policy"].isin(list(labels))
        & (means["eval_mode"] == eval_mode)
        & (means["measure"] == measure)
        & (means["round"] == round_)
    ]
    columns = (mine[c].tolist() for c in ("config_id", "stage", "policy", "gain"))
    gains = _gains_of(list(zip(*columns, strict=True)), labels)
    if not gains:
        return pd.Series(dtype="float64")
    index = pd.MultiIndex.from_tuples(list(gains), names=["config_id", "stage"])
    return pd.Series(list(gains.values()), index=index, dtype="float64")


_Row = tuple[str, str, str, float]


def _gains_of(rows: Sequence[_Row], labels: Sequence[str]) -> dict[Setting, float]:
    """:func:`ordering` of the (config_id, stage, policy, gain) rows at one mode, measure
    and round as a dict (setting -> gain, settings sorted): what an agreement reads,
    without building a Series (a panel makes dozens)."""
    wanted = set(labels)
    rows = [r for r in rows if r[2] in wanted]
    if not rows:
        return {}
    # A (config_id, stage) × policy table of each label's first non-missing gain, kept
    # where every policy that has a gain has one for it; each row's mean adds its gains in
    # policy order, as a pivot table's row mean does.
    table: dict[tuple[str, str], dict[str, float]] = {}
    present: set[str] = set()
    for config_id, stage, policy, gain in rows:
        if gain is None or math.isnan(gain):
            continue
        present.add(policy)
        table.setdefault((config_id, stage), {}).setdefault(policy, float(gain))
    if len(present) < len(wanted):
        return {}
    order = sorted(present)
    kept = sorted(k for k, row in table.items() if len(row) == len(order))
    return {k: sum(table[k][p] for p in order) / len(order) for k in kept}


def _by_cell(means: pd.DataFrame) -> dict[tuple[str, str, int], list[_Row]]:
    """``means``' rows grouped by (eval_mode, measure, round), in row order: what
    :func:`ordering` filters, once for the dozens of orderings of a panel."""
    cells: dict[tuple[str, str, int], list[_Row]] = {}
    keys = ("eval_mode", "measure", "round", "config_id", "stage", "policy", "gain")
    for mode, measure, round_, *row in zip(*(means[c].tolist() for c in keys), strict=True):
        cells.setdefault((mode, measure, round_), []).append(tuple(row))
    return cells


def _pair_signs(values: Sequence[float]) -> npt.NDArray[np.int8]:
    """The sign of ``values[i] − values[j]`` (0 within :data:`TIE`) for every pair i < j,
    in :func:`itertools.combinations`' order (row by row of the upper triangle)."""
    v = np.asarray(values, dtype=np.float64)
    first, second = np.triu_indices(len(v), 1)
    d = v[first] - v[second]
    return np.where(np.abs(d) <= TIE, 0, np.where(d > 0, 1, -1)).astype(np.int8)


def _tau(sx: npt.NDArray[np.int8], sy: npt.NDArray[np.int8]) -> float:
    """τ-b from the two orderings' pair signs (:func:`_pair_signs`)."""
    pairs = len(sx)
    tied_x, tied_y = int(np.count_nonzero(sx == 0)), int(np.count_nonzero(sy == 0))
    both = (sx != 0) & (sy != 0)
    concordant = int(np.count_nonzero(both & (sx == sy)))
    discordant = int(np.count_nonzero(both & (sx != sy)))
    denominator = math.sqrt((pairs - tied_x) * (pairs - tied_y))
    return math.nan if denominator == 0 else (concordant - discordant) / denominator


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b of two paired score lists (Kendall 1945; :func:`scipy.stats.kendalltau`'s
    default): over the n_0 = n(n−1)/2 pairs, with n_c concordant, n_d discordant, n_1 and n_2
    tied in the first and the second list, τ_b = (n_c − n_d) / √((n_0 − n_1)(n_0 − n_2)).
    Values within :data:`TIE` are tied. NaN when fewer than two items or either list ties
    every pair."""
    if len(x) != len(y):
        raise ValueError(f"orderings differ in length: {len(x)} and {len(y)}")
    return _tau(_pair_signs(x), _pair_signs(y))


class Flip(NamedTuple):
    """Two settings whose order flips: ``first`` is above ``second`` in ordering a, below
    it in b; the gains are each ordering's."""

    first: Setting
    second: Setting
    a_first: float
    a_second: float
    b_first: float
    b_second: float


@dataclass(frozen=True)
class Agreement:
    """Kendall's τ-b between two orderings of the same settings, and their flips.

    ``factor``: what changed between them (``user``, ``seed`` or ``mode``); ``a`` and ``b``
    name the two sides (users, a user's seed labels, or modes); ``user``: whose orderings
    (empty for a pair of users). ``best_a``/``best_b``: each ordering's top setting."""

    factor: str
    a: str
    b: str
    user: str
    eval_mode: str
    measure: str
    items: int
    tau: float
    flips: tuple[Flip, ...]
    best_a: Setting | None
    best_b: Setting | None


def _agreement(
    factor: str,
    a: str,
    b: str,
    user: str,
    mode: str,
    measure: str,
    of_x: Mapping[Setting, float],
    of_y: Mapping[Setting, float],
) -> Agreement:
    items = [i for i in of_x if i in of_y]
    xs, ys = [of_x[i] for i in items], [of_y[i] for i in items]
    sx, sy = _pair_signs(xs), _pair_signs(ys)
    first, second = np.triu_indices(len(items), 1)
    flipped = np.flatnonzero(sx * sy < 0)  # the discordant pairs, in combinations' order
    flips = tuple(
        Flip(items[i], items[j], xs[i], xs[j], ys[i], ys[j])
        if xs[i] > xs[j]
        else Flip(items[j], items[i], xs[j], xs[i], ys[j], ys[i])
        for i, j in zip(first[flipped].tolist(), second[flipped].tolist(), strict=True)
    )
    tau = _tau(sx, sy) if len(items) >= 2 else math.nan

    def top(values: list[float]) -> Setting | None:
        return items[int(np.argmax(values))] if values else None

    return Agreement(factor, a, b, user, mode, measure, len(items), tau, flips, top(xs), top(ys))


def labels_by_user(labels: Sequence[UserLabel]) -> dict[str, list[str]]:
    """Each user's labels at its own depth (its seeds), users in run order."""
    users: dict[str, list[str]] = {}
    for label in labels:
        if not label.budget:
            users.setdefault(label.user, []).append(label.label)
    return users


def agreements(
    means: pd.DataFrame,
    labels: Sequence[UserLabel],
    *,
    primary_mode: str,
    primary_measure: str,
    modes: Sequence[str],
    round_: int = 1,
    exclude: Sequence[str] = (),
) -> list[Agreement]:
    """Every pair of orderings that should agree (``means`` from :func:`setting_gains`):

    - each pair of users at the primary mode and measure (a user over several seeds: the
      mean over its seeds of each setting's gain);
    - each pair of one user's seeds, same mode and measure;
    - each pair of ``modes`` for each user, at the primary measure, or, where it cannot
      change in one of them (frozen evaluation's pinned prefix), at every measure both have.

    Settings of the configs in ``exclude`` (baselines whose gain is 0 by construction) are
    left out."""
    means = means[~means["config_id"].isin(list(exclude))]
    users = labels_by_user(labels)
    out: list[Agreement] = []

    cells = _by_cell(means)

    def of(labels_: Sequence[str], mode: str, measure: str) -> dict[Setting, float]:
        return _gains_of(cells.get((mode, measure, round_), []), labels_)

    def at(labels_: Sequence[str]) -> dict[Setting, float]:
        return of(labels_, primary_mode, primary_measure)

    pooled = {user: at(own) for user, own in users.items()}
    for (ua, xa), (ub, xb) in itertools.combinations(pooled.items(), 2):
        out.append(_agreement("user", ua, ub, "", primary_mode, primary_measure, xa, xb))
    for user, own in users.items():
        if len(own) < 2:
            continue
        alone = {label: at([label]) for label in own}
        for (la, xa), (lb, xb) in itertools.combinations(alone.items(), 2):
            out.append(_agreement("seed", la, lb, user, primary_mode, primary_measure, xa, xb))
    measures = list(dict.fromkeys(str(m) for m in means["measure"]))
    for user, own in users.items():
        for ma, mb in itertools.combinations(modes, 2):
            # The primary measure where both modes order settings by it; else every
            # measure both have (the others are only computed when they are needed).
            usable: dict[str, tuple[dict[Setting, float], dict[Setting, float]]] = {}
            for m in [primary_measure, *(m for m in measures if m != primary_measure)]:
                xy = (of(own, ma, m), of(own, mb, m))
                if len(xy[0]) and len(xy[1]):
                    usable[m] = xy
                    if m == primary_measure:
                        break
            for measure, (xa, xb) in usable.items():
                out.append(_agreement("mode", ma, mb, user, f"{ma}/{mb}", measure, xa, xb))
    return out


def sums_of_squares(cube: npt.ArrayLike, factors: Sequence[str]) -> pd.DataFrame:
    """The ANOVA table of a balanced, fully crossed layout with one value per cell
    (Montgomery, *Design and Analysis of Experiments*, §5.4): each effect's SS is the
    inclusion–exclusion of its factors' marginal means (SS_a = b·c·Σ_i (ȳ_i·· − ȳ)²), its
    df the product of (levels − 1). One row per main effect and interaction (``a × b``),
    the interaction of all factors as ``residual``, then ``total``; columns ``source``,
    ``df``, ``ss``, ``share`` (SS / SS_total, η²; NaN when the values do not vary)."""
    values = np.asarray(cube, dtype=np.float64)
    if values.ndim != len(factors):
        raise ValueError(f"a {values.ndim}-way table needs {values.ndim} factor names")
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ValueError("the table must be non-empty and finite")
    axes = range(values.ndim)

    def marginal(kept: tuple[int, ...]) -> npt.NDArray[np.float64]:
        dropped = tuple(a for a in axes if a not in kept)
        return np.asarray(values.mean(axis=dropped, keepdims=True), dtype=np.float64)

    total = float(((values - values.mean()) ** 2).sum())
    rows: list[dict[str, Any]] = []
    for size in range(1, values.ndim + 1):
        for subset in itertools.combinations(axes, size):
            effect = np.zeros([1] * values.ndim)
            for k in range(len(subset) + 1):
                for kept in itertools.combinations(subset, k):
                    effect = effect + (-1) ** (len(subset) - k) * marginal(kept)
            ss = float((np.broadcast_to(effect, values.shape) ** 2).sum())
            df = int(np.prod([values.shape[a] - 1 for a in subset]))
            name = "residual" if size == values.ndim else " × ".join(factors[a] for a in subset)
            rows.append({"source": name, "df": df, "ss": ss})
    rows.append({"source": "total", "df": values.size - 1, "ss": total})
    table = pd.DataFrame(rows)
    table["share"] = table["ss"] / total if total > 0 else math.nan
    return table


def _cell_gains(
    gains: pd.DataFrame, eval_mode: str, measure: str, round_: int, exclude: Sequence[str]
) -> pd.DataFrame:
    """``gains`` at one mode, measure and round, the configs in ``exclude`` left out."""
    return gains[
        (gains["eval_mode"] == eval_mode)
        & (gains["measure"] == measure)
        & (gains["round"] == round_)
        & ~gains["config_id"].isin(list(exclude))
    ]


def variance_components(
    gains: pd.DataFrame,
    labels: Sequence[UserLabel],
    *,
    eval_mode: str,
    measure: str,
    round_: int = 1,
    exclude: Sequence[str] = (),
) -> pd.DataFrame:
    """For each user run under two seeds or more and each feedback stage: how the variance
    of its per-query gains splits between config, seed and query (:func:`sums_of_squares`
    of the config × seed × query table over the queries every (config, seed) keeps).

    Columns ``user``, ``stage``, ``configs``, ``seeds``, ``queries``, then the ANOVA table's.
    """
    frame = _cell_gains(gains, eval_mode, measure, round_, exclude)
    seed_of = {label.label: label.seed for label in labels}
    parts = []
    for user, own in labels_by_user(labels).items():
        if len(own) < 2:
            continue
        mine = frame[frame["policy"].isin(own)]
        for stage, by_stage in mine.groupby("stage", sort=False):
            cube = by_stage.pivot_table(
                index="query_id", columns=["config_id", "policy"], values="gain", aggfunc="first"
            ).dropna()
            configs = list(dict.fromkeys(str(column[0]) for column in cube.columns))
            if cube.empty or len(configs) < 2 or cube.shape[1] != len(configs) * len(own):
                continue
            seeds = sorted(own, key=lambda label: (seed_of.get(label) or 0, label))
            values = np.stack(
                [cube[[(c, s) for s in seeds]].to_numpy().T for c in configs]
            )  # config × seed × query
            table = sums_of_squares(values, ["config", "seed", "query"])
            table.insert(0, "queries", values.shape[2])
            table.insert(0, "seeds", values.shape[1])
            table.insert(0, "configs", values.shape[0])
            table.insert(0, "stage", str(stage))
            table.insert(0, "user", user)
            parts.append(table)
    if not parts:
        return pd.DataFrame(
            columns=["user", "stage", "configs", "seeds", "queries", "source", "df", "ss", "share"]
        )
    return pd.concat(parts, ignore_index=True)


def budget_curve(
    gains: pd.DataFrame,
    labels: Sequence[UserLabel],
    *,
    eval_mode: str,
    measure: str,
    round_: int = 1,
    exclude: Sequence[str] = (),
) -> pd.DataFrame:
    """The gain against the judgment budget (:data:`BUDGET_COLUMNS`): for each user run at
    several depths (``experiment.budgets``), at each depth and for each config and stage,
    the mean per-query gain over the queries that label keeps, with its 95% t interval.
    A user over several seeds enters at the seed its budgets ran at (the first)."""
    frame = _cell_gains(gains, eval_mode, measure, round_, exclude)
    points: list[tuple[str, int, str]] = []
    for user in dict.fromkeys(label.user for label in labels):
        mine = [label for label in labels if label.user == user]
        budgets = [label for label in mine if label.budget and label.depth is not None]
        if not budgets:
            continue
        seed = budgets[0].seed
        own = [
            label
            for label in mine
            if not label.budget and label.seed == seed and label.depth is not None
        ]
        for label in sorted([*budgets, *own[:1]], key=lambda item: item.depth or 0):
            points.append((user, int(label.depth or 0), label.label))
    if not points:
        return pd.DataFrame(columns=BUDGET_COLUMNS)
    chosen = pd.DataFrame(points, columns=["user", "depth", "policy"])
    rows = frame.merge(chosen, on="policy")
    curve = summarize_groups(
        rows, ["user", "depth", "policy", "config_id", "stage"], "gain", differences=True
    )
    curve = curve.rename(columns={"policy": "label"}).drop(columns="std")
    curve["n"] = curve["n"].astype("int64")
    order = {user: i for i, user in enumerate(dict.fromkeys(chosen["user"]))}
    curve = curve.sort_values(
        ["user", "config_id", "stage", "depth"],
        key=lambda c: c.map(order) if c.name == "user" else c,
    )
    return curve[BUDGET_COLUMNS].reset_index(drop=True)


def saturation(curve: pd.DataFrame) -> pd.DataFrame:
    """Where a larger budget stops paying, per user × config × stage of a
    :func:`budget_curve`: the smallest depth whose mean gain reaches the lower 95% bound of
    the largest mean gain (a larger budget buys no gain its interval can tell apart).
    Columns ``user``, ``config_id``, ``stage``, ``depth``, ``best_depth``."""
    rows = []
    for (user, config_id, stage), group in curve.groupby(
        ["user", "config_id", "stage"], sort=False
    ):
        group = group.dropna(subset=["mean"]).sort_values("depth")
        if group.empty:
            continue
        top = group.iloc[int(np.argmax(group["mean"].to_numpy(float)))]
        floor = top["ci_low"] if not math.isnan(float(top["ci_low"])) else top["mean"]
        enough = group[group["mean"] >= floor - TIE]
        rows.append(
            {
                "user": user,
                "config_id": config_id,
                "stage": stage,
                "depth": int(enough["depth"].iloc[0]),
                "best_depth": int(top["depth"]),
            }
        )
    return pd.DataFrame(rows, columns=["user", "config_id", "stage", "depth", "best_depth"])


@dataclass(frozen=True)
class Robustness:
    """Whether one setting stays on top when the user, the seed or the mode changes.

    Users and seeds are compared at the primary mode and measure, the ones the setting was
    picked at: ``orderings`` counts each user's and each seed's ordering once, ``first``
    those the setting tops, ``not_first`` the others as (factor, user, side, the setting on
    top there). A mode comparison may fall back to another measure (frozen evaluation pins
    the primary one), where another setting may lead in both modes; so each counts as one
    check of whether the two modes put the same setting on top: ``modes``, ``modes_agree``
    and ``mode_changes`` (user, modes, measure, top in a, top in b). ``lowest``: the
    agreement with the lowest τ."""

    setting: Setting
    orderings: int
    first: int
    not_first: tuple[tuple[str, str, str, Setting], ...]
    modes: int
    modes_agree: int
    mode_changes: tuple[tuple[str, str, str, Setting | None, Setting | None], ...]
    lowest: Agreement | None

    @property
    def robust(self) -> bool:
        checks = self.orderings + self.modes
        return checks > 0 and self.first == self.orderings and self.modes_agree == self.modes


def robustness(found: Sequence[Agreement], setting: Setting) -> Robustness:
    """How often ``setting`` tops the user and seed orderings of ``found``, and how often
    its mode comparisons agree on the top setting."""
    seen: dict[tuple[str, str, str], Setting | None] = {}
    modes = [a for a in found if a.factor == "mode" and a.items >= 2]
    for agreement in found:
        if agreement.factor == "mode":
            continue
        seen.setdefault((agreement.factor, agreement.user, agreement.a), agreement.best_a)
        seen.setdefault((agreement.factor, agreement.user, agreement.b), agreement.best_b)
    counted = {side: top for side, top in seen.items() if top is not None}
    not_first = tuple((*side, top) for side, top in counted.items() if top != setting)
    changes = tuple(
        (a.user, a.eval_mode, a.measure, a.best_a, a.best_b) for a in modes if a.best_a != a.best_b
    )
    defined = [a for a in found if not math.isnan(a.tau)]
    lowest = min(defined, key=lambda a: a.tau) if defined else None
    return Robustness(
        setting,
        len(counted),
        len(counted) - len(not_first),
        not_first,
        len(modes),
        len(modes) - len(changes),
        changes,
        lowest,
    )
