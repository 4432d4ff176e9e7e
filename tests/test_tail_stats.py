"""The parent's statistics by codes (issue 13) on the shipped Cranfield collection: each
answer is the one the pandas path (kept as the fallback) gives on the same run."""

from __future__ import annotations

import pytest

from evidence_bench.experiment.run import _excluded
from evidence_bench.experiment.store import read_tables
from tests.conftest import CRANFIELD15, shared_run


def test_excluded_on_cranfield_is_pandas_count(tmp_path_factory: pytest.TempPathFactory) -> None:
    """15 queries, four configs, two users, two rounds: residual round 2 leaves queries out
    (each config exhausted some in round 1), so there is something to count."""
    scores = read_tables(shared_run(tmp_path_factory, "cranfield15", CRANFIELD15)).scores
    by_codes = _excluded(scores, 15)
    assert any(key.endswith("|2|rerank|residual") for key in by_codes)
    assert all(0 < n <= 15 for n in by_codes.values())
    # query ids as plain strings: pandas' groupby and nunique, in its own order
    by_pandas = _excluded(scores.astype({"query_id": str}), 15)
    assert by_codes == by_pandas
