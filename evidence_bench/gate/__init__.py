"""The regression gate: compare a run's summary with a committed baseline.

A baseline holds the expected mean and query count of every config × user × round × stage
× eval mode × measure, with a tolerance (default: equal to 4 decimals). Only the feedback
stages' gated measures (the run's ``eval.primary_measure`` unless the baseline's ``gate``
header names others) can FAIL; controls, ``initial`` and other measures are compared and
reported, never gated, and so is a cell that cannot change in frozen mode (``fixed`` in
summary.csv). A gated cell FAILs when its mean drops beyond tolerance or it stands on
other queries than the baseline's, and the FAIL names the queries that dropped most. The
baseline must cover every gated cell of the run and every cell it names must exist: a gap
is an error, never a pass.

``python -m evidence_bench check RUN_DIR --baseline baselines/ci.yaml [--update]``
exits 0 when nothing failed, 1 on any FAIL, 2 when the run and baseline cannot be compared.

The names are imported when first used (evidence_bench/_lazy.py), so ``check --help``
answers before pandas is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evidence_bench._lazy import attach

if TYPE_CHECKING:
    from evidence_bench.gate._baseline import (
        DEFAULT_TOLERANCE,
        Baseline,
        GateSpec,
        load_baseline,
        write_baseline,
    )
    from evidence_bench.gate._cli import main, warnings_for
    from evidence_bench.gate._compare import Check, Role, compare
    from evidence_bench.gate._run import RunFacts, read_run

__all__ = [
    "DEFAULT_TOLERANCE",
    "Baseline",
    "Check",
    "GateSpec",
    "Role",
    "RunFacts",
    "compare",
    "load_baseline",
    "main",
    "read_run",
    "warnings_for",
    "write_baseline",
]

__getattr__, __dir__ = attach(
    __name__,
    {
        "evidence_bench.gate._baseline": [
            "DEFAULT_TOLERANCE", "Baseline", "GateSpec", "load_baseline", "write_baseline",
        ],
        "evidence_bench.gate._cli": ["main", "warnings_for"],
        "evidence_bench.gate._compare": ["Check", "Role", "compare"],
        "evidence_bench.gate._run": ["RunFacts", "read_run"],
    },
)  # fmt: skip
