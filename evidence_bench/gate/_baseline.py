"""The baseline file: what a run is compared with, read strictly and written atomically.

Format 2 (``format: 2``) records, besides provenance, a ``gate`` header saying which cells
can FAIL (feedback stages × measures × eval modes), and one entry per summary cell with its
``n`` and ``mean``; a gated entry also keeps its per-query values (``queries``, rounded to
4 decimals), so a FAIL can name the queries that moved most. A format-1 baseline (no
``format`` key) is refused with the command that rewrites it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evidence_bench._atomic import write_atomic
from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.evaluation.measures import parse_measure
from evidence_bench.gate._run import KEYS, Cell, RunFacts, describe, read_text
from evidence_bench.protocol.stages import EVAL_MODES, PARTNERS

__all__ = [
    "DEFAULT_TOLERANCE",
    "FEEDBACK_STAGES",
    "FORMAT",
    "Baseline",
    "Entry",
    "GateSpec",
    "default_spec",
    "load_baseline",
    "parse_spec",
    "write_baseline",
]

FORMAT = 2
#: Half a unit in the 4th decimal: a mean that rounds to the stored value passes.
DEFAULT_TOLERANCE = 0.00005
#: The stages that rank with the user's feedback; every other stage is a control for one
#: of them (``PARTNERS``), reported but never gated.
FEEDBACK_STAGES: tuple[str, ...] = tuple(dict.fromkeys(PARTNERS.values()))
_DIGITS = 4
#: Each stored per-query value and the stored mean are rounded to 4 decimals, so the mean of
#: the stored values is within two half-units of the stored mean.
_SELF_CONSISTENT = 2 * DEFAULT_TOLERANCE + 1e-9
#: libyaml's parser when PyYAML was built with it (the pure-Python one is far slower)
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: The keys a baseline's top level may have: what write_baseline writes
_TOP_KEYS = (
    "format", "query_set", "experiment", "cassette_manifest_sha256", "package_version",
    "git_commit", "tolerance", "gate", "configs", "checks",
)  # fmt: skip


class _RepeatedKey(yaml.YAMLError):
    """A mapping that names a key twice (PyYAML keeps the last one without a word)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class _StrictLoader(_SAFE_LOADER):  # type: ignore[misc]
    """The safe loader, refusing a key repeated in one mapping: a second ``tolerance`` or
    ``query_set`` would otherwise replace the first silently."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<: *anchor``: its keys are the defaults the mapping's own replace
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                break  # an unhashable key: the safe loader's own error says so
            if key in seen:
                raise _RepeatedKey(
                    f"repeats the key {key!r} of line {seen[key] + 1}", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_LOADER = _StrictLoader

_ENTRY_KEYS = (*KEYS, "n", "mean", "tolerance", "queries")
_HEADER = """\
# The regression gate's baseline: python -m evidence_bench check RUN --baseline THIS_FILE
# Only cells of the `gate` stages, measures and modes can FAIL; every other cell is reported.
# Rewrite it on purpose, from a run you have read, with --update (see README.md).
"""


@dataclass(frozen=True, slots=True)
class GateSpec:
    """Which cells can FAIL: feedback stages × measures × eval modes."""

    stages: tuple[str, ...]
    measures: tuple[str, ...]
    modes: tuple[str, ...]

    def gates(self, cell: Cell) -> bool:
        _config, _policy, _round, stage, mode, measure = cell
        return stage in self.stages and measure in self.measures and mode in self.modes

    def as_dict(self) -> dict[str, list[str]]:
        return {"stages": [*self.stages], "measures": [*self.measures], "modes": [*self.modes]}


@dataclass(frozen=True, slots=True)
class Entry:
    """One baseline cell: the queries behind its mean (``n``), the mean, its tolerance, and
    for a gated cell each query's value."""

    index: int
    cell: Cell
    n: int
    mean: float
    tolerance: float
    queries: Mapping[str, float] | None


@dataclass(frozen=True, slots=True)
class Baseline:
    source: str
    query_set: str
    gate: GateSpec
    entries: tuple[Entry, ...]
    provenance: Mapping[str, Any]


def parse_spec(
    stages: Iterable[str], measures: Iterable[str], modes: Iterable[str], *, where: str
) -> GateSpec:
    """A GateSpec from names, each checked; ``where`` names the option or key at fault."""
    stages, modes = tuple(stages), tuple(modes)
    for name, values, valid in (("stages", stages, FEEDBACK_STAGES), ("modes", modes, EVAL_MODES)):
        if not values:
            raise DataError(f"{where}: gate {name} is empty; nothing could FAIL")
        for value in values:
            if value not in valid:
                raise DataError(
                    f"{where}: {value!r} cannot be a gated {name[:-1]} (valid: {', '.join(valid)})"
                )
    try:
        canonical = tuple(str(parse_measure(name)) for name in measures)
    except ConfigurationError as exc:
        raise DataError(f"{where}: {exc}") from exc
    if not canonical:
        raise DataError(f"{where}: gate measures is empty; nothing could FAIL")
    return GateSpec(
        tuple(dict.fromkeys(stages)), tuple(dict.fromkeys(canonical)), tuple(dict.fromkeys(modes))
    )


def default_spec(run: RunFacts) -> GateSpec:
    """The feedback stages and eval modes the run has, under its ``eval.primary_measure``."""
    stages = {cell[3] for cell in run.cells}
    modes = {cell[4] for cell in run.cells}
    return GateSpec(
        tuple(s for s in FEEDBACK_STAGES if s in stages),
        (run.primary_measure,),
        tuple(m for m in EVAL_MODES if m in modes),
    )


def load_baseline(path: Path) -> Baseline:
    """Read and validate a baseline file; errors name the file and the entry at fault."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a baseline file")
    if not path.is_file():
        raise DataError(f"{path}: no such baseline (create it with --update)")
    try:
        data = yaml.load(read_text(path), Loader=_LOADER)  # a safe loader
    except _RepeatedKey as exc:
        raise DataError(f"{path}: line {exc.problem_mark.line + 1} {exc.problem}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise DataError(f"{path}: not valid YAML{where} ({exc.__class__.__name__})") from exc
    return parse_baseline(data, str(path))


def parse_baseline(data: object, source: str) -> Baseline:
    """Validate a loaded baseline: every field is checked, nothing defaults silently."""
    if not isinstance(data, dict):
        raise DataError(f"{source}: a baseline is a YAML mapping with a 'checks' list")
    if "format" not in data:
        raise DataError(
            f"{source}: an old baseline format (no per-query values, no gate header); "
            f"rewrite it: python -m evidence_bench check RUN_DIR --baseline {source} --update"
        )
    if data["format"] != FORMAT or isinstance(data["format"], bool):
        raise DataError(f"{source}: format {data['format']!r} is not {FORMAT}, the one read here")
    unknown = sorted((str(key) for key in data if key not in _TOP_KEYS), key=str)
    if unknown:
        raise DataError(
            f"{source}: {unknown[0]} is not a key of a baseline (valid: {', '.join(_TOP_KEYS)})"
        )
    if not isinstance(data.get("query_set"), str) or not data["query_set"]:
        raise DataError(f"{source}: query_set must name a query set")
    tolerance = _tolerance(data.get("tolerance", DEFAULT_TOLERANCE), f"{source}: tolerance")
    spec = _spec(data.get("gate"), source)
    checks = data.get("checks")
    if not isinstance(checks, list):
        raise DataError(f"{source}: a baseline needs a 'checks' list")
    if not checks:
        raise DataError(f"{source}: checks is empty; a baseline that names nothing cannot pass")
    entries: list[Entry] = []
    seen: dict[Cell, int] = {}
    for index, raw in enumerate(checks):
        entry = _entry(raw, index, tolerance, f"{source}: checks[{index}]")
        if entry.cell in seen:
            raise DataError(
                f"{source}: checks[{index}] repeats checks[{seen[entry.cell]}] "
                f"({describe(entry.cell)})"
            )
        seen[entry.cell] = index
        entries.append(entry)
    provenance = {k: v for k, v in data.items() if k not in ("checks", "gate", "format")}
    return Baseline(source, data["query_set"], spec, tuple(entries), provenance)


def _spec(raw: object, source: str) -> GateSpec:
    if not isinstance(raw, dict):
        raise DataError(f"{source}: gate must be a mapping of stages, measures and modes")
    lists = {}
    for key in ("stages", "measures", "modes"):
        value = raw.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DataError(f"{source}: gate.{key} must be a list of names")
        lists[key] = value
    unknown = sorted(set(raw) - set(lists), key=str)
    if unknown:
        raise DataError(
            f"{source}: gate.{unknown[0]} is not a key (valid: stages, measures, modes)"
        )
    return parse_spec(lists["stages"], lists["measures"], lists["modes"], where=f"{source}: gate")


def _real(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{where} {value!r} is not a number")
    if math.isnan(value):
        raise DataError(f"{where} is NaN; the gate cannot compare NaN")
    if math.isinf(value):
        raise DataError(f"{where} is infinite")
    return float(value)


def _whole(value: object, where: str, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DataError(f"{where} {value!r} is not a whole number")
    if value < least:
        raise DataError(f"{where} is {value}, below {least}")
    return value


def _tolerance(value: object, where: str) -> float:
    tolerance = _real(value, where)
    if tolerance < 0:
        raise DataError(f"{where} is {tolerance}, below 0")
    return tolerance


def _entry(raw: object, index: int, tolerance: float, where: str) -> Entry:
    if not isinstance(raw, dict):
        raise DataError(f"{where} is a {type(raw).__name__}, not a mapping of {', '.join(KEYS)}")
    missing = [key for key in (*KEYS, "n", "mean") if key not in raw]
    if missing:
        raise DataError(f"{where} lacks {', '.join(missing)}")
    unknown = [str(key) for key in raw if key not in _ENTRY_KEYS]
    if unknown:
        raise DataError(f"{where}.{unknown[0]} is not a key (valid: {', '.join(_ENTRY_KEYS)})")
    for key in ("config_id", "policy", "stage", "eval_mode", "measure"):
        if not isinstance(raw[key], str) or not raw[key]:
            raise DataError(f"{where}.{key} {raw[key]!r} is not a name")
    cell: Cell = (
        raw["config_id"],
        raw["policy"],
        _whole(raw["round"], f"{where}.round", least=0),
        raw["stage"],
        raw["eval_mode"],
        raw["measure"],
    )
    n = _whole(raw["n"], f"{where}.n", least=1)
    mean = _real(raw["mean"], f"{where}.mean")
    if "tolerance" in raw:
        tolerance = _tolerance(raw["tolerance"], f"{where}.tolerance")
    queries = _queries(raw["queries"], n, mean, where) if "queries" in raw else None
    return Entry(index, cell, n, mean, tolerance, queries)


def _queries(raw: object, n: int, mean: float, where: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise DataError(f"{where}.queries must map query_id to value")
    values: dict[str, float] = {}
    for query_id, value in raw.items():
        if isinstance(query_id, bool) or not isinstance(query_id, str | int):
            raise DataError(f"{where}.queries: {query_id!r} is not a query_id")
        values[str(query_id)] = _real(value, f"{where}.queries[{query_id!r}]")
    if len(values) != n:
        raise DataError(f"{where} has n {n} but {len(values)} per-query values")
    own = math.fsum(values.values()) / n
    if abs(own - mean) > _SELF_CONSISTENT:
        raise DataError(f"{where}.mean {mean} is not the mean of its per-query values ({own:.4f})")
    return values


def write_baseline(
    run: RunFacts, path: Path, spec: GateSpec, *, tolerance: float = DEFAULT_TOLERANCE
) -> Baseline:
    """Write every summary cell of ``run`` as the baseline, with per-query values for the
    gated ones; the file is validated before it replaces the old one, atomically."""
    gated = [cell for cell, facts in run.cells.items() if spec.gates(cell) and not facts.fixed]
    check_spec_covers(spec, run, str(path))
    values = run.values(gated)
    data: dict[str, Any] = {
        "format": FORMAT,
        "query_set": run.query_set,
        "experiment": run.manifest.get("experiment"),
        "cassette_manifest_sha256": run.manifest.get("cassette_manifest_sha256"),
        "package_version": run.manifest.get("package_version"),
        "git_commit": run.manifest.get("git_commit"),
        "tolerance": tolerance,
        "gate": spec.as_dict(),
        "configs": dict(run.labels),
        "checks": [
            _row(cell, facts.n, facts.mean, values.get(cell)) for cell, facts in run.cells.items()
        ],
    }
    baseline = parse_baseline(data, str(path))
    text = _HEADER + yaml.safe_dump(data, sort_keys=False, width=140, default_flow_style=None)
    if yaml.load(text, Loader=_LOADER) != data:  # what is read back is what was checked
        raise DataError(f"{path}: the baseline does not read back as written")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a baseline file")
    write_atomic(path, text, parents=True)  # a crash or a full disk leaves the old one whole
    return baseline


def check_spec_covers(spec: GateSpec, run: RunFacts, source: str) -> None:
    """Every stage, measure and mode the gate names exists in the run, and something can
    FAIL: a gate that selects no cell would pass anything."""
    present = {
        "stage": {cell[3] for cell in run.cells},
        "measure": {cell[5] for cell in run.cells},
        "mode": {cell[4] for cell in run.cells},
    }
    for kind, names in (("stage", spec.stages), ("measure", spec.measures), ("mode", spec.modes)):
        for name in names:
            if name not in present[kind]:
                raise DataError(
                    f"{source}: the gate names {kind} {name!r}, which the run {run.path} lacks "
                    f"(it has {', '.join(sorted(present[kind]))})"
                )
    if not any(spec.gates(cell) and not facts.fixed for cell, facts in run.cells.items()):
        raise DataError(
            f"{source}: no cell of the run {run.path} is gated (every gated cell cannot "
            "change in frozen mode); nothing could FAIL"
        )


def _row(cell: Cell, n: int, mean: float, values: Mapping[str, float] | None) -> dict[str, Any]:
    row: dict[str, Any] = dict(zip(KEYS, cell, strict=True))
    row["n"] = n
    row["mean"] = round(mean, _DIGITS)
    if values is not None:
        row["queries"] = {query_id: round(v, _DIGITS) for query_id, v in values.items()}
    return row
