"""The names an episode's rows are keyed by: its stages, the feedback stage each control
stands beside, and the evaluation modes (:mod:`evidence_bench.protocol.episode` says what
each is). Constants only, so that what reads a run (the report, the gate) names them without
importing the episode's engine."""

from __future__ import annotations

__all__ = ["EVAL_MODES", "PARTNERS", "STAGES"]

#: A round's stages in the order run_episode fills them: without an expansion, with it, with
#: the equal-depth controls too.
STAGES = ("initial", "control", "shuffled", "rerank", "expand", "deep_initial", "deep_control")

#: Each control stage and the feedback stage it is cut to the length of, in every mode.
PARTNERS = {
    "initial": "rerank",
    "control": "rerank",
    "shuffled": "rerank",
    "deep_initial": "expand",
    "deep_control": "expand",
}

#: The evaluation modes, in the order a run lists them.
EVAL_MODES = ("full", "residual", "frozen")
