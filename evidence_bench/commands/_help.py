"""``run --help`` and ``record --help``: the experiments to choose from, or one experiment's
description and main knobs with their values and their help from the schema's ``#:``
comments, instead of Hydra's page of every config group.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
import typing
from collections.abc import Mapping
from typing import Any

from evidence_bench._doc_comments import field_comments
from evidence_bench.commands._common import PROG, fail

__all__ = ["KNOBS", "RECORD_KNOBS", "asks_for_help", "experiment_help", "print_help"]

#: The knobs ``run --help +experiment=NAME`` shows: what an experiment is mostly varied by.
KNOBS = (
    "experiment.queries", "experiment.rounds", "experiment.depth", "experiment.grid",
    "query_set.name", "ranker.name", "ranker.alpha", "ranker.beta", "ranker.gamma",
    "refiner.name", "policies", "eval.primary_measure", "seed", "workers", "runs_dir",
)  # fmt: skip
#: ... and ``record --help +experiment=NAME`` besides them.
RECORD_KNOBS = ("provider", "record_rounds", "record_deep", "record_searches")

_HELP_FLAGS = ("-h", "--help")
_EXPERIMENT = re.compile(r"^\+{0,2}experiment=(?P<name>.*)$")


def asks_for_help(argv: list[str]) -> bool:
    return any(arg in _HELP_FLAGS for arg in argv)


def print_help(command: str, argv: list[str], config_dir: str | None) -> None:
    """What ``COMMAND --help [+experiment=NAME] [overrides]`` prints; exit 0 (1 when the
    experiment does not compose, with that one line)."""
    from evidence_bench.commands import experiment_list
    from evidence_bench.errors import EvidenceBenchError

    rest = [arg for arg in argv if arg not in _HELP_FLAGS]
    chosen = [m["name"] for m in map(_EXPERIMENT.match, rest) if m]
    try:
        if chosen:
            print(experiment_help(command, chosen[-1], rest, config_dir), end="")
        else:
            print(_command_usage(command) + "\n" + experiment_list(config_dir), end="")
    except EvidenceBenchError as exc:
        fail(str(exc), 2)
    raise SystemExit(0)


def _command_usage(command: str) -> str:
    record = (
        "Records the answers the experiment's episodes need, one cassette per query\n"
        "(provider=simulator: a simulator on 127.0.0.1; provider=brave_live: Brave), into\n"
        "query_set.cassettes while it holds none; else into a new directory,\n"
        "recordings/<query set>/<time>, leaving them as they are (--force: into them).\n"
        if command == "record"
        else "Replays the experiment's episodes from the cassettes, simulates the users and\n"
        "writes a run directory with report.html in it.\n"
    )
    return (
        f"usage: {PROG} {command} +experiment=NAME [overrides]"
        f"{' [--force]' if command == 'record' else ''} [--multirun] [--config-dir DIR]\n\n"
        f"{record}"
        f"{PROG} {command} --help +experiment=NAME: that experiment's description and "
        "main knobs\n"
    )


def experiment_help(
    command: str, name: str, overrides: list[str], config_dir: str | None = None
) -> str:
    """The experiment ``name`` as ``overrides`` compose it: its description, its file and
    its main knobs with their values."""
    from evidence_bench.commands._hydra import one_line
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.catalog import experiments, shown
    from evidence_bench.experiment.config import check_config, compose

    try:
        cfg, _text = compose(
            [a for a in overrides if not a.lstrip("+~").startswith("hydra")], config_dir
        )
    except Exception as exc:
        fail(one_line(exc))
    try:
        check_config(cfg)  # the keys the schemas let through (a user's part takes its own)
    except EvidenceBenchError as exc:
        fail(str(exc))
    path = next((e.path for e in experiments(config_dir) if e.name == name), None)
    experiment = cfg.get("experiment") or {}
    description = experiment.get("description") or "(no description: add experiment.description)"
    knobs = _knobs(cfg) + (RECORD_KNOBS if command == "record" else ())
    helps = _field_help()
    own = "a key of the ranker's own, passed to its _target_"
    rows = [(f"{key}={_shown(_lookup(cfg, key))}", helps.get(key, own)) for key in knobs]
    lines = [
        f"usage: {PROG} {command} +experiment={name} [overrides]"
        + (" [--force]" if command == "record" else ""),
        "",
        *textwrap.wrap(f"{name}: {description}", _WIDTH),
        *([f"({shown(path)})"] if path else []),
        "",
        "main knobs (override as key=value; key=a,b --multirun sweeps them):",
        *(line for row, text in rows for line in _knob(row, text)),
        "",
        f"every key and value: {PROG} {command} +experiment={name} --cfg job",
    ]
    return "\n".join(lines) + "\n"


def _knobs(cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """:data:`KNOBS`; for a ranker of the user's (``ranker._target_``), its target and its own
    keys in place of Rocchio's weights."""
    from evidence_bench.experiment.config import RankerConf

    ranker = cfg.get("ranker") or {}
    if not ranker.get("_target_"):
        return KNOBS
    schema = {spec.name for spec in dataclasses.fields(RankerConf)}
    own = tuple(f"ranker.{key}" for key in ranker if key not in schema)
    at = KNOBS.index("ranker.name")
    rocchio = ("ranker.name", "ranker.alpha", "ranker.beta", "ranker.gamma")
    return (*KNOBS[:at], "ranker._target_", *own, *(k for k in KNOBS[at:] if k not in rocchio))


#: Where a knob's help starts, and the width it wraps to.
_HELP_COLUMN, _WIDTH = 32, 100


def _knob(row: str, text: str) -> list[str]:
    """``  key=value  help``, the help wrapped; on the next lines when ``row`` is long."""
    indent = " " * _HELP_COLUMN
    first = f"  {row}".ljust(_HELP_COLUMN)
    if len(first) > _HELP_COLUMN:
        return [
            first.rstrip(),
            *textwrap.wrap(text, _WIDTH, initial_indent=indent, subsequent_indent=indent),
        ]
    return textwrap.wrap(text, _WIDTH, initial_indent=first, subsequent_indent=indent) or [
        first.rstrip()
    ]


def _lookup(cfg: Mapping[str, Any], key: str) -> Any:
    value: Any = cfg
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if key == "policies" and isinstance(value, Mapping):
        return list(value)
    return value


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | dict):
        import yaml

        return str(yaml.safe_dump(value, default_flow_style=True, width=10**6)).strip()
    return str(value)


def _field_help() -> dict[str, str]:
    """``key -> the first sentence of its schema field's #: comment`` for every field of the
    root schema and of its groups."""
    from evidence_bench.experiment import config

    helps: dict[str, str] = {}
    groups: dict[str, type] = {"": config.RunConf}
    for name, kind in typing.get_type_hints(config.RunConf).items():
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            groups[name] = kind
    for prefix, schema in groups.items():
        for field, text in field_comments(schema).items():
            helps[f"{prefix}.{field}" if prefix else field] = _first_sentence(text)
    return helps


def _first_sentence(text: str) -> str:
    """Up to the first full stop outside parentheses, without reST's literal marks."""
    depth = 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "." and depth == 0 and text[at + 1 : at + 2] in ("", " "):
            text = text[:at]
            break
    return text.replace("``", "")
