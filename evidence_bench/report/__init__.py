"""The report: a run directory rendered as one self-contained HTML file, and a terminal summary.

``render_report(run_dir)`` writes ``report.html`` beside the run's data and returns its path;
``gather_multirun(dir)`` reads a Hydra multirun's runs as one; ``summary_table(run_dir)`` is the
plain-text table printed at the end of a run. ``analyze`` computes the tables once so a caller
can pass the result to both.

The names are imported when first used (PEP 562), so importing one module of the package
(``report.terminal`` to print a run's summary, say) does not load the templates, the charts and the
statistics with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evidence_bench.report.page import render_report
    from evidence_bench.report.render import gather_multirun
    from evidence_bench.report.tables import Analysis, analyze
    from evidence_bench.report.terminal import summary_table
    from evidence_bench.runs.data import RunData, load_run

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
    "Analysis": f"{__name__}.tables",
    "RunData": "evidence_bench.runs.data",
    "analyze": f"{__name__}.tables",
    "gather_multirun": f"{__name__}.render",
    "load_run": "evidence_bench.runs.data",
    "render_report": f"{__name__}.page",
    "summary_table": f"{__name__}.terminal",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
