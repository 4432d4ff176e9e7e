"""Hydra callbacks: a ``--multirun`` ends in one report over all its jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

__all__ = ["GatherReport"]


class GatherReport(Callback):
    """After the last job of a multirun, gather every job's run into one ``report.html``."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        if not config.get("report", True):
            return
        from evidence_bench.errors import EvidenceBenchError
        from evidence_bench.report.render import render_report

        sweep = Path(config.hydra.sweep.dir)
        if not any(sweep.glob("*/run/manifest.json")):
            return  # every job failed; each said why
        try:
            path = render_report(sweep)
        except EvidenceBenchError as exc:
            print(f"evidence_bench: report: {exc}")
            return
        print(f"report: {path}")
