"""Dependencies match the features (issue 27): every third-party module the package imports
is declared by a distribution in the core or in the extra of the feature that imports it,
the core holds no page stack, and a run that reads pages without the ``pages`` extra stops
with one line naming it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from dataclasses import asdict
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from evidence_bench.commands import main
from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.components import engine_config
from evidence_bench.experiment.config import RankerConf, RefinerConf
from evidence_bench.web.page_text import PAGE_STACK

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

#: The extra each optional module belongs to; every other third-party module is the core's.
EXTRA_OF = {
    "trafilatura": "pages",
    "readability": "pages",
    "lxml": "pages",
    "lxml_html_clean": "pages",
    "htmldate": "pages",
    "charset_normalizer": "pages",
    "feedparser": "pages",
    "ddgs": "livefetch",
    "optuna": "tune",
    "sentence_transformers": "dense",
    "transformers": "dense",
}
_LAZY_CALLS = ("module", "import_module")  # _lazy.module("x"), importlib.import_module("x")


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]).lower()


def _declared(group: str) -> set[str]:
    """The distributions ``group`` installs ("core" or an extra), self-references followed."""
    requirements = (
        PROJECT["dependencies"] if group == "core" else PROJECT["optional-dependencies"][group]
    )
    names: set[str] = set()
    for requirement in requirements:
        if _name(requirement) == "evidence-bench":
            extras = re.search(r"\[(.*?)\]", requirement)
            for extra in extras.group(1).split(",") if extras else ():
                names |= _declared(extra.strip())
        else:
            names.add(_name(requirement))
    return names


def _imported() -> dict[str, set[str]]:
    """Third-party top-level modules the package imports -> the files that import them."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "evidence_bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) in _LAZY_CALLS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names = [node.args[0].value]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in (
                    "evidence_bench",
                    "__future__",
                ):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_walk_finds_the_imports_of_every_layer() -> None:
    """(The walk itself: plain, from-, function-level and lazy imports are all seen.)"""
    imported = _imported()
    assert {"httpx", "pandas", "hydra", "trafilatura", "optuna"} <= set(imported)
    assert "evidence_bench/web/page_text.py" in imported["trafilatura"]  # module("trafilatura")
    assert "os" not in imported and "evidence_bench" not in imported


def test_every_imported_package_is_declared_where_its_feature_is() -> None:
    installed = packages_distributions()
    missing = []
    for module, files in sorted(_imported().items()):
        group = EXTRA_OF.get(module, "core")
        if module in installed:
            candidates = {_name(dist) for dist in installed[module]}
        else:  # an extra not installed here (dense): its distribution is named as its module
            assert group != "core", f"{module} (imported by {sorted(files)}) is not installed"
            candidates = {_name(module)}
        if not candidates & _declared(group):
            missing.append(f"{module} ({', '.join(sorted(files))}): not declared in {group}")
    assert not missing, "\n".join(missing)


def test_the_core_is_what_a_run_on_snippets_needs() -> None:
    core = _declared("core")
    assert not core & (_declared("pages") | _declared("livefetch"))
    assert {"httpx", "vcrpy", "hydra-core", "pandas", "jinja2"} <= core  # the design card's
    assert "pytest" in _declared("dev")
    assert _declared("livefetch") == _declared("pages") | {"ddgs"}  # discovery adds ddgs


def test_every_page_stack_module_is_in_the_pages_extra() -> None:
    assert {EXTRA_OF[module] for module in PAGE_STACK} == {"pages"}


def test_reading_pages_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # as if it were not installed
    with pytest.raises(ConfigurationError) as raised:
        engine_config("c", asdict(RankerConf(evidence="page")), asdict(RefinerConf()))
    assert str(raised.value) == (
        "ranker.evidence=page needs the page stack, an optional extra: "
        "pip install 'evidence_bench[pages]' (cannot import trafilatura)"
    )
    engine_config("c", asdict(RankerConf()), asdict(RefinerConf()))  # snippets: none of it


#: The command line, as if readability-lxml were not installed.
BLOCKED = (
    "import sys; sys.modules['readability'] = None\n"
    "from evidence_bench.commands import main\n"
    "main()"
)


@pytest.mark.slow
def test_a_page_experiment_without_the_extra_stops_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, "run", "+experiment=smoke", "refiner.evidence=both",
         f"runs_dir={tmp_path / 'runs'}", "progress=false"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "evidence_bench: refiner.evidence=both needs the page stack, an optional extra: "
        "pip install 'evidence_bench[pages]' (cannot import readability)"
    ]
    assert not (tmp_path / "runs").exists()  # stopped before any run was written


def test_a_launcher_without_its_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The joblib launcher is an extra (a run needs none of it): asked for without it, one
    line names the extra."""
    assert "hydra-joblib-launcher" in _declared("joblib") - _declared("core")
    monkeypatch.setitem(sys.modules, "hydra_plugins.hydra_joblib_launcher", None)
    with pytest.raises(SystemExit) as exited:
        main(["run", "+experiment=smoke", "-m", "hydra/launcher=joblib"])
    assert exited.value.code == 1
    assert capsys.readouterr().err.splitlines() == [
        "evidence_bench: hydra/launcher=joblib needs Hydra's joblib launcher, an optional "
        "extra: pip install 'evidence_bench[joblib]'"
    ]
