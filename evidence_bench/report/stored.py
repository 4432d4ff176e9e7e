"""The report's analysis, stored in the run directory so ``report RUN_DIR`` need not redo it.

The page's context (:func:`evidence_bench.report.render.report_context`) is written as
:data:`FILE` by the run that computes it (and by a ``report`` that computed it anew), with
the key of everything it was computed from:

- the file's format, the package's version and a hash of its sources (the code that reads,
  analyzes and charts a run, and the templates), and the versions of the libraries it
  computes with (:data:`_LIBRARIES`);
- the run's ``seed``, and the randomization ``trials`` and ``max_episodes`` asked for;
- a SHA-256 of every file of the run directory the report reads (all but the report
  itself, this file, staging files, and an exported CSV whose Parquet table is there,
  since the report reads the table).

:func:`load_context` returns it only when the stored key equals the one computed for the
run as it is now, field for field; otherwise the report computes the analysis and says
why. The page rendered from a stored context is the page rendered from the context computed.

The file is gzipped JSON: the key on its first line (read without the rest), the context on
the second. JSON holds strings, numbers, booleans, null, lists and string-keyed objects, so
tuples, other dicts and the charts' SVG are tagged (``{"__tuple__": [...]}``); anything
else is refused when storing, so a context is stored exactly or not at all. Loading runs
no code. The charts' SVG is inserted into the page as markup, as the report itself is, so a
run directory's stored analysis is trusted as its ``report.html`` is; a chart that is not
one SVG element as :mod:`~evidence_bench.report.charts` draws it is refused.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import re
import zlib
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from markupsafe import Markup

from evidence_bench._atomic import write_atomic
from evidence_bench._resources import distribution_version
from evidence_bench.errors import WriteError
from evidence_bench.runs.checksums import file_sha256

__all__ = ["FILE", "FORMAT", "analysis_key", "load_context", "store_context", "store_quietly"]

#: The stored analysis, in the run directory.
FILE = "analysis.json.gz"
#: The layout of :data:`FILE`; a change makes every stored analysis stale.
FORMAT = 1
#: Files a report never reads: itself, the stored analysis, and an exported CSV beside the
#: Parquet table it was written from (the report reads the table: the CSV can be absent).
_NOT_READ = {"report.html", FILE}
_EXPORTED = {
    "per_query.csv": "scores.parquet",
    "summary.csv": "summary.parquet",
    "feedback.csv": "feedback.parquet",
    "episodes.jsonl": "episodes.parquet",
}
_TUPLE, _DICT, _MARKUP = "__tuple__", "__dict__", "__markup__"
_TAGS = frozenset({_TUPLE, _DICT, _MARKUP})
#: What a chart is: one SVG element as chart.svg.j2 writes it (the envelope; every tag and
#: attribute inside is checked by :class:`_ChartCheck`).
_CHART = re.compile(
    r'\A<svg xmlns="http://www\.w3\.org/2000/svg" class="chart"[^<]*>.*</svg>\Z', re.S
)
#: The elements charts.py and chart.svg.j2 draw (html.parser lowercases names), and nothing
#: else: no script, style, link, meta, foreignObject, image, use or anchor can pass.
_CHART_ELEMENTS = frozenset(
    {"svg", "title", "defs", "pattern", "lineargradient", "stop", "line", "rect", "circle"}
    | {"path", "polyline", "polygon", "text", "tspan"}
)
#: An attribute name as the charts write them: letters, digits and hyphens (no
#: ``xlink:href``, no namespace), and never an event handler (``on...``) or a link (``href``).
_CHART_ATTRIBUTE = re.compile(r"\A(?!on)(?!href\Z)[a-z][a-z0-9-]*\Z")
#: A value that fetches or runs something: only ``url(#id)`` (a pattern or gradient of the
#: chart itself) may reference anything.
_CHART_VALUE = re.compile(r"url\((?!#[\w-]+\))|javascript:|expression\(|@import", re.I)


class _ChartCheck(HTMLParser):
    """Whether a chart's markup holds only the elements, attributes and values a chart
    draws, under one root element. Its text is escaped (``&lt;``, kept as an entity here),
    so a raw ``<`` in the text is markup html.parser could not read, and refused."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.ok, self.depth, self.roots = True, 0, 0

    def _tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _CHART_ELEMENTS or (tag == "svg") != (self.depth == 0):
            self.ok = False
        for name, value in attrs:
            if not _CHART_ATTRIBUTE.match(name) or _CHART_VALUE.search(value or ""):
                self.ok = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs)
        self.roots += self.depth == 0
        self.depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, attrs)
        if self.depth == 0:
            self.ok = False  # a root that is not <svg>...</svg>

    def handle_endtag(self, tag: str) -> None:
        self.depth -= 1
        if self.depth < 0 or tag not in _CHART_ELEMENTS:
            self.ok = False

    def handle_data(self, data: str) -> None:
        if "<" in data or (self.depth == 0 and data.strip()):
            self.ok = False  # markup the parser could not read, or text outside the root

    def handle_comment(self, data: str) -> None:
        self.ok = False  # as a declaration or processing instruction: nothing a chart draws

    def handle_decl(self, decl: str) -> None:
        self.ok = False

    handle_pi = unknown_decl = handle_comment


def _is_chart(text: str) -> bool:
    check = _ChartCheck()
    check.feed(text)
    check.close()
    return check.ok and check.depth == 0 and check.roots == 1


@functools.cache
def source_digest() -> str:
    """SHA-256 over the package's Python sources and templates (path and bytes of each)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = sorted(
        p for p in root.rglob("*") if p.suffix in (".py", ".j2") and "__pycache__" not in p.parts
    )
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


#: The libraries an analysis's numbers and page come from: NumPy does not promise the same
#: random streams across versions (NEP 19), so the randomization tests' p-values may move
#: with it, and the others compute or format what the page shows.
_LIBRARIES = ("numpy", "pandas", "pyarrow", "scipy", "jinja2", "markupsafe")


@functools.cache
def library_versions() -> dict[str, str]:
    """Each of :data:`_LIBRARIES` with its installed version."""
    return {name: distribution_version(name) for name in _LIBRARIES}


def _inputs(run_dir: Path) -> dict[str, str]:
    """File name -> SHA-256 of every file of ``run_dir`` the report may read."""
    names = {p.name: p for p in run_dir.iterdir() if p.is_file()}
    found: dict[str, str] = {}
    for name in sorted(names):
        if name in _NOT_READ or name.startswith(".") or _EXPORTED.get(name) in names:
            continue
        found[name] = file_sha256(names[name])
    return found


def _seed(run_dir: Path) -> Any:
    try:
        seeds = json.loads((run_dir / "manifest.json").read_text("utf-8")).get("seeds")
    except (OSError, ValueError, AttributeError):
        return None
    return seeds.get("seed") if isinstance(seeds, Mapping) else seeds


def analysis_key(run_dir: Path, *, trials: int, max_episodes: int) -> dict[str, Any]:
    """What the analysis of ``run_dir`` depends on (the module's docstring)."""
    return {
        "format": FORMAT,
        "package_version": distribution_version(),
        "libraries": dict(library_versions()),
        "sources": source_digest(),
        "seed": _seed(run_dir),
        "trials": int(trials),
        "max_episodes": int(max_episodes),
        "inputs": _inputs(run_dir),
    }


#: How :func:`_changed` names a field of the key that changed (the others: by their values).
_CHANGED = {"format": "its format", "libraries": "the libraries' versions",
            "sources": "the package's sources"}  # fmt: skip


def _changed(stored: Any, key: Mapping[str, Any]) -> str | None:
    """What differs between a stored key and ``key`` (None: nothing)."""
    if not isinstance(stored, Mapping):
        return "its key is not readable"
    for field in (name for name in key if name != "inputs"):
        if stored.get(field) != key[field]:
            if field in _CHANGED:
                return f"{_CHANGED[field]} changed"
            return f"{field} {stored.get(field)!r}, now {key[field]!r}"
    before, now = stored.get("inputs"), key["inputs"]
    if not isinstance(before, Mapping):
        return "its key is not readable"
    for name in sorted({*before, *now}):
        if name not in now:
            return f"{name} is gone"
        if name not in before:
            return f"{name} is new"
        if before[name] != now[name]:
            return f"{name} changed"
    return None


_PLAIN = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})


def _encoded(value: Any) -> Any:
    """``value`` as JSON can hold it exactly (the module's docstring), else TypeError. A
    list or dict with nothing in it to tag is returned itself, not copied (most of a
    context: records of plain values, each checked in one pass of C: ``issuperset`` over
    its values' types)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        if _PLAIN.issuperset(map(type, value)):
            return value
        items = [_encoded(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if kind is dict:
        if _STR.issuperset(map(type, value)) and _TAGS.isdisjoint(value):
            if _PLAIN.issuperset(map(type, value.values())):
                return value
            fields = {k: _encoded(v) for k, v in value.items()}
            same = all(fields[k] is v for k, v in value.items())
            return value if same else fields
        return {_DICT: [[_encoded(k), _encoded(v)] for k, v in value.items()]}
    if kind is tuple:
        plain = _PLAIN.issuperset(map(type, value))
        return {_TUPLE: list(value) if plain else [_encoded(v) for v in value]}
    if kind is Markup:
        return {_MARKUP: str(value)}
    raise TypeError(f"a {kind.__module__}.{kind.__qualname__} cannot be stored exactly")


def _chart(text: Any) -> Markup:
    if not isinstance(text, str) or not _CHART.match(text) or not _is_chart(text):
        raise ValueError("a chart is not an SVG element as the report draws it")
    return Markup(text)


def _decoded(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        tag, value = next(iter(obj.items()))
        if tag == _TUPLE:
            return tuple(value)
        if tag == _DICT:
            return {k: v for k, v in value}
        if tag == _MARKUP:
            return _chart(value)
    return obj


def store_context(run_dir: Path, key: Mapping[str, Any], context: Mapping[str, Any]) -> None:
    """Write ``context`` with its ``key`` as ``run_dir``/:data:`FILE`, atomically; a
    TypeError (and nothing written) when it holds a value JSON cannot hold exactly."""
    lines = [
        json.dumps(key, sort_keys=True),
        json.dumps(_encoded(dict(context)), separators=(",", ":")),  # ASCII: the faster path
    ]
    text = "\n".join(lines) + "\n"
    # mtime=0: the same context gives the same bytes; level 1 trades size for speed
    write_atomic(run_dir / FILE, gzip.compress(text.encode("ascii"), compresslevel=1, mtime=0))


def store_quietly(run_dir: Path, key: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    """:func:`store_context` for a report that computed its analysis: what to add to its
    note (the report is written either way)."""
    try:
        store_context(run_dir, key, context)
    except (TypeError, WriteError) as exc:
        return f"; not stored ({exc})"
    return f"; stored in {FILE}"


def load_context(run_dir: Path, key: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The stored context of ``run_dir`` when its key is ``key``, else None; and why not."""
    path = run_dir / FILE
    if not path.is_file():
        return None, f"analysis computed (no {FILE})"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            changed = _changed(json.loads(lines.readline()), key)
            if changed is not None:
                return None, f"analysis computed ({FILE} is stale: {changed})"
            context = json.loads(lines.readline(), object_hook=_decoded)
    except (OSError, EOFError, zlib.error, ValueError, TypeError, KeyError) as exc:
        # (UnicodeDecodeError is a ValueError; a tag holding the wrong kind a TypeError)
        return None, f"analysis computed ({FILE} is not readable: {exc})"
    if not isinstance(context, dict):
        return None, f"analysis computed ({FILE} is not readable: not an object)"
    return context, f"analysis read from {FILE} (its key matches the run)"
