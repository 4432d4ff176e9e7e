"""``.. public-api::``: autodoc of every name in ``evidence_bench.__all__``, nothing else.

The public face is the list in ``evidence_bench/__init__.py`` (tested by
``tests/test_exported_members.py``); this directive documents exactly that list, grouped by
the module that defines each name and titled by that module's docstring, so a name added
to ``__all__`` appears in the manual and a private helper never does.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections import defaultdict
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def _title(module: str) -> str:
    """The module docstring's first line up to its first ``": "``: a short section title
    (the whole docstring follows it)."""
    doc = inspect.getdoc(importlib.import_module(module)) or module
    first = doc.strip().splitlines()[0]
    return first.split(": ", 1)[0].rstrip(".")


def _directive(obj: Any) -> str:
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if inspect.isroutine(inspect.unwrap(obj)):  # functools.cache wrappers too
        return "autofunction"
    return "autodata"


def _bare_fields(cls: type) -> list[str]:
    """A dataclass's fields without a doc comment: the signature and its parameter list
    already show them, and repeating one as a member would print its default's repr."""
    if not dataclasses.is_dataclass(cls):
        return []
    from sphinx.pycode import ModuleAnalyzer

    documented = ModuleAnalyzer.for_module(cls.__module__).find_attr_docs()
    return [f.name for f in dataclasses.fields(cls) if (cls.__name__, f.name) not in documented]


def public_api(package: str) -> dict[str, list[tuple[str, str]]]:
    """``{defining module: [(name, autodoc directive), ...]}`` for ``package.__all__``."""
    root = importlib.import_module(package)
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name in root.__all__:
        obj = getattr(root, name)
        module = getattr(obj, "__module__", None) if not isinstance(obj, str) else None
        groups[module or package].append((name, _directive(obj)))
    return dict(groups)


class PublicApi(SphinxDirective):
    required_arguments = 1  # the package

    def run(self) -> list[nodes.Node]:
        package = self.arguments[0]
        groups = public_api(package)
        # Errors read best last: the pipeline's parts first, then what they raise.
        order = sorted(
            groups, key=lambda module: (module != package, module.endswith(".errors"), module)
        )
        lines: list[str] = [f".. currentmodule:: {package}", ""]
        for module in order:
            title = _title(module)
            lines += [title, "-" * len(title), ""]
            if module != package:
                doc = inspect.getdoc(importlib.import_module(module)) or ""
                lines += [*doc.splitlines(), ""]
            for name, directive in groups[module]:
                target = f"{package}.{name}"
                lines.append(f".. {directive}:: {target}")
                bare = _bare_fields(getattr(importlib.import_module(package), name))
                if bare:
                    lines.append(f"   :exclude-members: {', '.join(bare)}")
                lines.append("")
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="public-api"), node)
        return list(node.children)


def _signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    ret: str | None,
) -> tuple[str | None, str | None] | None:
    """Signatures as a reader needs them.

    A Protocol is implemented, never instantiated: it shows no ``(*args, **kwargs)``. The
    default analyzer shows as ``Analyzer()``: its repr holds a frozenset of stop words,
    long and in an order that changes from process to process (the build must not).
    """
    if what == "class" and getattr(obj, "_is_protocol", False):
        return "", ret
    if signature:
        from evidence_bench.engine.text import Analyzer

        return signature.replace(repr(Analyzer()), "Analyzer()"), ret
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("public-api", PublicApi)
    app.connect("autodoc-process-signature", _signature)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
