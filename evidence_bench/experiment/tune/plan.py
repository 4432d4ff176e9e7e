"""``experiment.tune`` validated into a :class:`TunePlan`: a bad setting fails before any
episode runs, in one line naming its key."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evidence_bench.errors import ConfigurationError
from evidence_bench.evaluation.attribution import BASELINES
from evidence_bench.evaluation.measures import parse_measure
from evidence_bench.experiment.components import RANKERS, EngineConfig, engine_config
from evidence_bench.experiment.plan import RunPlan, plan_run
from evidence_bench.experiment.tune.evaluate import Objective
from evidence_bench.experiment.tune.search import SearchSpace

__all__ = ["TunePlan", "check_folds", "plan_tuning"]

_KEY = "experiment.tune"


@dataclass(frozen=True)
class TunePlan:
    """A tuning run: the run plan (its one engine is the default config, its one user the
    tuned one), the search space and the cross-validation."""

    run: RunPlan
    space: SearchSpace
    folds: int
    trials: int
    startup_trials: int
    objective: Objective
    policy: str

    @property
    def default(self) -> EngineConfig:
        return self.run.engines[0]

    def default_params(self) -> dict[str, float]:
        params = dict(self.default.ranker_params)
        return {name: float(params[name]) for name in self.space.names}

    def engine(self, params: Mapping[str, float], config_id: str) -> EngineConfig:
        """The default config with ``params`` swapped in."""
        ranker = tuple((k, params.get(k, v)) for k, v in self.default.ranker_params)
        return replace(self.default, config_id=config_id, ranker_params=ranker)


def _space(tune: Mapping[str, Any], ranker: Mapping[str, Any]) -> SearchSpace:
    space = tune.get("space") or {}
    if not space:
        raise ConfigurationError(f"{_KEY}.space is empty: name ranker parameters, e.g. beta")
    takes = RANKERS[str(ranker["name"])].params
    step = tune.get("step")
    if step is not None and not (isinstance(step, int | float) and step > 0):
        raise ConfigurationError(f"{_KEY}.step={step!r} must be a positive number or null")
    bounds = []
    for name, interval in space.items():
        where = f"{_KEY}.space.{name}"
        if name not in takes or isinstance(ranker.get(name), bool | str | list):
            numeric = [p for p in takes if isinstance(ranker.get(p), int | float)]
            numeric = [p for p in numeric if not isinstance(ranker.get(p), bool)]
            raise ConfigurationError(
                f"{where}: not a numeric parameter of ranker {ranker['name']!r} "
                f"(valid: {', '.join(numeric) or 'none'})"
            )
        if (
            not isinstance(interval, Sequence)
            or len(interval) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in interval)
            or not interval[0] < interval[1]
        ):
            raise ConfigurationError(f"{where}={interval!r} must be [low, high] with low < high")
        low, high = float(interval[0]), float(interval[1])
        if step is not None:
            cells = (high - low) / step
            if abs(cells - round(cells)) > 1e-9:
                raise ConfigurationError(
                    f"{where}=[{low:g}, {high:g}] is not a whole number of "
                    f"{_KEY}.step={step:g} wide"
                )
        bounds.append((str(name), low, high))
    return SearchSpace(tuple(bounds), float(step) if step is not None else None)


def plan_tuning(cfg: Mapping[str, Any], overrides: Sequence[str] | None = None) -> TunePlan:
    """Validate a resolved config with ``experiment.tune`` set into a :class:`TunePlan`."""
    tune = cfg["experiment"].get("tune")
    if not tune:
        raise ConfigurationError(f"{_KEY} is not set: not a tuning experiment")
    experiment = cfg["experiment"]
    for key in ("grid", "configs"):
        if experiment.get(key):
            raise ConfigurationError(
                f"experiment.{key}: a tuning experiment searches {_KEY}.space from the "
                "ranker and refiner settings; leave it empty"
            )
    run = plan_run(cfg, overrides)
    if importlib.util.find_spec("optuna") is None:
        raise ConfigurationError(
            f"experiment {run.experiment!r} tunes with Optuna, which is not installed: "
            "pip install 'evidence_bench[tune]'"
        )
    # plan_run checked their bounds (experiment/bounds.py)
    folds, trials, startup = (int(tune[key]) for key in ("folds", "trials", "startup_trials"))
    stage = str(tune.get("stage"))
    if stage not in BASELINES:
        raise ConfigurationError(
            f"{_KEY}.stage={stage!r} is not valid (valid: {', '.join(BASELINES)})"
        )
    policy = str(tune.get("policy"))
    if policy not in run.users:
        raise ConfigurationError(
            f"{_KEY}.policy={policy!r} is not a user of this experiment "
            f"(valid: {', '.join(run.users)})"
        )
    space = _space(tune, cfg["ranker"])
    for corner in ((low for _n, low, _h in space.bounds), (h for _n, _l, h in space.bounds)):
        point = {**cfg["ranker"], **dict(zip(space.names, corner, strict=True))}
        try:  # a bound the ranker refuses fails now, naming the key
            engine_config("c00", point, cfg["refiner"], cfg.get("analyzer"))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{_KEY}.space: {exc}") from exc
    objective = Objective(
        stage=stage,
        control=BASELINES[stage][1],
        round=1,  # the only round where every trial is scored on the same queries
        mode=str(cfg["eval"]["primary_mode"]),
        measure=str(parse_measure(str(cfg["eval"]["primary_measure"]))),  # as plan_run
    )
    run = replace(run, users={policy: run.users[policy]})
    return TunePlan(run, space, folds, trials, startup, objective, policy)


def check_folds(plan: TunePlan, queries: int) -> None:
    """k-fold needs at least k queries."""
    if plan.folds > queries:
        raise ConfigurationError(
            f"{_KEY}.folds={plan.folds} is more than the {queries} queries of the query set "
            "(lower it, or raise experiment.queries)"
        )
