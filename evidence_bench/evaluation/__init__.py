"""Evaluation: trec_eval-exact measures, TREC run and qrels files, and paired statistics.

The only place that measures, pairs, tests and corrects: :mod:`.statistics` (summaries,
t and randomization tests, Holm, one tie tolerance) and :mod:`.comparisons` (every paired
comparison of a run at once, within configurations and across them on common queries).
"""

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
from evidence_bench.evaluation.statistics import (
    TIE,
    Summary,
    holm,
    improved_degraded,
    paired_t_test,
    randomization_test,
    selection_intervals,
    summarize,
    trials_for,
)
from evidence_bench.evaluation.trec import read_qrels, read_run, write_qrels, write_run

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
    "holm",
    "improved_degraded",
    "paired_t_test",
    "parse_measure",
    "prepare",
    "randomization_test",
    "ranks_to_scores",
    "read_qrels",
    "read_run",
    "selection_intervals",
    "summarize",
    "trials_for",
    "write_qrels",
    "write_run",
]
