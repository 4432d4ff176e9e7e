"""The report: a run directory rendered as one self-contained HTML file, and a terminal summary.

``render_report(run_dir)`` writes ``report.html`` beside the run's data and returns its path;
``gather_multirun(dir)`` reads a Hydra multirun's runs as one; ``summary_table(run_dir)`` is the
plain-text table printed at the end of a run. ``analyze`` computes the tables once so a caller
can pass the result to both.

The names are imported when first used (PEP 562), so importing one module of the package
(``report.data`` to read a run, say) does not load the templates, the charts and the
statistics with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evidence_bench.report.data import RunData, load_run
    from evidence_bench.report.page import render_report
    from evidence_bench.report.render import gather_multirun
    from evidence_bench.report.tables import Analysis, analyze
    from evidence_bench.report.terminal import summary_table

__all__ = [
    "Analysis",
    "RunData",
    "analyze",
    "gather_multirun",
    "load_run",
    "render_report",
    "summary_table",
]

_HOMES = {
    "Analysis": "tables",
    "RunData": "data",
    "analyze": "tables",
    "gather_multirun": "render",
    "load_run": "data",
    "render_report": "page",
    "summary_table": "terminal",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
