"""evidence=snippet|page|both: what a ranker and a refiner read, and the page cassette that
``record`` writes and a run replays with no socket, on a collection nobody has seen."""

from __future__ import annotations

import json
import math
import shutil
import socket
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import httpx
import pandas as pd
import pytest

from evidence_bench.collections.beir import load_collection
from evidence_bench.engine.base import Label
from evidence_bench.engine.evidence_mode import (
    EvidenceMode,
    PageEvidenceRanker,
    PageEvidenceRefiner,
    reading_copies,
)
from evidence_bench.engine.ranking import TfidfRocchioRanker
from evidence_bench.engine.refiner import LexicalRefiner
from evidence_bench.errors import ConfigurationError, DataError, ReplayMissError, WriteError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import (
    EngineConfig,
    effective_key,
    engine_config,
    make_ranker,
)
from evidence_bench.experiment.config import RankerConf, RefinerConf, compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import record
from evidence_bench.experiment.run import perform_run
from evidence_bench.report.evidence import evidence_table
from evidence_bench.report.page import render_report
from evidence_bench.runs.data import RunData, Settings
from evidence_bench.web.failure import FailureReason
from evidence_bench.web.page_cassettes import (
    PAGES_NAME,
    PageRecord,
    fetch_page,
    write_page_cassette,
)
from evidence_bench.web.page_text import MAX_CHARS
from evidence_bench.web.pages import page_failure
from tests.conftest import exported, write_tiny_collection
from tests.report_fixtures import STAGES


class FakePages:
    def __init__(self, texts: dict[str, str | None]) -> None:
        self.texts = texts
        self.asked: list[str] = []

    def page_texts(self, urls: Sequence[str]) -> list[str | None]:
        self.asked.extend(urls)
        return [self.texts.get(url) for url in urls]


def _item(n: int, title: str, snippet: str) -> Evidence:
    return Evidence(title=title, url=f"https://ex.test/{n}", snippet=snippet, rank=n)


CANDIDATES = [
    _item(1, "report one", "measured results of a study"),
    _item(2, "report two", "measured results of a study"),
    _item(3, "report three", "measured results of a study"),
]
PAGES = FakePages(
    {
        "https://ex.test/1": None,  # failed: read as its snippet
        "https://ex.test/2": "a long page on supersonic shock waves and shock tubes",
        "https://ex.test/3": "notes on shock",
    }
)


def test_snippet_evidence_ranks_as_the_ranker_alone() -> None:
    # no candidate's title or snippet holds "shock": every score is 0, the provider's order
    ranked = TfidfRocchioRanker().rank("shock waves", CANDIDATES, {})
    assert [item.rank for item in ranked] == [1, 2, 3]
    assert [item.url for item in ranked] == [c.url for c in CANDIDATES]


def test_page_evidence_ranks_by_what_the_pages_say() -> None:
    ranker = PageEvidenceRanker(TfidfRocchioRanker(), EvidenceMode.PAGE, PAGES)
    ranked = ranker.rank("shock waves", CANDIDATES, {})
    # page 2 holds both query terms, page 3 one, candidate 1 (its page failed) neither
    assert [item.url for item in ranked] == [
        "https://ex.test/2", "https://ex.test/3", "https://ex.test/1"
    ]  # fmt: skip
    assert [item.rank for item in ranked] == [1, 2, 3]
    # the ranking holds the candidates themselves, not what the ranker read
    assert {item.snippet for item in ranked} == {"measured results of a study"}


def test_reading_copies_per_mode() -> None:
    page = reading_copies(CANDIDATES, EvidenceMode.PAGE, PAGES)
    both = reading_copies(CANDIDATES, EvidenceMode.BOTH, PAGES)
    assert page[0] is CANDIDATES[0] and both[0] is CANDIDATES[0]  # failed page: the snippet
    assert page[1].snippet == "a long page on supersonic shock waves and shock tubes"
    assert both[1].snippet == (
        "measured results of a study a long page on supersonic shock waves and shock tubes"
    )
    assert page[1].text == "report two a long page on supersonic shock waves and shock tubes"
    assert reading_copies(CANDIDATES, EvidenceMode.SNIPPET, PAGES) == CANDIDATES


def test_page_text_is_clipped_to_max_chars_at_a_word_boundary() -> None:
    # 7-character words: character 12,000 falls inside the 1,715th word ("sh"), which is
    # dropped whole, with the space before it
    long = "shocks " * 5000
    pages = FakePages({"https://ex.test/1": long})
    (copy,) = reading_copies(CANDIDATES[:1], EvidenceMode.PAGE, pages)
    assert MAX_CHARS == 12_000 and long[:12_000].endswith(" sh")
    assert copy.snippet == " ".join(["shocks"] * 1714)


def test_page_evidence_refines_from_the_pages() -> None:
    marked = {"https://ex.test/2": Label.RELEVANT}
    snippet = LexicalRefiner().refine("shock", CANDIDATES, marked)
    page = PageEvidenceRefiner(LexicalRefiner(), EvidenceMode.PAGE, PAGES).refine(
        "shock", CANDIDATES, marked
    )
    assert "supersonic" not in snippet.added_terms
    # page 2's terms but the query's; "a", "on", "and" are stop words. tf x idf over the 3
    # reading copies: "waves", "tubes", "supersonic", "long", "page" (tf 1, df 1), and
    # "report" and "two" from the title (report: df 3, a lower idf)
    assert set(page.added_terms) <= {"long", "page", "supersonic", "waves", "tubes", "two"}
    assert len(page.added_terms) == 4


def _config(config_id: str, evidence: str = "snippet") -> EngineConfig:
    ranker = asdict(RankerConf(evidence=evidence))
    return engine_config(config_id, ranker, asdict(RefinerConf()))


def test_page_evidence_without_pages_fails_in_one_line() -> None:
    with pytest.raises(ConfigurationError, match="needs the pages of a query set"):
        make_ranker(_config("c00", "page")).rank("shock", CANDIDATES, {})
    with pytest.raises(ConfigurationError, match=r"ranker.evidence='pages' is not valid"):
        _config("c00", "pages")


def test_evidence_mode_is_part_of_the_effective_key() -> None:
    snippet, page = _config("a"), _config("b", "page")
    assert effective_key(snippet) != effective_key(page)
    assert "evidence" not in snippet.params()  # snippet-only runs keep their columns
    assert page.params()["evidence"] == "page" and page.params()["refiner_evidence"] == "snippet"


# -- record, then replay, end to end ---------------------------------------------------------


def overrides(collection: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "+experiment=page_evidence",
        "hydra.mode=RUN",
        "query_set=beir",
        "query_set.name=tiny",
        f"query_set.path={collection}",
        f"query_set.cassettes={tmp_path / 'cassettes'}",
        f"runs_dir={tmp_path / 'runs'}",
        "experiment.depth=10",
        "pages.failure_rate=0.25",
        "pages.timeout_s=1.0",
        "workers=1",
        "progress=false",
        "report=false",
        *extra,
    ]


@pytest.fixture(scope="module")
def recorded_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny collection's search and page cassettes, recorded once for the module (the
    recording is the same every time: a simulator over the same collection)."""
    root = tmp_path_factory.mktemp("recorded")
    collection = write_tiny_collection(root / "tiny")
    cfg, _ = compose(overrides(collection, root))
    summary = record(plan_run(cfg), provider="simulator", rounds=0, page_timeout_s=1.0)
    assert summary.pages and summary.page_failures
    return root


@pytest.fixture
def recorded(recorded_once: Path, tmp_path: Path) -> Path:
    """The collection, with a copy of its recorded cassettes in ``tmp_path / "cassettes"``
    (where :func:`overrides` points), which a test may change."""
    shutil.copytree(recorded_once / "cassettes", tmp_path / "cassettes")
    return recorded_once / "tiny"


def test_record_writes_one_page_cassette_each_url_once(recorded: Path, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    data = json.loads((cassettes / PAGES_NAME).read_text())
    urls = [page["url"] for page in data["pages"]]
    assert urls == sorted(set(urls))  # each URL once, sorted
    assert data["failure_rate"] == 0.25 and data["recorded_from"] == "simulator"
    collection = load_collection(recorded)
    for page in data["pages"]:
        doc_id = collection.doc_id_for(page["url"])
        assert doc_id is not None
        kind = page_failure(doc_id, 0.25)
        expected = {None: 200, "http_status": 404, "not_html": 200, "timeout": 0}[
            kind and kind.value
        ]
        assert page["status"] == expected, page["url"]
        assert ("error" in page) is (kind is not None and kind.value == "timeout")
        assert set(page) <= {"url", "status", "content_type", "body", "error"}
    manifest = json.loads((cassettes / "@manifest.json").read_text())
    assert manifest["pages"]["file"] == PAGES_NAME and manifest["pages"]["urls"] == len(urls)
    assert PAGES_NAME not in manifest["cassettes"]
    # no search cassette holds a page fetch
    for path in cassettes.glob("[0-9]*.json"):
        uris = [i["request"]["uri"] for i in json.loads(path.read_text())["interactions"]]
        assert all("/res/v1/web/search?" in uri for uri in uris), path


def test_replay_reads_pages_with_no_socket(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("replay opened a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    cfg, text = compose(overrides(recorded, tmp_path, "replay.on_miss=error"))
    path = exported(perform_run(cfg, text).path, "csv")
    configs = pd.read_csv(path / "configs.csv")
    assert list(configs["evidence"]) == [
        "snippet", "page", "both", "page", "page", "snippet", "page"
    ]  # fmt: skip
    assert list(configs["idf"]) == ["candidates"] * 4 + ["background"] + ["candidates"] * 2
    assert list(configs["refiner_expand_depth"].astype(str)) == ["none"] * 4 + ["40"] + ["none"] * 2
    summary = pd.read_csv(path / "summary.csv")
    cell = summary[(summary.stage == "expand") & (summary.eval_mode == "full")
                   & (summary.measure == "nDCG@10") & (summary.policy == "oracle")]  # fmt: skip
    by_config = cell.set_index("config_id")["mean"]
    # the page evidence configs read other text: their numbers are their own
    assert set(by_config.index) == {"c00", "c01", "c02", "c03", "c04", "c05", "c06"}
    episodes = [json.loads(line) for line in (path / "episodes.jsonl").read_text().splitlines()]
    refined = {(e["config_id"], e["query_id"]): e["rounds"][0]["refined_query"] for e in episodes
               if e["policy"] == "oracle"}  # fmt: skip
    assert any(refined[("c00", q)] != refined[("c01", q)] for q in ("1", "2", "3", "4"))
    html = render_report(path).read_text()
    assert '<section id="evidence">' in html
    assert html.count('data-evidence="page"') == 4 * 2 * 2  # 4 configs x 2 users x 2 stages


def test_replay_of_a_changed_page_cassette_stops_naming_it(recorded: Path, tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / PAGES_NAME
    path.write_text(path.read_text().replace("measured", "measureD", 1))
    cfg, text = compose(overrides(recorded, tmp_path))
    with pytest.raises(DataError, match=rf"page cassette {path} was changed since it was recorded"):
        perform_run(cfg, text)


def test_replay_with_another_failure_rate_stops(recorded: Path, tmp_path: Path) -> None:
    cfg, text = compose(overrides(recorded, tmp_path, "pages.failure_rate=0.1"))
    with pytest.raises(DataError, match=r"recorded with pages.failure_rate=0.25, the run asks "):
        perform_run(cfg, text)


def test_a_page_that_cannot_be_fetched_is_recorded_as_failed_not_raised() -> None:
    """record fetches every page before it writes the page cassette: a body its
    Content-Encoding cannot decode, or a host httpx or IDNA refuses, is that page's failure,
    not an exception that loses the pages fetched before it."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/gz":
            return httpx.Response(
                200, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"},
                content=b"not gzip",
            )  # fmt: skip
        return httpx.Response(200, headers={"Content-Type": "text/html"}, content=b"<p>x</p>")

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        assert fetch_page(client, "https://ex.test/ok").failure is None
        assert fetch_page(client, "https://ex.test/gz").error == "content_encoding"
        assert fetch_page(client, "https://xn--/").error == "invalid_url"
        assert fetch_page(client, "http://[::1/").error == "invalid_url"

    def broken(request: httpx.Request) -> httpx.Response:
        raise ValueError("a bug in a transport")

    # any other error is no page's failure: it would read the page as its snippet unseen
    with (
        httpx.Client(transport=httpx.MockTransport(broken)) as client,
        pytest.raises(ValueError, match="a bug in a transport"),
    ):
        fetch_page(client, "https://ex.test/ok")


def test_a_recording_from_the_simulator_does_not_depend_on_the_machine_speed(
    recorded_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine so loaded that no extraction ends within its page's time, a recording
    from the simulator holds the pages an idle machine recorded: its pages are extracted
    without a time bound (they are not hostile), so none becomes a timeout."""

    def out_of_time(*args: object, **kwargs: object) -> FailureReason:
        return FailureReason.TIMEOUT

    monkeypatch.setattr("evidence_bench.web.page_cassettes.read_page_bounded", out_of_time)
    cfg, _ = compose(overrides(recorded_once / "tiny", tmp_path))
    record(plan_run(cfg), provider="simulator", rounds=0, page_timeout_s=1.0)
    again = (tmp_path / "cassettes" / PAGES_NAME).read_bytes()
    assert again == (recorded_once / "cassettes" / PAGES_NAME).read_bytes()


def test_recording_at_another_failure_rate_records_the_pages_afresh(
    recorded: Path, tmp_path: Path
) -> None:
    """The pages recorded at 0.25 are not those of 0.5: a recording at 0.5 over that page
    cassette records every page again (and says so), rather than keep the old ones under a
    header that says 0.5, which replay at 0.5 would then accept."""
    cfg, _ = compose(overrides(recorded, tmp_path, "pages.failure_rate=0.5"))
    summary = record(
        plan_run(cfg),
        provider="simulator",
        rounds=0,
        searches=False,
        page_timeout_s=1.0,
        force=True,
    )
    path = tmp_path / "cassettes" / PAGES_NAME
    assert summary.afresh == [
        f"{path} was recorded with failure_rate=0.25, this recording has 0.5; recorded its "
        "pages afresh"
    ]
    data = json.loads(path.read_text())
    assert data["failure_rate"] == 0.5 and summary.pages == len(data["pages"])
    collection = load_collection(recorded)
    for page in data["pages"]:
        kind = page_failure(collection.doc_id_for(page["url"]) or "", 0.5)
        expected = {None: 200, "http_status": 404, "not_html": 200, "timeout": 0}[
            kind and kind.value
        ]
        assert page["status"] == expected, page["url"]


@pytest.mark.parametrize("on_miss", ["error", "skip"])
def test_a_missing_page_cassette_names_what_to_record(
    on_miss: str, tiny_collection: Path, tmp_path: Path
) -> None:
    """Searches recorded, pages not: under on_miss=error, and under skip too (which leaves out
    the pages a cassette lacks: without the cassette every page would be read as its snippet,
    the page configs would equal the snippet ones, and the run would look like any other)."""
    cfg, _ = compose(overrides(tiny_collection, tmp_path, "experiment.configs=[{}]"))
    record(plan_run(cfg), provider="simulator", rounds=0)
    # one page config, whose searches (no deeper expansion) are the ones recorded
    page_only = "experiment.configs=[{ranker: {evidence: page}}]"
    cfg, text = compose(
        overrides(tiny_collection, tmp_path, f"replay.on_miss={on_miss}", page_only)
    )
    with pytest.raises(ReplayMissError, match=r"no page cassette .*@pages.json for evidence=page"):
        perform_run(cfg, text)


def test_write_page_cassette_scrubs_every_form_of_the_key(tmp_path: Path) -> None:
    key = "sk/live+key"
    body = f"<p>{key} sk%2Flive%2Bkey</p>".encode()
    records = [PageRecord("https://ex.test/1", 200, "text/html", body)]
    path = tmp_path / PAGES_NAME
    write_page_cassette(path, records, header={}, secrets=[key])
    text = path.read_text()
    assert "sk/live" not in text and "sk%2Flive" not in text
    assert text.count("REDACTED-API-KEY") == 2


def test_a_page_cassette_holding_the_key_in_a_latin_1_body_is_refused(tmp_path: Path) -> None:
    """A body that is not UTF-8 is stored as base64, where scrubbing cannot reach the key:
    the cassette is refused, naming the page, and nothing is written."""
    key = "sk/live+key"
    records = [
        PageRecord("https://ex.test/fine", 200, "text/html", "<p>caf\xe9</p>".encode("latin-1")),
        PageRecord(
            "https://ex.test/held", 200, "text/html", f"<p>\xe9 {key}</p>".encode("latin-1")
        ),
    ]
    path = tmp_path / PAGES_NAME
    with pytest.raises(WriteError) as caught:
        write_page_cassette(path, records, header={}, secrets=[key])
    assert str(caught.value) == (
        f"refusing to write {path}: it would hold the API key (the page https://ex.test/held)"
    )
    assert not path.exists()


# -- the report's Evidence section -------------------------------------------------------------


def _tiny_run(tmp_path: Path) -> RunData:
    configs = pd.DataFrame(
        {
            "config_id": ["c00", "c01"],
            "label": ["tfidf", "tfidf · page evidence"],
            "ranker": ["tfidf_rocchio"] * 2,
            "refiner": ["lexical"] * 2,
            "role": ["feedback"] * 2,
            "alias_of": ["", ""],
            "beta": [0.75, 0.75],
            "evidence": ["snippet", "page"],
            "refiner_evidence": ["snippet", "page"],
        }
    )
    stages = ("initial", "rerank", "control", "expand", "deep_control")
    values = {  # (config, query) -> nDCG@10 of each stage, residual, round 1
        ("c00", "q1"): (0.2, 0.2, 0.2, 0.3, 0.1),
        ("c00", "q2"): (0.4, 0.4, 0.4, 0.3, 0.3),
        ("c01", "q1"): (0.2, 0.2, 0.2, 0.5, 0.2),
        ("c01", "q2"): (0.4, 0.4, 0.4, 0.7, 0.3),
    }
    rows = [
        (cid, "oracle", qid, 1, stage, "residual", "nDCG@10", value)
        for (cid, qid), row in values.items()
        for stage, value in zip(stages, row, strict=True)
    ]
    per_query = pd.DataFrame(rows, columns=["config_id", "policy", "query_id", "round", "stage",
                                            "eval_mode", "measure", "value"])  # fmt: skip
    settings = Settings("e", "tiny", ("nDCG@10",), ("residual",), "residual", "nDCG@10", 1)
    return RunData(tmp_path, settings, {}, configs, per_query, pd.DataFrame(), pd.DataFrame(),
                   (), (), ("oracle",), tuple(STAGES))  # fmt: skip


def test_the_evidence_table_by_hand(tmp_path: Path) -> None:
    table = evidence_table(_tiny_run(tmp_path))
    assert table is not None
    expand = table[table.stage == "expand"].set_index("config_id")
    # snippet: expand mean 0.3 over initial mean 0.3; own gain mean(0.3-0.1, 0.3-0.3) = 0.1
    assert expand.loc["c00", "relative_gain"] == pytest.approx(0.0)
    assert expand.loc["c00", "gain"] == pytest.approx(0.1)
    # page: expand mean 0.6 over 0.3 = +100%; own gain mean(0.3, 0.4) = 0.35
    assert expand.loc["c01", "relative_gain"] == pytest.approx(1.0)
    assert expand.loc["c01", "gain"] == pytest.approx(0.35)
    # vs snippet: differences 0.2 and 0.4, mean 0.3, sd 0.1414; t(0.975, 1) = 12.706
    assert expand.loc["c01", "vs_snippet"] == pytest.approx(0.3)
    half = 12.7062 * (0.02**0.5) / 2**0.5
    assert expand.loc["c01", "vs_snippet_low"] == pytest.approx(0.3 - half, abs=1e-3)
    assert expand.loc["c01", "vs_snippet_high"] == pytest.approx(0.3 + half, abs=1e-3)
    assert list(table.evidence) == ["snippet", "page"] * 2
    # page expand 0.2 above snippet on both queries: a constant shift, no t interval
    data = _tiny_run(tmp_path)
    pq = data.per_query
    shifted = (pq["config_id"] == "c01") & (pq["stage"] == "expand")
    pq.loc[shifted, "value"] = [0.5, 0.5]  # snippet's expand: 0.3 and 0.3
    again = evidence_table(data)
    assert again is not None
    row = again[(again.stage == "expand") & (again.config_id == "c01")].iloc[0]
    assert row["vs_snippet"] == pytest.approx(0.2)
    assert math.isnan(row["vs_snippet_low"]) and math.isnan(row["vs_snippet_high"])


def test_no_evidence_table_for_a_snippet_only_run(tmp_path: Path) -> None:
    data = _tiny_run(tmp_path)
    configs = data.configs.drop(columns=["evidence", "refiner_evidence"])
    assert evidence_table(replace(data, configs=configs)) is None


def test_background_numbers_do_not_depend_on_how_many_queries_run(
    recorded: Path, tmp_path: Path
) -> None:
    # the background is every judged query's first pages, whatever experiment.queries keeps
    only = (
        "experiment.configs=[{ranker: {evidence: page, idf: background}, "
        "refiner: {evidence: page, idf: background, expand_depth: 20}}]"
    )
    values = []
    for queries in ("experiment.queries=2", "experiment.queries=null"):
        cfg, text = compose(overrides(recorded, tmp_path, "replay.on_miss=error", only, queries))
        per_query = pd.read_csv(exported(perform_run(cfg, text).path, "csv") / "per_query.csv")
        values.append(per_query.set_index(list(per_query.columns[:-1]))["value"])
    few, every = values
    assert len(few) < len(every)
    assert every.loc[few.index].tolist() == few.tolist()
