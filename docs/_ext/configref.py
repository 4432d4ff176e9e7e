"""``.. config-reference::``: the configuration reference, generated from the typed schemas.

Everything on the page comes from two places at build time, so it cannot drift:

- the dataclass schemas in ``evidence_bench/experiment/config.py`` (every field's type and
  default, and its ``#:`` doc comment, read as autodoc reads it), and which engine part or
  user reads a field (``experiment.components.RANKERS``/``REFINERS``, the policy classes);
- the YAML files under ``conf/``: each group is a directory, each option a file, and the
  option's documentation is the comment at the top of its file.

:func:`collect` builds the model and lists what is undocumented (a group with no schema
field, an option file without a comment, a field without a doc comment, a schema without a
docstring); the directive turns each into a build warning (an error under ``-W``) and
``tests/test_docs.py`` asserts there are none.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evidence_bench._doc_comments import field_comments

#: Groups mounted under another key than their directory's name: ``conf/policy/`` options
#: become entries of ``policies`` (``+policy@policies.LABEL=OPTION``).
MOUNTS = {"policy": "policies"}

#: How an option of each group is chosen on the command line (``{option}`` filled in).
SELECT = {
    "experiment": "+experiment={option}",
    "policy": "+policy@policies.{option}={option}",
}


@dataclass(frozen=True)
class Field:
    key: str  # the dotted config key, e.g. ``ranker.alpha`` or ``policies.<label>.depth``
    type: str
    default: Any
    doc: str
    read_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Option:
    name: str
    path: Path
    doc: str
    body: str  # the file without its leading comment


@dataclass
class Group:
    key: str  # the RunConf field: ``ranker``, ``policies``, ...
    directory: str | None  # the conf/ directory holding its options, if any
    schema: type
    doc: str
    fields: list[Field] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    default_option: str | None = None


@dataclass
class Reference:
    top_level: list[Field]
    groups: list[Group]
    problems: list[str]


def _class_doc(cls: type) -> str:
    """The class docstring, or "" for the one ``@dataclass`` makes up (``Name(field: ...)``)."""
    doc = inspect.getdoc(cls) or ""
    return "" if doc.startswith(f"{cls.__name__}(") else doc


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return dataclasses.MISSING


def _schema_of(annotation: Any) -> type | None:
    """The dataclass a RunConf field holds: itself, or the values of a ``dict[str, X]``."""
    args: tuple[Any, ...] = getattr(annotation, "__args__", ())
    if getattr(annotation, "__origin__", None) is dict:
        annotation = args[-1]
    return (
        annotation
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation)
        else None
    )


def _readers(group: str) -> dict[str, tuple[str, ...]]:
    """For the fields of a group: which ranker, refiner or user kind takes each one."""
    from evidence_bench.experiment.components import RANKERS, REFINERS, USERS

    readers: dict[str, list[str]] = {}
    if group in ("ranker", "refiner"):
        registry = RANKERS if group == "ranker" else REFINERS
        for name, part in registry.items():
            for param in part.params:
                readers.setdefault(param, []).append(name)
    elif group == "policies":
        for name, cls in USERS.items():
            for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
                readers.setdefault(spec.name, []).append(name)
    return {key: tuple(names) for key, names in readers.items()}


def _header(text: str) -> tuple[str, str]:
    """A YAML file's leading comment (Hydra's ``# @package`` line left out) and the rest."""
    doc: list[str] = []
    lines = text.splitlines()
    index = 0
    for index, line in enumerate(lines):  # noqa: B007 (index is used after the loop)
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        if not stripped.startswith("# @package"):
            doc.append(stripped.lstrip("#").strip())
    else:
        index = len(lines)
    return " ".join(doc).strip(), "\n".join(lines[index:]).strip()


def _root_defaults(conf_dir: Path) -> dict[str, str]:
    """``{group: option}`` from the defaults list of ``conf/config.yaml``."""
    root = yaml.safe_load((conf_dir / "config.yaml").read_text())
    chosen: dict[str, str] = {}
    for entry in root.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                if not str(key).startswith("override "):
                    chosen[str(key)] = str(value)
    return chosen


def collect(conf_dir: Path, schema_module: str = "evidence_bench.experiment.config") -> Reference:
    """The configuration reference for ``conf_dir`` and the root schema ``RunConf``."""
    import importlib
    import typing

    module = importlib.import_module(schema_module)
    root: type = module.RunConf
    hints = typing.get_type_hints(root)
    raw_types = {spec.name: str(spec.type) for spec in dataclasses.fields(root)}
    problems: list[str] = []
    defaults = _root_defaults(conf_dir)

    def fields_of(schema: type, prefix: str, readers: dict[str, tuple[str, ...]]) -> list[Field]:
        out = []
        for spec in dataclasses.fields(schema):
            doc = field_comments(schema).get(spec.name, "")
            if not doc:
                problems.append(f"{schema_module}.{schema.__name__}.{spec.name}: no #: doc comment")
            out.append(
                Field(
                    f"{prefix}{spec.name}",
                    str(spec.type),
                    _default(spec),
                    doc,
                    readers.get(spec.name, ()),
                )
            )
        return out

    top_level: list[Field] = []
    groups: list[Group] = []
    by_key: dict[str, Group] = {}
    for spec in dataclasses.fields(root):
        schema = _schema_of(hints[spec.name])
        if schema is None:
            doc = field_comments(root).get(spec.name, "")
            if not doc:
                problems.append(f"{schema_module}.{root.__name__}.{spec.name}: no #: doc comment")
            top_level.append(Field(spec.name, raw_types[spec.name], _default(spec), doc))
            continue
        doc = _class_doc(schema)
        if not doc:
            problems.append(f"{schema_module}.{schema.__name__}: no docstring")
        mapped = dataclasses.is_dataclass(hints[spec.name])
        prefix = f"{spec.name}." if mapped else f"{spec.name}.<label>."
        group = Group(spec.name, None, schema, doc, fields_of(schema, prefix, _readers(spec.name)))
        groups.append(group)
        by_key[spec.name] = group

    for directory in sorted(p for p in conf_dir.iterdir() if p.is_dir()):
        name = directory.name
        found = by_key.get(MOUNTS.get(name, name))
        if found is None:
            problems.append(
                f"conf/{name}/: a config group with no field in {root.__name__} "
                f"(add one, or map it in docs/_ext/configref.py MOUNTS)"
            )
            continue
        group = found
        group.directory = name
        group.default_option = defaults.get(name)
        for path in sorted(directory.glob("*.yaml")):
            doc, body = _header(path.read_text())
            if not doc:
                problems.append(f"conf/{name}/{path.name}: no comment at the top saying what it is")
            group.options.append(Option(path.stem, path, doc, body))
    return Reference(top_level, groups, problems)


# --- rendering -------------------------------------------------------------------------------


def _show(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(a schema of its own)"
    if value == "???":
        return "??? (required)"
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("...").strip()


def _confval(item: Field) -> list[str]:
    """One key: its name (an index entry, ``:confval:`` target), then type, default and doc."""
    read_by = ""
    if item.read_by:
        read_by = " Read by " + ", ".join(f"``{name}``" for name in item.read_by) + "."
    doc = item.doc if item.doc.endswith(".") else f"{item.doc}."
    bound = _bounds().get(item.key.replace("<label>", "*"))
    bounded = f" Bounded: {bound.describe()}." if bound is not None else ""
    return [
        f".. confval:: {item.key}",
        "",
        f"   ``{item.type}``, default ``{_show(item.default)}``. {doc}{read_by}{bounded}",
        "",
    ]


def _bounds() -> dict[str, Any]:
    """``{key: Bound}`` of the knobs that multiply work (``experiment/bounds.py``)."""
    from evidence_bench.experiment.bounds import BOUNDS

    return {bound.key: bound for bound in BOUNDS}


def _bounds_section() -> list[str]:
    """Every bound in one list, the tuning keys (one ``experiment.tune`` key above) too."""
    from evidence_bench.experiment import bounds

    lines = ["Bounds", "------", ""]
    lines += [
        "Each of these keys multiplies what a run computes, holds or waits for; a value "
        "outside its range is refused when the config is checked, before anything runs, "
        "in one line naming the key and the range "
        "(``experiment.rounds=1000000000 must be between 1 and 50``).",
        "",
    ]
    lines += [f"- ``{b.key}``: {b.describe()}" for b in bounds.BOUNDS]
    lines += [
        f"- ``seeds``: at most {bounds.MAX_SEEDS} entries",
        f"- ``policies``: at most {bounds.MAX_USERS} users",
        f"- ``experiment.configs`` times the points of ``experiment.grid``: at most "
        f"{bounds.MAX_ENGINE_CONFIGS} engine configs",
        "",
    ]
    return lines


def _select(group: Group, option: str) -> str:
    assert group.directory is not None
    template = SELECT.get(group.directory, f"{group.directory}={{option}}")
    return template.format(option=option)


def render(reference: Reference) -> list[str]:
    """The reference as reStructuredText lines (sections, ``confval`` entries, YAML)."""
    lines = ["Top-level settings", "------------------", ""]
    lines += ["Set as ``key=value`` on the command line; they belong to no group.", ""]
    for item in reference.top_level:
        lines += _confval(item)
    for group in reference.groups:
        title = f"``{group.key}``"
        lines += [title, "-" * len(title), "", group.doc, ""]
        if group.directory is None:
            lines += [
                "No files under ``conf/``: set its keys on the command line, "
                f"e.g. ``{group.fields[0].key}=...``.",
                "",
            ]
        else:
            chosen = (
                f" The default is ``{group.default_option}`` (``conf/config.yaml``)."
                if group.default_option
                else " No option is chosen by default."
            )
            names = ", ".join(f"``{option.name}``" for option in group.options)
            lines += [
                f"Options in ``conf/{group.directory}/``: {names}; choose one with "
                f"``{_select(group, 'NAME')}``.{chosen}",
                "",
            ]
        lines += [".. rubric:: Keys", ""]
        for item in group.fields:
            lines += _confval(item)
        if group.options:
            for option in group.options:
                heading = f"``{group.directory}``: ``{option.name}``"
                lines += [heading, "~" * len(heading), "", option.doc, ""]
                lines += [f"Choose with ``{_select(group, option.name)}``.", ""]
                if option.body:
                    lines += [".. code-block:: yaml", ""]
                    lines += [f"   {line}" if line else "" for line in option.body.splitlines()]
                    lines += [""]
    return lines + _bounds_section()


def setup(app: Any) -> dict[str, Any]:
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util import logging
    from sphinx.util.docutils import SphinxDirective
    from sphinx.util.nodes import nested_parse_with_titles

    logger = logging.getLogger(__name__)

    class ConfigReference(SphinxDirective):
        required_arguments = 1  # the conf/ directory, relative to the docs' source directory

        def run(self) -> list[nodes.Node]:
            conf_dir = (Path(self.env.srcdir) / self.arguments[0]).resolve()
            reference = collect(conf_dir)
            for problem in reference.problems:
                logger.warning("undocumented config: %s", problem, location=self.get_location())
            for path in conf_dir.rglob("*.yaml"):
                self.env.note_dependency(str(path))
            node = nodes.section()
            node.document = self.state.document
            source = StringList(render(reference), source="config-reference")
            nested_parse_with_titles(self.state, source, node)
            return list(node.children)

    app.add_directive("config-reference", ConfigReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
