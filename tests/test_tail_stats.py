"""The parent's statistics by codes (issue 13) on the shipped Cranfield collection: each
answer is the one the pandas path (kept as the fallback) gives on the same run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evidence_bench.evaluation.comparisons import common_queries, key_tuples, strings
from evidence_bench.evaluation.statistics import first_met, summarize, summarize_codes
from evidence_bench.evaluation.validity import per_query_gains, setting_gains
from evidence_bench.experiment.run import _excluded
from evidence_bench.runs.store import read_tables
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
    # a (cell, query) space too large for the table: unused query ids widen it past
    # max(4 rows, 2**20) cells, so the hashed path counts the same
    cells = scores.groupby(["config_id", "policy", "round", "stage", "eval_mode"]).ngroups
    wide = scores.copy()
    unused = [f"unused-{i}" for i in range((1 << 20) // cells + 1)]
    wide["query_id"] = wide["query_id"].cat.add_categories(unused)
    width = len(wide["query_id"].cat.categories)
    assert cells * width > max(4 * len(wide), 1 << 20)
    assert _excluded(wide, 15) == by_pandas


def test_setting_gains_on_cranfield_is_pandas_grouping(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each setting's mean gain over the queries every setting of its user keeps: by codes,
    the rows, order and floats of common_queries and pandas' groupby; also once a config
    loses a query, which then leaves every setting of that user and round."""
    scores = read_tables(shared_run(tmp_path_factory, "cranfield15", CRANFIELD15)).scores
    gains = per_query_gains(scores)
    lost = gains.index[
        (gains["config_id"] == "c00") & (gains["query_id"] == "1") & (gains["round"] == 1)
    ]
    within = ["policy", "round", "eval_mode", "measure"]
    for frame in (gains, gains.drop(index=lost).reset_index(drop=True)):
        shared = common_queries(frame, within=within, across=["config_id", "stage"])
        grouped = shared.groupby([*within, "config_id", "stage"], sort=False)["gain"]
        want = grouped.agg(["count", "mean"]).reset_index()
        want = want.rename(columns={"count": "n", "mean": "gain"})
        pd.testing.assert_frame_equal(setting_gains(frame), want, check_exact=True)
    dropped = setting_gains(gains.drop(index=lost))
    whole = setting_gains(gains)
    assert len(lost) and len(dropped) == len(whole)
    assert (dropped["n"] < whole["n"]).any()  # query 1 left round 1 for every config


def test_first_met_by_table_by_hand() -> None:
    """Codes from a small range (at most a quarter of the rows) take the table path."""
    cell = np.array([2, 0, 2, 1] * 4, dtype=np.int64)
    code, first = first_met(cell)
    assert code.tolist() == [0, 1, 0, 2] * 4
    assert first.tolist() == [0, 1, 3]


def test_first_met_table_and_hashing_agree() -> None:
    cell = np.random.default_rng(7).integers(0, 300, 50_000)
    code, first = first_met(cell)  # the table: 300 codes for 50,000 rows
    spread = cell * 1_000_003 + 17  # the same groups, too far apart for a table: hashed
    hashed_code, hashed_first = first_met(spread)
    assert code.tolist() == hashed_code.tolist()
    assert first.tolist() == hashed_first.tolist()
    assert (cell[first][code] == cell).all()


@pytest.mark.parametrize("groups", [1000, 70_000], ids=["16-bit", "wider"])
def test_summarize_codes_rows_in_frame_order(groups: int) -> None:
    """Each group's rows in frame order whether its codes are sorted as 16 bits (radix) or
    not (more than 65,536 groups): each group's mean and std are summarize's of its values
    alone, to the bit."""
    rng = np.random.default_rng(5)
    code = rng.permutation(np.concatenate([np.arange(groups), rng.integers(0, groups, 130_000)]))
    values = rng.random(len(code))
    stats = summarize_codes(code, values, groups)
    for group in (0, 1, groups // 2, groups - 1):
        mine = np.flatnonzero(code == group)
        alone = summarize(values[mine].tolist())
        assert stats["first"][group] == mine[0]
        assert stats["n"][group] == len(mine)
        assert stats["mean"][group] == alone.mean
        assert stats["std"][group] == alone.std or len(mine) == 1


def test_key_tuples_by_hand() -> None:
    """Plain strings and ints whatever the columns' types: categories unused and out of
    order, a plain string column; with a missing value, what strings() gives."""
    frame = pd.DataFrame(
        {
            "config_id": pd.Categorical(["c1", "c0", "c1"], categories=["c9", "c1", "c0"]),
            "policy": pd.Categorical(["oracle", "noisy", "noisy"]),
            "round": np.array([2, 1, 2], dtype=np.int16),
            "measure": ["AP", "RR", "AP"],
        }
    )
    columns = ["config_id", "policy", "round", "measure"]
    assert key_tuples(frame, columns) == [
        ("c1", "oracle", 2, "AP"),
        ("c0", "noisy", 1, "RR"),
        ("c1", "noisy", 2, "AP"),
    ]
    assert all(type(v) is str for row in key_tuples(frame, columns) for v in row[:2])
    frame["policy"] = pd.Categorical(["oracle", None, "noisy"])
    got = key_tuples(frame, ["policy"])
    assert [got[0], got[2]] == [("oracle",), ("noisy",)]
    assert str(got[1][0]) == str(strings(frame["policy"]).tolist()[1])


def test_per_query_gains_follow_category_order_with_unused_categories() -> None:
    """Rows in the keys' category order (unused categories included, as ``set_index``
    orders them), not the order first met; rerank − control by hand."""
    config = pd.Categorical(["c0", "c0", "c1", "c1", "c0", "c0"], categories=["c9", "c1", "c0"])
    query = pd.Categorical(["q1", "q1", "q1", "q1", "q2", "q2"], categories=["q3", "q2", "q1"])
    frame = pd.DataFrame(
        {
            "config_id": config,
            "policy": "oracle",
            "query_id": query,
            "round": np.int16(1),
            "stage": ["rerank", "control"] * 3,
            "eval_mode": "residual",
            "measure": "AP",
            "value": [0.5, 0.25, 0.75, 0.5, 1.0, 0.125],
        }
    )
    gains = per_query_gains(frame)
    assert list(zip(gains["config_id"], gains["query_id"], gains["gain"], strict=True)) == [
        ("c1", "q1", 0.25),
        ("c0", "q2", 0.875),
        ("c0", "q1", 0.25),
    ]
