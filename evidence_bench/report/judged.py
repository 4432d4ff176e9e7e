"""How much of each ranking a run's judgments cover: ``Judged@10`` beside each gain.

A gain measured on rankings that are mostly unjudged says little: every unjudged result
counts as irrelevant (:mod:`evidence_bench.evaluation.incomplete`). The report shows, beside
each feedback stage's gain, the mean ``Judged@10`` of that stage's ranking (its full list,
as ``runs.parquet`` keeps it) over the queries the run ranked.
"""

from __future__ import annotations

from evidence_bench.errors import DataError
from evidence_bench.evaluation.incomplete import judged_cells
from evidence_bench.runs.data import RunData
from evidence_bench.runs.store import read_tables, trec_qrels

__all__ = ["JUDGED_AT", "judged_by_cell"]

#: The cutoff shown: the depth the primary measures read.
JUDGED_AT = 10


def judged_by_cell(data: RunData) -> dict[tuple[str, str, int, str], float]:
    """(config_id, policy, round, stage) -> mean Judged@10, for every run merged into
    ``data`` (its config ids prefixed as the report's); a run without its TREC runs (one
    written before them, or exported CSVs) gives none."""
    cells: dict[tuple[str, str, int, str], float] = {}
    for source in data.sources:
        tables = data.tables if len(data.sources) == 1 and data.tables is not None else None
        try:
            if tables is None:
                tables = read_tables(source.path, only=("runs", "rankings", "trec_qrels"))
        except DataError:
            continue
        found = judged_cells(tables.runs, tables.rankings, trec_qrels(tables), JUDGED_AT)
        for (cid, policy, round_, stage), value in found.items():
            cells[source.config_prefix + cid, policy, round_, stage] = value
    return cells
