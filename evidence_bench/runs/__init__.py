"""A run directory's tables: written by the experiment (:mod:`~evidence_bench.runs.store`),
read back by the experiment, the report and the gate (:mod:`~evidence_bench.runs.data`).

The layer between evaluation and experiment: it imports the protocol's and evaluation's
vocabulary, never the experiment that writes a run or the report that renders one.
"""
