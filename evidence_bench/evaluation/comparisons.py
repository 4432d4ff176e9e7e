"""Paired comparisons of a run's rankings, every one at once, within and across configurations.

A :class:`Comparison` is ``stage − reference`` per query (rerank − control, say), over the
queries scored in every stage of ``paired``. :func:`compare` runs each comparison for every
configuration × user × round × evaluation mode × measure of a ``per_query`` frame and
answers two questions with it:

- *within a configuration* (what did feedback do for this config?): over the config's own
  queries. Under residual evaluation a query leaves a round when the config has already
  shown every relevant document (Salton & Buckley 1990), so each config keeps its own set:
  the ``n``, ``diff``, CI, counts, ``p_t`` and ``p_rand`` columns.
- *across configurations* (which settings changed this measure, which is best, the sweep):
  over the queries that every compared config keeps, or the configs would be scored on
  different queries, each chosen by what that config displayed. A family is one (user,
  round, mode, measure, stage, reference) across the configs; its tests run on its common
  queries (``n_common``, ``diff_common``, ``p_rand_common``) and are Holm-corrected across
  the family (``p_holm``; Holm 1979). Where a config keeps exactly the common queries, the
  two tests are the same test and give the same p.

Cells that cannot change (``fixed``: frozen evaluation's pinned prefix, from ``summary.csv``)
are not tested and are in no family: a gain of exactly 0 there is no evidence of anything.

Randomization signs follow the run's ``seed``: every sign-flip test of ``n`` queries for a
user draws its signs from ``numpy.random.default_rng(randomization_seed(seed, policy, n))``
(:data:`RANDOMIZATION_SEED`), queries in query-id order. So all tests of one size for one user
share one sign matrix and run as one matrix product, a test's p does not depend on what else
the run holds, it is the same in every process, and another ``seed`` resamples it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np
import numpy.typing as npt

from evidence_bench._lazy import module
from evidence_bench.errors import DataError
from evidence_bench.evaluation.statistics import (
    BLOCK_CELLS,
    MIN_TRIALS,
    TIE,
    holm,
    ngroups,
    sign_flip_p_values,
    t_intervals,
    t_test_p_values,
    trials_for,
)
from evidence_bench.seeding import derivation, derived_seed

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = module("pandas")


__all__ = [
    "FAMILY",
    "KEYS",
    "RANDOMIZATION_SEED",
    "Comparison",
    "Comparisons",
    "StageValues",
    "common_queries",
    "compare",
    "complete_rows",
    "key_tuples",
    "randomization_seed",
    "stage_values",
    "strings",
]

#: What one comparison row is about (with its stage and reference).
KEYS = ("config_id", "policy", "round", "eval_mode", "measure")
#: A Holm family: one comparison of one user, round, mode and measure, across the configs.
FAMILY = ("policy", "round", "eval_mode", "measure", "stage", "reference")
#: The column of :func:`compare`'s working table naming each row's stratum (query set).
_STRATUM = "_stratum"
#: How the signs of a randomization test are seeded, as the manifest records it.
RANDOMIZATION_SEED = (
    derivation("seed", '"randomization"', "policy", "n")
    + " seeds numpy.random.default_rng; signs are 2 * integers(0, 2, (r, n), dtype=int8) - 1"
    + f" drawn in blocks of r = {BLOCK_CELLS} // n rows up to the trials, queries in"
    + " query-id order"
)

_Ints = npt.NDArray[np.int64]


class Comparison(NamedTuple):
    """``stage − reference`` per query, over the queries scored in every stage of ``paired``
    (which holds both: a query excluded from any of them drops out of the pair)."""

    stage: str
    reference: str
    paired: tuple[str, ...]


@dataclass(frozen=True)
class Comparisons:
    """:func:`compare`'s rows, the randomization trials and seed that made them, and the
    size of the largest family (the m that set the trials)."""

    rows: pd.DataFrame
    trials: int
    seed: int
    family: int = 0


def randomization_seed(seed: int, policy: str, n: int) -> int:
    """The seed of the signs of every randomization test of ``n`` queries for ``policy``."""
    return derived_seed(seed, "randomization", policy, int(n))


@dataclass
class StageValues:
    """What ``set_index([*KEYS, "query_id", "stage"])["value"].unstack("stage")`` gives, by
    codes: one row per (KEYS, query_id) of the compared stages, in the index order the
    unstack sorts them to, without its MultiIndex."""

    #: per row: the KEYS and query_id columns of its first row in ``per_query``
    rows: pd.DataFrame
    #: per row: its KEYS as one code, ascending with the order
    key: _Ints
    #: per stage: its value at each row (NaN where the stage has none)
    values: dict[str, npt.NDArray[np.float64]]


def _duplicate(exc: object) -> DataError:
    return DataError(
        "per_query.csv: a (config_id, policy, query_id, round, stage, eval_mode, measure) "
        f"appears more than once: {exc}"
    )


def _level_codes(values: pd.Series, chosen: _Ints, used_levels: bool) -> tuple[_Ints, int]:
    """The chosen rows' codes of one key, numbered as the unstack's index levels number them:
    a categorical's categories when all are used (or ``used_levels`` is false), else its used
    values in the order first met (``MultiIndex.remove_unused_levels``); any other column's
    sorted values (an integer column's ranked by :func:`_ranks`, not hashed)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy()[chosen].astype(np.int64)
        size = len(values.cat.categories)
        if (
            used_levels
            and len(codes)
            and codes.min() >= 0
            and (np.bincount(codes, minlength=size) == 0).any()
        ):
            codes = pd.factorize(codes)[0].astype(np.int64)
    elif isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu" and len(chosen):
        picked = values.to_numpy()[chosen].astype(np.int64)  # (numpy's: none missing)
        low = int(picked.min())
        codes, present = _ranks(picked - low, int(picked.max()) - low + 1)
        size = len(present)
    else:
        codes, levels = pd.factorize(values.iloc[chosen], sort=True)
        codes, size = codes.astype(np.int64), len(levels)
    if len(codes) and codes.min() < 0:
        raise DataError(f"per_query.csv: a row of a compared stage has no {values.name}")
    return codes, max(size, 1)


def stage_values(
    per_query: pd.DataFrame,
    stages: Sequence[str],
    *,
    used_levels: bool = True,
    where: npt.NDArray[np.bool_] | None = None,
) -> StageValues:
    """:class:`StageValues` of ``per_query``'s rows of ``stages``. ``used_levels`` false:
    a categorical key's rows in category order even where some categories are unused (the
    order ``set_index`` gives, before the unstack drops unused levels). ``where``: of those,
    only the rows it marks (what ``per_query[where]`` would give, without copying it)."""
    columns = [*KEYS, "query_id"]
    stage = per_query["stage"]
    if isinstance(stage.dtype, pd.CategoricalDtype):
        stage_codes, names = stage.cat.codes.to_numpy(), stage.cat.categories.astype(str)
    else:
        stage_codes, names = pd.factorize(stage)
    # each row's position among ``stages`` (a stage named twice: its first), −1 elsewhere
    wanted = {name: i for i, name in reversed(list(enumerate(stages)))}
    stage_of = np.array([wanted.get(n, -1) for n in names] + [-1], dtype=np.int64)
    column = stage_of[stage_codes]
    chosen = np.flatnonzero(column >= 0 if where is None else (column >= 0) & where)
    key = np.zeros(len(chosen), dtype=np.int64)
    space = size = 1
    for name in columns:
        codes, size = _level_codes(per_query[name], chosen, used_levels)
        space *= size
        if space >= 1 << 62:
            raise DataError("per_query.csv: too many distinct keys to compare")
        key = key * size + codes
    row, distinct = _ranks(key, space)  # each chosen row's wide row: its key's rank
    del key
    cell = row * len(stages) + column[chosen]
    if len(cell) and np.bincount(cell).max() > 1:  # a (row, stage) twice: counted, not sorted
        raise _duplicate("Index contains duplicate entries, cannot reshape")
    matrix = np.full((len(distinct), len(stages)), np.nan)
    matrix.reshape(-1)[cell] = per_query["value"].to_numpy(np.float64)[chosen]
    del cell
    first = np.full(len(distinct), len(row), dtype=np.int64)  # each wide row's first row
    np.minimum.at(first, row, np.arange(len(row)))
    rows = per_query.iloc[chosen[first]][columns].reset_index(drop=True)
    return StageValues(
        rows,
        distinct // size,  # the last key is query_id's
        {name: matrix[:, i].copy() for i, name in enumerate(stages) if wanted[name] == i},
    )


def _ranks(key: _Ints, space: int) -> tuple[_Ints, _Ints]:
    """Each value's rank among the distinct values of ``key`` (all in [0, ``space``)), and
    those values ascending: by a table of the space where it is at most four times the
    rows, else by sorting."""
    if space <= max(4 * len(key), 1 << 20):
        present = np.zeros(space, dtype=bool)
        present[key] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        return rank[key], np.flatnonzero(present)
    distinct, inverse = np.unique(key, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), distinct


def _query_order(query_ids: pd.Series) -> _Ints:
    """Each query id's rank in string order: the order of a test's differences."""
    if isinstance(query_ids.dtype, pd.CategoricalDtype):
        categories = query_ids.cat.categories.astype(str)
        rank = np.empty(len(categories), dtype=np.int64)
        rank[np.argsort(np.asarray(categories), kind="stable")] = np.arange(len(categories))
        return np.asarray(rank[query_ids.cat.codes.to_numpy()], dtype=np.int64)
    codes, _ = pd.factorize(query_ids.astype(str), sort=True)
    return np.asarray(codes, dtype=np.int64)


@dataclass
class _Pairs:
    """One comparison's paired queries: per query its row (``code``) and difference."""

    comparison: Comparison
    keys: pd.DataFrame  # one row per comparison row, KEYS columns
    code: _Ints  # per query: its row
    query: _Ints  # per query: its rank in query-id order
    diff: npt.NDArray[np.float64]
    means: dict[str, npt.NDArray[np.float64]]  # per row: the mean of each paired stage


def _pairs(wide: StageValues, comparison: Comparison) -> _Pairs | None:
    """The rows of ``wide`` holding every stage of ``comparison.paired``; None without any."""
    if not set(comparison.paired) <= set(wide.values):
        return None
    kept = np.ones(len(wide.key), dtype=bool)
    for stage in comparison.paired:
        kept &= ~np.isnan(wide.values[stage])
    sel = np.flatnonzero(kept)
    if not len(sel):
        return None
    index = wide.rows.iloc[sel].reset_index(drop=True)
    key = wide.key[sel]
    new = np.empty(len(key), dtype=bool)
    new[0] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    code = (np.cumsum(new) - 1).astype(np.int64)  # the keys ascend: numbered as first met
    keys = index.iloc[np.flatnonzero(new)][list(KEYS)].reset_index(drop=True)
    values = {s: wide.values[s][sel] for s in comparison.paired}
    diff = values[comparison.stage] - values[comparison.reference]
    diff[np.abs(diff) <= TIE] = 0.0
    n = np.bincount(code).astype(np.float64)
    means = {s: np.bincount(code, values[s]) / n for s in comparison.paired}
    return _Pairs(comparison, keys, code, _query_order(index["query_id"]), diff, means)


def _moments(
    code: _Ints, diff: npt.NDArray[np.float64], rows: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """n, mean and sample std (ddof=1; NaN for n < 2) of ``diff`` per row, two-pass."""
    n = np.bincount(code, minlength=rows).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.bincount(code, diff, minlength=rows) / n
        squares = np.bincount(code, (diff - mean[code]) ** 2, minlength=rows)
        std = np.where(n >= 2, np.sqrt(squares / (n - 1.0)), np.nan)
    return n, mean, std


def _spread(code: _Ints, diff: npt.NDArray[np.float64], rows: int) -> npt.NDArray[np.float64]:
    """max − min of ``diff`` per row (NaN for a row without any)."""
    high = np.full(rows, -np.inf)
    low = np.full(rows, np.inf)
    np.maximum.at(high, code, diff)
    np.minimum.at(low, code, diff)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(high), high - low, np.nan)


def _fixed_rows(
    keys: pd.DataFrame, comparison: Comparison, fixed: pd.DataFrame | None
) -> npt.NDArray[np.bool_]:
    """Rows where any paired stage's cell is fixed (cannot change)."""
    if fixed is None or fixed.empty:
        return np.zeros(len(keys), dtype=bool)
    cells = fixed[strings(fixed["stage"]).isin(comparison.paired)]
    marked = set(key_tuples(cells, KEYS))
    return np.fromiter((k in marked for k in key_tuples(keys, KEYS)), bool, len(keys))


def strings(column: pd.Series) -> pd.Series:
    """``column.astype(str)``; a categorical's categories converted once and taken by code."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        if not (codes < 0).any():  # a missing value: astype's own "nan"
            names = column.cat.categories.astype(str)
            return pd.Series(names.take(codes), index=column.index, name=column.name)
    return column.astype(str)


def key_tuples(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple[str | int, ...]]:
    """Each row's ``columns`` as a tuple of plain strings (``round``: an int), as
    :func:`strings` would give them: rows read differently still match."""
    values = [
        frame[c].astype("int64").tolist() if c == "round" else _string_list(frame[c])
        for c in columns
    ]
    return list(zip(*values, strict=True)) if values else []


def _string_list(column: pd.Series) -> list[str]:
    """``strings(column).tolist()``; a categorical's by picking each code's name from its
    categories' (a few hundred rows: no string array built for them)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        if not (codes < 0).any():
            names: list[str] = column.cat.categories.astype(str).tolist()
            return [names[code] for code in codes.tolist()]
    return cast(list[str], strings(column).tolist())


def _strata(keys: pd.DataFrame, strata: Mapping[str, str] | None) -> pd.Series:
    """Each row's stratum (its config's query set in ``strata``; "" for every row without)."""
    if not strata:
        return pd.Series("", index=keys.index)
    return strings(keys["config_id"]).map(dict(strata)).fillna("")


def _common(
    pairs: _Pairs, fixed: npt.NDArray[np.bool_], stratum: pd.Series
) -> tuple[npt.NDArray[np.bool_], int]:
    """Per query: whether every tested (not fixed) config of its family keeps it; and the
    largest family's size."""
    split = bool((stratum != "").any())
    keys = pairs.keys.assign(**{_STRATUM: stratum.to_numpy()}) if split else pairs.keys
    by = [*KEYS[1:], _STRATUM] if split else list(KEYS[1:])
    family = keys.groupby(by, observed=True, sort=False).ngroup().to_numpy()
    size = np.bincount(family[~fixed], minlength=int(family.max()) + 1)
    tested = ~fixed[pairs.code]
    of_query = family[pairs.code]
    # each (family, query)'s tested configs, counted (stage_values refused a missing key)
    combined = of_query.astype(np.int64) * (int(pairs.query.max()) + 1) + pairs.query
    have = np.bincount(combined[tested], minlength=int(combined.max()) + 1)[combined]
    return tested & (have == size[of_query]), int(size.max(initial=0))


def compare(
    per_query: pd.DataFrame,
    comparisons: Sequence[Comparison],
    *,
    seed: int = 0,
    trials: int = MIN_TRIALS,
    fixed: pd.DataFrame | None = None,
    confidence: float = 0.95,
    strata: Mapping[str, str] | None = None,
    where: npt.NDArray[np.bool_] | None = None,
) -> Comparisons:
    """Every comparison for every (config, user, round, mode, measure) of ``per_query``.

    One row per comparison row: the :data:`KEYS`, ``stage``, ``reference``; over the row's
    own queries ``n``, ``mean_<stage>`` for each paired stage, ``diff`` (mean stage −
    reference) with ``diff_std`` and its t interval ``diff_ci_low/high`` (NaN for n = 1 and
    for differences all equal and non-zero, as ``p_t``),
    ``improved``/``degraded``/``unchanged`` (beyond :data:`TIE`), ``p_t``, ``p_rand``;
    ``fixed``; over the family's common queries ``n_common``, ``diff_common``,
    ``diff_std_common``, ``diff_spread_common`` (max − min), ``p_rand_common`` and ``p_holm``.

    ``trials``: at least this many randomization trials, and at least 100 per member of the
    largest family (:func:`trials_for`). ``fixed``: cells that cannot change (the
    :data:`KEYS` and ``stage`` of each), left out of tests and families. ``strata``:
    config_id -> the query set it was scored on, where configs of several are compared
    (each family is then within one query set); None: one query set. ``where``: compare
    only the rows of ``per_query`` it marks (as ``per_query[where]`` would).
    """
    stages = list(dict.fromkeys(s for c in comparisons for s in c.paired))
    wide = stage_values(per_query, stages, where=where)
    found = [p for c in comparisons if (p := _pairs(wide, c)) is not None]
    del wide
    blocks: list[pd.DataFrame] = []
    tests: list[tuple[_Ints, npt.NDArray[np.float64], _Ints, npt.NDArray[np.bool_]]] = []
    largest = 0
    offset = 0
    for pairs in found:
        rows = len(pairs.keys)
        fixed_rows = _fixed_rows(pairs.keys, pairs.comparison, fixed)
        n, mean, std = _moments(pairs.code, pairs.diff, rows)
        stratum = _strata(pairs.keys, strata)
        keep, family_size = _common(pairs, fixed_rows, stratum)
        largest = max(largest, family_size)
        n_c, mean_c, std_c = _moments(pairs.code[keep], pairs.diff[keep], rows)
        spread = _spread(pairs.code, pairs.diff, rows)
        low, high = t_intervals(n, mean, std, confidence, spread=spread)
        up = np.bincount(pairs.code, pairs.diff > TIE, minlength=rows).astype(np.int64)
        down = np.bincount(pairs.code, pairs.diff < -TIE, minlength=rows).astype(np.int64)
        block = pairs.keys.copy()
        block["stage"] = pairs.comparison.stage
        block["reference"] = pairs.comparison.reference
        block["n"] = n.astype(np.int64)
        for stage, values in pairs.means.items():
            block[f"mean_{stage}"] = values
        block["diff"] = mean
        block["diff_std"] = std
        block["diff_ci_low"] = low
        block["diff_ci_high"] = high
        block["improved"] = up
        block["degraded"] = down
        block["unchanged"] = block["n"] - up - down
        p_t = t_test_p_values(n, mean, std, spread)
        block["p_t"] = np.where(fixed_rows, np.nan, p_t)
        block["fixed"] = fixed_rows
        block[_STRATUM] = stratum.to_numpy()
        block["n_common"] = n_c.astype(np.int64)
        block["diff_common"] = np.where(n_c > 0, mean_c, np.nan)
        block["diff_std_common"] = std_c
        block["diff_spread_common"] = _spread(pairs.code[keep], pairs.diff[keep], rows)
        blocks.append(block)
        # Own queries for every tested row; common ones only where they are fewer.
        own = ~fixed_rows[pairs.code]
        fewer = keep & (n_c < n)[pairs.code]
        for mask, kind in ((own, True), (fewer, False)):
            flags = np.full(int(mask.sum()), kind)
            tests.append((pairs.code[mask] + offset, pairs.diff[mask], pairs.query[mask], flags))
        offset += rows
    if not blocks:
        return Comparisons(pd.DataFrame(columns=[*KEYS, "stage", "reference"]), trials, seed, 0)
    table = pd.concat(blocks, ignore_index=True)
    total = trials_for(largest, floor=trials)
    p_own, p_common = _randomization(table, tests, total, seed)
    table["p_rand"] = p_own
    table["p_rand_common"] = np.where(
        table["n_common"] == table["n"], p_own, np.where(table["n_common"] > 0, p_common, np.nan)
    )
    # A cell that cannot change has a difference of 0 by construction, which is no evidence:
    # it gets no difference and no test rather than a gain of 0.
    untested = ["diff", "diff_std", "diff_ci_low", "diff_ci_high", "diff_common"]
    table.loc[
        table["fixed"],
        [*untested, "diff_std_common", "diff_spread_common", "p_rand", "p_rand_common"],
    ] = np.nan
    table["p_holm"] = _holm(table, "p_rand_common")
    return Comparisons(table.drop(columns=_STRATUM), total, seed, largest)


def _randomization(
    table: pd.DataFrame,
    tests: Sequence[tuple[_Ints, npt.NDArray[np.float64], _Ints, npt.NDArray[np.bool_]]],
    trials: int,
    seed: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """p of every sign-flip test: own-query tests (flag True) and common-query ones, in
    (policy, n) batches of one sign matrix and one product each."""
    rows = len(table)
    row = np.concatenate([t[0] for t in tests])
    diff = np.concatenate([t[1] for t in tests])
    query = np.concatenate([t[2] for t in tests])
    own = np.concatenate([t[3] for t in tests])
    test = row + np.where(own, 0, rows)  # one id per test: own first, then common
    size = np.bincount(test, minlength=2 * rows)
    policy_codes, policies = pd.factorize(table["policy"].astype(str))
    policy = np.concatenate([policy_codes, policy_codes])
    # by policy, size and test, then query: each test ranked once, then one sort of
    # (rank, query), unique per entry (a test holds a query once)
    ranked = np.lexsort((np.arange(2 * rows), size, policy))
    rank = np.empty(2 * rows, dtype=np.int64)
    rank[ranked] = np.arange(2 * rows)
    order = np.argsort(rank[test] * (int(query.max(initial=0)) + 1) + query)
    test, diff = test[order], diff[order]
    p = np.full(2 * rows, np.nan)
    if not len(test):
        return p[:rows], p[rows:]
    sizes, users = size[test], policy[test]
    starts = np.flatnonzero(np.r_[True, (sizes[1:] != sizes[:-1]) | (users[1:] != users[:-1])])
    ends = np.r_[starts[1:], len(test)]
    for start, end in zip(starts, ends, strict=True):
        n = int(size[test[start]])
        ids = test[start:end:n]
        matrix = diff[start:end].reshape(len(ids), n).T
        name = str(policies[policy[test[start]]])
        p[ids] = sign_flip_p_values(matrix, trials=trials, seed=randomization_seed(seed, name, n))
    return p[:rows], p[rows:]


def _holm(table: pd.DataFrame, column: str) -> pd.Series:
    """:func:`~evidence_bench.evaluation.statistics.holm` within each family, all families
    at once: each family's p-values in ascending order (ties in row order, as a stable sort
    leaves them), min(1, (m − j)·p_(j)) and its running maximum within the family (a
    family's rows are contiguous once sorted: one accumulate each, not a pandas group)."""
    adjusted = np.full(len(table), np.nan)
    tested = np.flatnonzero(table[column].notna().to_numpy())
    if not len(tested):
        return pd.Series(adjusted, index=table.index, dtype="float64")
    p = table[column].to_numpy(np.float64)[tested]
    if ((p < 0.0) | (p > 1.0)).any():
        holm(p.tolist())  # its one-line error for a p-value outside [0, 1]
    rows = table.iloc[tested]
    by = [*FAMILY, _STRATUM] if _STRATUM in rows else list(FAMILY)
    family = rows.groupby(by, observed=True, sort=False).ngroup().to_numpy(np.int64)
    order = np.lexsort((p, family))  # by family, then p; stable, so ties keep row order
    family, p_sorted = family[order], p[order]
    size = np.bincount(family)
    start = np.cumsum(size) - size
    j = np.arange(len(order)) - start[family]  # the position within the family
    scaled = np.minimum(1.0, (size[family] - j) * p_sorted)
    running = np.empty_like(scaled)
    for first, end in zip(start.tolist(), (start + size).tolist(), strict=True):
        np.maximum.accumulate(scaled[first:end], out=running[first:end])
    adjusted[tested[order]] = running
    return pd.Series(adjusted, index=table.index, dtype="float64")


def common_queries(
    frame: pd.DataFrame, within: Sequence[str], across: Sequence[str]
) -> pd.DataFrame:
    """The rows of ``frame`` whose ``query_id`` is scored for every combination of the
    ``across`` columns present in its ``within`` group (e.g. within (policy, round,
    measure), across (config_id, stage)): what a comparison across them may use; ``frame``
    itself when that is every row (the callers only read it)."""
    if frame.empty:
        return frame
    query = pd.factorize(frame["query_id"], use_na_sentinel=False)[0].astype(np.int64)
    keep = complete_rows(ngroups(frame, within), ngroups(frame, across), query)
    if keep.all():  # frame itself, not a copy
        return frame
    return frame[keep]


def complete_rows(group: _Ints, combo: _Ints, query: _Ints) -> npt.NDArray[np.bool_]:
    """Per row: whether every ``combo`` of its ``group`` holds its ``query`` (codes from 0):
    each (group, query)'s distinct combinations, hashed, against its group's."""
    width, combos = int(query.max()) + 1, int(combo.max()) + 1
    pair, pairs = pd.factorize(group.astype(np.int64) * width + query)
    pair = pair.astype(np.int64)
    held = np.bincount(pd.unique(pair * combos + combo) // combos, minlength=len(pairs))
    in_group = np.bincount(pd.unique(group * combos + combo) // combos)
    return np.asarray((held == in_group[np.asarray(pairs) // width])[pair])
