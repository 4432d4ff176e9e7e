"""A query's rows travel as columns (each distinct evaluation, mark set and ranking once)
and the builder turns them into the run's tables: row for row what the episodes gave, in
run order, with the keys as sorted categories."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from evidence_bench.errors import DataError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.runner import (
    QueryOutput,
    query_output,
    replay_query,
    replay_worker,
)
from evidence_bench.protocol.episode import EpisodeResult
from evidence_bench.runs.store import (
    FEEDBACK_COLUMNS,
    PER_QUERY_COLUMNS,
    QueryRowsBuilder,
    TableBuilder,
)
from tests.conftest import episode_as_run


def test_a_query_s_rankings_list_their_keys_in_the_order_first_held() -> None:
    # by hand: [b, a], then [c, a], then [b, a] again (one id), then the runs' [d]: the
    # keys b, a, c, d in that order, each ranking as their numbers; the same when the
    # builder met the keys in another order first (here d, c before any ranking)
    for early in ([], ["d", "c"]):
        rows = QueryRowsBuilder("q")
        rows.codes(early)
        assert [rows.ranking(keys) for keys in (["b", "a"], ["c", "a"], ("b", "a"))] == [0, 1, 0]
        rows.run(rows.pair("c1", "oracle"), 1, "rerank", ["d"])
        built = rows.build(["P@2"], np.empty((0, 1)))
        assert built.ranking_keys == ["b", "a", "c", "d"]
        assert built.ranking_items.tolist() == [0, 1, 2, 1, 3]
        assert built.ranking_offsets.tolist() == [0, 2, 4, 5]
        assert built.run_ranking.tolist() == [2]


def test_an_episode_gives_its_scores_as_rows_whatever_their_ids() -> None:
    shared = EpisodeResult(
        scored=[(0, "initial", "full"), (1, "rerank", "residual")],
        evaluations=[2, 0],
        measures=("P@2", "RR"),
        values=np.array([[1.0, 1.0], [0.0, 0.0], [0.5, 0.25]]),
    )
    assert shared.scores == [
        (0, "initial", "full", "P@2", 0.5),
        (0, "initial", "full", "RR", 0.25),
        (1, "rerank", "residual", "P@2", 1.0),
        (1, "rerank", "residual", "RR", 1.0),
    ]
    alone = EpisodeResult(
        scored=list(shared.scored),
        evaluations=[0, 1],
        measures=("P@2", "RR"),
        values=np.array([[0.5, 0.25], [1.0, 1.0]]),
    )
    assert shared == alone
    alone.values = np.array([[0.5, 0.25], [1.0, 0.5]])
    assert shared != alone


def _output(query_id: str, config: str, *, ranking: list[str], label: str) -> QueryOutput:
    """One query with one episode of two rounds, two measures scored in two stages."""
    scores = [
        (config, "oracle", query_id, 0, "initial", "full", "P@5", 0.2),
        (config, "oracle", query_id, 0, "initial", "full", "AP", 0.125),
        (config, "oracle", query_id, 1, "rerank", "full", "P@5", 0.4),
        (config, "oracle", query_id, 1, "rerank", "full", "AP", 0.5),
    ]
    feedback = [(config, "oracle", query_id, 1, "d1", label, "https://x.org/1", 1)]
    rounds = [
        {"round": 1, "marks": [{"doc_id": "d1", "label": label}], "before": ranking},
        {"round": 2, "marks": [], "before": ranking},
    ]
    episode = {"config_id": config, "policy": "oracle", "query_id": query_id, "query": "q"}
    runs = {(config, "oracle", 0, "initial"): ranking, (config, "oracle", 1, "rerank"): ["u"]}
    return QueryOutput.from_rows(
        query_id,
        scores=scores,
        feedback=feedback,
        episodes=[{**episode, "rounds": rounds}],
        rankings=runs,
    )


def test_the_builder_numbers_marks_and_rankings_once_across_queries() -> None:
    builder = TableBuilder()
    first = _output("q2", "b", ranking=["u", "v"], label="relevant")
    second = _output("q1", "a", ranking=["u", "v"], label="relevant")
    for out in (first, second):
        builder.add(out.rows)
    tables = builder.tables({"q1": {"https://x.org/1": 1}})

    scores = tables.scores
    assert list(scores.columns) == PER_QUERY_COLUMNS
    rows = list(scores.itertuples(index=False, name=None))
    assert rows == [tuple(r) for out in (first, second) for r in out.scores]
    assert len(rows) == 8 and rows[0] == ("b", "oracle", "q2", 0, "initial", "full", "P@5", 0.2)
    assert str(scores["round"].dtype) == "int16" and str(scores["value"].dtype) == "float64"
    # keys are categories, sorted as pd.Categorical sorts them, whatever came first
    assert list(scores["config_id"].cat.categories) == ["a", "b"]
    assert list(scores["query_id"].cat.categories) == ["q1", "q2"]
    assert list(scores["measure"].cat.categories) == ["AP", "P@5"]

    # one mark set (d1 relevant at 1) for both queries' round 1, one (empty) for round 2
    assert tables.episodes["marks"].tolist() == [0, 1, 0, 1]
    assert tables.feedback["doc_id"].tolist() == ["d1"]
    # rankings: [u, v] (the episodes' lists and the initial runs), then [u]
    assert [list(r) for r in tables.rankings] == [["u", "v"], ["u"]]
    assert tables.episodes["before"].tolist() == [0, 0, 0, 0]
    assert tables.runs["ranking"].tolist() == [0, 1, 0, 1]

    feedback = builder.feedback()
    assert list(feedback.columns) == FEEDBACK_COLUMNS
    assert list(feedback.itertuples(index=False, name=None)) == [
        ("b", "oracle", "q2", 1, "d1", "relevant", "https://x.org/1", 1),
        ("a", "oracle", "q1", 1, "d1", "relevant", "https://x.org/1", 1),
    ]
    # text as categories (a sweep's examined documents repeat a few thousand strings)
    assert [str(t) for t in feedback.dtypes] == ["category", "category", "category", "int64"] * 2


def test_rankings_are_written_dictionary_encoded_and_read_back_as_strings(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evidence_bench.runs.store import read_tables, write_tables

    builder = TableBuilder()
    for out in (
        _output("q2", "b", ranking=["u", "v"], label="relevant"),
        _output("q1", "a", ranking=["v", "u"], label="relevant"),
    ):
        builder.add(out.rows)
    write_tables(tmp_path, builder.tables({"q1": {"https://x.org/1": 1}}))
    table = pq.read_table(tmp_path / "rankings.parquet")
    # as an Arrow list<string> column always read: no stored dictionary type
    assert table.schema.field("items").type == pa.list_(pa.field("element", pa.string()))
    assert table.to_pydict() == {
        "ranking": [0, 1, 2],
        # each distinct ranking once, as first met: q2's [u, v], the rerank's [u], q1's
        "items": [["u", "v"], ["u"], ["v", "u"]],
    }
    column = pq.ParquetFile(tmp_path / "rankings.parquet").metadata.row_group(0).column(1)
    assert "RLE_DICTIONARY" in column.encodings
    read = read_tables(tmp_path, only=["rankings"]).rankings
    assert [list(r) for r in read] == table.column("items").to_pylist()


def test_an_empty_run_has_empty_tables() -> None:
    builder = TableBuilder()
    builder.add(QueryOutput("q1").rows)
    tables = builder.tables({})
    assert tables.scores.empty and list(tables.scores.columns) == PER_QUERY_COLUMNS
    assert builder.feedback().empty and len(tables.rankings) == 0


def test_scores_without_every_measure_are_a_data_error() -> None:
    scores = [
        ("c", "oracle", "q1", 0, "initial", "full", "P@5", 0.2),
        ("c", "oracle", "q1", 0, "initial", "full", "AP", 0.1),
        ("c", "oracle", "q1", 0, "control", "full", "P@5", 0.2),
    ]
    with pytest.raises(DataError, match=r"query 'q1'.*stage control.*P@5, not P@5, AP"):
        QueryOutput.from_rows("q1", scores=scores)


def test_feedback_of_no_episode_round_is_a_data_error() -> None:
    feedback = [("c", "oracle", "q1", 3, "d1", "relevant", "https://x.org/1", 1)]
    episode = {"config_id": "c", "policy": "oracle", "query_id": "q1", "rounds": []}
    with pytest.raises(DataError, match="config c, policy oracle, round 3 belongs to no"):
        QueryOutput.from_rows("q1", feedback=feedback, episodes=[episode])


def test_a_real_query_s_table_holds_what_each_episode_gives_alone(tmp_path: Path) -> None:
    over = ["+experiment=rocchio_sweep", "experiment.queries=2", "experiment.grid.beta=[0.5,4.0]"]
    cfg, _ = compose([*over, "experiment.grid.gamma=[0.0]", f"runs_dir={tmp_path}"])
    plan = plan_run(cfg)
    worker = replay_worker(plan)
    query_id = list(worker.query_set.queries)[1]
    with httpx.Client(transport=worker.store.transport(query_id)) as client:
        replayed = replay_query(worker, query_id, client)
        out = query_output(worker, replayed, worker.engines, plan)
        expected = []
        doc_id = worker.query_set.collection.doc_id_for
        marks = []
        for parts in worker.engines:
            engine = parts[0]
            for user_name, user in worker.users:
                alone = episode_as_run(plan, replayed, parts, user, user_name)
                key = (engine.config_id, user_name, query_id)
                expected += [(*key, *row) for row in alone.scores]
                marks += [
                    (*key, r, doc_id(k) or k, lab, k, rank) for r, k, lab, rank in alone.feedback
                ]
    # each distinct evaluation went once: fewer value rows than scored (stage, mode)s
    assert len(out.rows.values) < len(out.rows.score_evaluation)
    builder = TableBuilder()
    builder.add(out.rows)
    tables = builder.tables(worker.query_set.qrels)
    assert len(expected) > 500
    assert list(tables.scores.itertuples(index=False, name=None)) == expected
    assert list(builder.feedback().itertuples(index=False, name=None)) == marks
    assert isinstance(tables.scores["config_id"].dtype, pd.CategoricalDtype)
