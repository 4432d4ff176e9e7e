"""Evaluation: trec_eval-exact measures, TREC run and qrels files, and paired statistics."""

from evidence_bench.evaluation.measures import (
    FAMILIES,
    Measure,
    QueryJudgments,
    evaluate,
    parse_measure,
    prepare,
    ranks_to_scores,
)
from evidence_bench.evaluation.statistics import (
    Summary,
    holm,
    improved_degraded,
    paired_t_test,
    randomization_test,
    summarize,
)
from evidence_bench.evaluation.trec import read_qrels, read_run, write_qrels, write_run

__all__ = [
    "FAMILIES",
    "Measure",
    "QueryJudgments",
    "Summary",
    "evaluate",
    "holm",
    "improved_degraded",
    "paired_t_test",
    "parse_measure",
    "prepare",
    "randomization_test",
    "ranks_to_scores",
    "read_qrels",
    "read_run",
    "summarize",
    "write_qrels",
    "write_run",
]
