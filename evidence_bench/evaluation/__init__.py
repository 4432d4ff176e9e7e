"""Evaluation: trec_eval-exact measures, TREC run and qrels files, and paired statistics.

The only place that measures, pairs, tests and corrects: :mod:`.statistics` (summaries,
t and randomization tests, Holm, one tie tolerance) and :mod:`.comparisons` (every paired
comparison of a run at once, within configurations and across them on common queries), and
:mod:`.oracle_share` (each user's gain as a share of the oracle's, Fieller's interval);
:mod:`.validity` asks whether a run's ordering of settings survives another user, seed or
evaluation mode (Kendall's τ-b, the variance split of per-query gains, the budget curve).

The names below are imported on first use (:mod:`evidence_bench._lazy`): the measures an
episode needs do not import the statistics' pandas and scipy.
"""

from typing import TYPE_CHECKING

from evidence_bench._lazy import attach

if TYPE_CHECKING:
    from evidence_bench.evaluation.comparisons import Comparison, Comparisons, compare
    from evidence_bench.evaluation.measures import (
        FAMILIES,
        Measure,
        QueryJudgments,
        evaluate,
        evaluate_many,
        parse_measure,
        prepare,
        ranks_to_scores,
    )
    from evidence_bench.evaluation.oracle_share import oracle_share
    from evidence_bench.evaluation.statistics import (
        TIE,
        Summary,
        fieller_intervals,
        holm,
        improved_degraded,
        paired_t_test,
        randomization_test,
        selection_intervals,
        summarize,
        trials_for,
    )
    from evidence_bench.evaluation.trec import read_qrels, read_run, write_qrels, write_run
    from evidence_bench.evaluation.validity import kendall_tau_b, sums_of_squares

__all__ = [
    "FAMILIES",
    "TIE",
    "Comparison",
    "Comparisons",
    "Measure",
    "QueryJudgments",
    "Summary",
    "compare",
    "evaluate",
    "evaluate_many",
    "fieller_intervals",
    "holm",
    "improved_degraded",
    "kendall_tau_b",
    "oracle_share",
    "paired_t_test",
    "parse_measure",
    "prepare",
    "randomization_test",
    "ranks_to_scores",
    "read_qrels",
    "read_run",
    "selection_intervals",
    "summarize",
    "sums_of_squares",
    "trials_for",
    "write_qrels",
    "write_run",
]

__getattr__, __dir__ = attach(
    __name__,
    {
        "evidence_bench.evaluation.comparisons": ["Comparison", "Comparisons", "compare"],
        "evidence_bench.evaluation.measures": [
            "FAMILIES",
            "Measure",
            "QueryJudgments",
            "evaluate",
            "evaluate_many",
            "parse_measure",
            "prepare",
            "ranks_to_scores",
        ],
        "evidence_bench.evaluation.oracle_share": ["oracle_share"],
        "evidence_bench.evaluation.statistics": [
            "TIE",
            "Summary",
            "fieller_intervals",
            "holm",
            "improved_degraded",
            "paired_t_test",
            "randomization_test",
            "selection_intervals",
            "summarize",
            "trials_for",
        ],
        "evidence_bench.evaluation.trec": ["read_qrels", "read_run", "write_qrels", "write_run"],
        "evidence_bench.evaluation.validity": ["kendall_tau_b", "sums_of_squares"],
    },
)
del TYPE_CHECKING, attach
