"""Cross-validated tuning of ranker weights with Optuna (``+experiment=rocchio_tune``).

``folds`` deals the queries into folds, ``search`` runs each fold's TPE study on the other
folds and scores its choice held out, ``evaluate`` replays episodes for it (cached,
sharded over processes), ``plan`` validates ``experiment.tune``, ``run`` writes the run.
"""

from evidence_bench.experiment.tune.run import perform_tune

__all__ = ["perform_tune"]
