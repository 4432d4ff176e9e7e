"""``run`` and ``record``: Hydra tasks that hand the resolved config to
:func:`~evidence_bench.experiment.run.perform_run` and
:func:`~evidence_bench.experiment.record.record`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evidence_bench.commands._common import fail
from evidence_bench.commands._help import asks_for_help, print_help
from evidence_bench.commands._hydra import collecting, config_dir_option, hydra_task

__all__ = ["FORCE", "record_command", "run_command"]

#: ``record``'s flag to record into cassettes that exist.
FORCE = "--force"


def run_command(argv: list[str]) -> None:
    """``run +experiment=NAME [overrides]``."""
    _answer_help("run", argv)
    hydra_task(_run, argv)


def record_command(argv: list[str]) -> None:
    """``record +experiment=NAME [overrides] [--force]``: ``--force`` records into the query
    set's cassettes even when they exist (:mod:`evidence_bench.experiment.record_target`)."""
    force = FORCE in argv
    _answer_help("record", [arg for arg in argv if arg != FORCE])

    @functools.wraps(_record)
    def task(cfg: Any) -> None:
        _record(cfg, force=force)

    hydra_task(task, [arg for arg in argv if arg != FORCE])


def _answer_help(command: str, argv: list[str]) -> None:
    """``--help``: the experiments, or the chosen one's knobs (:mod:`._help`), and exit."""
    if asks_for_help(argv):
        rest, config_dir = config_dir_option(argv)
        print_help(command, rest, config_dir)


def _run(cfg: Any) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.config import resolved
    from evidence_bench.experiment.run import RunOutcome, RunReport, perform_run
    from evidence_bench.report.fresh import new_run_report

    plain, text = resolved(cfg)
    perform: Callable[..., RunOutcome] = perform_run
    report: RunReport = new_run_report
    tune = bool(plain["experiment"].get("tune"))
    if tune:  # a tuning experiment (rocchio_tune)
        from evidence_bench.experiment.tune import perform_tune
        from evidence_bench.report.fresh import new_tuning_report

        if int(plain.get("shards", 1)) > 1:
            fail("shards: a tuning experiment (experiment.tune) cannot be sharded")
        perform = perform_tune
        report = new_tuning_report
    hydra_cfg = HydraConfig.get()
    job_dir = None
    if hydra_cfg.mode == RunMode.MULTIRUN:
        job_dir = Path(hydra_cfg.runtime.output_dir) / "run"
    # one run whose episodes run in this process: what start-up made lives as long as it
    collecting(keep=plain.get("workers") == 1 and job_dir is None and not tune)
    try:
        outcome = perform(
            plain, text, run_dir=job_dir, overrides=list(hydra_cfg.overrides.task), report=report
        )
    except EvidenceBenchError as exc:
        fail(str(exc))
    print(outcome.announce(), end="")


def _record(cfg: Any, *, force: bool = False) -> None:
    from hydra.core.hydra_config import HydraConfig

    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.config import resolved
    from evidence_bench.experiment.plan import plan_run
    from evidence_bench.experiment.record import record

    plain, _text = resolved(cfg)
    collecting()
    try:
        summary = record(
            plan_run(plain),
            provider=str(plain.get("provider", "simulator")),
            rounds=int(plain.get("record_rounds", 1)),
            deep=bool(plain.get("record_deep", True)),
            searches=bool(plain.get("record_searches", True)),
            page_timeout_s=float((plain.get("pages") or {}).get("timeout_s", 5.0)),
            allow_private=bool((plain.get("pages") or {}).get("allow_private", False)),
            force=force,
            progress=bool(plain.get("progress", True)),
        )
    except EvidenceBenchError as exc:
        fail(str(exc))
    for path in summary.replaced:
        print(f"evidence_bench: {path} could not be read; recorded it afresh", file=sys.stderr)
    for note in summary.afresh:
        print(f"evidence_bench: {note}", file=sys.stderr)
    print(summary.announce(list(HydraConfig.get().overrides.task)), end="")
