"""The report: a run directory rendered as one self-contained HTML file, and a terminal summary.

``render_report(run_dir)`` writes ``report.html`` beside the run's data and returns its path;
``gather_multirun(dir)`` reads a Hydra multirun's runs as one; ``summary_table(run_dir)`` is the
plain-text table printed at the end of a run. ``analyze`` computes the tables once so a caller
can pass the result to both.
"""

from evidence_bench.report.data import RunData, load_run
from evidence_bench.report.render import gather_multirun, render_report
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
