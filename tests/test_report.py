"""The HTML report: escaping of web text, self-containment, numbers checked against pandas
(what feedback did against its control, what the judgments add against shuffled labels, the
change against before), Holm correction, the atomic write, multiruns, and the terminal
summary."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pandas as pd
import pytest
import yaml
from markupsafe import Markup
from report_fixtures import (
    NO_SHUFFLED,
    PAYLOAD_IMG,
    PAYLOAD_SCRIPT,
    write_multirun,
    write_run_dir,
)
from scipy import stats

import evidence_bench.report.page as page_module
import evidence_bench.report.render as render_module
import evidence_bench.report.terminal as terminal_module
from evidence_bench.errors import DataError, WriteError
from evidence_bench.evaluation.statistics import holm
from evidence_bench.report import (
    analyze,
    gather_multirun,
    load_run,
    render_report,
    summary_table,
)
from evidence_bench.runs.data import load_episodes
from tests.conftest import CRANFIELD15, shared_run

TRIALS = 400
ROOT = Path(__file__).resolve().parents[1]
VOID = {"meta", "link", "br", "img", "input", "hr", "col", "source", "wbr", "area", "base"}
MINUS = "\u2212"


@dataclass(repr=False)
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    #: Text and child elements in document order.
    parts: list[str | Node] = field(default_factory=list)

    def __repr__(self) -> str:
        # Short: pytest shows a failing test's arguments, and a page's DOM is megabytes.
        return f"<{self.tag} {self.attrs}: {self.content()[:80]!r}>"

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


@dataclass(repr=False)
class Rendered:
    run_dir: Path
    html: str
    dom: Node

    def __repr__(self) -> str:
        return f"Rendered({self.run_dir})"


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


def test_the_page_environment_escapes_every_value_shown() -> None:
    """The page's environment autoescapes each value shown (Markup alone passes as it is),
    reads ``d.name`` as Jinja2 does (a dict's methods are still its methods) and refuses an
    undefined name."""
    source = "{{ t }}|{{ t }}|{{ d.x }}|{{ d.values is callable }}|{{ n }}|{{ m }}"
    values = {"t": "<b>&'\"", "d": {"x": "<i>", "values": 1}, "n": 3, "m": Markup("<hr>")}
    env = page_module._environment()
    shown = env.from_string(source).render(**values)
    assert shown == "&lt;b&gt;&amp;&#39;&#34;|&lt;b&gt;&amp;&#39;&#34;|&lt;i&gt;|True|3|<hr>"
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


#: Command-line overrides as a user could type them: one carries a payload, one a space.
STAGED_OVERRIDES = ("+experiment=rocchio_sweep", f"experiment.name={PAYLOAD_SCRIPT}", "seed=1 2")


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
    manifest["overrides"] = [*STAGED_OVERRIDES]
    manifest["git_dirty"] = True
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
                # In-page anchors only (the charts are SVG, their fills url(#...)).
                assert value.startswith("#"), (node.tag, name)
    csp = rendered.dom.find_all("meta", http_equiv="Content-Security-Policy")
    assert csp and "default-src 'none'" in csp[0].attrs["content"]
    assert not re.search(r"url\((?!#)", rendered.html)  # no CSS loads either
    assert "@import" not in rendered.html


# --- numbers against an independent pandas computation ------------------------------------

#: Each feedback stage's before and no-feedback control at equal depth (notes: episode.py).
EQUAL_FOOTING = {"rerank": ("initial", "control"), "expand": ("deep_initial", "deep_control")}


def paired(
    pq: pd.DataFrame, config: str, policy: str, round_: int, stage: str, measure: str = "nDCG@10"
) -> pd.DataFrame:
    """before, control and feedback of one comparison, on the queries scored in all three."""
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == measure)
        & (pq["config_id"] == config)
        & (pq["policy"] == policy)
        & (pq["round"] == round_)
    ]
    wide = sel.pivot(index="query_id", columns="stage", values="value")
    before, control = EQUAL_FOOTING[stage]
    out = wide[[before, control, stage]].dropna()
    out.columns = pd.Index(["before", "control", "feedback"])
    return out


def signed(value: float) -> str:
    text = f"{value:+.3f}"
    return (text[1:] if float(text) == 0 else text).replace("-", MINUS)


def t_interval(values: pd.Series) -> tuple[float, float]:
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return values.mean() - half, values.mean() + half


def summary_rows(dom: Node, measure: str = "nDCG@10") -> list[Node]:
    table = dom.find_all("table", data_measure=measure)[0]
    return [r for r in table.find_all("tr") if "data-stage" in r.attrs]


def test_three_numbers_match_per_query_csv(rendered: Rendered) -> None:
    pq = per_query(rendered.run_dir)
    for config, policy, round_, stage in [
        ("c02", "noisy", 1, "rerank"),
        ("c03", "oracle", 2, "expand"),
    ]:
        three = paired(pq, config, policy, round_, stage)
        row = summary_row(
            rendered.dom,
            "nDCG@10",
            data_config=config,
            data_policy=policy,
            data_round=str(round_),
            data_stage=stage,
        )
        assert cell(row, "n").content() == str(len(three))
        for column in ("before", "control", "feedback"):
            assert cell(row, column).content() == f"{three[column].mean():.3f}", column


def test_gain_is_feedback_minus_control_paired_on_query_id(rendered: Rendered) -> None:
    """The skipped expand of c01/noisy/round 2 leaves one query out of all three rankings."""
    pq = per_query(rendered.run_dir)
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
        & (pq["config_id"] == "c01")
        & (pq["policy"] == "noisy")
        & (pq["round"] == 2)
    ]
    three = paired(pq, "c01", "noisy", 2, "expand")
    assert len(three) == sel["query_id"].nunique() - 1
    gains = three["feedback"] - three["control"]
    row = summary_row(
        rendered.dom,
        "nDCG@10",
        data_config="c01",
        data_policy="noisy",
        data_round="2",
        data_stage="expand",
    )
    gain = cell(row, "gain-cell")
    assert float(gain.attrs["data-gain"]) == pytest.approx(gains.mean(), abs=1e-5)
    assert gain.content().split()[0] == signed(gains.mean())
    low, high = t_interval(gains)
    assert f"[{signed(low)}, {signed(high)}]" in gain.content()
    better = int((gains > 1e-9).sum())
    worse = int((gains < -1e-9).sum())
    assert cell(row, "counts").content().split() == [
        str(better),
        str(worse),
        str(len(gains) - better - worse),
    ]
    p_t = next(c for c in row.children if "p" in c.classes())
    expected = stats.ttest_rel(three["feedback"], three["control"]).pvalue
    assert float(p_t.attrs["data-p"]) == pytest.approx(expected, rel=1e-4)


def test_change_against_before_is_at_equal_depth(rendered: Rendered) -> None:
    """Expand's before is deep_initial, not the shorter initial list."""
    pq = per_query(rendered.run_dir)
    three = paired(pq, "c04", "oracle", 1, "expand")
    deep = (three["feedback"] - three["before"]).mean()
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
        & (pq["config_id"] == "c04")
        & (pq["policy"] == "oracle")
        & (pq["round"] == 1)
    ].pivot(index="query_id", columns="stage", values="value")
    shallow = (sel["expand"] - sel["initial"]).mean()
    assert abs(deep - shallow) > 0.005  # the fixture's deep list scores higher
    row = summary_row(
        rendered.dom,
        "nDCG@10",
        data_config="c04",
        data_policy="oracle",
        data_round="1",
        data_stage="expand",
    )
    change = cell(row, "delta-before")
    assert float(change.attrs["data-delta"]) == pytest.approx(deep, abs=1e-5)
    assert change.find_all("span", **{"class": "v"})[0].content() == signed(deep)
    assert cell(row, "before").attrs["data-stage"] == "deep_initial"
    assert cell(row, "control").attrs["data-stage"] == "deep_control"


def test_holm_adjusted_p_at_least_raw(rendered: Rendered) -> None:
    rows = [
        r
        for t in rendered.dom.find_all("table")
        if "summary" in t.classes()
        for r in t.find_all("tr")
        if "data-stage" in r.attrs
    ]
    assert len(rows) > 50
    differ = 0
    for row in rows:
        raw = [float(c.attrs["data-p"]) for c in row.children if "p" in c.classes()]
        assert len(raw) == 2
        holm_cell = cell(row, "p-holm")
        # Holm adjusts the test over the family's common queries (data-p-raw); where the row
        # keeps just those (data-n = n), it is the row's own randomization test.
        common = float(holm_cell.attrs["data-p-raw"])
        assert 0.0 <= common <= float(holm_cell.attrs["data-p"]) <= 1.0
        if holm_cell.attrs["data-n"] == cell(row, "n").content():
            assert common == raw[1]
        else:
            differ += 1
            assert f"n={holm_cell.attrs['data-n']}" in holm_cell.content()
        before_raw = float(cell(row, "delta-before").attrs["data-p-raw"])
        assert 0.0 <= before_raw <= float(cell(row, "p-holm-before").attrs["data-p"]) <= 1.0
    # The fixture's skipped expand (c01, noisy, round 2) takes one query from its family,
    # in each of the five measures' tables.
    assert differ == 5 * (len(pd.read_csv(rendered.run_dir / "configs.csv")) - 1)


def test_holm_family_is_configs_of_one_measure_user_stage_round(rendered: Rendered) -> None:
    table = rendered.dom.find_all("table", data_measure="AP")[0]
    rows = table.find_all("tr", data_policy="oracle", data_round="2", data_stage="rerank")
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    assert len(rows) == len(configs)
    raw = [float(cell(r, "p-holm").attrs["data-p-raw"]) for r in rows]
    shown = [float(cell(r, "p-holm").attrs["data-p"]) for r in rows]
    assert shown == pytest.approx(holm(raw), abs=1e-5)
    # Every member was tested over the same queries: those all configs keep.
    pq = per_query(rendered.run_dir)
    kept = [set(paired(pq, c, "oracle", 2, "rerank", "AP").index) for c in configs["config_id"]]
    assert {cell(r, "p-holm").attrs["data-n"] for r in rows} == {str(len(set.intersection(*kept)))}
    raw_before = [float(cell(r, "delta-before").attrs["data-p-raw"]) for r in rows]
    shown_before = [float(cell(r, "p-holm-before").attrs["data-p"]) for r in rows]
    assert shown_before == pytest.approx(holm(raw_before), abs=1e-5)


def test_significance_mark_follows_adjusted_randomization_p(rendered: Rendered) -> None:
    marked = 0
    for table in rendered.dom.find_all("table"):
        for row in table.find_all("tr"):
            if "data-stage" not in row.attrs:
                continue
            p = float(cell(row, "p-holm").attrs["data-p"])
            star = "★" in cell(row, "gain-cell").content()
            assert star == (p < 0.05)
            marked += star
    assert marked > 0


def test_round_zero_shows_provider_order_and_control(rendered: Rendered) -> None:
    pq = per_query(rendered.run_dir)
    sel = pq[(pq["eval_mode"] == "residual") & (pq["measure"] == "P@10") & (pq["round"] == 0)]
    table = rendered.dom.find_all("table", data_measure="P@10")[0]
    rows = table.find_all("tr", data_config="c03", data_policy="noisy", data_round="0")
    assert len(rows) == 1
    mine = sel[(sel["config_id"] == "c03") & (sel["policy"] == "noisy")]
    for stage, column in (("initial", "before"), ("control", "control")):
        mean = mine[mine["stage"] == stage]["value"].mean()
        assert cell(rows[0], column).content() == f"{mean:.3f}"


def test_summary_says_how_expand_and_control_are_compared(rendered: Rendered) -> None:
    notes = [n for n in rendered.dom.walk() if "equal-depth" in n.classes()]
    assert len(notes) == 5  # one under each measure's table
    text = " ".join(notes[0].content().split())
    assert "equal depth" in text and "deepened with the provider's next results" in text
    assert "expanded list's length" in text and "isolates the scorer switch" in text


# --- what the judgments add, and the change against before -----------------------------------


def judged(pq: pd.DataFrame, config: str, policy: str, round_: int) -> pd.DataFrame:
    """initial, shuffled and rerank of one comparison, on the queries scored in all three."""
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
        & (pq["config_id"] == config)
        & (pq["policy"] == policy)
        & (pq["round"] == round_)
    ]
    wide = sel.pivot(index="query_id", columns="stage", values="value")
    return wide[["initial", "shuffled", "rerank"]].dropna()


def summary_cell(dom: Node, config: str, policy: str, round_: int, stage: str, cls: str) -> Node:
    row = summary_row(
        dom,
        "nDCG@10",
        data_config=config,
        data_policy=policy,
        data_round=str(round_),
        data_stage=stage,
    )
    return cell(row, cls)


@pytest.mark.parametrize(
    ("config", "policy", "round_"), [(*NO_SHUFFLED[:2], NO_SHUFFLED[3]), ("c03", "noisy", 2)]
)
def test_judgments_add_is_rerank_minus_shuffled(
    rendered: Rendered, config: str, policy: str, round_: int
) -> None:
    """Paired on the queries scored in initial, shuffled and rerank: where the fixture lost a
    shuffled ranking, one query fewer than the control comparison."""
    pq = per_query(rendered.run_dir)
    three = judged(pq, config, policy, round_)
    others = paired(pq, config, policy, round_, "rerank")
    lost = (config, policy, round_) == (*NO_SHUFFLED[:2], NO_SHUFFLED[3])
    assert len(three) == len(others) - lost
    added = three["rerank"] - three["shuffled"]
    gain = summary_cell(rendered.dom, config, policy, round_, "rerank", "judgment-cell")
    assert float(gain.attrs["data-gain"]) == pytest.approx(added.mean(), abs=1e-5)
    assert gain.content().split()[0] == signed(added.mean())
    low, high = t_interval(added)
    assert f"[{signed(low)}, {signed(high)}]" in gain.content()
    assert gain.attrs["title"] == f"over {len(three)} queries"
    shuffled = summary_cell(rendered.dom, config, policy, round_, "rerank", "shuffled")
    assert shuffled.content() == f"{three['shuffled'].mean():.3f}"
    assert shuffled.attrs["data-n"] == str(len(three))
    # The comparison against the control keeps its own queries.
    n = summary_cell(rendered.dom, config, policy, round_, "rerank", "n")
    assert n.content() == str(len(others))


def test_judgments_are_holm_corrected_across_configs(rendered: Rendered) -> None:
    table = rendered.dom.find_all("table", data_measure="AP")[0]
    rows = table.find_all("tr", data_policy="noisy", data_round="1", data_stage="rerank")
    assert len(rows) == len(pd.read_csv(rendered.run_dir / "configs.csv"))
    p = [cell(r, "p-holm-judgment") for r in rows]
    raw = [float(c.attrs["data-p-raw"]) for c in p]
    assert [float(c.attrs["data-p"]) for c in p] == pytest.approx(holm(raw), abs=1e-5)
    for row, c in zip(rows, p, strict=True):
        star = "★" in cell(row, "judgment-cell").content()
        assert star == (float(c.attrs["data-p"]) < 0.05)


def test_expand_rows_leave_the_judgment_cells_empty(rendered: Rendered) -> None:
    rows = [r for r in summary_rows(rendered.dom) if r.attrs["data-stage"] == "expand"]
    assert rows
    for row in rows:
        for cls in ("shuffled", "judgment-cell", "p-holm-judgment"):
            assert cell(row, cls).content().strip() == "–", cls


def test_summary_tables_are_rectangular(rendered: Rendered) -> None:
    """Every row spans the header's columns: the judgment group shifts nothing."""
    for table in rendered.dom.find_all("table"):
        if "summary" not in table.classes():
            continue
        # The first header row spans every column: single columns and the groups.
        head = table.find_all("thead")[0].find_all("tr")[0].children
        width = sum(int(c.attrs.get("colspan", "1")) for c in head)
        for body in table.find_all("tbody"):
            covered: list[int] = []  # rows still covered by a cell with a rowspan above
            for row in body.find_all("tr"):
                cells = [c for c in row.children if c.tag in {"td", "th"}]
                spans = sum(int(c.attrs.get("colspan", "1")) for c in cells)
                assert spans + len(covered) == width, row.attrs
                covered = [n - 1 for n in covered if n > 1]
                covered += [int(c.attrs.get("rowspan", "1")) - 1 for c in cells]
                covered = [n for n in covered if n > 0]


def test_summary_explains_the_shuffled_control(rendered: Rendered) -> None:
    notes = [n for n in rendered.dom.walk() if "judgments" in n.classes() and n.tag == "p"]
    assert len(notes) == 5  # one under each measure's table
    text = " ".join(notes[0].content().split())
    assert "gains nothing over shuffled" in text
    assert "pseudo-relevance effect of marking anything" in text


@pytest.mark.parametrize(
    ("config", "policy", "stage"), [("c02", "noisy", "rerank"), ("c04", "oracle", "expand")]
)
def test_change_against_before_as_percentage_and_counts(
    rendered: Rendered, config: str, policy: str, stage: str
) -> None:
    three = paired(per_query(rendered.run_dir), config, policy, 1, stage)
    pct = 100 * (three["feedback"].mean() - three["before"].mean()) / three["before"].mean()
    change = summary_cell(rendered.dom, config, policy, 1, stage, "delta-before")
    assert float(change.attrs["data-pct"]) == pytest.approx(pct, abs=1e-3)
    expected = (f"{pct:+.1f}" if round(pct, 1) else f"{pct:.1f}".lstrip("-")).replace("-", MINUS)
    assert change.find_all("span", **{"class": "pct"})[0].content() == f"({expected}%)"
    diff = three["feedback"] - three["before"]
    better, worse = int((diff > 1e-9).sum()), int((diff < -1e-9).sum())
    counts = summary_cell(rendered.dom, config, policy, 1, stage, "counts-before")
    assert counts.content().split() == [str(better), str(worse), str(len(diff) - better - worse)]


# --- verdict, sweep and episodes --------------------------------------------------------------


def best_by_gain(pq: pd.DataFrame, configs: pd.DataFrame) -> tuple[str, str, dict[str, float]]:
    """The feedback config × stage with the largest mean over users of the round-1 gain."""
    gains: dict[tuple[str, str], dict[str, float]] = {}
    for config in configs[configs["role"] != "baseline"]["config_id"]:
        for stage in ("rerank", "expand"):
            for policy in ("oracle", "noisy"):
                three = paired(pq, config, policy, 1, stage)
                gain = (three["feedback"] - three["control"]).mean()
                gains.setdefault((config, stage), {})[policy] = gain
    (config, stage), by_user = max(gains.items(), key=lambda kv: sum(kv[1].values()) / 2)
    return config, stage, by_user


def test_verdict_answers_from_the_attributable_gain(rendered: Rendered) -> None:
    pq = per_query(rendered.run_dir)
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    config, stage, by_user = best_by_gain(pq, configs)
    label = configs.set_index("config_id").at[config, "label"]
    verdict = rendered.dom.find_all("section", id="verdict")[0]
    text = " ".join(verdict.content().split())
    assert label in text and f"({config}), {stage}" in text
    assert "no-feedback control" in text and "round 1" in text
    items = [n for n in verdict.walk() if n.tag == "li" and "data-gain" in n.attrs]
    assert {i.attrs["data-policy"]: float(i.attrs["data-gain"]) for i in items} == pytest.approx(
        by_user, abs=1e-5
    )
    for policy in ("oracle", "noisy"):
        three = paired(pq, config, policy, 1, stage)
        worse = int((three["feedback"] < three["control"] - 1e-9).sum())
        assert f"{policy} {worse} of {len(three)}" in text
    assert "At round 2" in text  # the last round is shown too


def test_verdict_asks_whether_the_judgments_matter(rendered: Rendered) -> None:
    """For the best setting's rerank at round 1: rerank − shuffled per user, as in the table."""
    pq = per_query(rendered.run_dir)
    config, _, _ = best_by_gain(pq, pd.read_csv(rendered.run_dir / "configs.csv"))
    verdict = rendered.dom.find_all("section", id="verdict")[0]
    assert "Do the judgments matter?" in verdict.content()
    items = [n for n in verdict.walk() if n.tag == "li" and "data-judgment-gain" in n.attrs]
    assert [i.attrs["data-policy"] for i in items] == ["oracle", "noisy"]
    for item in items:
        policy = item.attrs["data-policy"]
        added = judged(pq, config, policy, 1).pipe(lambda t: t["rerank"] - t["shuffled"])
        assert float(item.attrs["data-judgment-gain"]) == pytest.approx(added.mean(), abs=1e-5)
        low, high = t_interval(added)
        text = " ".join(item.content().split())
        assert f"{policy}: {signed(added.mean())} [{signed(low)}, {signed(high)}]" in text
        holm_p = summary_cell(rendered.dom, config, policy, 1, "rerank", "p-holm-judgment")
        assert f"Holm p = {holm_p.content().split()[0]}" in text


def test_sweep_heatmap_shows_the_gain_over_control(rendered: Rendered) -> None:
    pq = per_query(rendered.run_dir)
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    _, stage, _ = best_by_gain(pq, configs)
    sweep = rendered.dom.find_all("section", id="sweep")[0]
    cells = {n.content().strip().rstrip("*") for n in sweep.walk() if n.tag == "text"}
    for config in configs[configs["role"] != "baseline"]["config_id"]:
        for policy in ("oracle", "noisy"):
            three = paired(pq, config, policy, 1, stage)
            gain = (three["feedback"] - three["control"]).mean()
            assert f"{gain:+.3f}".replace("-", MINUS) in cells, (config, policy)
    assert "gain in nDCG@10 over control" in cells


def test_episodes_show_before_control_after_and_the_breakdown(rendered: Rendered) -> None:
    queries = rendered.dom.find_all("section", id="queries")[0]
    config, stage = queries.attrs["data-config"], queries.attrs["data-stage"]
    before, control = EQUAL_FOOTING[stage]
    pq = per_query(rendered.run_dir)
    episodes = {
        (e["policy"], e["query_id"]): e
        for e in map(json.loads, (rendered.run_dir / "episodes.jsonl").read_text().splitlines())
        if e["config_id"] == config
    }
    details = [n for n in queries.walk() if n.tag == "details" and "episode" in n.classes()]
    assert details
    for detail in details[:3]:
        policy, query_id = detail.attrs["data-policy"], detail.attrs["data-query"]
        three = paired(pq, config, policy, 1, stage).loc[query_id]
        nums = next(n for n in detail.walk() if "nums" in n.classes()).content()
        expected = f"{three['before']:.3f} · {three['control']:.3f} → {three['feedback']:.3f}"
        assert nums == expected
        tables = [n for n in detail.walk() if n.tag == "table" and "breakdown" in n.classes()]
        recorded = episodes[(policy, query_id)]["rounds"]
        assert len(tables) == len(recorded)
        for table, round_ in zip(tables, recorded, strict=True):
            rows = [r for r in table.find_all("tr") if "data-doc" in r.attrs]
            assert [r.attrs["data-doc"] for r in rows] == [b["doc_id"] for b in round_["breakdown"]]
            shown = [[c.content() for c in r.children if "f" in c.classes()] for r in rows]
            assert shown == [[f"{b[k]:.3f}" for k in "RFTDS"] for b in round_["breakdown"]]
    assert before and control  # the stages the nums above were read from


def test_breakdown_titles_are_escaped(rendered: Rendered) -> None:
    """A breakdown row names its result by the page's (untrusted) title: shown as text."""
    documents = [
        json.loads(line)
        for line in (rendered.run_dir / "documents.jsonl").read_text("utf-8").splitlines()
    ]
    hostile = {d["doc_id"]: d["title"] for d in documents if "<" in d["title"]}
    rows = [
        r
        for t in rendered.dom.find_all("table")
        if "breakdown" in t.classes()
        for r in t.find_all("tr")
        if r.attrs.get("data-doc") in hostile
    ]
    assert rows
    for row in rows:
        assert hostile[row.attrs["data-doc"]] in row.content()
    assert "<script" not in rendered.html.lower()


def test_old_run_without_controls_says_so(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path)
    pq = per_query(run_dir)
    pq[pq["stage"].isin(["initial", "rerank", "expand"])].to_csv(
        run_dir / "per_query.csv", index=False
    )
    dom = parse(render_report(run_dir, trials=20).read_text("utf-8"))
    verdict = dom.find_all("section", id="verdict")[0]
    assert "none" in verdict.classes()
    assert "no-feedback controls" in " ".join(verdict.content().split())
    assert "without their no-feedback controls" in summary_table(run_dir, trials=20)


def test_run_without_shuffled_shows_no_judgment_columns(tmp_path: Path) -> None:
    """A run from before the shuffled-label control: the table keeps its shape, no verdict
    line asks about judgments, and the terminal shows none."""
    run_dir = write_run_dir(tmp_path, n_queries=6, rounds=1, grid={"beta": [0.5, 1.0]})
    pq = per_query(run_dir)
    pq[pq["stage"] != "shuffled"].to_csv(run_dir / "per_query.csv", index=False)
    html = render_report(run_dir, trials=20).read_text("utf-8")
    dom = parse(html)
    assert "Judgments add" not in html and "Do the judgments matter?" not in html
    assert not [n for n in dom.walk() if "shuffled" in n.classes()]
    test_summary_tables_are_rectangular(Rendered(run_dir, html, dom))
    text = summary_table(run_dir, trials=20)
    assert "judgments add (its rerank" not in text
    assert all(line.endswith("–") for line in text.splitlines()[2:-1])


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


def test_reproduce_line_names_the_runs_overrides(rendered: Rendered) -> None:
    manifest = json.loads((rendered.run_dir / "manifest.json").read_text("utf-8"))
    reproduce = rendered.dom.find_all("p", id="reproduce")[0]
    command = reproduce.find_all("code")[0].content()
    assert command == "python -m evidence_bench run " + " ".join(manifest["overrides"])
    assert manifest["git_dirty"] is False
    assert not [n for n in rendered.dom.walk() if "dirty" in n.classes()]


def test_reproduce_line_quotes_overrides_and_says_the_tree_was_dirty(staged: Node) -> None:
    reproduce = staged.find_all("p", id="reproduce")[0]
    command = reproduce.find_all("code")[0].content()
    assert command.startswith("python -m evidence_bench run ")
    # Escaped into the page, and quoted so the shell reads each override as one argument.
    assert shlex.split(command)[4:] == list(STAGED_OVERRIDES)
    dirty = [n for n in staged.walk() if n.tag == "p" and "dirty" in n.classes()]
    assert len(dirty) == 1 and "uncommitted changes" in dirty[0].content()
    header = staged.find_all("dl", id="header")[0]
    assert "with uncommitted changes" in header.content()


@pytest.mark.parametrize(
    "manifest",
    [{}, {"overrides": None}, {"overrides": "seed=1"}, {"overrides": ["seed=1", 2]}],
)
def test_reproduce_line_without_overrides_names_the_experiment(manifest: dict[str, object]) -> None:
    """A run from before overrides were recorded (or a manifest that holds no list of them)."""
    assert render_module._reproduce(manifest, "rocchio_sweep") == "+experiment=rocchio_sweep"


def test_one_dirty_job_makes_the_multirun_dirty(tmp_path: Path) -> None:
    sweep = write_multirun(tmp_path, jobs=2, n_queries=4, rounds=1)
    assert "git_dirty" not in gather_multirun(sweep).manifest
    manifest_path = sweep / "1" / "run" / "manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    manifest["git_dirty"] = True
    manifest_path.write_text(json.dumps(manifest), "utf-8")
    assert gather_multirun(sweep).manifest["git_dirty"] is True


def test_header_counts_results_without_a_date(rendered: Rendered) -> None:
    manifest = json.loads((rendered.run_dir / "manifest.json").read_text("utf-8"))
    dates = rendered.dom.find_all("dd", id="missing-dates")
    assert dates and dates[0].attrs["data-missing"] == str(manifest["missing_dates"])
    assert f"{manifest['missing_dates']} results had no date" in dates[0].content()


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
    assert "Residual evaluation" in text and "Controls." in text
    charts = [n for n in rendered.dom.walk() if n.tag == "svg"]
    assert len(charts) == 4  # forest, sweep heatmap, sorted deltas, rounds
    ids_in_svg = [n.attrs["id"] for c in charts for n in c.walk() if "id" in n.attrs]
    assert len(ids_in_svg) == len(set(ids_in_svg))  # prefixed per chart: no clashes


def test_charts_are_labelled_and_show_the_reports_numbers(rendered: Rendered) -> None:
    charts = [n for n in rendered.dom.walk() if n.tag == "svg"]
    for chart in charts:
        assert chart.attrs["role"] == "img" and chart.attrs["aria-label"]
        titles = chart.find_all("title")
        assert titles and titles[0].content() == chart.attrs["aria-label"]
    texts = {
        section: [t.content() for c in rendered.dom.find_all("section", id=section)
                  for t in c.find_all("text")]
        for section in ("sweep", "queries")
    }  # fmt: skip
    # The heatmap's outlined best cell: the verdict's gain over the common queries, per user.
    gains = rendered.dom.find_all("ul", **{"class": "verdict-gains"})[0].find_all("li")
    assert gains
    for li in gains:
        shown = signed(float(li.attrs["data-gain"]))
        assert any(t.startswith(shown) for t in texts["sweep"]), shown
        # The per-query chart's title: the best's queries better and worse than the control.
        policy, n = li.attrs["data-policy"], li.attrs["data-n"]
        titled = [t for t in texts["queries"] if t.startswith(f"{policy}: ")]
        assert len(titled) == 1 and titled[0].endswith(f"of {n}"), titled


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
    run_dir = write_run_dir(
        tmp_path, grid={"beta": [0.5, 0.75, 1.0]}, breakdown=False, missing_dates=None
    )
    html = render_report(run_dir, trials=50, max_episodes=4).read_text("utf-8")
    ids = {n.attrs.get("id") for n in parse(html).walk()}
    assert "sweep" not in ids and "queries" in ids
    assert "missing-dates" not in ids  # a run that does not count dates says nothing
    assert html.count('<details class="episode"') == 4
    assert 'class="breakdown"' not in html


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
    run_dir = write_run_dir(tmp_path, n_queries=5, rounds=1)
    before = set(os.listdir(run_dir))

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(WriteError, match=r"could not write .*report\.html: disk full"):
        render_report(run_dir, trials=20)  # one line naming it, not the OSError
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


@pytest.mark.parametrize("column", ["config_id", "query_id", "stage"])
def test_a_score_without_a_key_is_refused_at_load(tmp_path: Path, column: str) -> None:
    """An empty key cell (a hand-edited per_query.csv) is one line naming the file and the
    key, before any reader has to guess where the row belongs."""
    run_dir = write_run_dir(tmp_path)
    scores = pd.read_csv(run_dir / "per_query.csv", dtype=str)
    scores.loc[3, column] = None
    scores.to_csv(run_dir / "per_query.csv", index=False)
    with pytest.raises(DataError, match=rf"per_query\.csv: a row has no {column}$"):
        load_run(run_dir)


# --- multirun -----------------------------------------------------------------------------


def test_gather_multirun_prefixes_configs_by_job(tmp_path: Path) -> None:
    sweep = write_multirun(tmp_path, jobs=2, n_queries=6)
    data = gather_multirun(sweep)
    ids = list(data.configs["config_id"])
    assert ids[:2] == ["j0:c00", "j0:c01"] and "j1:c04" in ids
    assert len(set(data.configs["label"])) == len(ids)  # repeated labels told apart
    assert set(data.per_query["config_id"].astype(str)) == set(ids)
    jobs = [json.loads((sweep / j / "run" / "manifest.json").read_text()) for j in ("0", "1")]
    assert data.manifest["replay"]["replayed"] == sum(m["replay"]["replayed"] for m in jobs)
    assert len(load_episodes(data, "j1:c03")) == 2 * 6
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
    first_round = episodes[("oracle", "j1:001")]["rounds"][0]
    assert first_round["marks"][0]["doc_id"].startswith("j1:")
    assert all(row["doc_id"].startswith("j1:") for row in first_round["breakdown"])


def test_gather_multirun_without_runs_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "0").mkdir()
    with pytest.raises(DataError, match="no run directories"):
        gather_multirun(tmp_path)


# --- analysis and terminal ----------------------------------------------------------------


#: The p-values of the summary that derive from the randomization's signs (and Holm's of them).
P_COLUMNS = ["p_rand", "p_rand_common", "p_rand_before", "judgment_p_rand", "p_holm"]
#: :func:`_p_values` as a script for another process: it imports what the report's analysis
#: needs and nothing of the tests (test_report's own imports cost ~2.5 s of CPU more).
P_VALUES_SCRIPT = (
    "import json, sys; from pathlib import Path; "
    "from evidence_bench.report import analyze, load_run; "
    "summary = analyze(load_run(Path(sys.argv[1])), trials=300).summary; "
    "print(json.dumps(summary[json.loads(sys.argv[2])].fillna(-1.0).to_numpy().tolist()))"
)


def _p_values(run_dir: Path) -> list[list[float]]:
    summary = analyze(load_run(run_dir), trials=300).summary
    return summary[P_COLUMNS].fillna(-1.0).to_numpy().tolist()  # type: ignore[no-any-return]


def test_randomization_follows_the_runs_seed(tmp_path: Path) -> None:
    """The signs derive from config.yaml's ``seed`` (and the user): the same seed gives the
    same p-values in another process; another seed resamples them, over the same scores."""
    run_dir = write_run_dir(tmp_path, n_queries=8)
    here = _p_values(run_dir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env["PYTHONHASHSEED"] = "12345"  # another process, with another str hash
    other = subprocess.run(
        [sys.executable, "-c", P_VALUES_SCRIPT, str(run_dir), json.dumps(P_COLUMNS)],
        capture_output=True, text=True, check=True, env=env, timeout=300,
    )  # fmt: skip
    assert json.loads(other.stdout.strip().splitlines()[-1]) == here
    config_path = run_dir / "config.yaml"
    config = yaml.safe_load(config_path.read_text("utf-8"))
    assert config["seed"] == 0
    config["seed"] = 1
    config_path.write_text(yaml.safe_dump(config), "utf-8")
    resampled = _p_values(run_dir)
    changed = sum(
        a != b
        for row_a, row_b in zip(here, resampled, strict=True)
        for a, b in zip(row_a, row_b, strict=True)
    )
    assert changed > len(here)  # most tests draw other signs
    data = load_run(run_dir)
    assert data.settings.seed == 1
    html = render_report(data, trials=300).read_text("utf-8")
    assert "derive from the run's seed (1)" in " ".join(html.split())


def test_a_tests_p_does_not_depend_on_the_other_configs(tmp_path: Path) -> None:
    """Signs are drawn per (seed, user, n), not per position in the run: dropping a config
    leaves every other config's own randomization p as it was (same trials)."""
    run_dir = write_run_dir(tmp_path, n_queries=8)
    full = analyze(load_run(run_dir), trials=1000).summary
    pq = per_query(run_dir)
    pq[pq["config_id"] != "c02"].to_csv(run_dir / "per_query.csv", index=False)
    fewer = analyze(load_run(run_dir), trials=1000).summary
    keys = ["config_id", "policy", "round", "stage", "measure"]
    both = full.merge(fewer, on=keys, suffixes=("", "_fewer"))
    assert len(both) == len(fewer) and len(fewer) < len(full)
    assert list(both["p_rand"]) == list(both["p_rand_fewer"])
    assert list(both["judgment_p_rand"].fillna(-1)) == list(
        both["judgment_p_rand_fewer"].fillna(-1)
    )


def test_a_single_query_has_no_interval(tmp_path: Path) -> None:
    """Three queries, two rounds: at round 2 the fixture leaves one query per comparison
    (the others have nothing relevant left unseen), so no CI and no t-test: "–"."""
    run_dir = write_run_dir(tmp_path, n_queries=3)
    dom = parse(render_report(run_dir, trials=50).read_text("utf-8"))
    rows = [r for r in summary_rows(dom) if r.attrs["data-round"] == "2"]
    assert rows
    for row in rows:
        assert cell(row, "n").content() == "1"
        assert cell(row, "gain-cell").find_all("span", **{"class": "ci"})[0].content() == "–"
        p_t = next(c for c in row.children if "p" in c.classes())
        if float(cell(row, "gain-cell").attrs["data-gain"]) == 0:  # the baseline: no change
            assert p_t.content() == "1.000"
        else:  # t has no degrees of freedom
            assert p_t.content() == "–" and p_t.attrs["data-p"] == ""
        # The randomization test's exact answer for one pair: both signs are as extreme.
        assert float(cell(row, "p-holm").attrs["data-p-raw"]) == 1.0


def test_fixed_cells_are_left_out_of_tests_and_holm(tmp_path: Path) -> None:
    """summary.csv's ``fixed`` (a frozen-mode cell that cannot change): no test, no place
    in its Holm family, and the report says why."""
    run_dir = write_run_dir(tmp_path)
    summary = pd.read_csv(run_dir / "summary.csv", dtype={"config_id": str})
    summary["fixed"] = (
        (summary["config_id"] == "c03")
        & (summary["round"] == 1)
        & (summary["eval_mode"] == "residual")
    )
    summary.to_csv(run_dir / "summary.csv", index=False)
    dom = parse(render_report(run_dir, trials=50).read_text("utf-8"))
    table = dom.find_all("table", data_measure="AP")[0]
    rows = table.find_all("tr", data_policy="oracle", data_round="1", data_stage="rerank")
    fixed = [r for r in rows if r.attrs["data-config"] == "c03"]
    others = [r for r in rows if r.attrs["data-config"] != "c03"]
    assert len(fixed) == 1 and len(others) == 4
    # one cell in place of the gain and every test: a gain of 0 here would be no evidence
    assert cell(fixed[0], "gain-cell").content() == "cannot change in residual mode"
    assert not [c for c in fixed[0].children if {"p", "p-holm"} & c.classes()]
    raw = [float(cell(r, "p-holm").attrs["data-p-raw"]) for r in others]
    assert [float(cell(r, "p-holm").attrs["data-p"]) for r in others] == pytest.approx(
        holm(raw), abs=1e-5
    )  # a family of the four configs that can change
    analysis = analyze(load_run(run_dir), trials=50)
    row = analysis.summary[
        (analysis.summary["config_id"] == "c03") & (analysis.summary["round"] == 1)
    ]
    assert row["fixed"].all() and not row["significant"].any()
    assert row["p_holm"].isna().all() and row["p_rand"].isna().all()


def test_report_says_how_many_trials_and_why(rendered: Rendered) -> None:
    text = " ".join(rendered.dom.find_all("section", id="data")[0].content().split())
    configs = len(pd.read_csv(rendered.run_dir / "configs.csv"))
    trials = max(TRIALS, 100 * configs)  # at least 100 per configuration of a family
    assert f"use {trials} trials" in text
    assert f"largest Holm family ({configs})" in text
    assert f"{configs}/({trials} + 1), is below 0.01" in text
    assert "Smucker, Allan & Carterette 2007" in text and "Holm 1979" in text


def test_terminal_summary_shows_before_control_feedback_and_gain(rendered: Rendered) -> None:
    text = summary_table(rendered.run_dir, trials=TRIALS)
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    for label in configs["label"]:
        assert label in text
    assert "round 1" in text.splitlines()[0]
    three = paired(per_query(rendered.run_dir), "c03", "oracle", 1, "rerank")
    gains = three["feedback"] - three["control"]
    low, high = t_interval(gains)
    line = next(
        ln
        for ln in text.splitlines()
        if ln.startswith(configs["label"][3]) and "oracle" in ln and "rerank" in ln
    )
    cells = line.split()
    for column in ("before", "control", "feedback"):
        assert f"{three[column].mean():.3f}" in cells, column
    ascii_signed = [signed(v).replace(MINUS, "-") for v in (gains.mean(), low, high)]
    assert f"{ascii_signed[0]} [{ascii_signed[1]}, {ascii_signed[2]}]" in line
    # The compact judgments column: rerank − shuffled, on its own queries.
    added = judged(per_query(rendered.run_dir), "c03", "oracle", 1)
    judgment = signed((added["rerank"] - added["shuffled"]).mean()).replace(MINUS, "-")
    assert re.search(rf" {re.escape(judgment)}( \*)?$", line), line
    expand = next(
        ln
        for ln in text.splitlines()
        if ln.startswith(configs["label"][3]) and "oracle" in ln and "expand" in ln
    )
    assert expand.endswith(" –")
    assert "judgments add" in text.splitlines()[1]
    assert text.splitlines()[-2].startswith("best: ")
    assert text.splitlines()[-1].startswith("judgments add (its rerank − shuffled): ")
    assert "\x1b" not in text


def test_terminal_summary_shortens_a_sweep(rendered: Rendered) -> None:
    text = summary_table(rendered.run_dir, trials=TRIALS, max_rows=6)
    assert "more rows in report.html" in text
    assert text.count("provider order") == 4  # baselines always shown
    assert len(text.splitlines()) <= 1 + 1 + 6 + 3


def test_terminal_labels_wrap_between_words_and_are_never_cut() -> None:
    label = "tfidf_rocchio+boost alpha=0.5 beta=1.5 gamma=0.15 stemmer=english"
    lines = terminal_module._wrapped(label, 30)
    assert lines == ["tfidf_rocchio+boost alpha=0.5", "beta=1.5 gamma=0.15", "stemmer=english"]
    assert " ".join(lines) == label
    assert terminal_module._wrapped("a\x1b[31mb", 30) == ["a?[31mb"]


def test_terminal_table_shows_each_label_whole(rendered: Rendered) -> None:
    """A label longer than its column goes on the next lines, under itself (it lost its
    middle: ``tfidf_rocchio+…st``, ``vector_rocchio…ta=0.75``)."""
    text = summary_table(rendered.run_dir, trials=TRIALS)
    assert "…" not in text
    rows = text.splitlines()[2:]
    width = rows[0].index("oracle") if "oracle" in rows[0] else None
    labels, current = [], []
    for row in rows:
        if row.startswith(("best:", "judgments add", "...")) or not row.strip():
            break
        head, rest = row[:width].rstrip(), row[width:].strip()
        if rest and current:
            labels.append(" ".join(current))
            current = []
        current.append(head)
    labels.append(" ".join(current))
    configs = pd.read_csv(rendered.run_dir / "configs.csv")
    assert set(labels) <= set(configs["label"]) and labels


# --- a real run: comparisons across configs use the queries all of them keep ---------------


@pytest.fixture(scope="module")
def cranfield15(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """15 Cranfield queries, four swept configs, two rounds: under residual evaluation the
    configs keep different queries in round 2 (each exhausted others in round 1). The run is
    test_comparisons.py's too (made once); the report is written beside it."""
    run_dir = shared_run(tmp_path_factory, "cranfield15", CRANFIELD15)
    out = tmp_path_factory.mktemp("cranfield15") / "report.html"
    html = render_report(run_dir, trials=TRIALS, out=out).read_text("utf-8")
    return Rendered(run_dir, html, parse(html))


def kept_by_all(pq: pd.DataFrame, policy: str, round_: int, stage: str) -> set[str]:
    """The queries every config scored in before, control and ``stage``: set intersection."""
    configs = sorted(pq["config_id"].unique())
    sets = [set(paired(pq, c, policy, round_, stage).index) for c in configs]
    return set.intersection(*sets)


def test_real_run_holm_cells_name_the_common_queries(cranfield15: Rendered) -> None:
    pq = per_query(cranfield15.run_dir)
    manifest = json.loads((cranfield15.run_dir / "manifest.json").read_text("utf-8"))
    assert manifest["seeds"]["randomization"].startswith(
        'sha256(json.dumps([seed, "randomization", policy, n]))'
    )
    shown = 0
    for policy in ("oracle", "noisy"):
        common = kept_by_all(pq, policy, 2, "rerank")
        rows = summary_rows(cranfield15.dom)
        family = [
            r
            for r in rows
            if (r.attrs["data-policy"], r.attrs["data-round"], r.attrs["data-stage"])
            == (policy, "2", "rerank")
        ]
        assert len(family) == 4
        for row in family:
            holm_cell = cell(row, "p-holm")
            assert holm_cell.attrs["data-n"] == str(len(common))
            own = int(cell(row, "n").content())
            assert own >= len(common)
            if own > len(common):
                shown += 1
                assert f"n={len(common)}" in holm_cell.content()
        raw = [float(cell(r, "p-holm").attrs["data-p-raw"]) for r in family]
        adjusted = [float(cell(r, "p-holm").attrs["data-p"]) for r in family]
        assert adjusted == pytest.approx(holm(raw), abs=1e-5)
    assert shown > 0  # some config keeps more queries than all four share


def test_real_run_best_sweep_and_rounds_use_the_common_queries(cranfield15: Rendered) -> None:
    """The best setting, the sweep's cells and the rounds chart at round 2, where the
    configs' query sets differ, against set intersections and scipy."""
    from evidence_bench.report import tables

    pq = per_query(cranfield15.run_dir)
    data = load_run(cranfield15.run_dir)
    summary = analyze(data, trials=TRIALS).summary
    late = summary[summary["round"] == 2]
    best = tables._best(data, late)
    assert best is not None and best.round == 2
    configs = sorted(pq["config_id"].unique())
    expected: dict[tuple[str, str], float] = {}
    gains: dict[tuple[str, str, str], pd.Series] = {}
    for stage in ("rerank", "expand"):
        for policy in ("oracle", "noisy"):
            common = sorted(kept_by_all(pq, policy, 2, stage))
            for config in configs:
                three = paired(pq, config, policy, 2, stage).loc[common]
                gains[(config, stage, policy)] = three["feedback"] - three["control"]
        for config in configs:
            expected[(config, stage)] = (
                gains[(config, stage, "oracle")].mean() + gains[(config, stage, "noisy")].mean()
            ) / 2
    assert (best.config_id, best.stage) == max(expected, key=lambda k: expected[k])
    assert best.candidates == len(configs) * 2 * 2  # configs × stages × users
    for row in best.rows.to_dict("records"):
        mine = gains[(best.config_id, best.stage, row["policy"])]
        assert row["n_common"] == len(mine) <= row["n"]
        assert row["gain_common"] == pytest.approx(mine.mean())
        # Simultaneous over the 16 candidates: scipy's t interval at 1 − 0.05/16.
        low, high = stats.t.interval(
            1 - 0.05 / best.candidates, len(mine) - 1, loc=mine.mean(), scale=stats.sem(mine)
        )
        assert (row["best_ci_low"], row["best_ci_high"]) == pytest.approx((low, high))
        plain = t_interval(mine)
        assert row["best_ci_low"] < plain[0] and row["best_ci_high"] > plain[1]
    table = tables.sweep_table(data, summary, best)
    assert table is not None
    for row in table.to_dict("records"):
        mine = gains[(row["config_id"], best.stage, row["policy"])]
        assert row["n_common"] == len(mine)
        assert row["gain_common"] == pytest.approx(mine.mean())
    # The rounds chart's lines over two configs whose round-2 sets differ.
    sizes = {c: len(paired(pq, c, "oracle", 2, "rerank")) for c in configs}
    a, b = min(sizes, key=sizes.__getitem__), max(sizes, key=sizes.__getitem__)
    assert sizes[a] < sizes[b]
    means = tables.rounds_means(data, [a, b], "rerank")
    round2 = means[(means["round"] == 2) & (means["policy"] == "oracle")]
    shared = set(paired(pq, a, "oracle", 2, "rerank").index) & set(
        paired(pq, b, "oracle", 2, "rerank").index
    )
    assert set(round2["n"]) == {len(shared)}
    mine = paired(pq, b, "oracle", 2, "rerank").loc[sorted(shared)]
    line = round2[(round2["config_id"] == b) & (round2["stage"] == "rerank")]
    assert float(line["mean"].iloc[0]) == pytest.approx(mine["feedback"].mean())


def test_real_run_sweep_and_rounds_say_n(cranfield15: Rendered) -> None:
    pq = per_query(cranfield15.run_dir)
    sweep = cranfield15.dom.find_all("section", id="sweep")[0]
    stage = cranfield15.dom.find_all("section", id="queries")[0].attrs["data-stage"]
    titles = [n.content() for n in sweep.walk() if n.tag == "text"]
    for policy in ("oracle", "noisy"):
        n = len(kept_by_all(pq, policy, 1, stage))
        assert any(t.startswith(policy) and t.endswith(f"(n = {n})") for t in titles), titles
    note = cranfield15.dom.find_all("p", **{"class": "note rounds-n"})[0]
    text = " ".join(note.content().split())
    config = cranfield15.dom.find_all("section", id="queries")[0].attrs["data-config"]
    start = pq[
        (pq["config_id"] == config)
        & (pq["policy"] == "oracle")
        & (pq["round"] == 0)
        & (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
    ]
    n0 = len(set(start[start["stage"] == "initial"]["query_id"]))
    # Only the best is drawn (the run has no baseline config), so its own queries count.
    own = len(paired(pq, config, "oracle", 2, stage))
    assert f"oracle: n = {n0} at round 0" in text and f"n = {own} at round 2" in text


def test_terminal_summary_lists_many_users_a_line_each() -> None:
    """Three users share the ``best:`` line; a validity run's 21 (users × seeds × budgets)
    get a line each, the first eight shown and the rest counted."""
    few = terminal_module._per_user("best: x: ", ["a +0.1", "b +0.2", "c +0.3"])
    assert few == ["best: x: a +0.1; b +0.2; c +0.3"]
    many = terminal_module._per_user("best: x: ", [f"u{i} +0.{i}" for i in range(21)])
    assert many[0] == "best: x:"
    assert many[1:9] == [f"  u{i} +0.{i}" for i in range(8)]
    assert many[9:] == ["  ... 13 more users in report.html"]
