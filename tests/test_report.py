"""The HTML report: escaping of web text, self-containment, numbers checked against pandas,
Holm correction, the atomic write, multiruns, and the terminal summary."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from report_fixtures import PAYLOAD_IMG, PAYLOAD_SCRIPT, write_multirun, write_run_dir

import evidence_bench.report.render as render_module
from evidence_bench.errors import DataError
from evidence_bench.evaluation.statistics import holm
from evidence_bench.report import (
    analyze,
    gather_multirun,
    load_run,
    render_report,
    summary_table,
)
from evidence_bench.report.data import load_episodes

TRIALS = 400
VOID = {"meta", "link", "br", "img", "input", "hr", "col", "source", "wbr", "area", "base"}
MINUS = "\u2212"


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    #: Text and child elements in document order.
    parts: list[str | Node] = field(default_factory=list)

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def content(self) -> str:
        return "".join(p if isinstance(p, str) else p.content() for p in self.parts)

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        return [
            n
            for n in self.walk()
            if n.tag == tag and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class TreeBuilder(HTMLParser):
    """A small DOM from html.parser: enough to find rows, cells and attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        self.stack[-1].parts.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        self.stack[-1].parts.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(html: str) -> Node:
    builder = TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


@dataclass
class Rendered:
    run_dir: Path
    html: str
    dom: Node


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    run_dir = write_run_dir(tmp_path_factory.mktemp("report"))
    path = render_report(run_dir, trials=TRIALS)
    assert path == run_dir / "report.html"
    html = path.read_text("utf-8")
    return Rendered(run_dir, html, parse(html))


def per_query(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "per_query.csv", dtype={"query_id": str})


def summary_row(dom: Node, measure: str, **attrs: str) -> Node:
    table = dom.find_all("table", data_measure=measure)
    assert len(table) == 1
    rows = table[0].find_all("tr", **attrs)
    assert len(rows) == 1, attrs
    return rows[0]


def cell(row: Node, cls: str) -> Node:
    cells = [c for c in row.children if cls in c.classes()]
    assert len(cells) == 1, cls
    return cells[0]


# --- untrusted web text ---------------------------------------------------------------------


def test_no_script_element_or_event_handler(rendered: Rendered) -> None:
    assert "<script" not in rendered.html.lower()
    for node in rendered.dom.walk():
        assert node.tag not in {"script", "img", "iframe", "object", "embed"}, node.tag
        handlers = [name for name in node.attrs if name.lower().startswith("on")]
        assert not handlers, (node.tag, handlers)


def test_payloads_are_shown_as_text(rendered: Rendered) -> None:
    text = rendered.dom.content()
    # The query, a title, a snippet, a URL and an added term each carry a payload.
    assert text.count(PAYLOAD_SCRIPT) >= 4
    assert text.count(PAYLOAD_IMG) >= 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered.html
    assert "javascript:alert(1)" in text  # shown, as text


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Node:
    """A run as the runner renders it: in ``.<run id>.tmp``, its manifest without a date or a
    cassette hash; one config label carries a payload and a ``$``."""
    run_dir = write_run_dir(
        tmp_path_factory.mktemp("staged"), run_id=".20261201T101500Z-abcdef.tmp"
    )
    manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    del manifest["created"]
    manifest["cassette_manifest_sha256"] = None
    (run_dir / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    configs = pd.read_csv(run_dir / "configs.csv")
    configs.loc[configs["config_id"] == "c02", "label"] = f"{PAYLOAD_SCRIPT} $x$ & co"
    configs.to_csv(run_dir / "configs.csv", index=False)
    html = render_report(run_dir, trials=20).read_text("utf-8")
    assert "<script" not in html.lower()
    return parse(html)


def test_config_labels_are_escaped_in_tables_and_charts(staged: Node) -> None:
    svg_text = [n.content() for n in staged.walk() if n.tag == "text"]
    assert any(f"{PAYLOAD_SCRIPT} $x$ & co" in t for t in svg_text)  # mathtext stays off
    cells = [n.content() for n in staged.walk() if "cfg" in n.classes()]
    assert any(c.startswith(f"{PAYLOAD_SCRIPT} $x$ & co") for c in cells)


def test_header_while_staged_in_the_runners_tmp_dir(staged: Node) -> None:
    text = " ".join(staged.find_all("header")[0].content().split())
    assert "20261201T101500Z-abcdef" in text and ".tmp" not in text
    assert "2026-12-01T10:15:00Z" in text  # from the run id
    assert "None" not in text


def test_nothing_is_loaded_from_outside(rendered: Rendered) -> None:
    for node in rendered.dom.walk():
        for name, value in node.attrs.items():
            if name in {"src", "href", "xlink:href", "action", "poster", "data"}:
                # In-page anchors, and the colour bar matplotlib embeds as a PNG.
                assert value.startswith(("#", "data:image/png;base64,")), (node.tag, name)
    csp = rendered.dom.find_all("meta", http_equiv="Content-Security-Policy")
    assert csp and "default-src 'none'" in csp[0].attrs["content"]
    assert not re.search(r"url\((?!#)", rendered.html)  # no CSS loads either
    assert "@import" not in rendered.html


# --- numbers against an independent pandas computation ------------------------------------


def test_means_match_per_query_csv(rendered: Rendered) -> None:
    pq = per_query(rendered.run_dir)
    sel = pq[(pq["eval_mode"] == "residual") & (pq["measure"] == "nDCG@10")]
    mine = sel[(sel["config_id"] == "c02") & (sel["policy"] == "noisy") & (sel["round"] == 1)]
    rerank = mine[mine["stage"] == "rerank"]["value"].mean()
    initial = mine[mine["stage"] == "initial"]["value"].mean()
    row = summary_row(
        rendered.dom,
        "nDCG@10",
        data_config="c02",
        data_policy="noisy",
        data_round="1",
        data_stage="rerank",
    )
    means = [c for c in row.children if "mean" in c.classes()]
    shown = {("initial" in c.classes()): c.content().split()[0] for c in means}
    assert shown[False] == f"{rerank:.3f}"
    assert shown[True] == f"{initial:.3f}"


def test_change_is_paired_on_query_id(rendered: Rendered) -> None:
    """The skipped expand of c01/noisy/round 2 leaves one query out of the pair."""
    pq = per_query(rendered.run_dir)
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
        & (pq["config_id"] == "c01")
        & (pq["policy"] == "noisy")
        & (pq["round"] == 2)
    ]
    wide = sel.pivot(index="query_id", columns="stage", values="value")
    paired = wide[["initial", "expand"]].dropna()
    assert len(paired) == len(wide) - 1
    delta = (paired["expand"] - paired["initial"]).mean()
    worse = int((paired["expand"] < paired["initial"] - 1e-9).sum())
    better = int((paired["expand"] > paired["initial"] + 1e-9).sum())
    row = summary_row(
        rendered.dom,
        "nDCG@10",
        data_config="c01",
        data_policy="noisy",
        data_round="2",
        data_stage="expand",
    )
    assert cell(row, "delta").content().split()[0] == f"{delta:+.3f}".replace("-", MINUS)
    counts = cell(row, "counts").content().split()
    assert counts == [str(better), str(worse), str(len(paired) - better - worse)]


def test_holm_adjusted_p_at_least_raw(rendered: Rendered) -> None:
    rows = [
        r
        for t in rendered.dom.find_all("table")
        if "summary" in t.classes()
        for r in t.find_all("tr")
        if "data-stage" in r.attrs
    ]
    assert len(rows) > 50
    for row in rows:
        raw = [float(c.attrs["data-p"]) for c in row.children if "p" in c.classes()]
        adjusted = [float(c.attrs["data-p"]) for c in row.children if "p-holm" in c.classes()]
        assert len(raw) == len(adjusted) == 2
        for p, q in zip(raw, adjusted, strict=True):
            assert 0.0 <= p <= q <= 1.0


def test_holm_family_is_configs_of_one_measure_user_stage_round(rendered: Rendered) -> None:
    table = rendered.dom.find_all("table", data_measure="AP")[0]
    rows = table.find_all("tr", data_policy="oracle", data_round="2", data_stage="rerank")
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    assert len(rows) == len(configs)
    raw = [float(next(c for c in r.children if "p" in c.classes()).attrs["data-p"]) for r in rows]
    shown = [
        float(next(c for c in r.children if "p-holm" in c.classes()).attrs["data-p"]) for r in rows
    ]
    assert shown == pytest.approx(holm(raw), abs=1e-5)


def test_significance_mark_follows_adjusted_randomization_p(rendered: Rendered) -> None:
    marked = 0
    for table in rendered.dom.find_all("table"):
        for row in table.find_all("tr"):
            if "data-stage" not in row.attrs:
                continue
            p = float([c for c in row.children if "p-holm" in c.classes()][1].attrs["data-p"])
            star = "★" in cell(row, "delta").content()
            assert star == (p < 0.05)
            marked += star
    assert marked > 0


# --- header -----------------------------------------------------------------------------------


def test_header_names_what_reproduces_the_run(rendered: Rendered) -> None:
    manifest = json.loads((rendered.run_dir / "manifest.json").read_text("utf-8"))
    header = rendered.dom.find_all("dl", id="header")[0]
    text = " ".join(header.content().split())
    assert (
        rendered.dom.find_all("dd", id="cassette-hash")[0].content().strip()
        == (manifest["cassette_manifest_sha256"])
    )
    for value in ("0.1.0", manifest["git_commit"], "cranfield", "oracle, noisy", "residual"):
        assert value in text
    replay = manifest["replay"]
    assert f"{replay['replayed']} replayed" in text
    assert f"{replay['skipped']} skipped" in text


def test_header_counts_excluded_queries(rendered: Rendered) -> None:
    pq = per_query(rendered.run_dir)
    sel = pq[
        (pq["eval_mode"] == "residual") & (pq["measure"] == "nDCG@10") & (pq["stage"] == "initial")
    ]
    n = sel.groupby(["config_id", "policy", "round"])["query_id"].nunique().unstack("round")
    for round_ in (1, 2):
        expected = int((n[0] - n[round_]).max())
        assert expected > 0
        span = rendered.dom.find_all("span", data_round=str(round_))
        assert span and span[0].attrs["data-max"] == str(expected)
        assert str(expected) in span[0].content()


# --- sections ---------------------------------------------------------------------------------


def test_sections_and_verdict(rendered: Rendered) -> None:
    ids = {n.attrs.get("id") for n in rendered.dom.walk()}
    assert {"verdict", "summary", "sweep", "queries", "rounds", "data"} <= ids
    verdict = rendered.dom.find_all("section", id="verdict")[0]
    assert verdict.classes() & {"yes", "partly", "unclear", "no"}
    text = rendered.dom.content()
    assert "Residual evaluation" in text and "Equal-depth caveat" in text
    charts = [n for n in rendered.dom.walk() if n.tag == "svg"]
    assert len(charts) == 4  # forest, sweep heatmap, sorted deltas, rounds
    ids_in_svg = [n.attrs["id"] for c in charts for n in c.walk() if "id" in n.attrs]
    assert len(ids_in_svg) == len(set(ids_in_svg))  # prefixed per chart: no clashes


def test_episode_details_show_marks_queries_and_grades(rendered: Rendered) -> None:
    details = [n for n in rendered.dom.walk() if n.tag == "details" and "episode" in n.classes()]
    deltas = [float(d.find_all("span")[0].content().replace(MINUS, "-")) for d in details]
    assert deltas == sorted(deltas)  # largest loss first
    first = next(d for d in details if d.attrs["data-query"] == "001")
    text = first.content()
    assert "Refined query" in text and PAYLOAD_SCRIPT in text
    grades = [g.content() for g in first.walk() if "grade" in g.classes()]
    qrels = pd.read_csv(rendered.run_dir / "qrels.csv", dtype={"query_id": str, "doc_id": str})
    judged = qrels[qrels["query_id"] == "001"]
    assert "–" in grades  # an unjudged document
    assert set(grades) - {"–"} <= {str(g) for g in judged["relevance"]}
    labels = [m.content() for m in first.walk() if "mark" in m.classes()]
    assert set(labels) <= {"more", "relevant", "less", "irrelevant", "unsure", "seen"}
    assert labels


def test_query_ids_keep_their_leading_zeros(rendered: Rendered) -> None:
    queries = {
        d.attrs["data-query"] for d in rendered.dom.find_all("details") if "data-query" in d.attrs
    }
    assert "001" in queries


def test_one_swept_parameter_no_heatmap_and_capped_episodes(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path, grid={"beta": [0.5, 0.75, 1.0]})
    html = render_report(run_dir, trials=50, max_episodes=4).read_text("utf-8")
    ids = {n.attrs.get("id") for n in parse(html).walk()}
    assert "sweep" not in ids and "queries" in ids
    assert html.count('<details class="episode"') == 4


def test_run_without_feedback_rounds(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path, rounds=0, policies=("oracle",))
    dom = parse(render_report(run_dir, trials=20).read_text("utf-8"))
    assert "none" in dom.find_all("section", id="verdict")[0].classes()
    assert dom.find_all("table", data_measure="nDCG@10")
    assert not dom.find_all("section", id="queries")
    assert "no feedback round" in summary_table(run_dir, trials=20)


def test_episode_selection_prefers_real_losses() -> None:
    deltas = pd.DataFrame(
        {
            "policy": ["a"] * 6 + ["b"] * 6,
            "query_id": [f"{i:03d}" for i in range(12)],
            "delta": [-0.5, 0.1, 0.2, 0.3, 0.4, 0.5, -0.9, -0.8, -0.7, -0.6, -0.5, 0.1],
        }
    )
    chosen = render_module._selected(deltas, ["a", "b"], limit=8)
    # a has one loss, so its share goes to its largest gains; b fills half with losses.
    assert sorted(chosen[chosen["policy"] == "a"]["delta"]) == [-0.5, 0.3, 0.4, 0.5]
    assert sorted(chosen[chosen["policy"] == "b"]["delta"]) == [-0.9, -0.8, -0.5, 0.1]
    assert list(chosen["delta"]) == sorted(chosen["delta"])


def test_latest_symlink_reports_the_real_run_id(rendered: Rendered, tmp_path: Path) -> None:
    latest = tmp_path / "latest"
    latest.symlink_to(rendered.run_dir)
    assert load_run(latest).path.name == rendered.run_dir.name


def test_render_is_deterministic(rendered: Rendered, tmp_path: Path) -> None:
    out = render_report(rendered.run_dir, trials=TRIALS, out=tmp_path / "again.html")
    assert out.read_text("utf-8") == rendered.html


# --- the write ----------------------------------------------------------------------------


def test_failed_write_leaves_no_partial_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = write_run_dir(tmp_path)
    before = set(os.listdir(run_dir))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(render_module.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        render_report(run_dir, trials=20)
    assert set(os.listdir(run_dir)) == before  # no report.html, no temporary file


def test_failed_render_keeps_the_previous_report(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    report = run_dir / "report.html"
    report.write_text("previous report", "utf-8")
    (run_dir / "per_query.csv").write_text("config_id,policy\nc00,oracle\n", "utf-8")
    with pytest.raises(DataError, match=r"per_query\.csv.*missing column"):
        render_report(run_dir, trials=20)
    assert report.read_text("utf-8") == "previous report"
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize(
    ("remove", "message"),
    [("manifest.json", r"manifest\.json: file not found"), ("configs.csv", r"configs\.csv")],
)
def test_missing_required_file_names_it(tmp_path: Path, remove: str, message: str) -> None:
    run_dir = write_run_dir(tmp_path)
    (run_dir / remove).unlink()
    with pytest.raises(DataError, match=message):
        load_run(run_dir)


def test_unknown_config_in_per_query_is_an_error(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    configs = pd.read_csv(run_dir / "configs.csv")
    configs[configs["config_id"] != "c04"].to_csv(run_dir / "configs.csv", index=False)
    with pytest.raises(DataError, match="c04"):
        load_run(run_dir)


# --- multirun -----------------------------------------------------------------------------


def test_gather_multirun_prefixes_configs_by_job(tmp_path: Path) -> None:
    sweep = write_multirun(tmp_path, jobs=2)
    data = gather_multirun(sweep)
    ids = list(data.configs["config_id"])
    assert ids[:2] == ["j0:c00", "j0:c01"] and "j1:c04" in ids
    assert len(set(data.configs["label"])) == len(ids)  # repeated labels told apart
    assert set(data.per_query["config_id"].astype(str)) == set(ids)
    jobs = [json.loads((sweep / j / "run" / "manifest.json").read_text()) for j in ("0", "1")]
    assert data.manifest["replay"]["replayed"] == sum(m["replay"]["replayed"] for m in jobs)
    assert len(load_episodes(data, "j1:c03")) == 2 * 12
    path = render_report(sweep, trials=20)  # a multirun directory renders directly
    assert path == sweep / "report.html"
    html = path.read_text("utf-8")
    assert "j1:c03" in html and "<script" not in html


def test_multirun_over_query_sets_keeps_queries_apart(tmp_path: Path) -> None:
    sweep = tmp_path / "multirun"
    write_run_dir(tmp_path, run_dir=sweep / "0" / "run", query_set="cranfield")
    write_run_dir(tmp_path, run_dir=sweep / "1" / "run", query_set="cacm", seed=1)
    data = gather_multirun(sweep)
    assert {"j0:001", "j1:001"} <= set(data.queries["query_id"])
    one = data.per_query[data.per_query["config_id"] == "j1:c00"]
    assert set(one["query_id"].astype(str)) <= {f"j1:{i:03d}" for i in range(1, 13)}
    episodes = load_episodes(data, "j1:c02")
    assert ("oracle", "j1:001") in episodes
    marked = episodes[("oracle", "j1:001")]["rounds"][0]["marks"][0]["doc_id"]
    assert marked.startswith("j1:")


def test_gather_multirun_without_runs_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "0").mkdir()
    with pytest.raises(DataError, match="no run directories"):
        gather_multirun(tmp_path)


# --- analysis and terminal ----------------------------------------------------------------


def test_parallel_randomization_matches_serial(tmp_path: Path) -> None:
    data = load_run(write_run_dir(tmp_path, n_queries=8))
    serial = analyze(data, trials=200, workers=1).summary["p_rand"]
    parallel = analyze(data, trials=200, workers=2).summary["p_rand"]
    pd.testing.assert_series_equal(serial, parallel)


def test_terminal_summary_lists_configs_and_means(rendered: Rendered) -> None:
    text = summary_table(rendered.run_dir, trials=TRIALS)
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    for label in configs["label"]:
        assert label in text
    pq = per_query(rendered.run_dir)
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
        & (pq["config_id"] == "c03")
        & (pq["policy"] == "oracle")
        & (pq["round"] == 2)
        & (pq["stage"] == "rerank")
    ]
    line = next(
        ln for ln in text.splitlines() if ln.startswith(configs["label"][3]) and "rerank" in ln
    )
    assert "oracle" in line and f"{sel['value'].mean():.3f}" in line.split()
    assert text.splitlines()[-1].startswith("best: ")
    assert "\x1b" not in text


def test_terminal_summary_shortens_a_sweep(rendered: Rendered) -> None:
    text = summary_table(rendered.run_dir, trials=TRIALS, max_rows=6)
    assert "more rows in report.html" in text
    assert text.count("provider order") == 4  # baselines always shown
