# The part of Optuna's API that evidence_bench/experiment/tune/search.py calls, as Optuna 5
# declares it (optuna/study/study.py, optuna/trial/_trial.py, optuna/samplers/_tpe/sampler.py,
# optuna/logging.py). mypy reads this instead of Optuna's own package, whose imports
# (SQLAlchemy, Alembic, matplotlib) were ~35% of the modules a clean `make typecheck`
# analyzed; tests/test_tune.py runs the real calls.
from collections.abc import Callable, Sequence
from typing import Literal

from optuna import logging as logging
from optuna import samplers as samplers
from optuna.samplers import BaseSampler

__all__ = ["Study", "Trial", "create_study", "logging", "samplers"]

class Trial:
    @property
    def number(self) -> int: ...
    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False
    ) -> float: ...

class Study:
    def optimize(
        self,
        func: Callable[[Trial], float | Sequence[float]],
        n_trials: int | None = None,
        timeout: float | None = None,
        n_jobs: int = 1,
    ) -> None: ...

def create_study(
    *,
    storage: str | None = None,
    sampler: BaseSampler | None = None,
    study_name: str | None = None,
    direction: Literal["minimize", "maximize"] | None = None,
    load_if_exists: bool = False,
) -> Study: ...
