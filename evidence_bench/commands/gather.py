"""``gather``: the run that shards split, from their run directories."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evidence_bench.commands._common import asks_help, fail

__all__ = ["gather", "gather_command"]


def gather_command(argv: list[str]) -> None:
    usage = "usage: python -m evidence_bench gather SHARD_DIR... (or a multirun dir)"
    asks_help(argv, usage)
    if not argv or any(arg.startswith("-") for arg in argv):
        fail(usage, 2)
    gather([Path(arg) for arg in argv])


def gather(paths: Sequence[Path], overrides: Sequence[str] | None = None) -> None:
    """Write the shards' run (:func:`~evidence_bench.experiment.gather.gather_shards`) and
    say where; else one line naming the shard at fault, and exit status 1."""
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.gather import gather_shards
    from evidence_bench.report.fresh import new_run_report

    try:
        outcome = gather_shards(paths, overrides=overrides, report=new_run_report)
    except EvidenceBenchError as exc:
        fail(f"gather: {exc}")
    print(outcome.announce(), end="")
