"""The Jinja2 environment the report's page and its charts are rendered in: Jinja2's own,
autoescaping everything, with the same bytes out for less CPU on a sweep's page (~130,000
values shown).

It compiles templates with a code generator of its own (:class:`_EscapingGenerator`, over
Jinja2's private ``CodeGenerator._output_child_pre``; ``jinja2<3.2`` in pyproject.toml), so
its compiled templates are cached under names that carry a digest of this module and
Jinja2's version (:data:`CACHE_PATTERN`): neither a plain environment nor another version of
this one loads them. Should a Jinja2 release stop calling that method, templates compile as
plain Jinja2 compiles them: escaped by ``markupsafe.escape``, the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import BytecodeCache, Environment, PackageLoader, StrictUndefined, Template, nodes
from jinja2.compiler import CodeGenerator, Frame
from markupsafe import escape

__all__ = ["CACHE_PATTERN", "ReportEnvironment", "report_environment"]

_DIGEST = hashlib.sha256(Path(__file__).read_bytes() + jinja2.__version__.encode()).hexdigest()
#: The compiled templates' cache file names (``%s``: the template's key): this module's
#: source and Jinja2's version in them, so an edit of either compiles afresh.
CACHE_PATTERN = f"__evidence_bench_report_{_DIGEST[:16]}_%s.cache"

#: What ``d.name`` finds on a dict as an attribute (its methods): only for these names does
#: Jinja's attribute-first lookup differ from the key lookup.
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _EscapingGenerator(CodeGenerator):
    """Jinja2's compiler, but an autoescaped ``{{ ... }}`` calls the environment's
    :meth:`ReportEnvironment.escaped` instead of ``markupsafe.escape``."""

    def _output_child_pre(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if frame.eval_ctx.volatile or not frame.eval_ctx.autoescape:
            super()._output_child_pre(node, frame, finalize)
            return
        self.write("environment.escaped(")
        if finalize.src is not None:
            self.write(finalize.src)


class ReportEnvironment(Environment):
    """Jinja2's environment, with the same bytes out:

    - ``d.name`` on the plain dicts a context is made of looks up the key first, where
      Jinja tries the attribute first and, for a dict, pays for an AttributeError on every
      lookup. The same value either way: a dict's attributes are its methods, looked up as
      before.
    - Every value shown is still escaped, each distinct string once per render
      (:meth:`escaped`): a page repeats a few thousand strings (numbers, classes, ids) tens
      of thousands of times, and each ``markupsafe.escape`` builds a new Markup.
    """

    code_generator_class = _EscapingGenerator

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._escaped: dict[str, str] = {}

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)

    def escaped(self, value: Any) -> str:
        """``markupsafe.escape(value)``, as the template's output joins it; a str's
        remembered (its escaped text does not change)."""
        if type(value) is not str:
            return escape(value)
        found = self._escaped.get(value)
        if found is None:
            found = self._escaped[value] = escape(value)
        return found

    def render(self, template: Template, context: Mapping[str, Any]) -> str:
        """``template`` rendered with ``context``; the strings it escaped are forgotten
        (a page's, a few MB, are not kept for the next)."""
        try:
            return template.render(**context)
        finally:
            self._escaped.clear()


def report_environment(*, bytecode_cache: BytecodeCache | None = None) -> ReportEnvironment:
    """The environment of the report's templates (``evidence_bench/report/templates``):
    autoescaping, undefined names an error, block tags trimmed."""
    return ReportEnvironment(
        loader=PackageLoader("evidence_bench.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=bytecode_cache,
    )
