"""How much of a change is feedback's own: each feedback stage against its no-feedback
control, at equal depth, with paired tests.

Reranking with a different scorer moves the numbers even with no feedback at all, and an
expanded list scores higher on AP and recall from its length alone. So ``rerank`` is
compared with ``control`` (the same ranker, feedback terms off, same candidates) and
``expand`` with ``deep_control`` (the same, over the provider's list deepened to the
expanded length). The gain attributable to feedback is the paired difference; p-values
come from a paired t-test and a randomization test, Holm-corrected across the configs of
the run within each (policy, round, stage, mode, measure) family, over the queries they all
keep (:mod:`evidence_bench.evaluation.comparisons` computes all of it).
"""

from __future__ import annotations

from collections.abc import Mapping

from evidence_bench.evaluation.comparisons import Comparison

__all__ = ["BASELINES", "JUDGMENT", "comparisons"]

#: feedback stage -> (the ranking before feedback, the no-feedback control) at equal depth
BASELINES = {"rerank": ("initial", "control"), "expand": ("deep_initial", "deep_control")}
#: feedback stage -> (before, the same marks with their labels shuffled): what the user's
#: judgments add beyond marking any documents at all (Rocchio's pseudo-relevance effect)
JUDGMENT = {"rerank": ("initial", "shuffled")}


def comparisons(
    baselines: Mapping[str, tuple[str, str]] = BASELINES, *, against: str = "control"
) -> list[Comparison]:
    """Each feedback stage against its control (``against="control"``) or its before
    (``"before"``), over the queries scored in all three."""
    pick = 1 if against == "control" else 0
    return [
        Comparison(stage, pair[pick], (pair[0], pair[1], stage))
        for stage, pair in baselines.items()
    ]
