"""Parts from the user's code, named by ``_target_``: rankers, refiners, simulated users and
query-set loaders, checked at plan time and run through the one episode protocol.

The toy rankers below order the candidates by rules simple enough to work out by hand from
the provider's list and the user's marks; their scores are checked against pytrec_eval on
the run's own exported TREC runs.
"""

from __future__ import annotations

import gzip
import importlib.machinery
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from evidence_bench._resources import packaged
from evidence_bench._targets import TARGET, locate
from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.run import perform_run
from tests.conftest import exported

TOY = '''
"""Toy parts of a user's own."""
from evidence_bench.engine.base import Label, RefinedQuery
from evidence_bench.evidence import Evidence
from evidence_bench.users.policies import LabelKind, Mark

PULL = (Label.MORE, Label.RELEVANT)
PUSH = (Label.LESS, Label.IRRELEVANT)
SEEN = []  # every feedback a Recording ranker was given


class Reverse:
    """The provider's list backwards."""

    name = "reverse"

    def rank(self, query, candidates, feedback):
        return list(reversed(candidates))


class MarkedFirst:
    """Results marked relevant, then the unmarked, then those marked irrelevant, each in the
    provider's order; ``weight`` changes nothing."""

    name = "marked_first"

    def __init__(self, weight=1.0):
        self.weight = weight

    def rank(self, query, candidates, feedback):
        pulled = [c for c in candidates if feedback.get(c.key) in PULL]
        pushed = [c for c in candidates if feedback.get(c.key) in PUSH]
        rest = [c for c in candidates if c not in pulled and c not in pushed]
        return pulled + rest + pushed


class Two(MarkedFirst):
    def __init__(self, a=0, b=0):
        self.a, self.b = a, b


class Recording:
    name = "recording"

    def rank(self, query, candidates, feedback):
        SEEN.append(dict(feedback))
        return list(candidates)


class NoRank:
    name = "no_rank"


class ShortRank:
    name = "short_rank"

    def rank(self, query):
        return []


class Drops:
    name = "drops"

    def rank(self, query, candidates, feedback):
        return list(candidates)[1:]


class Unnamed:
    def rank(self, query, candidates, feedback):
        return list(candidates)


class Wing:
    """Adds "wing" to every query."""

    def refine(self, query, candidates, feedback):
        return RefinedQuery(f"{query} wing", ("wing",))


class FirstOnly:
    """Examines the first result it has not examined and marks it relevant."""

    def __init__(self, depth=10, seed=0):
        self.depth = depth

    name = "first_only"
    expects = frozenset({LabelKind.POSITIVE})

    def judge(self, *, query_id, round, displayed, judgments, examined):
        for item in displayed:
            if item.key not in examined:
                return [Mark(item.key, Label.RELEVANT)]
        return []


class Patient(FirstOnly):
    """Marks the first ``marks`` results it has not examined relevant."""

    def __init__(self, depth=10, marks=1):
        self.depth = depth
        self.marks = marks

    def judge(self, *, query_id, round, displayed, judgments, examined):
        fresh = [item for item in displayed if item.key not in examined]
        return [Mark(item.key, Label.RELEVANT) for item in fresh[: self.marks]]


class Inventor(FirstOnly):
    def judge(self, *, query_id, round, displayed, judgments, examined):
        return [Mark("https://elsewhere.example/", Label.RELEVANT)]


class FirstDocs:
    """Answers every search with the collection's documents from ``shift`` on, in its order."""

    def __init__(self, collection, shift=0):
        self.collection = collection
        self.shift = shift

    def search(self, query, *, limit):
        docs = self.collection.documents
        ids = list(docs)[self.shift : self.shift + limit]
        return [Evidence(docs[i].title, self.collection.url_for(i), docs[i].text[:80]) for i in ids]


class TooMany(FirstDocs):
    def search(self, query, *, limit):
        return super().search(query, limit=limit + 1)


def broken(**kwargs):
    raise ValueError("k1 must be positive")
'''

LOADER = '''
"""A query-set loader of the user's own: reads Cranfield's files with its own code."""
import csv
import json
from pathlib import Path


def load(directory):
    root = Path(directory)
    documents = {}
    for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            documents[record["_id"]] = {"title": record["title"], "text": record["text"]}
    queries = {}
    for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            queries[record["_id"]] = record["text"]
    qrels = {}
    with (root / "qrels.tsv").open(encoding="utf-8") as rows:
        for row in list(csv.reader(rows, delimiter="\\t"))[1:]:
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return {"documents": documents, "queries": queries, "qrels": qrels}


def unknown_document(directory):
    return {"documents": {"d1": "wing lift"}, "queries": {"q1": "wing"}, "qrels": {"q1": {"d2": 1}}}
'''

RUN = ("workers=1", "report=false", "progress=false")


@pytest.fixture
def user_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory holding the modules ``toy`` and ``loader``, importable as
    the plan makes the working directory; both forgotten after the test."""
    (tmp_path / "toy.py").write_text(TOY)
    (tmp_path / "loader.py").write_text(LOADER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("toy", "loader"):
        sys.modules.pop(name, None)


def _run(tmp: Path, *overrides: str) -> Path:
    cfg, text = compose(["+experiment=smoke", *RUN, f"runs_dir={tmp / 'runs'}", *overrides])
    return perform_run(cfg, text).path


def _trec(run: Path, name: str) -> dict[str, dict[str, int]]:
    """A TREC run of the export as query -> doc -> rank (1 first)."""
    ranks: dict[str, dict[str, int]] = {}
    with gzip.open(run / "trec" / name, "rt", encoding="utf-8") as lines:
        for line in lines:
            query_id, _, doc, rank, _, _ = line.split()
            ranks.setdefault(query_id, {})[doc] = int(rank)
    return ranks


def _ordered(ranks: dict[str, int]) -> list[str]:
    return sorted(ranks, key=ranks.__getitem__)


def _qrels(run: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (run / "trec" / "qrels.txt").read_text().splitlines():
        query_id, _, doc, grade = line.split()
        qrels.setdefault(query_id, {})[doc] = int(grade)
    return qrels


def _scores(run: Path, stage: str, measure: str) -> dict[str, float]:
    frame = pd.read_parquet(run / "scores.parquet")
    rows = frame[
        (frame["stage"] == stage)
        & (frame["eval_mode"] == "full")
        & (frame["measure"] == measure)
        & (frame["round"] == 1)
    ]
    return dict(zip(rows["query_id"].astype(str), rows["value"], strict=True))


def _by_pytrec_eval(run: Path, name: str) -> dict[str, float]:
    ranks = _trec(run, name)
    # pytrec_eval ranks by score; a score falling with the rank keeps the run's order
    scored = {q: {d: float(100 - r) for d, r in docs.items()} for q, docs in ranks.items()}
    found = pytrec_eval.RelevanceEvaluator(_qrels(run), {"ndcg_cut_10"}).evaluate(scored)
    return {q: values["ndcg_cut_10"] for q, values in found.items()}


# --- a user's ranker, end to end on Cranfield ---------------------------------------------------


def test_a_users_ranker_reverses_the_providers_list_and_scores_as_pytrec_eval(
    user_code: Path,
) -> None:
    run = exported(_run(user_code, "ranker._target_=toy.Reverse"), "trec")
    initial = _trec(run, "c00.oracle.r0.initial.run.gz")
    rerank = _trec(run, "c00.oracle.r1.rerank.run.gz")
    control = _trec(run, "c00.oracle.r1.control.run.gz")
    assert sorted(rerank) == sorted(initial) and len(rerank) == 5
    for query_id, docs in initial.items():
        # by hand: the 20 candidates the initial search gave, last first, feedback or not
        assert _ordered(rerank[query_id]) == _ordered(docs)[::-1]
        assert _ordered(control[query_id]) == _ordered(docs)[::-1]
    expected = _by_pytrec_eval(run, "c00.oracle.r1.rerank.run.gz")
    assert _scores(run, "rerank", "nDCG@10") == pytest.approx(expected, abs=1e-9)
    configs = pd.read_csv(run / "configs.csv")
    assert configs.loc[0, "label"] == "toy.Reverse"
    assert configs.loc[0, "ranker"] == "toy.Reverse"


def test_a_users_ranker_is_given_the_marks_and_its_control_none(user_code: Path) -> None:
    run = exported(_run(user_code, "ranker._target_=toy.MarkedFirst"), "trec")
    initial = _trec(run, "c00.oracle.r0.initial.run.gz")
    rerank = _trec(run, "c00.oracle.r1.rerank.run.gz")
    control = _trec(run, "c00.oracle.r1.control.run.gz")
    marks = pd.read_parquet(run / "feedback.parquet")
    episodes = pd.read_parquet(run / "episodes.parquet")
    assert len(marks) == 5 * 10  # the oracle examines the top 10 of each query
    for query_id, docs in initial.items():
        (episode,) = episodes.index[episodes["query_id"].astype(str) == query_id]
        rows = marks[marks["marks"] == episodes.loc[episode, "marks"]]
        label = dict(zip(rows["url"], rows["label"], strict=True))
        provider = _ordered(docs)
        pulled = [d for d in provider if label.get(d) in ("more", "relevant")]
        pushed = [d for d in provider if label.get(d) == "irrelevant"]
        rest = [d for d in provider if d not in pulled and d not in pushed]
        assert pulled and pushed  # the hand-worked order below is not the provider's
        assert _ordered(rerank[query_id]) == pulled + rest + pushed
        assert _ordered(control[query_id]) == provider  # empty feedback: nothing moves
    expected = _by_pytrec_eval(run, "c00.oracle.r1.rerank.run.gz")
    assert _scores(run, "rerank", "nDCG@10") == pytest.approx(expected, abs=1e-9)


def test_a_users_ranker_gives_the_same_numbers_again(user_code: Path) -> None:
    first = pd.read_parquet(_run(user_code, "ranker._target_=toy.MarkedFirst") / "scores.parquet")
    again = pd.read_parquet(_run(user_code, "ranker._target_=toy.MarkedFirst") / "scores.parquet")
    pd.testing.assert_frame_equal(first, again)


def test_the_control_gives_a_users_ranker_empty_feedback(user_code: Path) -> None:
    from evidence_bench.engine.base import Label
    from evidence_bench.evidence import Evidence
    from evidence_bench.experiment.components import make_ranker

    plan = plan_run(compose(["+experiment=smoke", "ranker._target_=toy.Recording"])[0])
    (engine,) = plan.engines
    import toy

    toy.SEEN.clear()
    candidates = [Evidence(f"t{i}", f"https://x.example/{i}", "s", rank=i) for i in (1, 2)]
    marks = {candidates[0].key: Label.RELEVANT}
    make_ranker(engine).rank("q", candidates, marks)
    make_ranker(engine, feedback=False).rank("q", candidates, marks)
    assert [marks, {}] == toy.SEEN


# --- aliases, the sweep, the report's columns ---------------------------------------------------


def test_a_users_ranker_with_the_same_config_is_an_alias(user_code: Path) -> None:
    configs = (
        "+experiment.configs=[{ranker: {_target_: toy.MarkedFirst, weight: 1.0}},"
        "{ranker: {_target_: toy.MarkedFirst, weight: 1.0}},"
        "{ranker: {_target_: toy.MarkedFirst, weight: 2.0}}, {ranker: {name: provider_order}}]"
    )
    plan = plan_run(compose(["+experiment=smoke", configs])[0])
    assert [e.config_id for e in plan.engines] == ["c00", "c02", "c03"]
    assert plan.aliases == {"c01": "c00"}
    assert [e.label for e in plan.asked[:3]] == ["toy.MarkedFirst weight=1"] * 2 + [
        "toy.MarkedFirst weight=2"
    ]
    assert plan.engines[0].params()["weight"] == 1.0
    assert plan.engines[-1].ranker == "provider_order"


def test_a_users_ranker_given_its_parameters_in_another_order_is_an_alias(
    user_code: Path,
) -> None:
    configs = (
        "+experiment.configs=[{ranker: {_target_: toy.Two, a: 1, b: 2}},"
        "{ranker: {_target_: toy.Two, b: 2, a: 1}}, {ranker: {_target_: toy.Two, b: 1, a: 2}}]"
    )
    plan = plan_run(compose(["+experiment=smoke", configs])[0])
    assert plan.aliases == {"c01": "c00"}
    assert [e.label for e in plan.asked] == [
        "toy.Two a=1 b=2",
        "toy.Two b=2 a=1",
        "toy.Two b=1 a=2",
    ]


def test_a_grid_sweeps_a_users_ranker_parameters(user_code: Path) -> None:
    plan = plan_run(
        compose(
            [
                "+experiment=smoke",
                "ranker._target_=toy.MarkedFirst",
                "+experiment.grid={weight:[1.0,3.0]}",
            ]
        )[0]
    )
    assert [dict(e.ranker_params) for e in plan.engines] == [{"weight": 1.0}, {"weight": 3.0}]
    assert plan.swept == ("weight",)


def test_a_multirun_sweeps_a_users_ranker_parameter(user_code: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "evidence_bench", "run", "--multirun", "+experiment=smoke",
            "ranker._target_=toy.MarkedFirst", "ranker.weight=1,2", "experiment.queries=2",
            *RUN, "hydra/launcher=basic",
        ],
        cwd=user_code, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    labels = sorted(
        pd.read_csv(path)["label"][0]
        for path in user_code.glob("runs/smoke/multirun-*/*/run/configs.csv")
    )
    assert labels == ["toy.MarkedFirst weight=1", "toy.MarkedFirst weight=2"]


# --- refiners and simulated users of the user's own ---------------------------------------------


def test_a_users_refiner_builds_the_query_expand_sends(user_code: Path) -> None:
    run = _run(user_code, "refiner._target_=toy.Wing", "experiment.queries=2")
    episodes = pd.read_parquet(run / "episodes.parquet")
    for _, episode in episodes.iterrows():
        detail = json.loads(episode["detail"])
        assert detail["refined_query"] == f"{episode['query']} wing"
        assert detail["added_terms"] == ["wing"]


def _policy(root: Path, name: str, text: str) -> None:
    """A policy of the user's own, ``conf/policy/NAME.yaml``, chosen as the shipped ones
    are: ``+policy@policies.NAME=NAME``."""
    (root / "conf" / "policy").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "policy" / f"{name}.yaml").write_text(text)


def test_a_users_simulated_user_marks_as_it_says(user_code: Path) -> None:
    _policy(user_code, "first", "_target_: toy.FirstOnly\ndepth: 10\n")
    run = _run(
        user_code,
        "~policies.oracle",
        "+policy@policies.first=first",
        "experiment.queries=3",
        "experiment.rounds=2",
    )
    marks = pd.read_parquet(run / "feedback.parquet")
    episodes = pd.read_parquet(run / "episodes.parquet")
    assert set(episodes["policy"]) == {"first"}
    assert len(episodes) == 3 * 2 and len(marks) == 3 * 2  # one mark a round
    assert set(marks["label"]) == {"relevant"}
    round_one = marks[marks["marks"].isin(episodes.loc[episodes["round"] == 1, "marks"])]
    assert set(round_one["rank"]) == {1}  # the first result shown


def test_a_users_search_provider_answers_every_search(user_code: Path) -> None:
    from evidence_bench.collections.beir import load_collection

    run = _run(
        user_code,
        "search_provider._target_=toy.FirstDocs",
        "search_provider.shift=3",
        "experiment.queries=3",
    )
    exported(run, "trec")
    cranfield = load_collection(packaged("collections/cranfield"))
    # by hand: every query's first page is the collection's documents 4 to 23, in file order
    first_page = [cranfield.url_for(doc_id) for doc_id in list(cranfield.documents)[3:23]]
    initial = _trec(run, "c00.oracle.r0.initial.run.gz")
    assert len(initial) == 3
    assert all(_ordered(docs) == first_page for docs in initial.values())
    expected = _by_pytrec_eval(run, "c00.oracle.r0.initial.run.gz")
    frame = pd.read_parquet(run / "scores.parquet")
    rows = frame[(frame["stage"] == "initial") & (frame["eval_mode"] == "full")
                 & (frame["measure"] == "nDCG@10") & (frame["round"] == 0)]  # fmt: skip
    found = dict(zip(rows["query_id"].astype(str), rows["value"], strict=True))
    assert found == pytest.approx(expected, abs=1e-9)
    assert json.loads((run / "manifest.json").read_text())["replay"]["replayed"] == 0


def test_record_refuses_a_users_search_provider(user_code: Path) -> None:
    from evidence_bench.experiment.record import record

    plan = plan_run(compose(["+experiment=smoke", "search_provider._target_=toy.FirstDocs"])[0])
    with pytest.raises(ConfigurationError) as caught:
        record(plan, provider="simulator", rounds=1)
    assert str(caught.value) == (
        "search_provider._target_=toy.FirstDocs: a run asks your search provider itself and "
        "replays no cassette, so there is nothing to record"
    )
    assert not (user_code / "recordings").exists()


def test_a_users_simulated_user_takes_keys_of_its_own_in_params(user_code: Path) -> None:
    _policy(user_code, "patient", "_target_: toy.Patient\nparams: {marks: 3}\n")
    run = _run(user_code, "~policies.oracle", "+policy@policies.patient=patient",
               "experiment.queries=2")  # fmt: skip
    marks = pd.read_parquet(run / "feedback.parquet")
    assert len(marks) == 2 * 3 and sorted(set(marks["rank"])) == [1, 2, 3]
    with pytest.raises(ConfigurationError) as caught:
        plan_run(compose(["+experiment=smoke", "+policies.oracle.params.marks=3"])[0])
    assert str(caught.value).startswith("policies.oracle.params={'marks': 3}: kind 'oracle'")
    _policy(user_code, "twice", "_target_: toy.Patient\ndepth: 5\nparams: {depth: 3}\n")
    with pytest.raises(ConfigurationError) as caught:
        plan_run(compose(["+experiment=smoke", "+policy@policies.twice=twice"])[0])
    assert str(caught.value) == (
        "policies.twice.params.depth: given beside policies.twice.depth; give it once"
    )


# --- what the plan refuses, in one line ---------------------------------------------------------

_NO_RANK = "no method rank(query, candidates, feedback)"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["ranker._target_=toy.NoRank"], f"ranker._target_=toy.NoRank: {_NO_RANK}"),
        (
            ["ranker._target_=toy.ShortRank"],
            "ranker._target_=toy.ShortRank: rank(query) cannot be called as "
            "rank(query, candidates, feedback)",
        ),
        (["ranker._target_=toy.Unnamed"], "ranker._target_=toy.Unnamed: no attribute 'name'"),
        (["ranker._target_=toy.Nope"], "ranker._target_=toy.Nope: module 'toy' has no 'Nope'"),
        (
            ["ranker._target_=toy"],
            "ranker._target_=toy: not an import path of the form module.Name",
        ),
        (
            ["ranker._target_=toy.broken"],
            "ranker._target_=toy.broken: ValueError: k1 must be positive",
        ),
        (
            ["ranker._target_=toy.MarkedFirst", "ranker.k2=3"],
            "ranker.k2=3: toy.MarkedFirst takes no parameter 'k2' (it takes: weight)",
        ),
        (
            ["ranker._target_=toy.MarkedFirst", "ranker.beta=2"],
            "ranker.beta=2.0: toy.MarkedFirst takes no parameter 'beta' (it takes: weight)",
        ),
        (
            ["refiner._target_=toy.Reverse"],
            "refiner._target_=toy.Reverse: no method refine(query, candidates, feedback)",
        ),
        (
            ["+policy@policies.mine=reverse"],
            "policies.mine._target_=toy.Reverse: no method "
            "judge(*, query_id, round, displayed, judgments, examined)",
        ),
        (
            ["search_provider._target_=toy.Reverse"],
            "search_provider._target_=toy.Reverse: no method search(query, *, limit)",
        ),
        (
            [
                "search_provider._target_=toy.FirstDocs",
                "ranker.evidence=page",
                "ranker.idf=background",
            ],
            "search_provider: idf=background reads the cassettes' first pages; "
            "use idf=candidates with a search provider of your own",
        ),
        (
            ["+experiment.grid={k1:[1.0,2.0]}", "ranker._target_=toy.MarkedFirst"],
            "ranker.k1=1.0: toy.MarkedFirst takes no parameter 'k1' (it takes: weight)",
        ),
    ],
)
def test_a_part_that_misses_its_protocol_is_one_line_naming_the_key(
    user_code: Path, overrides: list[str], message: str
) -> None:
    _policy(user_code, "reverse", "_target_: toy.Reverse\n")
    with pytest.raises(ConfigurationError) as caught:
        plan_run(compose(["+experiment=smoke", *overrides])[0])
    assert str(caught.value) == message


def test_an_import_error_names_the_module_and_the_plans_sys_path(user_code: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        plan_run(compose(["+experiment=smoke", "ranker._target_=my_missing.Ranker"])[0])
    head, _, path = str(caught.value).partition("; sys.path: ")
    assert head == "ranker._target_=my_missing.Ranker: no module named 'my_missing'"
    assert path.split(":")[: len(sys.path)] == [p for p in sys.path]
    assert str(user_code) in path.split(":")


def test_the_working_directory_does_not_shadow_a_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's ``tqdm.py`` beside the experiment: the user's part is found, and every
    later import of ``tqdm`` still finds the library."""
    (tmp_path / "tqdm.py").write_text("raise ImportError('the user's tqdm.py')\n")
    (tmp_path / "shadow_part.py").write_text("def make() -> int:\n    return 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert locate("ranker", "shadow_part.make")() == 1
    finally:
        sys.modules.pop("shadow_part", None)
    spec = importlib.machinery.PathFinder.find_spec("tqdm")
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin).parent != tmp_path
    assert sys.path[-1] == str(tmp_path)


def _loader_files(root: Path, text: str) -> None:
    root.mkdir(exist_ok=True)
    document = {"_id": "d1", "title": "", "text": text}
    (root / "corpus.jsonl").write_text(json.dumps(document) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "wing"}) + "\n")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")


def test_a_loaders_changed_files_are_loaded_again(user_code: Path) -> None:
    """The same loader and parameters in one process (an API user, a multirun): once its
    files change, the query set holds what they hold now, not what they held."""
    from evidence_bench.collections.queryset import load_query_set

    data = user_code / "data"
    conf = {"name": "mine", TARGET: "loader.load", "directory": str(data), "cassettes": "-"}
    _loader_files(data, "wing lift")
    assert load_query_set(conf, limit=None).collection.documents["d1"].text == "wing lift"
    _loader_files(data, "wing lift and drag at high speed")
    again = load_query_set(conf, limit=None).collection.documents["d1"].text
    assert again == "wing lift and drag at high speed"


def test_the_command_line_says_it_in_one_line_and_exits_1(user_code: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evidence_bench", "run", "+experiment=smoke",
         "ranker._target_=toy.NoRank"],
        cwd=user_code, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == f"evidence_bench: ranker._target_=toy.NoRank: {_NO_RANK}\n"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["ranker._target_=toy.Drops"],
            "ranker._target_=toy.Drops: rank() for query '{query}' returned 19 of the 20 "
            "candidates (it must return all)",
        ),
        (
            ["search_provider._target_=toy.TooMany"],
            "search_provider._target_=toy.TooMany: search() for query '{query}' returned 21 "
            "results (limit=20)",
        ),
        (
            ["~policies.oracle", "+policy@policies.bad=inventor"],
            "policies.bad._target_=toy.Inventor: judge() for query '1' round 1 marked "
            "'https://elsewhere.example/', which was not displayed",
        ),
    ],
)
def test_a_part_that_breaks_its_contract_stops_the_run_naming_it(
    user_code: Path, overrides: list[str], message: str
) -> None:
    _policy(user_code, "inventor", "_target_: toy.Inventor\n")
    cfg, text = compose(["+experiment=smoke", *RUN, "experiment.queries=1", *overrides])
    with pytest.raises(ConfigurationError) as caught:
        perform_run(cfg, text)
    query = compose(["+experiment=smoke"])[0]
    from evidence_bench.collections.queryset import load_query_set

    first = next(iter(load_query_set(query["query_set"], limit=1).queries.values()))
    assert str(caught.value) == message.format(query=first)
    assert not list((user_code / "runs").glob("smoke/*/manifest.json"))  # no half-written run


# --- a query-set loader of the user's own -------------------------------------------------------


def test_a_users_loader_of_cranfield_gives_the_built_in_numbers(user_code: Path) -> None:
    source = packaged("collections/cranfield")
    built_in = _run(user_code, "runs_dir=built_in", "experiment.queries=4")
    loaded = _run(
        user_code,
        "runs_dir=loaded",
        "experiment.queries=4",
        "query_set._target_=loader.load",
        f"query_set.directory={source}",
    )
    columns = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure"]
    ours = pd.read_parquet(built_in / "scores.parquet").sort_values(columns, ignore_index=True)
    theirs = pd.read_parquet(loaded / "scores.parquet").sort_values(columns, ignore_index=True)
    assert len(ours) > 0
    pd.testing.assert_frame_equal(ours, theirs)


def test_a_loader_whose_qrels_name_an_unknown_document_is_refused(user_code: Path) -> None:
    from evidence_bench.collections.queryset import load_query_set

    cfg = compose(["+experiment=smoke", "query_set._target_=loader.unknown_document",
                   "query_set.name=mine", "query_set.directory=x"])[0]  # fmt: skip
    with pytest.raises(DataError) as caught:
        load_query_set(cfg["query_set"], limit=None)
    assert str(caught.value) == (
        "query_set._target_=loader.unknown_document: the qrels of query 'q1' judge document "
        "'d2', which it does not hold"
    )


# --- a user's own root config -------------------------------------------------------------------


def test_a_users_root_config_applies_under_the_experiment_and_the_command_line(
    user_code: Path,
) -> None:
    (user_code / "conf").mkdir()
    (user_code / "conf" / "config.yaml").write_text(
        textwrap.dedent(
            """\
            runs_dir: my_runs
            workers: 1
            ranker:
              _target_: toy.MarkedFirst
              weight: 2.0
            """
        )
    )
    cfg = compose(["+experiment=smoke"])[0]
    assert (cfg["runs_dir"], cfg["workers"], cfg["ranker"]["weight"]) == ("my_runs", 1, 2.0)
    assert plan_run(cfg).engines[0].label == "toy.MarkedFirst weight=2"
    assert compose(["+experiment=smoke", "ranker.weight=3"])[0]["ranker"]["weight"] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("defaults:\n  - query_set: cacm\n", "a defaults list is not read in your root config"),
        ("runz_dir: x\n", "runz_dir: unknown config key (valid: query_set, ranker,"),
        ("- a list\n", "not a mapping of config keys"),
    ],
)
def test_a_users_root_config_it_cannot_apply_is_refused(
    user_code: Path, text: str, message: str
) -> None:
    (user_code / "conf").mkdir()
    (user_code / "conf" / "config.yaml").write_text(text)
    with pytest.raises(ConfigurationError) as caught:
        compose(["+experiment=smoke"])
    assert str(caught.value).startswith(f"{user_code / 'conf' / 'config.yaml'}: {message}")
