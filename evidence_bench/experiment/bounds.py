"""The ranges of the config knobs that multiply a run's work (rounds, seeds, users, engine
configs, workers, shards, trials): :func:`check_bounds` refuses a value outside its range
before anything runs, in one line naming the key and its range. The configuration
reference shows each range (``docs/_ext/configref.py`` reads :data:`BOUNDS`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from evidence_bench.errors import ConfigurationError

__all__ = ["BOUNDS", "MAX_ENGINE_CONFIGS", "MAX_SEEDS", "MAX_USERS", "Bound", "check_bounds"]


@dataclass(frozen=True, slots=True)
class Bound:
    """``key`` (dotted; ``*`` stands for every label of a mapping) takes ``low`` to ``high``,
    both included; ``null`` too where ``nullable``; ``note`` says what an edge value means;
    a whole number unless ``fractional``."""

    key: str
    low: float
    high: float
    note: str = ""
    nullable: bool = False
    fractional: bool = False

    def describe(self) -> str:
        """The range as the error and the manual say it: ``between 1 and 50 (or null)``."""
        note = self.note or ("or null" if self.nullable else "")
        tail = f" ({note})" if note else ""
        return f"between {_number(self.low)} and {_number(self.high)}{tail}"


#: Every result list is at most 200 deep (Brave's 20 a page times its 10 pages).
_DEEPEST = 200

BOUNDS: tuple[Bound, ...] = (
    Bound("experiment.rounds", 1, 50),
    Bound("experiment.depth", 1, _DEEPEST),
    Bound("experiment.queries", 1, 1_000_000, "or null: all", nullable=True),
    Bound("experiment.tune.folds", 2, 100),
    Bound("experiment.tune.trials", 1, 1000),
    Bound("experiment.tune.startup_trials", 1, 1000),
    Bound("query_set.limit", 1, 1_000_000, "or null: all", nullable=True),
    Bound("policies.*.depth", 1, _DEEPEST),
    Bound("pages.timeout_s", 0.01, 300, fractional=True),
    Bound("record_rounds", 0, 50, "0: every round"),
    Bound("workers", 0, 256, "0: one per core"),
    Bound("shards", 1, 1000),
)

#: The most entries of ``seeds``: each one runs every user that draws at random again.
MAX_SEEDS = 100
#: The most users (``policies``): each one runs every engine config's episodes again.
MAX_USERS = 100
#: The most engine configs ``experiment.configs`` times the points of ``experiment.grid`` make.
MAX_ENGINE_CONFIGS = 1000


def check_bounds(cfg: Mapping[str, Any]) -> None:
    """Refuse a value of a bounded knob outside its range, or a run with more seeds, users or
    engine configs than the bounds above, naming the key and the bound."""
    for bound in BOUNDS:
        for key, value in _values(cfg, bound.key.split("."), ""):
            if value is None and bound.nullable:
                continue
            kinds = (int, float) if bound.fractional else (int,)
            number = isinstance(value, kinds) and not isinstance(value, bool)
            if not number or not (bound.low <= value <= bound.high):  # NaN fails too
                kind = "" if bound.fractional or number else "a whole number "
                raise ConfigurationError(f"{key}={value!r} must be {kind}{bound.describe()}")
    seeds = cfg.get("seeds") or []
    if len(seeds) > MAX_SEEDS:
        raise ConfigurationError(f"seeds lists {len(seeds)} seeds; at most {MAX_SEEDS}")
    users = cfg.get("policies") or {}
    if len(users) > MAX_USERS:
        raise ConfigurationError(f"policies names {len(users)} users; at most {MAX_USERS}")
    experiment = cfg.get("experiment") or {}
    grid = experiment.get("grid") or {}
    sizes = [len(v) if isinstance(v, list | tuple) else 1 for v in grid.values()]
    engines = max(1, len(experiment.get("configs") or [])) * math.prod(sizes)
    if engines > MAX_ENGINE_CONFIGS:
        raise ConfigurationError(
            f"experiment.configs and experiment.grid make {engines} engine configs; "
            f"at most {MAX_ENGINE_CONFIGS}"
        )


def _values(node: Any, path: list[str], prefix: str) -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` for every key of ``node`` that ``path`` names; none where a
    part is missing or null (an experiment without ``tune``)."""
    if not isinstance(node, Mapping):
        return
    head, rest = path[0], path[1:]
    names = list(node) if head == "*" else [head] if head in node else []
    for name in names:
        key = f"{prefix}{name}"
        if rest:
            yield from _values(node[name], rest, f"{key}.")
        else:
            yield key, node[name]


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
