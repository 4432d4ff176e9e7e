"""The report: a run directory rendered as one self-contained HTML file, and a terminal summary.

``render_report(run_dir)`` writes ``report.html`` beside the run's data and returns its path;
``gather_multirun(dir)`` reads a Hydra multirun's runs as one; ``summary_table(run_dir)`` is the
plain-text table printed at the end of a run. ``analyze`` computes the tables once so a caller
can pass the result to both.

The names are imported when first used (:mod:`evidence_bench._lazy`), so importing one
module of the package (``report.terminal``, say) does not load the templates, the charts and
the statistics with it.
"""

from typing import TYPE_CHECKING

from evidence_bench._lazy import attach

if TYPE_CHECKING:
    from evidence_bench.report.page import render_report
    from evidence_bench.report.tables import Analysis, analyze
    from evidence_bench.report.terminal import summary_table
    from evidence_bench.runs.data import RunData, gather_multirun, load_run

__all__ = [
    "Analysis",
    "RunData",
    "analyze",
    "gather_multirun",
    "load_run",
    "render_report",
    "summary_table",
]

__getattr__, __dir__ = attach(
    __name__,
    {
        "evidence_bench.report.page": ["render_report"],
        "evidence_bench.report.tables": ["Analysis", "analyze"],
        "evidence_bench.report.terminal": ["summary_table"],
        "evidence_bench.runs.data": ["RunData", "gather_multirun", "load_run"],
    },
)
del TYPE_CHECKING, attach
