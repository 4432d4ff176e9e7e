"""The report of a run just computed: what the command line hands the experiment to render
a new run's report in its staging directory (:class:`evidence_bench.experiment.run.RunReport`).

The analysis is computed once from the tables in memory (not read back) and serves both the
page (:func:`~evidence_bench.report.page.write_run_report`) and the terminal's summary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evidence_bench.report.numbers import DEFAULT_TRIALS
from evidence_bench.report.page import write_run_report
from evidence_bench.report.tables import analyze
from evidence_bench.report.terminal import summary_table
from evidence_bench.report.tuning import tuning_table
from evidence_bench.runs.data import load_run
from evidence_bench.runs.store import RunTables

__all__ = ["new_run_report", "new_tuning_report"]


def new_run_report(
    run_dir: Path,
    tables: RunTables,
    *,
    analyzed: Callable[[], object] | None = None,
    inputs: Callable[[], object] | None = None,
    processes: int = 1,
) -> str:
    """Write ``run_dir/report.html`` and return the summary table the terminal prints.

    ``analyzed``: called once the analysis is computed, before the page is rendered;
    ``inputs``: called before the stored analysis' key hashes the run's files;
    ``processes``: how many processes the analysis may use (:func:`analyze`)."""
    data = load_run(run_dir, tables=tables)
    analysis = analyze(data, trials=DEFAULT_TRIALS, processes=processes)
    if analyzed is not None:
        analyzed()
    terminal = summary_table(analysis)
    write_run_report(run_dir, analysis, inputs=inputs, processes=processes)
    return terminal


def new_tuning_report(
    run_dir: Path,
    tables: RunTables,
    *,
    analyzed: Callable[[], object] | None = None,
    inputs: Callable[[], object] | None = None,
    processes: int = 1,
) -> str:
    """:func:`new_run_report` for a tuning run: its terminal summary ends with the tuning
    table (the folds' chosen weights and held-out scores)."""
    terminal = new_run_report(
        run_dir, tables, analyzed=analyzed, inputs=inputs, processes=processes
    )
    return terminal + tuning_table(run_dir)
