"""The gate never passes on garbage, and it gates what it claims (issues 14.1 and 12.7).

Every case runs ``check`` on a small hand-made run directory (one config, one user, four
queries), so the expected cells, query ids and values are known exactly. Exit 0: no gated
cell failed; 1: a gated cell FAILed, nothing else; 2: the run or baseline is unusable,
said in one line naming the file and the entry at fault.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from evidence_bench.gate import main

Cell = tuple[int, str, str, str]  # round, stage, eval_mode, measure (config c00, oracle)

#: The rerank stage's nDCG@10 in the full mode, per query; the other cells are offsets of it.
RERANK = {"q1": 0.5, "q2": 0.6, "q3": 0.8, "q4": 0.4}
OFFSET = {"initial": -0.2, "control": -0.25, "rerank": 0.0, "expand": 0.05}
MEASURES = ("nDCG@10", "P@10")
MODES = ("full", "frozen")


def cells() -> dict[Cell, dict[str, float]]:
    """Round 0: initial; round 1: initial, control, rerank, expand; × 2 modes × 2 measures
    = 20 cells, 4 of them gated by default (rerank and expand, nDCG@10, round 1)."""
    stages = {0: ("initial",), 1: ("initial", "control", "rerank", "expand")}
    table = {}
    for round_, names in stages.items():
        for stage in names:
            for mode in MODES:
                for measure in MEASURES:
                    shift = OFFSET[stage] - (0.1 if measure == "P@10" else 0.0)
                    table[(round_, stage, mode, measure)] = {
                        q: round(v + shift, 4) for q, v in RERANK.items()
                    }
    return table


def write_run(
    path: Path,
    values: Mapping[Cell, Mapping[str, float]],
    *,
    fixed: Mapping[Cell, bool] | None = None,
    primary: str = "nDCG@10",
    query_set: str = "toy",
) -> Path:
    """The five files the gate reads, as the runner writes them (10 significant digits)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(
        yaml.safe_dump({"experiment": {"name": "toy"}, "eval": {"primary_measure": primary}})
    )
    (path / "configs.csv").write_text("config_id,label\nc00,toy ranker\n")
    manifest = {"query_set": query_set, "experiment": "toy", "package_version": "0.1.0",
                "cassette_manifest_sha256": "abc", "git_commit": "0" * 40}  # fmt: skip
    (path / "manifest.json").write_text(json.dumps(manifest))
    head = ["config_id", "policy", "round", "stage", "eval_mode", "measure"]
    summary = [[*head, "n", "mean", "std", "ci_low", "ci_high", *(["fixed"] if fixed else [])]]
    per_query = [[*head[:2], "query_id", *head[2:], "value"]]
    for (round_, stage, mode, measure), by_query in values.items():
        mean = math.fsum(by_query.values()) / len(by_query)
        row = ["c00", "oracle", str(round_), stage, mode, measure, str(len(by_query))]
        row += [f"{mean:.10g}", "", "", ""]
        if fixed:
            row.append(str(fixed.get((round_, stage, mode, measure), False)))
        summary.append(row)
        for query_id, value in by_query.items():
            per_query.append(
                ["c00", "oracle", query_id, str(round_), stage, mode, measure, f"{value:.10g}"]
            )
    for name, rows in (("summary.csv", summary), ("per_query.csv", per_query)):
        with (path / name).open("w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
    return path


GATED = (1, "rerank", "full", "nDCG@10")


def changed(cell: Cell, **queries: float | None) -> dict[Cell, dict[str, float]]:
    """The toy run with some of ``cell``'s per-query values replaced (None: query gone)."""
    table = cells()
    for query_id, value in queries.items():
        if value is None:
            del table[cell][query_id]
        else:
            table[cell][query_id] = value
    return table


@pytest.fixture
def toy_run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", cells())


@pytest.fixture
def baseline(toy_run: Path, tmp_path: Path) -> Path:
    path = tmp_path / "baseline.yaml"
    assert main([str(toy_run), "--baseline", str(path), "--update"]) == 0
    return path


def check(
    run: Path, baseline: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str, str]:
    code = main([str(run), "--baseline", str(baseline), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- what --update writes -------------------------------------------------------------------


def test_update_gates_the_feedback_stages_primary_measure_with_per_query_values(
    baseline: Path,
) -> None:
    data = yaml.safe_load(baseline.read_text())
    assert data["format"] == 2 and data["query_set"] == "toy"
    assert data["gate"] == {"stages": ["rerank", "expand"], "measures": ["nDCG@10"],
                            "modes": ["full", "frozen"]}  # fmt: skip
    assert len(data["checks"]) == 20
    gated = [e for e in data["checks"] if "queries" in e]
    assert [(e["round"], e["stage"], e["eval_mode"], e["measure"]) for e in gated] == [
        (1, "rerank", "full", "nDCG@10"),
        (1, "rerank", "frozen", "nDCG@10"),
        (1, "expand", "full", "nDCG@10"),
        (1, "expand", "frozen", "nDCG@10"),
    ]
    rerank = gated[0]
    # (0.5 + 0.6 + 0.8 + 0.4) / 4 = 0.575
    assert rerank["n"] == 4 and rerank["mean"] == 0.575
    assert rerank["queries"] == {"q1": 0.5, "q2": 0.6, "q3": 0.8, "q4": 0.4}
    # expand is rerank + 0.05 per query: 0.625
    assert gated[2]["mean"] == 0.625 and gated[2]["queries"]["q3"] == 0.85
    assert oct(baseline.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in baseline.parent.iterdir()) == ["baseline.yaml", "run"]


def test_update_follows_the_runs_primary_measure_and_the_gate_options(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", cells(), primary="P@10")
    path = tmp_path / "b.yaml"
    assert main([str(run), "--baseline", str(path), "--update"]) == 0
    assert yaml.safe_load(path.read_text())["gate"]["measures"] == ["P@10"]
    options = ["--stages", "expand", "--measures", "nDCG@10,P@10", "--modes", "frozen"]
    assert main([str(run), "--baseline", str(path), "--update", *options]) == 0
    data = yaml.safe_load(path.read_text())
    assert data["gate"] == {"stages": ["expand"], "measures": ["nDCG@10", "P@10"],
                            "modes": ["frozen"]}  # fmt: skip
    gated = [(e["stage"], e["eval_mode"], e["measure"]) for e in data["checks"] if "queries" in e]
    assert gated == [("expand", "frozen", "nDCG@10"), ("expand", "frozen", "P@10")]


def test_a_fresh_baseline_passes_its_own_run(
    toy_run: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = check(toy_run, baseline, capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"PASS: no gated check worse than {baseline}",
        "20 checks: 4 gated (4 OK, 0 IMPROVED, 0 FAIL), 16 reported, not gated (0 moved)",
    ]


# --- FAIL: only gated cells, with the queries that moved most --------------------------------


def test_a_fail_lists_the_queries_that_dropped_most(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # q3 0.8 -> 0.2 (-0.6), q2 0.6 -> 0.3 (-0.3), q1 unchanged, q4 0.4 -> 0.45 (up: not listed)
    # mean (0.5 + 0.3 + 0.2 + 0.45) / 4 = 0.3625, delta 0.3625 - 0.575 = -0.2125
    later = write_run(tmp_path / "later", changed(GATED, q2=0.3, q3=0.2, q4=0.45))
    code, out, err = check(later, baseline, capsys)
    assert code == 1
    assert one_line(err) == f"1 gated checks worse than {baseline}"
    lines = out.splitlines()
    assert lines[:2] == [  # the verdict first
        f"FAIL: 1 of 4 gated checks worse than {baseline}",
        "20 checks: 4 gated (3 OK, 0 IMPROVED, 1 FAIL), 16 reported, not gated (0 moved)",
    ]
    assert lines[3].split() == ["FAIL", "c00", "oracle", "1", "rerank", "full", "nDCG@10", "4",
                                "0.5750", "0.3625", "-0.2125"]  # fmt: skip
    assert lines[-2:] == [
        "queries that moved most, per FAIL (query_id: baseline -> run):",
        "  c00 oracle round 1 rerank full nDCG@10: q3: 0.8000 -> 0.2000, q2: 0.6000 -> 0.3000",
    ]


def test_at_most_three_queries_are_listed_largest_drop_first(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # drops: q1 -0.1, q2 -0.4, q3 -0.2, q4 -0.4 (a tie with q2 at 4 decimals: query id order)
    later = write_run(tmp_path / "later", changed(GATED, q1=0.4, q2=0.2, q3=0.6, q4=0.0))
    code, out, _err = check(later, baseline, capsys)
    assert code == 1
    assert "nDCG@10: q2: 0.6000 -> 0.2000, q4: 0.4000 -> 0.0000, q3: 0.8000 -> 0.6000\n" in out


@pytest.mark.parametrize(
    ("queries", "note"),
    [
        # the mean rises to (0.5 + 0.6 + 0.8) / 3 = 0.6333, but it stands on 3 queries, not 4
        ({"q4": None}, "n 4 -> 3; lost query q4"),
        # same n and the same mean, other queries: q4 (0.4) is gone, q5 (0.4) came
        ({"q4": None, "q5": 0.4}, "lost query q4; gained query q5"),
        ({"q5": 0.1}, "n 4 -> 5; gained query q5"),
    ],
)
def test_a_gated_cell_on_other_queries_fails_whatever_its_mean(
    tmp_path: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
    queries: dict[str, float | None],
    note: str,
) -> None:
    later = write_run(tmp_path / "later", changed(GATED, **queries))
    code, out, _err = check(later, baseline, capsys)
    assert code == 1
    first = out.splitlines()[3]
    assert first.startswith("FAIL") and " rerank " in first and first.endswith(note)


def test_cells_that_are_not_gated_are_reported_and_never_fail(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = cells()
    table[(1, "control", "full", "nDCG@10")] = {"q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}
    table[(0, "initial", "full", "nDCG@10")] = {"q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}
    table[(1, "rerank", "full", "P@10")] = {"q1": 0.0, "q2": 0.0, "q3": 0.0}  # n 4 -> 3 too
    code, out, err = check(write_run(tmp_path / "later", table), baseline, capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == [  # without --verbose: no row is a FAIL or IMPROVED
        f"PASS: no gated check worse than {baseline}",
        "20 checks: 4 gated (4 OK, 0 IMPROVED, 0 FAIL), 16 reported, not gated (3 moved)",
        "3 reported checks moved (not gated): --verbose lists them",
    ]
    code, out, err = check(write_run(tmp_path / "later", table), baseline, capsys, "--verbose")
    assert (code, err) == (0, "")
    rows = [line.split()[:8] for line in out.splitlines()[3:6]]
    # initial was 0.3, 0.4, 0.6, 0.2 (mean 0.375); control 0.25 less (0.325); P@10 0.1 less
    assert rows == [
        ["REPORTED", "c00", "oracle", "1", "rerank", "full", "P@10", "4->3"],
        ["REPORTED", "c00", "oracle", "0", "initial", "full", "nDCG@10", "4"],
        ["REPORTED", "c00", "oracle", "1", "control", "full", "nDCG@10", "4"],
    ]
    assert out.splitlines()[3].endswith("not gated; n 4 -> 3")
    assert "queries that moved most" not in out
    assert out.splitlines()[1] == (
        "20 checks: 4 gated (4 OK, 0 IMPROVED, 0 FAIL), 16 reported, not gated (3 moved)"
    )
    assert [line.split()[0] for line in out.splitlines()[6:]] == ["OK"] * 17  # every row


def test_cells_that_cannot_change_in_frozen_mode_are_never_gated(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frozen = (1, "rerank", "frozen", "nDCG@10")
    # q3 0.8 -> 0.1: the mean drops by 0.7 / 4 = 0.175, but the run says it cannot change
    later = write_run(tmp_path / "later", changed(frozen, q3=0.1), fixed={frozen: True})
    code, out, _err = check(later, baseline, capsys, "--verbose")
    assert code == 0
    row = out.splitlines()[3]
    assert row.split()[:11] == ["REPORTED", "c00", "oracle", "1", "rerank", "frozen", "nDCG@10",
                                "4", "0.5750", "0.4000", "-0.1750"]  # fmt: skip
    assert row.endswith("cannot change in frozen mode")
    assert out.splitlines()[1] == (
        "20 checks: 3 gated (3 OK, 0 IMPROVED, 0 FAIL), 17 reported, not gated (1 moved; "
        "1 cannot change in frozen mode)"
    )
    # the same run without the column (missing = False): the cell is gated, and FAILs
    plain = write_run(tmp_path / "plain", changed(frozen, q3=0.1))
    assert check(plain, baseline, capsys)[0] == 1
    # --update keeps no per-query values for it: 3 gated entries, not 4
    path = tmp_path / "b.yaml"
    assert main([str(later), "--baseline", str(path), "--update"]) == 0
    entries = yaml.safe_load(path.read_text())["checks"]
    assert sum("queries" in e for e in entries) == 3


def test_improved_beyond_tolerance_passes_and_says_to_update(
    tmp_path: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    later = write_run(tmp_path / "later", changed(GATED, q4=0.6))  # mean 0.625, +0.05
    code, out, _err = check(later, baseline, capsys)
    assert code == 0
    assert out.splitlines()[3].split()[:1] == ["IMPROVED"]
    assert f"update the baseline on purpose with --update {baseline}" in out


# --- unusable inputs: one line, exit 2 -------------------------------------------------------


def test_a_mean_half_a_unit_from_the_stored_one_passes_its_own_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.05625 is stored as 0.0562 or 0.0563 (4 decimals), exactly the default tolerance
    away: the run the baseline was written from must pass it (float error made it FAIL)."""
    table = cells()
    table[GATED] = dict.fromkeys(table[GATED], 0.05625)
    run = write_run(tmp_path / "run", table)
    path = tmp_path / "baseline.yaml"
    assert main([str(run), "--baseline", str(path), "--update"]) == 0
    stored = next(
        e
        for e in yaml.safe_load(path.read_text())["checks"]
        if e["stage"] == "rerank"
        and e["eval_mode"] == "full"
        and e["measure"] == "nDCG@10"
        and e["round"] == 1
    )
    assert abs(stored["mean"] - 0.05625) == pytest.approx(0.00005)  # on the boundary
    code, out, _err = check(run, path, capsys)
    assert code == 0, out
    assert "4 gated (4 OK, 0 IMPROVED, 0 FAIL)" in out.splitlines()[-1]


def edit_csv(name: str, line: int, column: str, value: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        with (run / name).open(newline="") as handle:
            rows = list(csv.reader(handle))
        rows[line - 1][rows[0].index(column)] = value
        with (run / name).open("w", newline="") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)

    return edit


def replace_file(name: str, text: str | bytes | None) -> Callable[[Path], None]:
    """Overwrite ``name`` with text or bytes; None makes it a directory."""

    def edit(run: Path) -> None:
        target = run / name
        if text is None:
            target.unlink()
            target.mkdir()
        elif isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text)

    return edit


def drop_lines(name: str, keep: Callable[[str], bool]) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        lines = (run / name).read_text().splitlines(keepends=True)
        (run / name).write_text("".join(line for line in lines if keep(line)))

    return edit


def doubled(name: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        (run / name).write_text((run / name).read_text() * 2)

    return edit


def repeat_line(name: str, line: int) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        text = (run / name).read_text()
        (run / name).write_text(text + text.splitlines(keepends=True)[line - 1])

    return edit


def with_fixed(flag: str) -> Callable[[Path], None]:
    """A ``fixed`` column, False but for line 2, which says ``flag``."""

    def edit(run: Path) -> None:
        write_run(run, cells(), fixed={GATED: True})
        edit_csv(SUMMARY, 2, "fixed", flag)(run)

    return edit


def all_means(value: str) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        for line in range(2, 22):
            edit_csv("summary.csv", line, "mean", value)(run)

    return edit


GATED_LINE = "c00,oracle,q4,1,rerank,full,nDCG@10,"
FROZEN_CELLS = [cell for cell in cells() if cell[2] == "frozen"]
SUMMARY = "summary.csv"

RUN_FAULTS = [
    ("all means NaN", all_means("nan"), "summary.csv line 2: mean is NaN or empty", 2),
    ("a gated mean NaN", edit_csv(SUMMARY, 14, "mean", "NaN"),
     "summary.csv line 14: mean is NaN or empty", 2),
    ("an empty mean", edit_csv(SUMMARY, 4, "mean", ""),
     "summary.csv line 4: mean is NaN or empty", 2),
    ("a word for a mean", edit_csv(SUMMARY, 3, "mean", "high"),
     "summary.csv line 3: mean 'high' is not a finite number", 2),
    ("an infinite mean", edit_csv(SUMMARY, 3, "mean", "inf"),
     "summary.csv line 3: mean 'inf' is not a finite number", 2),
    ("a fractional n", edit_csv(SUMMARY, 5, "n", "4.0"),
     "summary.csv line 5: n '4.0' is not a whole number", 2),
    ("n of 0", edit_csv(SUMMARY, 5, "n", "0"), "summary.csv line 5: n is 0", 2),
    ("a word for a round", edit_csv(SUMMARY, 6, "round", "one"),
     "summary.csv line 6: round 'one' is not a whole number", 2),
    ("no stage", edit_csv(SUMMARY, 6, "stage", ""), "summary.csv line 6: stage is empty", 2),
    ("no query id", edit_csv("per_query.csv", 7, "query_id", " "),
     "per_query.csv line 7: query_id is empty", 2),
    ("summary.csv a directory", replace_file(SUMMARY, None),
     "summary.csv: is a directory, not a file", 2),
    ("summary.csv empty", replace_file(SUMMARY, ""), "summary.csv: empty (no header, no rows)", 2),
    ("summary.csv a header only", replace_file(SUMMARY, "config_id,policy,round,stage,"
     "eval_mode,measure,n,mean\n"), "summary.csv: a header and no rows", 2),
    ("summary.csv written twice", doubled(SUMMARY),
     "summary.csv line 22: repeats the header (a file written twice?)", 2),
    ("a repeated cell", repeat_line(SUMMARY, 4),
     "summary.csv line 22: repeats the cell of line 4 (config_id=c00, policy=oracle, round=0, "
     "stage=initial, eval_mode=frozen, measure=nDCG@10)", 2),
    ("no mean column", replace_file(SUMMARY, "config_id,policy,round,stage,eval_mode,measure,n\n"
     "c00,oracle,1,rerank,full,nDCG@10,4\n"), "summary.csv: missing column(s) mean", 2),
    ("a ragged line", replace_file(SUMMARY, "config_id,policy,round,stage,eval_mode,measure,n,"
     "mean\nc00,oracle,1,rerank,full,nDCG@10,4,0.5,extra,fields\n"),
     "summary.csv line 2: 10 fields, the header has 8", 2),
    ("a blank line", lambda run: (run / SUMMARY).write_text((run / SUMMARY).read_text() + "\n"),
     "summary.csv line 22: 0 fields, the header has 11", 2),
    ("a column named twice", replace_file(SUMMARY, "config_id,mean,mean\nc00,1,2\n"),
     "summary.csv: the header names column mean twice", 2),
    ("summary.csv not UTF-8", replace_file(SUMMARY, b"config_id,\xff\xfe\n"),
     "summary.csv: not UTF-8 text (byte 10)", 2),
    ("no summary.csv", lambda run: (run / SUMMARY).unlink(),
     "not a complete run directory (no summary.csv)", 2),
    ("a fixed flag that is not one", with_fixed("maybe"),
     "summary.csv line 2: fixed 'maybe' is not True or False", 2),
    # a damaged run must not take a gated cell out of the gate (here one that got worse)
    ("a cell fixed in full mode", lambda run: write_run(run, changed(GATED, q1=0.0),
     fixed={GATED: True}), "summary.csv line 14: fixed is true in full mode; only a frozen "
     "cell can be", 2),
    ("a NaN per-query value", edit_csv("per_query.csv", 2, "value", "nan"),
     "per_query.csv line 2: value is NaN or empty", 2),
    ("a gated cell's query missing from per_query.csv", drop_lines(
        "per_query.csv", lambda line: not line.startswith(GATED_LINE)),
     "per_query.csv holds 3 values for (config_id=c00, policy=oracle, round=1, stage=rerank, "
     "eval_mode=full, measure=nDCG@10), summary.csv says n=4: the run files disagree", 2),
    ("a gated mean per_query.csv disagrees with", edit_csv(SUMMARY, 14, "mean", "0.5"),
     "per_query.csv: the mean of (config_id=c00, policy=oracle, round=1, stage=rerank, "
     "eval_mode=full, measure=nDCG@10) is 0.575000, summary.csv says 0.500000", 2),
    ("per_query.csv a directory", replace_file("per_query.csv", None),
     "per_query.csv: is a directory, not a file", 2),
    ("manifest.json corrupt", replace_file("manifest.json", '{"query_set": "toy",'),
     "manifest.json: not valid JSON (line 1, column 21: Expecting property name", 2),
    ("manifest.json a list", replace_file("manifest.json", "[]"),
     "manifest.json: not a JSON object", 2),
    ("manifest.json without query_set", replace_file("manifest.json", "{}"),
     "manifest.json: no query_set", 2),
    ("manifest.json a directory", replace_file("manifest.json", None),
     "manifest.json: is a directory, not a file", 2),
    ("configs.csv without labels", replace_file("configs.csv", "config_id\nc00\n"),
     "configs.csv: missing column(s) label", 2),
    ("config.yaml corrupt", replace_file("config.yaml", "eval: [unclosed"),
     "config.yaml: not valid YAML", 2),
    ("an unknown primary measure", replace_file("config.yaml", "eval: {primary_measure: XYZ}"),
     "config.yaml: eval.primary_measure: unknown measure 'XYZ'", 2),
    ("no run directory", lambda run: os.rename(run, run.with_name("gone")),
     "run: not a run directory (no such directory)", 2),
    ("a gated cell that got worse", lambda run: write_run(run, changed(GATED, q1=0.0)),
     "FAIL c00 oracle 1 rerank full nDCG@10 4 0.5750 0.4500 -0.1250", 1),
    ("a control that got worse", lambda run: write_run(run, changed((1, "control", "full",
     "nDCG@10"), q1=0.0)), "REPORTED c00 oracle 1 control full nDCG@10 4 0.3250 0.2625", 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "message", "code"),
    [pytest.param(edit, message, code, id=name) for name, edit, message, code in RUN_FAULTS],
)
def test_run_files_that_cannot_be_compared(
    toy_run: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[Path], None],
    message: str,
    code: int,
) -> None:
    edit(toy_run)
    got, out, err = check(toy_run, baseline, capsys, "--verbose")
    assert got == code
    if code == 2:
        line = one_line(err)
        assert line.startswith("evidence_bench: check: ") and message in line
        assert str(toy_run) in line and out == ""
    else:
        words = message.split()
        assert any(line.split()[: len(words)] == words for line in out.splitlines()), out


def entry(data: dict[str, Any], stage: str = "rerank", mode: str = "full") -> dict[str, Any]:
    """The baseline entry of round 1, ``stage``, ``mode``, nDCG@10."""
    for item in data["checks"]:
        if (item["round"], item["stage"], item["eval_mode"], item["measure"]) == (
            1, stage, mode, "nDCG@10",
        ):  # fmt: skip
            return item  # type: ignore[no-any-return]
    raise AssertionError(stage)


def setting(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.update({key: value})


def in_entry(key: str, value: object, stage: str = "rerank") -> Callable[[dict[str, Any]], None]:
    return lambda data: entry(data, stage).update({key: value})


def without(key: str, stage: str = "rerank") -> Callable[[dict[str, Any]], None]:
    return lambda data: entry(data, stage).pop(key)


def first(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["checks"][0].update({key: value})


def query(query_id: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda data: entry(data)["queries"].update({query_id: value})


def gate(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["gate"].update({key: value})


def everything_but(key: str) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        kept = data[key]
        data.clear()
        data[key] = kept

    return edit


NAN = float("nan")
RERANK_FULL = "config_id=c00, policy=oracle, round=1, stage=rerank, eval_mode=full, measure=nDCG@10"

BASELINE_FAULTS = [
    ("checks: []", setting("checks", []),
     "checks is empty; a baseline that names nothing cannot pass"),
    ("cut short", lambda d: d.update(checks=d["checks"][:12]),
     f"does not cover the gated cell ({RERANK_FULL}) of the run"),
    ("a gated cell left out", lambda d: d["checks"].remove(entry(d, "expand", "frozen")),
     "does not cover the gated cell (config_id=c00, policy=oracle, round=1, stage=expand, "
     "eval_mode=frozen, measure=nDCG@10)"),
    ("no checks", lambda d: d.pop("checks"), "a baseline needs a 'checks' list"),
    ("an entry that is a string", lambda d: d["checks"].insert(3, "c00 rerank 0.5"),
     "checks[3] is a str, not a mapping"),
    ("an entry that is a list", lambda d: d["checks"].insert(0, [1, 2]),
     "checks[0] is a list, not a mapping"),
    ("a NaN mean", in_entry("mean", NAN), "checks[12].mean is NaN"),
    ("a NaN mean not gated", first("mean", NAN), "checks[0].mean is NaN"),
    ("an infinite mean", first("mean", float("inf")), "checks[0].mean is infinite"),
    ("a word for a mean", first("mean", "high"), "checks[0].mean 'high' is not a number"),
    ("a boolean mean", first("mean", True), "checks[0].mean True is not a number"),
    ("a text round", first("round", "0"), "checks[0].round '0' is not a whole number"),
    ("a fractional round", first("round", 0.5), "checks[0].round 0.5 is not a whole number"),
    ("n of 0", first("n", 0), "checks[0].n is 0, below 1"),
    ("no n", lambda d: d["checks"][0].pop("n"), "checks[0] lacks n"),
    ("a NaN tolerance", setting("tolerance", NAN), "tolerance is NaN"),
    ("a negative tolerance", setting("tolerance", -0.1), "tolerance is -0.1, below 0"),
    ("a word for a tolerance", first("tolerance", "loose"),
     "checks[0].tolerance 'loose' is not a number"),
    ("a NaN entry tolerance", in_entry("tolerance", NAN), "checks[12].tolerance is NaN"),
    ("a misspelt key", first("tolerence", 0.1), "checks[0].tolerence is not a key"),
    ("a numeric stage", first("stage", 3), "checks[0].stage 3 is not a name"),
    ("a repeated entry", lambda d: d["checks"].append(dict(d["checks"][1])),
     "checks[20] repeats checks[1]"),
    ("a NaN per-query value", query("q2", NAN), "checks[12].queries['q2'] is NaN"),
    ("a word per query", query("q2", "x"), "checks[12].queries['q2'] 'x' is not a number"),
    ("a query too many", query("q9", 0.575), "checks[12] has n 4 but 5 per-query values"),
    ("per-query values that do not make the mean", in_entry("mean", 0.6),
     "checks[12].mean 0.6 is not the mean of its per-query values (0.5750)"),
    ("a gated entry without per-query values", without("queries"),
     f"checks[12] ({RERANK_FULL}) is gated but keeps no per-query values"),
    ("queries not a mapping", in_entry("queries", [0.5, 0.6]), "checks[12].queries must map"),
    ("a cell the run lacks", first("config_id", "c99"), "config_id=c99"),
    ("a measure the run lacks", first("measure", "P@1000"), "measure=P@1000) is not in the run"),
    ("another query set", setting("query_set", "cacm"),
     "is for query set 'cacm', the run used 'toy'"),
    ("the old format", lambda d: d.pop("format"),
     "an old baseline format (no per-query values, no gate header); rewrite it: "
     "python -m evidence_bench check RUN_DIR --baseline"),
    ("a newer format", setting("format", 3), "format 3 is not 2"),
    ("no gate header", lambda d: d.pop("gate"), "gate must be a mapping"),
    ("a control gated", gate("stages", ["initial"]),
     "gate: 'initial' cannot be a gated stage (valid: rerank, expand)"),
    ("nothing gated", gate("measures", []), "gate measures is empty; nothing could FAIL"),
    ("an unknown gated measure", gate("measures", ["XYZ"]), "unknown measure 'XYZ'"),
    ("a gated measure the run lacks", gate("measures", ["AP"]),
     "the gate names measure 'AP', which the run"),
    ("an unknown gated mode", gate("modes", ["partial"]), "'partial' cannot be a gated mode"),
    ("a gate key misspelt", gate("stage", ["rerank"]), "gate.stage is not a key"),
    ("a top-level key misspelt", setting("tolerence", 0.1),
     "tolerence is not a key of a baseline (valid: format, query_set, experiment,"),
    ("a mapping with no format", everything_but("query_set"),
     "an old baseline format"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "message"),
    [pytest.param(edit, message, id=name) for name, edit, message in BASELINE_FAULTS],
)
def test_baselines_that_cannot_be_compared(
    toy_run: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    data = yaml.safe_load(baseline.read_text())
    edit(data)
    baseline.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = check(toy_run, baseline, capsys)
    line = one_line(err)
    assert (code, out) == (2, "")
    assert line.startswith(f"evidence_bench: check: {baseline}") and message in line


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- just\n- a list\n", "a baseline is a YAML mapping with a 'checks' list"),
        ("checks: [unclosed\n", "not valid YAML at line 2"),
        (b"format: 2\nquery_set: \xff\n", "not UTF-8 text"),
        (None, "is a directory, not a baseline file"),
        ("", "a baseline is a YAML mapping"),
        (
            "format: 2\nquery_set: toy\ntolerance: 0.1\nquery_set: cacm\n",
            "line 4 repeats the key 'query_set' of line 2",
        ),
        ("format: 2\nchecks:\n- {n: 1, mean: 0.5, n: 2}\n", "line 3 repeats the key 'n' of line 3"),
        ("format: 2\n? [a, b]\n: 1\n", "not valid YAML at line 2 (ConstructorError)"),
    ],
)
def test_baseline_files_that_cannot_be_read(
    toy_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str | bytes | None,
    message: str,
) -> None:
    path = tmp_path / "bad.yaml"
    if text is None:
        path.mkdir()
    elif isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    code, _out, err = check(toy_run, path, capsys)
    assert code == 2 and message in one_line(err) and str(path) in err


def test_a_baseline_may_use_yaml_merge_keys(
    toy_run: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An anchor and ``<<:`` (a hand-edited baseline's shorthand) is YAML the safe loader
    reads; the mapping's own keys replace the merged ones, and are no repeated keys."""
    lines = baseline.read_text().splitlines()
    entries = [i for i, line in enumerate(lines) if line.startswith("- {")]
    lines[entries[0]] = lines[entries[0]].replace("- {", "- &first {", 1)
    lines[entries[1]] = lines[entries[1]].replace("- {", "- {<<: *first, ", 1)
    baseline.write_text("\n".join(lines) + "\n")
    code, out, err = check(toy_run, baseline, capsys)
    assert (code, err) == (0, ""), err
    assert "4 gated (4 OK, 0 IMPROVED, 0 FAIL)" in out.splitlines()[-1]


def test_a_missing_baseline_says_how_to_create_it(
    toy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = check(toy_run, tmp_path / "none.yaml", capsys)
    assert code == 2
    assert one_line(err).endswith("none.yaml: no such baseline (create it with --update)")


# --- --update: refuses garbage, never half-writes --------------------------------------------


@pytest.mark.parametrize(
    ("edit", "options", "message"),
    [
        (all_means("nan"), [], "summary.csv line 2: mean is NaN or empty"),
        (edit_csv(SUMMARY, 14, "mean", "nan"), [], "summary.csv line 14: mean is NaN"),
        (edit_csv("per_query.csv", 2, "value", ""), [], "per_query.csv line 2: value is NaN"),
        (lambda run: None, ["--stages", "initial"], "'initial' cannot be a gated stage"),
        (lambda run: None, ["--measures", "nDCG@11"], "the gate names measure 'nDCG@11'"),
        (lambda run: None, ["--measures", "XYZ"], "unknown measure 'XYZ'"),
        (lambda run: None, ["--modes", "residual"], "the gate names mode 'residual'"),
        (lambda run: None, ["--stages", ","], "gate stages is empty"),
        (lambda run: write_run(run, cells(), fixed=dict.fromkeys(FROZEN_CELLS, True)),
         ["--modes", "frozen"], "no cell of the run"),
    ],
)  # fmt: skip
def test_update_refuses_a_run_it_cannot_gate_and_keeps_the_old_baseline(
    toy_run: Path,
    baseline: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[Path], None],
    options: list[str],
    message: str,
) -> None:
    before = baseline.read_bytes()
    edit(toy_run)
    code = main([str(toy_run), "--baseline", str(baseline), "--update", *options])
    _out, err = capsys.readouterr()
    assert code == 2 and message in one_line(err)
    assert baseline.read_bytes() == before
    assert sorted(p.name for p in baseline.parent.iterdir()) == ["baseline.yaml", "run"]


def test_a_failure_while_writing_leaves_the_old_baseline_whole(
    toy_run: Path, baseline: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    before = baseline.read_bytes()
    write_run(toy_run, changed(GATED, q1=0.0))  # a different baseline would be written

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    code = main([str(toy_run), "--baseline", str(baseline), "--update"])
    _out, err = capsys.readouterr()
    assert code == 2
    assert one_line(err) == (
        f"evidence_bench: check: could not write {baseline}: No space left on device; "
        "the file on disk is unchanged"
    )
    assert baseline.read_bytes() == before
    assert sorted(p.name for p in baseline.parent.iterdir()) == ["baseline.yaml", "run"]
    monkeypatch.undo()
    assert main([str(toy_run), "--baseline", str(baseline), "--update"]) == 0
    assert baseline.read_bytes() != before


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_update_to_a_path_that_cannot_hold_a_file(
    toy_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    if where == "a directory":
        target = tmp_path / "dir.yaml"
        target.mkdir()
    else:
        (tmp_path / "plain").write_text("x")
        target = tmp_path / "plain" / "b.yaml"
    code = main([str(toy_run), "--baseline", str(target), "--update"])
    _out, err = capsys.readouterr()
    assert code == 2 and str(target) in one_line(err)


def test_gate_options_go_with_update_only(toy_run: Path, baseline: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(toy_run), "--baseline", str(baseline), "--stages", "rerank"])
    assert exit_.value.code == 2


def test_a_bug_is_exit_2_never_1(
    toy_run: Path, baseline: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    import evidence_bench.gate._compare as compare_module

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(compare_module, "compare", broken)
    code, _out, err = check(toy_run, baseline, capsys)
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "evidence_bench: check: internal error (RuntimeError('a bug')); please report it"
    )
