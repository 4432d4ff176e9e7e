"""Knobs that multiply a run's work, set far out of range: each is refused when the config is
checked, before anything runs, in one line naming the key and its bound (exit 1, no run
directory). ``experiment.rounds=1000000000`` ran 103 s to a ``MemoryError`` before."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.bounds import BOUNDS, check_bounds
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from tests.fault_fixtures import main_in_process, one_line, smoke_args

# (override, the line), each key once past its top and once below its bottom where it has one
CASES = [
    ("experiment.rounds=1000000000", "experiment.rounds=1000000000 must be between 1 and 50"),
    ("experiment.rounds=51", "experiment.rounds=51 must be between 1 and 50"),
    ("experiment.rounds=0", "experiment.rounds=0 must be between 1 and 50"),
    ("experiment.depth=201", "experiment.depth=201 must be between 1 and 200"),
    (
        "experiment.queries=10000000",
        "experiment.queries=10000000 must be between 1 and 1000000 (or null: all)",
    ),
    ("query_set.limit=0", "query_set.limit=0 must be between 1 and 1000000 (or null: all)"),
    ("policies.oracle.depth=100000", "policies.oracle.depth=100000 must be between 1 and 200"),
    ("pages.timeout_s=1e9", "pages.timeout_s=1000000000.0 must be between 0.01 and 300"),
    ("pages.timeout_s=0", "pages.timeout_s=0.0 must be between 0.01 and 300"),
    ("record_rounds=1000", "record_rounds=1000 must be between 0 and 50 (0: every round)"),
    ("workers=100000", "workers=100000 must be between 0 and 256 (0: one per core)"),
    ("shards=1000000", "shards=1000000 must be between 1 and 1000"),
    ("+seeds=[" + ",".join(map(str, range(101))) + "]", "seeds lists 101 seeds; at most 100"),
    (
        "+experiment.grid.beta=[" + ",".join(str(b / 10) for b in range(1001)) + "]",
        "experiment.configs and experiment.grid make 1001 engine configs; at most 1000",
    ),
]


@pytest.mark.parametrize(("override", "message"), CASES)
def test_a_knob_past_its_bound_is_one_line_before_anything_runs(
    override: str,
    message: str,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done = main_in_process(
        *smoke_args(tmp_path / "runs", override), capfd=capfd, monkeypatch=monkeypatch
    )
    assert done.returncode == 1
    line = one_line(done)  # a list override reads as a sweep: "job 0 (...): " before it
    assert line.startswith("evidence_bench: ") and line.endswith(message), line
    assert not (tmp_path / "runs").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["+experiment=rocchio_tune", "experiment.tune.trials=1000000"],
            "experiment.tune.trials=1000000 must be between 1 and 1000",
        ),
        (
            ["+experiment=rocchio_tune", "experiment.tune.folds=1000"],
            "experiment.tune.folds=1000 must be between 2 and 100",
        ),
        (
            ["+experiment=smoke", "+policy@policies.many=oracle", "policies.many.depth=0"],
            "policies.many.depth=0 must be between 1 and 200",
        ),
    ],
)
def test_plan_refuses_a_bound_naming_the_key(overrides: list[str], message: str) -> None:
    cfg, _ = compose(overrides)
    with pytest.raises(ConfigurationError) as caught:
        plan_run(cfg)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("experiment.rounds", 2.5, "experiment.rounds=2.5 must be a whole number between 1 and 50"),
        ("workers", 1.5, "workers=1.5 must be a whole number between 0 and 256 (0: one per core)"),
    ],
)
def test_a_fraction_of_a_whole_number_knob_is_refused(key: str, value: float, message: str) -> None:
    """The schema refuses it on the command line; a config read back (a stored run's, as
    ``gather`` plans it) reaches the bounds as it was written."""
    with pytest.raises(ConfigurationError) as caught:
        check_bounds(_nest(key, value))
    assert str(caught.value) == message


def test_too_many_users_is_one_line() -> None:
    cfg, _ = compose(["+experiment=smoke"])
    cfg["policies"] = {f"u{n}": dict(cfg["policies"]["oracle"]) for n in range(101)}
    with pytest.raises(ConfigurationError, match=r"^policies names 101 users; at most 100$"):
        check_bounds(cfg)


@pytest.mark.parametrize("experiment", ["ci", "page_evidence", "rocchio_sweep", "validity"])
def test_every_shipped_experiment_is_within_the_bounds(experiment: str) -> None:
    cfg, _ = compose([f"+experiment={experiment}"])
    check_bounds(cfg)  # raises if a shipped experiment were out of bounds


@pytest.mark.parametrize("bound", BOUNDS, ids=[b.key for b in BOUNDS])
def test_each_bound_admits_its_edges(bound: object) -> None:
    from evidence_bench.experiment.bounds import Bound

    assert isinstance(bound, Bound)
    for edge in (bound.low, bound.high):
        check_bounds(_nest(bound.key.replace("*", "someone"), edge))


def _nest(key: str, value: float) -> dict[str, object]:
    node: dict[str, object] = {}
    parts = key.split(".")
    inner = node
    for part in parts[:-1]:
        inner[part] = {}
        inner = inner[part]  # type: ignore[assignment]
    inner[parts[-1]] = value
    return node
