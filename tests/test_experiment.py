"""The experiment pipeline end to end on a collection nobody has seen: record from the
simulator over loopback, replay with no socket, and check every number with trec_eval."""

from __future__ import annotations

import collections
import gzip
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from evidence_bench.errors import ConfigurationError, ReplayMissError, WriteError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import record
from evidence_bench.experiment.run import perform_run
from evidence_bench.protocol.stages import PARTNERS
from tests.conftest import exported, write_tiny_collection

TREC_NAMES = {
    "nDCG@10": "ndcg_cut_10",
    "P@10": "P_10",
    "R@20": "recall_20",
    "AP": "map",
    "RR": "recip_rank",
}


def overrides(collection: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "+experiment=ci",
        "query_set=beir",
        "query_set.name=tiny",
        f"query_set.path={collection}",
        f"query_set.cassettes={tmp_path / 'cassettes'}",
        f"runs_dir={tmp_path / 'runs'}",
        "experiment.depth=10",
        "workers=1",
        "progress=false",
        "report=false",
        *extra,
    ]


def record_all(collection: Path, tmp_path: Path, *extra: str) -> None:
    cfg, _ = compose(overrides(collection, tmp_path, *extra))
    record(plan_run(cfg), provider="simulator", rounds=0)


def run(collection: Path, tmp_path: Path, *extra: str) -> Path:
    """A run, with its interchange files exported into it (``export --format csv|trec``)."""
    cfg, text = compose(overrides(collection, tmp_path, *extra))
    return exported(perform_run(cfg, text).path)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny collection's cassettes as ``record_all`` writes them, recorded once for the
    module (a recording from the simulator is the same every time): ``"all"`` with no
    override, ``"rounds=1"`` with ``experiment.rounds=1``. Each test takes a copy."""
    made = {}
    for name, extra in (("all", ()), ("rounds=1", ("experiment.rounds=1",))):
        root = tmp_path_factory.mktemp("recorded")
        record_all(write_tiny_collection(root / "tiny"), root, *extra)
        made[name] = root / "cassettes"
    return made


def recorded_as(recordings: dict[str, Path], name: str, tmp_path: Path) -> None:
    """``record_all``'s cassettes (``recordings[name]``) in ``tmp_path``, where it writes."""
    shutil.copytree(recordings[name], tmp_path / "cassettes", dirs_exist_ok=True)


@pytest.fixture
def recorded(recordings: dict[str, Path], tiny_collection: Path, tmp_path: Path) -> Path:
    recorded_as(recordings, "all", tmp_path)
    return tiny_collection


@pytest.fixture(scope="module")
def plain_run(recordings: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``run`` of the recorded tiny collection with no override, made once for the tests
    that each made it (read-only); ``listing.txt`` beside it: the run directory's files
    before its interchange files were exported."""
    root = tmp_path_factory.mktemp("plain")
    collection = write_tiny_collection(root / "tiny")
    recorded_as(recordings, "all", root)
    cfg, text = compose(overrides(collection, root))
    path = perform_run(cfg, text).path
    (root / "listing.txt").write_text("\n".join(sorted(p.name for p in path.iterdir())))
    return exported(path)


def test_record_writes_a_cassette_per_query_and_a_manifest(recorded: Path, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    names = sorted(p.name for p in cassettes.glob("*.json"))
    assert names == ["1.json", "2.json", "3.json", "4.json", "@manifest.json"]
    manifest = json.loads((cassettes / "@manifest.json").read_text())
    assert manifest["recorded_from"] == "simulator"
    assert set(manifest["cassettes"]) == {"1.json", "2.json", "3.json", "4.json"}
    cassette = json.loads((cassettes / "1.json").read_text())
    queries = [i["request"]["uri"] for i in cassette["interactions"]]
    assert len(queries) >= 2  # the initial search and at least one refined query
    assert all("/res/v1/web/search?" in uri for uri in queries)


def test_replay_opens_no_socket_and_needs_no_simulator(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("replay opened a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", "http://127.0.0.1:9/elsewhere/res/v1")
    path = run(recorded, tmp_path, "replay.on_miss=error")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["replay"]["simulated"] == 0
    assert manifest["replay"]["replayed"] > 0
    assert (tmp_path / "runs" / "ci" / "latest").resolve() == path.resolve()


def test_run_directory_layout(plain_run: Path) -> None:
    path = plain_run
    listing = (path.parents[2] / "listing.txt").read_text().splitlines()
    assert listing == [
        "config.yaml", "configs.csv", "documents.jsonl", "episodes.parquet", "feedback.parquet",
        "manifest.json", "qrels.csv", "queries.csv", "rankings.parquet", "runs.parquet",
        "scores.parquet", "summary.parquet", "trec_qrels.parquet",
    ]  # fmt: skip
    for name in ("per_query.csv", "summary.csv", "feedback.csv", "episodes.jsonl",
                 "trec/qrels.txt"):  # fmt: skip
        assert (path / name).is_file(), name
    per_query = pd.read_csv(path / "per_query.csv", dtype={"query_id": str})
    assert list(per_query.columns) == [
        "config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure", "value"
    ]  # fmt: skip
    assert set(per_query["stage"]) == {
        "initial", "control", "shuffled", "rerank", "expand", "deep_initial", "deep_control"
    }  # fmt: skip
    expand = per_query[per_query.stage == "expand"].set_index(
        ["policy", "query_id", "round", "eval_mode", "measure"]
    )["value"]
    deep = per_query[per_query.stage == "deep_initial"].set_index(expand.index.names)["value"]
    assert expand.index.equals(deep.index)  # every expand has its equal-depth control
    for round_ in (1, 2):
        lengths = {}
        for stage in ("expand", "deep_initial", "deep_control"):
            lines = _run_lines(path / "trec" / f"c00.oracle.r{round_}.{stage}.run.gz")
            lengths[stage] = collections.Counter(line.split()[0] for line in lines)
        assert lengths["expand"] == lengths["deep_initial"] == lengths["deep_control"]
        assert max(lengths["expand"].values()) > 10  # deeper than the first page
    assert set(per_query["eval_mode"]) == {"full", "residual", "frozen"}
    assert set(per_query["policy"]) == {"oracle", "noisy"}
    assert (per_query[per_query["round"] == 0]["stage"].isin(["initial", "control"])).all()
    feedback = pd.read_csv(path / "feedback.csv", dtype={"query_id": str, "doc_id": str})
    assert set(feedback["label"]) <= {"more", "relevant", "less", "irrelevant", "unsure", "seen"}
    assert feedback["doc_id"].str.fullmatch(r"\d+").all()  # named as in the collection
    assert (feedback["url"] == "https://tiny.evidence-bench.test/doc/" + feedback["doc_id"]).all()
    assert feedback["rank"].between(1, 30).all()
    summary = pd.read_csv(path / "summary.csv")
    means = per_query.groupby(["config_id", "policy", "round", "stage", "eval_mode", "measure"])[
        "value"
    ].mean()
    for row in summary.itertuples():
        key = (row.config_id, row.policy, row.round, row.stage, row.eval_mode, row.measure)
        assert row.mean == pytest.approx(means[key])
        assert row.ci_low <= row.mean <= row.ci_high


def test_two_runs_are_identical_whatever_the_workers(
    plain_run: Path, recorded: Path, tmp_path: Path
) -> None:
    first = plain_run
    second = run(recorded, tmp_path, "workers=2")
    assert first != second
    for name in ("scores.parquet", "summary.parquet", "feedback.parquet", "episodes.parquet",
                 "rankings.parquet", "runs.parquet", "per_query.csv", "summary.csv",
                 "feedback.csv", "episodes.jsonl", "documents.jsonl", "configs.csv",
                 "trec/c00.noisy.r2.expand.run.gz"):  # fmt: skip
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def _run_lines(run_file: Path) -> list[str]:
    with gzip.open(run_file, "rt") as handle:
        return handle.read().splitlines()


def _trec_eval(qrels: dict[str, dict[str, int]], run_file: Path) -> dict[str, dict[str, float]]:
    run_scores: dict[str, dict[str, float]] = {}
    for line in _run_lines(run_file):
        qid, _q0, doc, _rank, score, _tag = line.split()
        run_scores.setdefault(qid, {})[doc] = float(score)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_NAMES.values()))
    return evaluator.evaluate(run_scores)  # type: ignore[no-any-return]


def test_every_full_and_residual_value_matches_trec_eval(plain_run: Path, tmp_path: Path) -> None:
    path = plain_run
    qrels: dict[str, dict[str, int]] = {}
    for line in (path / "trec" / "qrels.txt").read_text().splitlines():
        qid, _zero, doc, rel = line.split()
        qrels.setdefault(qid, {})[doc] = int(rel)
    per_query = pd.read_csv(path / "per_query.csv", dtype={"query_id": str})
    feedback = pd.read_csv(path / "feedback.csv", dtype={"query_id": str, "doc_id": str})
    documents = (path / "documents.jsonl").read_text().splitlines()
    url = {row["doc_id"]: row["url"] for row in map(json.loads, documents)}
    checked = 0
    run_files = sorted((path / "trec").glob("*.run.gz"))
    for config_id, policy, round_, stage in (
        per_query[["config_id", "policy", "round", "stage"]]
        .drop_duplicates()
        .itertuples(index=False)
    ):
        run_file = path / "trec" / f"{config_id}.{policy}.r{round_}.{stage}.run.gz"
        assert run_file in run_files
        rows = per_query[
            (per_query.config_id == config_id) & (per_query.policy == policy)
            & (per_query["round"] == round_) & (per_query.stage == stage)
        ]  # fmt: skip
        full = _trec_eval(qrels, run_file)
        for row in rows[rows.eval_mode == "full"].itertuples():
            assert row.value == pytest.approx(full[row.query_id][TREC_NAMES[row.measure]], abs=1e-9)
            checked += 1
        # residual: drop what the user examined up to this round from run and qrels
        seen = feedback[
            (feedback.config_id == config_id) & (feedback.policy == policy)
            & (feedback["round"] <= round_)
        ]  # fmt: skip
        examined = {(r.query_id, url[r.doc_id]) for r in seen.itertuples()}
        residual_qrels = {
            q: {d: g for d, g in docs.items() if (q, d) not in examined}
            for q, docs in qrels.items()
        }

        def left(file: Path, examined: set[tuple[str, str]] = examined) -> list[str]:
            lines = _run_lines(file)
            return [line for line in lines if tuple(line.split()[0:3:2]) not in examined]

        kept = left(run_file)
        partner = PARTNERS.get(stage)
        if partner is not None and round_ > 0:  # a control is cut to its partner's length
            partner_file = path / "trec" / f"{config_id}.{policy}.r{round_}.{partner}.run.gz"
            if partner_file.exists():
                room = collections.Counter(line.split()[0] for line in left(partner_file))
                used: collections.Counter[str] = collections.Counter()
                capped = []
                for line in kept:
                    qid = line.split()[0]
                    if used[qid] < room[qid]:
                        used[qid] += 1
                        capped.append(line)
                kept = capped
        residual_file = tmp_path / "residual.run.gz"
        with gzip.open(residual_file, "wt") as handle:
            handle.writelines(line + "\n" for line in kept)
        residual = _trec_eval(residual_qrels, residual_file)
        for row in rows[rows.eval_mode == "residual"].itertuples():
            expected = residual[row.query_id][TREC_NAMES[row.measure]]
            assert row.value == pytest.approx(expected, abs=1e-9)
            checked += 1
        # frozen: examined documents held at the rank they were shown (full freezing)
        if round_ > 0:
            frozen_file = tmp_path / "frozen.run.gz"
            with gzip.open(frozen_file, "wt") as handle:
                handle.writelines(_frozen_lines(path, run_file, seen, PARTNERS.get(stage)))
            frozen = _trec_eval(qrels, frozen_file)
            for row in rows[rows.eval_mode == "frozen"].itertuples():
                expected = frozen[row.query_id][TREC_NAMES[row.measure]]
                assert row.value == pytest.approx(expected, abs=1e-9)
                checked += 1
    assert checked >= 400


def _frozen_order(run_file: Path, seen: pd.DataFrame) -> dict[str, list[str]]:
    """Each examined document at the rank it was shown (feedback.csv), held there whether or
    not the run holds it; the run's other documents in the free ranks, in the run's order."""
    ranked: dict[str, list[str]] = {}
    for line in _run_lines(run_file):
        ranked.setdefault(line.split()[0], []).append(line.split()[2])
    for qid, docs in ranked.items():
        mine = seen[seen.query_id == qid]
        pins = {int(r.rank): r.url for r in mine.itertuples()}
        assert len(pins) == len(mine), f"two documents shown at one rank: {mine}"
        rest = [doc for doc in docs if doc not in pins.values()]
        slots: list[str | None] = [None] * (len(pins) + len(rest))
        for rank, url in pins.items():
            slots[rank - 1] = url  # an IndexError: a rank beyond the list, a gap
        fill = iter(rest)
        ranked[qid] = [slot if slot is not None else next(fill) for slot in slots]
    return ranked


def _frozen_lines(path: Path, run_file: Path, seen: pd.DataFrame, partner: str | None) -> list[str]:
    ranked = _frozen_order(run_file, seen)
    if partner is not None:  # a control is cut to its feedback stage's length
        partner_file = run_file.with_name(
            run_file.name.replace(f".{run_file.name.split('.')[3]}.", f".{partner}.")
        )
        if partner_file.exists():
            room = _frozen_order(partner_file, seen)
            ranked = {q: docs[: len(room.get(q, []))] for q, docs in ranked.items()}
    return [
        f"{qid} Q0 {doc} {i} {len(docs) - i + 1} frozen\n"
        for qid, docs in ranked.items()
        for i, doc in enumerate(docs, start=1)
    ]


def test_miss_with_on_miss_error_names_query_cassette_and_command(
    recordings: dict[str, Path], tiny_collection: Path, tmp_path: Path
) -> None:
    recorded_as(recordings, "rounds=1", tmp_path)
    good = run(tiny_collection, tmp_path, "experiment.rounds=1", "replay.on_miss=error")
    with pytest.raises(ReplayMissError) as caught:
        run(tiny_collection, tmp_path, "replay.on_miss=error")  # round 2 was never recorded
    message = str(caught.value)
    assert "query id '1'" in message
    assert str(tmp_path / "cassettes" / "1.json") in message
    command = (
        "record it with: python -m evidence_bench record +experiment=ci query_set=beir "
        f"query_set.name=tiny query_set.path={tiny_collection} "
        f"query_set.cassettes={tmp_path / 'cassettes'} record_rounds=0"
    )
    assert message.endswith(command)
    assert "\n" not in message
    runs = tmp_path / "runs" / "ci"
    assert (runs / "latest").resolve() == good.resolve()
    assert sorted(p.name for p in runs.iterdir() if p.name.startswith(".")) == []


def test_miss_with_simulate_and_skip_are_counted(
    recordings: dict[str, Path], tiny_collection: Path, tmp_path: Path
) -> None:
    recorded_as(recordings, "rounds=1", tmp_path)
    simulated = run(tiny_collection, tmp_path, "replay.on_miss=simulate")
    counts = json.loads((simulated / "manifest.json").read_text())["replay"]
    assert counts["simulated"] > 0 and counts["replayed"] > 0
    skipped = run(tiny_collection, tmp_path, "replay.on_miss=skip")
    counts = json.loads((skipped / "manifest.json").read_text())["replay"]
    assert counts["skipped"] > 0 and counts["skipped_expand_stages"] > 0
    per_query = pd.read_csv(skipped / "per_query.csv")
    full = per_query[per_query.eval_mode == "full"]
    episodes = ["config_id", "policy", "query_id"]
    round1 = full[(full["round"] == 1) & (full.stage == "expand")].groupby(episodes).ngroups
    round2 = full[(full["round"] == 2) & (full.stage == "expand")].groupby(episodes).ngroups
    assert round1 == 8  # 1 config x 2 users x 4 queries, all recorded
    assert round2 + counts["skipped_expand_stages"] == 8


def test_the_manifest_times_the_episodes_within_the_run(
    recordings: dict[str, Path], tiny_collection: Path, tmp_path: Path
) -> None:
    """``episodes_time_s``: the part of ``wall_time_s`` the workers split (bench_run's
    Amdahl figure reads it), so more than nothing and less than the whole."""
    recorded_as(recordings, "rounds=1", tmp_path)
    manifest = json.loads((run(tiny_collection, tmp_path) / "manifest.json").read_text())
    assert isinstance(manifest["episodes_time_s"], float)
    assert 0 < manifest["episodes_time_s"] < manifest["wall_time_s"]


def test_a_run_that_replayed_nothing_says_so(
    recordings: dict[str, Path], tiny_collection: Path, tmp_path: Path
) -> None:
    """No cassette where query_set.cassettes points (a typo): every search is simulated, as
    on_miss=simulate says, and the run says so rather than look like a replay."""
    cfg, text = compose(overrides(tiny_collection, tmp_path))
    outcome = perform_run(cfg, text)
    simulated = outcome.manifest["replay"]["simulated"]
    assert outcome.manifest["replay"]["replayed"] == 0 and simulated > 0
    assert outcome.terminal.endswith(
        f"warning: no search was answered from the cassettes in {tmp_path / 'cassettes'} "
        f"(none recorded there?): all {simulated} were simulated\n"
    )
    recorded_as(recordings, "rounds=1", tmp_path)
    assert "warning: no search" not in perform_run(cfg, text).terminal


def test_skip_cannot_skip_a_querys_first_page(
    recordings: dict[str, Path], tiny_collection: Path, tmp_path: Path
) -> None:
    """``on_miss=skip`` leaves out a later search; without its first page a query has no
    stage at all: one line naming the query, its cassette and the command, nothing written."""
    recorded_as(recordings, "rounds=1", tmp_path)
    (tmp_path / "cassettes" / "3.json").unlink()
    cfg, text = compose(overrides(tiny_collection, tmp_path, "replay.on_miss=skip"))
    with pytest.raises(ReplayMissError) as caught:
        perform_run(cfg, text)
    message = str(caught.value)
    assert message.startswith("no recorded response for query id '3', q=")
    assert f"(its first page) in {tmp_path / 'cassettes' / '3.json'}" in message
    assert "replay.on_miss=skip leaves out later searches; record it with: " in message
    assert "\n" not in message
    assert not (tmp_path / "runs" / "ci").exists() or not any((tmp_path / "runs" / "ci").iterdir())


def test_recording_never_writes_the_key(
    tiny_collection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence_bench.collections.beir import load_collection
    from evidence_bench.web.simulator import BraveSimulator, serve

    sentinel = "SENTINEL-KEY-5f3a9c1e7b"
    simulator = BraveSimulator(load_collection(tiny_collection, name="tiny"), token=sentinel)
    with serve(simulator) as running:
        monkeypatch.setenv("BRAVE_SEARCH_API_KEY", sentinel)
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", running.base_url)
        cfg, _ = compose(overrides(tiny_collection, tmp_path, "provider=brave_live"))
        record(plan_run(cfg), provider="brave_live", rounds=1)
    files = list((tmp_path / "cassettes").rglob("*"))
    assert len(files) == 5
    for file in files:
        assert sentinel not in file.read_text(), file


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["ranker.name=bm42"], "ranker.name='bm42' is not a known ranker (valid: livefetch, pro"),
        (["+experiment.grid.delta=[1,2]"], "experiment.grid.delta: not a ranker setting (name,"),
        (["+experiment.grid.w_r=[1,2]"], "grid.w_r: ranker 'tfidf_rocchio' has no parameter"),
        (["+experiment.configs=[{ranker:{nmae:x}}]"], "experiment.configs[0].ranker.nmae: unknown"),
        (["ranker.embedder=glove", "ranker.name=vector_rocchio"], "ranker.embedder='glove' is"),
        (["policies.noisy.kind=psychic"], "policies.noisy.kind='psychic' is not known (valid:"),
        (["eval.measures=[nDCG@10,MRR]"], "unknown measure 'MRR'"),
        (["eval.primary_mode=half"], "eval.primary_mode='half' is not valid"),
        (["experiment.rounds=0"], "experiment.rounds=0 must be between 1 and 50"),
        (["replay.on_miss=pray"], "replay.on_miss='pray' is not valid (valid: error, simulate"),
    ],
)
def test_bad_config_is_one_clear_line(
    tiny_collection: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    cfg, _ = compose(overrides(tiny_collection, tmp_path, *extra))
    with pytest.raises(ConfigurationError) as caught:
        plan_run(cfg)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_failed_run_leaves_no_partial_directory(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = run(recorded, tmp_path)
    import evidence_bench.experiment.run as run_module

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(run_module, "write_tables", broken)
    with pytest.raises(WriteError, match="disk full"):
        run(recorded, tmp_path)
    runs = tmp_path / "runs" / "ci"
    assert (runs / "latest").resolve() == good.resolve()
    assert sorted(p.name for p in runs.iterdir()) == sorted(["latest", good.name])
    assert os.listdir(good)  # the good run is untouched


def test_retries_against_a_rate_limited_simulator_are_recorded_as_successes_only(
    tiny_collection: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real loopback HTTP: the simulator answers 429 past one request a second, the
    provider waits out X-RateLimit-Reset and retries, and only the 200s reach the cassette."""
    import time

    from evidence_bench.collections.beir import load_collection
    from evidence_bench.web.simulator import BraveSimulator, serve

    simulator = BraveSimulator(load_collection(tiny_collection, name="tiny"), rate_limit=1)
    answered: list[int] = []
    handle = simulator.handle

    def counting(*args: object, **kwargs: object) -> object:
        answer = handle(*args, **kwargs)  # type: ignore[arg-type]
        answered.append(answer.status)
        return answer

    monkeypatch.setattr(simulator, "handle", counting)
    extra = ("experiment.queries=1", "~policies.noisy")
    started = time.monotonic()
    with serve(simulator) as running:
        monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "k")
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", running.base_url)
        cfg, _ = compose(overrides(tiny_collection, tmp_path, "provider=brave_live", *extra))
        record(plan_run(cfg), provider="brave_live", rounds=0, deep=True)
    elapsed = time.monotonic() - started
    assert 429 in answered  # the limit was hit, and retried past
    cassette = json.loads((tmp_path / "cassettes" / "1.json").read_text())
    statuses = [i["response"]["status"]["code"] for i in cassette["interactions"]]
    assert statuses.count(200) == answered.count(200) and set(statuses) == {200}
    assert elapsed >= len(statuses) - 1  # one success a second, at most
    path = run(tiny_collection, tmp_path, *extra, "replay.on_miss=error")
    assert json.loads((path / "manifest.json").read_text())["replay"]["simulated"] == 0


def test_the_record_command_keeps_what_changes_requests_and_drops_the_rest() -> None:
    from evidence_bench.experiment.plan import record_command

    cfg, _ = compose(["+experiment=ci"])
    given = ["+experiment=ci", "query_set=cacm", "ranker.beta=0.5", "runs_dir=/tmp/x",
             "workers=1", "replay.on_miss=error", "progress=false"]  # fmt: skip
    assert record_command(cfg, given) == (
        "python -m evidence_bench record +experiment=ci query_set=cacm ranker.beta=0.5 "
        "record_rounds=0"
    )


def test_config_defaults_match_the_engine_parts_defaults() -> None:
    """conf/ mirrors each part's own defaults (Hydra needs them typed); they must not drift."""
    from dataclasses import MISSING, fields

    from evidence_bench.engine.livefetch import LiveFetchRanker
    from evidence_bench.engine.ranking import TfidfRocchioRanker
    from evidence_bench.engine.term_rocchio import TermRocchioRefiner

    cfg, _ = compose(["+experiment=smoke"])
    checks = [
        (TfidfRocchioRanker, compose(["+experiment=smoke"])[0]["ranker"]),
        (LiveFetchRanker, compose(["+experiment=smoke", "ranker=livefetch"])[0]["ranker"]),
        (TermRocchioRefiner, compose(["+experiment=smoke", "refiner=term_rocchio"])[0]["refiner"]),
    ]
    for part, conf in checks:
        for f in fields(part):
            if f.name in conf and f.default is not MISSING:
                given = tuple(conf[f.name]) if isinstance(conf[f.name], list) else conf[f.name]
                assert given == f.default, (part.__name__, f.name)
    assert cfg["analyzer"]["stemmer"] == "english"
