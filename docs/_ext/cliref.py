"""The CLI reference, generated from the commands' own usage text and argparse parsers.

- ``.. literal-of:: module:NAME`` prints a string constant (the interactive help of
  ``evidence-fetcher``), or what a function of no arguments returns (the harness's usage,
  ``evidence_bench.commands:usage``), as a literal block;
- ``.. help-of:: module:function`` calls ``function(["--help"])`` and prints what it
  printed (argparse's help of ``python -m evidence_bench check``);
- ``.. argparse-options:: module:factory`` prints the usage and description of the parser
  that ``factory()`` returns, then documents each of its actions as an ``.. option::`` with
  its help text, under ``.. program::``.

The text comes from the code at build time, so the reference cannot drift from the
commands; an option without help text is a build warning (an error under ``-W``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
from collections.abc import Iterator
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)


def resolve(spec: str) -> Any:
    """``package.module:name`` → that object."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


@contextlib.contextmanager
def _columns(width: int = 92) -> Iterator[None]:
    """argparse wraps to the terminal's width: fix it, so every build prints the same."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def help_text(main: Any) -> str:
    """What ``main(["--help"])`` prints (argparse exits 0 after printing it)."""
    out = io.StringIO()
    with _columns(), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--help"])
    return out.getvalue()


def usage_text(parser: argparse.ArgumentParser) -> str:
    with _columns():
        return parser.format_usage().removeprefix("usage: ").strip()


def option_signature(action: argparse.Action) -> str:
    """``--limit LIMIT``, ``--format {text,json}``, ``QUERY``: as argparse's usage shows."""
    if not action.option_strings:
        return str(action.metavar or action.dest)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    if action.choices is not None:
        value = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        value = str(action.metavar or action.dest.upper())
    return ", ".join(f"{flag} {value}" for flag in action.option_strings)


def options(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """``(signature, help)`` for every action of ``parser``, in its order; ``help`` is ""
    where the action has none."""
    return [
        (option_signature(action), (action.help or "").replace("%(prog)s", parser.prog))
        for action in parser._actions
        if action.help is not argparse.SUPPRESS
    ]


def _literal(text: str) -> list[nodes.Node]:
    block = nodes.literal_block(text, text)
    block["language"] = "text"
    return [block]


class LiteralOf(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        value = resolve(self.arguments[0])
        return _literal(str(value() if callable(value) else value).rstrip("\n"))


class HelpOf(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        return _literal(help_text(resolve(self.arguments[0])).rstrip("\n"))


class ArgparseOptions(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        parser = resolve(self.arguments[0])()
        usage = ["   " + line for line in usage_text(parser).splitlines()]
        lines = [".. code-block:: text", "", *usage, "", parser.description or "", ""]
        lines += [f".. program:: {parser.prog}", ""]
        for signature, text in options(parser):
            if not text:
                logger.warning(
                    "%s: option %r has no help text",
                    parser.prog,
                    signature,
                    location=self.get_location(),
                )
            lines += [f".. option:: {signature}", "", f"   {text}", ""]
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=parser.prog), node)
        return list(node.children)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("literal-of", LiteralOf)
    app.add_directive("help-of", HelpOf)
    app.add_directive("argparse-options", ArgparseOptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
