"""idf=background and refiner.expand_depth: idf over a sample of pages plus the
candidates, and a refined query that fetches deeper (engine/background.py, refiner.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import httpx
import pytest

from evidence_bench.collections.beir import load_collection
from evidence_bench.engine.background import (
    Background,
    BackgroundRocchioRanker,
    DocumentFrequencies,
)
from evidence_bench.engine.base import Label
from evidence_bench.engine.evidence_mode import EvidenceMode
from evidence_bench.engine.ranking import TfidfRocchioRanker
from evidence_bench.engine.refiner import ExpansionDepth, LexicalRefiner
from evidence_bench.engine.session import SearchSession
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import (
    EngineConfig,
    engine_config,
    make_ranker,
    make_refiner,
)
from evidence_bench.experiment.config import RankerConf, RefinerConf, compose
from evidence_bench.experiment.plan import RunPlan, deep_limit, plan_run
from evidence_bench.web.brave import BraveProvider, RetryPolicy
from evidence_bench.web.cassettes import REPLAY_BASE_URL
from evidence_bench.web.simulator import BraveSimulator, SimulatorTransport

ROOT = Path(__file__).resolve().parents[1]


class NoPages:
    def page_texts(self, urls: Sequence[str]) -> list[str | None]:
        return [None for _ in urls]  # every page failed: each result is read as its snippet


def _ev(n: int, title: str, snippet: str = "") -> Evidence:
    return Evidence(title=title, url=f"https://example.org/doc/{n}", snippet=snippet, rank=n)


def test_document_frequencies_by_hand() -> None:
    sample = DocumentFrequencies(3, {"shock": 2, "wave": 1}, frozenset({"a", "b", "c"}))
    idf = sample.idf([("a", ["shock"]), ("x", ["shock", "tube"])])
    # "x" is not in the sample: N = 3 + 1 = 4; df(shock) = 2 + 1, df(tube) = 0 + 1;
    # "a" is, so it adds nothing. ln(5/4) + 1 and ln(5/2) + 1:
    assert idf == pytest.approx({"shock": 1.2231435513142097, "tube": 1.916290731874155})


def test_the_background_is_read_as_the_part_reads_and_counted_once() -> None:
    items = (_ev(1, "shock tube"), _ev(2, "shock wave"))
    background = Background(items, NoPages())
    first = background.frequencies(TfidfRocchioRanker().analyzer, EvidenceMode.PAGE, str)
    assert first.n == 2
    again = background.frequencies(TfidfRocchioRanker().analyzer, EvidenceMode.PAGE, str)
    assert again is first


def _pools(name: str, count: int) -> list[tuple[str, list[Evidence], dict[str, Label]]]:
    """The first ``count`` judged queries' top 20 from the simulator, with an oracle's
    marks on the top 10."""
    collection = load_collection(ROOT / "collections" / name, name=name)
    client = httpx.Client(transport=SimulatorTransport(BraveSimulator(collection)))
    provider = BraveProvider(
        "test", base_url=REPLAY_BASE_URL, http_client=client, retry=RetryPolicy(attempts=1)
    )
    pools = []
    with client:
        for query_id in collection.judged_query_ids()[:count]:
            text = collection.queries[query_id].text
            found = provider.search(text, limit=20)
            grades = collection.qrels[query_id]
            marks = {
                item.key: Label.RELEVANT
                if grades.get(collection.doc_id_for(item.key) or "", 0) > 0
                else Label.IRRELEVANT
                for item in found[:10]
            }
            pools.append((text, found, marks))
    return pools


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_an_empty_background_ranks_and_refines_as_the_candidates_alone(name: str) -> None:
    # with no sample, N and df are the candidates': the TF-IDF ranker's and the lexical
    # refiner's own idf, computed by their own code
    empty = Background((), NoPages())
    mode = EvidenceMode.SNIPPET
    for query, found, marks in _pools(name, 8):
        for feedback in ({}, marks):
            plain = TfidfRocchioRanker().score(query, found, feedback)
            sampled = BackgroundRocchioRanker(background=empty, mode=mode)
            assert sampled.score(query, found, feedback) == pytest.approx(plain, abs=1e-12)
            assert [i.key for i in sampled.rank(query, found, feedback)] == [
                i.key for i in TfidfRocchioRanker().rank(query, found, feedback)
            ]
        refined = LexicalRefiner(background=empty, mode=mode).refine(query, found, marks)
        assert refined == LexicalRefiner().refine(query, found, marks)


def test_a_background_where_a_word_is_common_picks_another_term() -> None:
    liked = _ev(1, "shock shock tube")
    candidates = [liked, _ev(2, "other")]
    marks = {liked.key: Label.RELEVANT}
    # over the two candidates shock and tube are equally rare: shock's tf 2 wins
    assert LexicalRefiner(max_terms=1).refine("flow", candidates, marks).added_terms == ("shock",)
    # ten sampled pages say shock: N = 12, idf(shock) = ln(13/12) + 1 = 1.080 (x tf 2 = 2.160),
    # idf(tube) = ln(13/2) + 1 = 2.872
    sample = Background(tuple(_ev(10 + n, "shock") for n in range(10)), NoPages())
    refiner = LexicalRefiner(max_terms=1, background=sample, mode=EvidenceMode.PAGE)
    assert refiner.refine("flow", candidates, marks).added_terms == ("tube",)
    assert refiner.effective_params()["idf"] == "background"


class CountingProvider:
    def __init__(self) -> None:
        self.limits: list[int] = []

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        self.limits.append(limit)
        return [_ev(n, f"result {n} of {query}") for n in range(1, limit + 1)]


@pytest.mark.parametrize(("depth", "asked"), [(None, 20), (40, 40)])
def test_expand_depth_is_what_the_refined_query_asks_for(depth: int | None, asked: int) -> None:
    provider = CountingProvider()
    refiner = LexicalRefiner() if depth is None else ExpansionDepth(LexicalRefiner(), depth)
    session = SearchSession("wing flutter", provider, refiner=refiner, limit=20)
    session.mark(Label.RELEVANT, 1)
    session.expand()
    assert provider.limits == [20, asked]


def _config(ranker: dict[str, object], refiner: dict[str, object]) -> EngineConfig:
    return engine_config(
        "c00", {**asdict(RankerConf()), **ranker}, {**asdict(RefinerConf()), **refiner}
    )


@pytest.mark.parametrize(
    ("ranker", "refiner", "message"),
    [
        ({"idf": "corpus"}, {}, r"ranker.idf='corpus' is not valid \(valid: candidates, backgr"),
        ({}, {"idf": "all"}, r"refiner.idf='all' is not valid"),
        ({"idf": "background"}, {}, r"idf=background reads the pages .* set ranker.evidence"),
        ({"name": "livefetch", "idf": "background", "evidence": "page"}, {}, "for tfidf_rocchio"),
        ({}, {"expand_depth": 0}, r"refiner.expand_depth=0 must be an integer from 1 to 200"),
        ({}, {"expand_depth": True}, r"refiner.expand_depth=True must be an integer"),
    ],
)  # fmt: skip
def test_bad_settings_fail_in_one_line(
    ranker: dict[str, object], refiner: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _config(ranker, refiner)


def test_a_part_built_without_the_background_fails_in_one_line() -> None:
    config = _config({"evidence": "page", "idf": "background"}, {"idf": "background"})
    with pytest.raises(ConfigurationError, match="idf=background needs the run's background"):
        make_ranker(config, pages=NoPages()).rank("flow", [_ev(1, "flow")], {})
    with pytest.raises(ConfigurationError, match="idf=background needs the run's background"):
        make_refiner(config, pages=NoPages()).refine(
            "flow", [_ev(1, "flow more")], {_ev(1, "").key: Label.RELEVANT}
        )


def test_the_settings_are_in_the_label_params_and_key() -> None:
    config = _config(
        {"evidence": "page", "idf": "background"},
        {"evidence": "page", "idf": "background", "expand_depth": 40},
    )
    params = config.params()
    assert (params["idf"], params["refiner_idf"], params["refiner_expand_depth"]) == (
        "background", "background", 40
    )  # fmt: skip
    assert "idf=background/background · expand_depth=40" in config.label
    plain = _config({}, {})
    assert not {"idf", "refiner_idf", "refiner_expand_depth"} & set(plain.params())


def _plan(*extra: str) -> RunPlan:
    cfg, _ = compose(["+experiment=smoke", "hydra.mode=RUN", *extra])
    return plan_run(cfg)


def test_the_equal_depth_control_reaches_as_deep_as_the_expansion() -> None:
    # depth 20, one round: one page more (40) by default; 20 + 40 with a 40-result expansion
    assert deep_limit(_plan("experiment.rounds=1")) == 40
    deeper = "experiment.configs=[{refiner: {expand_depth: 40}}]"
    assert deep_limit(_plan("experiment.rounds=1", deeper)) == 60
    assert deep_limit(_plan("experiment.rounds=2", deeper)) == 100


def test_a_background_ranking_is_a_permutation_renumbered() -> None:
    items: Sequence[Evidence] = [_ev(n, f"shock tube {n}") for n in range(1, 6)]
    sample = Background(tuple(_ev(10 + n, "shock") for n in range(4)), NoPages())
    ranker = BackgroundRocchioRanker(background=sample)
    ranked = ranker.rank("tube", items, {items[2].key: Label.RELEVANT})
    assert sorted(i.key for i in ranked) == sorted(i.key for i in items)
    assert [i.rank for i in ranked] == [1, 2, 3, 4, 5]
    assert math.isfinite(sum(ranker.score("tube", items, {})))
