"""Hydra callbacks: a ``--multirun`` ends in one report over all its jobs, or, when its jobs
are the shards of one run (``shards=N 'shard=range(N)'``), in that one run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

__all__ = ["GatherReport"]


class GatherReport(Callback):
    """After the last job of a multirun, gather every job's run into one ``report.html``;
    shards are gathered into the run they split (:mod:`evidence_bench.experiment.gather`)."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep = Path(config.hydra.sweep.dir)
        if int(config.get("shards", 1)) > 1:
            from evidence_bench.commands.gather import gather

            gather([sweep], [str(o) for o in config.hydra.overrides.task])
            return
        if not config.get("report", True):
            return
        from evidence_bench.errors import EvidenceBenchError
        from evidence_bench.report.page import render_report

        if not any(sweep.glob("*/run/manifest.json")):
            return  # every job failed; each said why
        try:
            path = render_report(sweep)
        except EvidenceBenchError as exc:
            print(f"evidence_bench: report: {exc}")
            return
        print(f"report: {path}")
