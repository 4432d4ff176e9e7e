"""Choosing ranker weights by k-fold cross-validation around TPE (docs/tutorials/tune.rst).

As PyTerrier's ``KFoldGridSearch`` (terrier-org/pyterrier, pyterrier/_evaluation/_grid.py),
each fold's weights are chosen on the other folds' queries and scored held out; the choice
is the best of ``trials`` points of Optuna's TPE sampler (Bergstra et al. 2011), the first
``startup_trials`` at random. Trials run one at a time, every fold's sampler seeded alike
from the run's seed; the best trial is the highest mean training score, the earliest on a tie.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from evidence_bench.errors import DataError
from evidence_bench.experiment.tune.folds import assign_folds
from evidence_bench.seeding import derivation, derived_seed

if TYPE_CHECKING:
    import optuna

__all__ = [
    "SAMPLER_SEED", "CrossValidation", "Fold", "Scorer", "SearchSpace", "Trial", "cross_validate",
    "sampler_seed",
]  # fmt: skip

#: How every fold's TPE sampler is seeded, for the manifest (numpy takes 32 bits).
SAMPLER_SEED = derivation("seed", '"tpe"') + " mod 2**32"


def sampler_seed(seed: int) -> int:
    return derived_seed(seed, "tpe") % 2**32


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """Each searched parameter's closed interval, on a grid of ``step`` (None: continuous)."""

    bounds: tuple[tuple[str, float, float], ...]
    step: float | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _low, _high in self.bounds)


class Scorer(Protocol):
    """The objective per query for one setting of the searched parameters.

    A query it cannot score (e.g. nothing relevant left under residual evaluation) is left
    out of the mapping."""

    def __call__(
        self, params: Mapping[str, float], query_ids: Sequence[str]
    ) -> Mapping[str, float]: ...


@dataclass(frozen=True, slots=True)
class Trial:
    fold: int
    number: int
    params: Mapping[str, float]
    #: mean objective over the fold's training queries that could be scored
    score: float
    queries: int


@dataclass(frozen=True, slots=True)
class Fold:
    fold: int
    train: tuple[str, ...]
    heldout: tuple[str, ...]
    chosen: Trial
    #: the chosen and the default setting's objective per held-out query
    tuned: Mapping[str, float]
    default: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class CrossValidation:
    folds: tuple[Fold, ...]
    trials: tuple[Trial, ...]
    default: Mapping[str, float]


def _mean(values: Mapping[str, float], order: Sequence[str]) -> float:
    return math.fsum(values[q] for q in order if q in values) / len(values)


def cross_validate(
    query_ids: Sequence[str],
    scorer: Scorer,
    space: SearchSpace,
    default: Mapping[str, float],
    *,
    folds: int,
    trials: int,
    startup_trials: int,
    seed: int,
    on_trial: Callable[[Trial], None] | None = None,
) -> CrossValidation:
    """Tune on each fold's training queries, score the choice and ``default`` held out.

    ``scorer`` is only ever asked about a fold's training queries while that fold's study
    runs; the held-out queries are scored after its choice is made.
    """
    import optuna  # the [tune] extra: only a tuning run needs it

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per trial
    try:
        done: list[Fold] = []
        every: list[Trial] = []
        for index, heldout in enumerate(assign_folds(query_ids, folds, seed)):
            held = set(heldout)
            train = tuple(q for q in query_ids if q not in held)
            found = _study(index, train, scorer, space, trials, startup_trials, seed, on_trial)
            every += found
            chosen = max(found, key=lambda t: (t.score, -t.number))
            done.append(
                Fold(
                    index,
                    train,
                    heldout,
                    chosen,
                    dict(scorer(chosen.params, heldout)),
                    dict(scorer(default, heldout)),
                )
            )
    finally:
        optuna.logging.set_verbosity(verbosity)
    return CrossValidation(tuple(done), tuple(every), dict(default))


def _study(
    fold: int,
    train: tuple[str, ...],
    scorer: Scorer,
    space: SearchSpace,
    trials: int,
    startup_trials: int,
    seed: int,
    on_trial: Callable[[Trial], None] | None,
) -> list[Trial]:
    import optuna

    sampler = optuna.samplers.TPESampler(seed=sampler_seed(seed), n_startup_trials=startup_trials)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    found: list[Trial] = []

    def objective(trial: optuna.Trial) -> float:
        # rounded: a grid point is 0.15, not TPE's 0.15000000000000002
        params = {
            name: round(trial.suggest_float(name, low, high, step=space.step), 10)
            for name, low, high in space.bounds
        }
        values = scorer(params, train)
        if not values:
            raise DataError(
                f"fold {fold}: none of its {len(train)} training queries could be scored "
                f"at {params} (every one left out: nothing relevant left unseen?)"
            )
        record = Trial(fold, trial.number, params, _mean(values, train), len(values))
        found.append(record)
        if on_trial is not None:
            on_trial(record)
        return record.score

    study.optimize(objective, n_trials=trials, n_jobs=1)
    return found
