"""The command line's one registry: every command's name, usage, one-line help and handler.

``python -m evidence_bench``, its ``--help``, the error for an unknown command and the CLI
reference read :data:`COMMANDS`. A handler (``module:function``) is imported only when its
command runs, so ``--help`` answers before numpy, pandas or Hydra are imported.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evidence_bench.commands._common import PROG, fail

__all__ = ["COMMANDS", "Command", "experiment_list", "find", "main", "usage"]


@dataclass(frozen=True)
class Command:
    """One command of ``python -m evidence_bench``."""

    #: What the user types: ``run``, ``check``.
    name: str
    #: Its arguments after the name, as the top-level usage shows them.
    arguments: str
    #: What it does, in one line.
    summary: str
    #: ``module:function``, the module's name under ``evidence_bench``: ``function(argv) ->
    #: int | None``, imported when the command runs.
    handler: str

    def load(self) -> Callable[[list[str]], int | None]:
        module, _, name = self.handler.partition(":")
        found = importlib.import_module(f"evidence_bench.{module}")
        function: Callable[[list[str]], int | None] = getattr(found, name)
        return function


#: Every command, in the order ``--help`` lists them: name, arguments, summary, handler.
COMMANDS: tuple[Command, ...] = (
    Command("run", "+experiment=NAME [overrides]",
        "replay cassettes, simulate users, write a run + report", "commands.run:run_command"),
    Command("record", "+experiment=NAME [overrides]",
        "record the cassettes an experiment needs", "commands.run:record_command"),
    Command("serve", "collection=NAME [port=8765]",
        "a Brave-compatible simulator on 127.0.0.1", "commands.serve:serve_command"),
    Command("report", "RUN_DIR",
        "re-render RUN_DIR/report.html (or a multirun dir)", "commands.report:report_command"),
    Command("gather", "SHARD_DIR...",
        "gather a run's shards (shards=N shard=i) into that run", "commands.gather:gather_command"),
    Command("export", "RUN_DIR --format csv|trec",
        "write a run's CSVs or TREC runs and qrels [--out DIR]", "commands.export:export_command"),
    Command("check", "RUN_DIR --baseline FILE",
        "compare a run with a baseline; --update rewrites it", "gate:main"),
    Command("livefetch", "QUERY [--mode news] ...",
        "fetch, extract, score and quote pages (LiveFetch)", "livefetch._cli:main"),
    Command("pool", "RUN_DIR --depth K --out FILE",
        "the run's unjudged results to judge [--qrels --budget]", "assess.cli:pool_command"),
    Command("assess", "POOL.jsonl --qrels QRELS.tsv",
        "judge a pool by keyboard on 127.0.0.1 [--port P]", "assess.cli:assess_command"),
    Command("init", "DIR",
        "a starter project: your ranker, its experiment, a CI gate", "commands.init:init_command"),
)  # fmt: skip


def find(name: str) -> Command:
    """The command called ``name``; else exit 2 with one line listing the valid ones."""
    for command in COMMANDS:
        if command.name == name:
            return command
    names = ", ".join(command.name for command in COMMANDS)
    fail(f"unknown command {name!r}; commands: {names}", 2)


def experiment_list(config_dir: str | Path | None = None, *, width: int = 100) -> str:
    """``experiments (DIRS):`` and one entry per experiment with its description, wrapped
    to ``width``: the shipped ones and a user's own (:func:`~evidence_bench.experiment.
    catalog.experiments`)."""
    from evidence_bench.experiment.catalog import experiments, search_dirs, shown

    found = experiments(config_dir)
    dirs = ", ".join(str(shown(d / "experiment")) for d in search_dirs(config_dir))
    pad = max((len(e.name) for e in found), default=0) + 4
    lines = [f"experiments ({dirs}):"]
    for experiment in found:
        text = experiment.description or "(no description: add experiment.description)"
        lines += textwrap.wrap(
            text,
            width,
            initial_indent=f"  {experiment.name}".ljust(pad),
            subsequent_indent=" " * pad,
        )
    return "\n".join(lines) + "\n"


def usage(config_dir: str | Path | None = None) -> str:
    """The top-level ``--help``: every command of :data:`COMMANDS`, every experiment."""
    pad = max(len(f"{c.name} {c.arguments}") for c in COMMANDS) + 4
    lines = [
        f"usage: {PROG} COMMAND [ARGS]",
        "   or: evidence-bench COMMAND [ARGS]",
        "",
        "commands:",
        *(f"  {f'{c.name} {c.arguments}'.ljust(pad)}{c.summary}" for c in COMMANDS),
        "",
        f"{PROG} COMMAND --help: that command's usage",
        "",
    ]
    return "\n".join(lines) + "\n" + experiment_list(config_dir)


def main(argv: list[str] | None = None) -> None:
    """Run the command ``argv`` names (``sys.argv[1:]`` by default); exit with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(), end="")
        raise SystemExit(0 if args else 2)
    command, rest = find(args[0]), args[1:]
    from evidence_bench.errors import EvidenceBenchError

    try:
        code = command.load()(rest)
    except EvidenceBenchError as exc:  # one line, exit 1
        fail(str(exc))
    except KeyboardInterrupt:
        # Ctrl-C: what was being written is removed on the way out (a run's staging
        # directory, a baseline's or a cassette's temporary file); one line, not a traceback
        fail("interrupted", 130)
    if code:
        raise SystemExit(code)
