"""Judging a run's results: ``pool`` draws what to judge, ``assess`` serves the page that
judges it (:mod:`.server`) into a qrels file (:mod:`.judgments`)."""

from evidence_bench.assess.judgments import GRADES, Judgments
from evidence_bench.assess.server import Assessment, make_server

__all__ = ["GRADES", "Assessment", "Judgments", "make_server"]
