"""The manual (``docs/``): every command, option, config group, option file and key has its
documentation, and every command the manual shows names things that exist.

These tests read sources only and run in about a second; ``make docs`` builds the manual
with warnings as errors, so the generated references are checked there as well.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

import evidence_bench
from evidence_bench import cli
from evidence_bench import commands as harness
from evidence_bench.engine.base import Label
from evidence_bench.livefetch import _cli as livefetch_cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONF = ROOT / "conf"


def _extension(name: str) -> ModuleType:
    """A module of ``docs/_ext`` (the Sphinx extensions the manual is generated with)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / "_ext" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text() for p in sorted(DOCS.rglob("*.rst"))}


def _usage_commands() -> list[str]:
    """The commands ``python -m evidence_bench --help`` lists."""
    block = harness.usage().split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def _reference_commands() -> list[str]:
    """The commands ``docs/reference/cli.rst`` has a section for, in its order."""
    page = (DOCS / "reference" / "cli.rst").read_text()
    return re.findall(r"^\.\. _cli-([a-z]+):\n\n``\1``\n~+$", page, re.MULTILINE)


# --- the CLI ---------------------------------------------------------------------------------


def test_the_usage_the_error_and_the_reference_list_the_registrys_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    registry = [command.name for command in harness.COMMANDS]
    with pytest.raises(SystemExit):
        harness.main(["no-such-command"])
    dispatched = capsys.readouterr().err.split("commands: ", 1)[1].strip()
    assert dispatched.split(", ") == registry
    assert _usage_commands() == registry
    assert _reference_commands() == registry
    assert registry == [
        "run", "record", "serve", "report", "gather", "export", "check", "livefetch",
        "pool", "assess", "init",
    ]  # fmt: skip


@pytest.mark.parametrize("command", _usage_commands())
def test_every_harness_command_has_a_section_in_the_cli_reference(command: str) -> None:
    page = (DOCS / "reference" / "cli.rst").read_text()
    section = re.search(
        rf"^\.\. _cli-{command}:\n\n``{command}``\n~+\n(?P<body>.*?)(?=^\.\. _cli-|\Z)",
        page,
        re.MULTILINE | re.DOTALL,
    )
    assert section, f"docs/reference/cli.rst has no section for {command!r}"
    body = section["body"]
    assert f"python -m evidence_bench {command}" in body or "help-of:: evidence_bench.gate" in body
    prose = [p for p in body.split("\n\n") if p.strip() and not p.startswith((" ", ".."))]
    assert sum(len(p.split()) for p in prose) >= 25, f"{command}: say what it does"


def test_the_cli_reference_is_generated_from_the_commands_themselves() -> None:
    page = (DOCS / "reference" / "cli.rst").read_text()
    cliref = _extension("cliref")
    for directive in (
        "literal-of:: evidence_bench.commands:usage",
        "help-of:: evidence_bench.gate:main",
        "argparse-options:: evidence_bench.cli:_parser",
        "literal-of:: evidence_bench.cli:_HELP",
    ):
        assert f".. {directive}\n" in page, directive
        cliref.resolve(directive.split(":: ", 1)[1])  # still names a real object
    check_help = cliref.help_text(cliref.resolve("evidence_bench.gate:main"))
    assert check_help.startswith("usage: python -m evidence_bench check")
    assert "--baseline" in check_help and "--update" in check_help


def test_every_evidence_fetcher_option_has_help_text() -> None:
    parser = cli._parser()
    documented = _extension("cliref").options(parser)
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert flags == {
        "-h", "--help", "--format", "--limit", "--fetch", "--cache", "--allow-private",
        "--interactive",
    }  # fmt: skip
    assert [signature for signature, _ in documented] == [
        "-h, --help",
        "QUERY",
        "--format {text,json}",
        "--limit LIMIT",
        "--fetch",
        "--cache PATH",
        "--allow-private",
        "--interactive",
    ]
    for signature, text in documented:
        assert len(text.split()) >= 3, f"evidence-fetcher {signature}: no help text"


def test_the_interactive_help_lists_every_command_the_prompt_accepts() -> None:
    listed = {line.split()[0] for line in cli._HELP.splitlines()[1:]}
    accepted = {label.value for label in Label} | {"show", "expand", "help", "done"}
    assert listed == accepted


# --- the configuration -----------------------------------------------------------------------


def test_every_config_group_option_and_key_is_documented() -> None:
    reference = _extension("configref").collect(CONF)
    assert reference.problems == []
    groups = {g.directory: g for g in reference.groups if g.directory}
    assert set(groups) == {p.name for p in CONF.iterdir() if p.is_dir()}
    for directory, group in groups.items():
        files = sorted(p.stem for p in (CONF / directory).glob("*.yaml"))
        assert [option.name for option in group.options] == files
        assert all(len(option.doc.split()) >= 3 for option in group.options), directory
    assert groups["ranker"].default_option == "tfidf_rocchio"
    assert groups["policy"].key == "policies"
    keys = {f.key: f for g in reference.groups for f in g.fields}
    assert keys["ranker.w_r"].read_by == ("livefetch",)
    assert set(keys["ranker.beta"].read_by) == {"tfidf_rocchio", "livefetch", "vector_rocchio"}
    assert keys["policies.<label>.patience"].read_by == ("patient",)
    assert keys["eval.measures"].default == ["nDCG@10", "P@10", "R@20", "AP", "RR"]
    assert {f.key for f in reference.top_level} >= {"runs_dir", "seed", "workers"}


def test_the_config_reference_page_is_generated_from_conf() -> None:
    assert ".. config-reference:: ../conf\n" in (DOCS / "reference" / "config.rst").read_text()


def test_an_undocumented_group_option_or_key_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "ranker" / "bm25.yaml").write_text("name: bm25\n")
    (conf / "index").mkdir()
    (conf / "index" / "flat.yaml").write_text("# A flat index\nkind: flat\n")
    (tmp_path / "myschema.py").write_text(
        textwrap.dedent(
            '''
            from dataclasses import dataclass, field

            @dataclass
            class RankerConf:
                """A ranker."""

                #: The ranker's name.
                name: str = "x"
                k1: float = 1.2

            @dataclass
            class EvalConf:
                #: Measures.
                measures: list[str] = field(default_factory=list)

            @dataclass
            class RunConf:
                ranker: RankerConf = field(default_factory=RankerConf)
                eval: EvalConf = field(default_factory=EvalConf)
                seed: int = 0
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = _extension("configref").collect(conf, schema_module="myschema").problems
    unmapped = "a config group with no field in RunConf (add one, or map it in " + (
        "docs/_ext/configref.py MOUNTS)"
    )
    assert problems[:3] == [
        "myschema.RankerConf.k1: no #: doc comment",
        "myschema.EvalConf: no docstring",
        "myschema.RunConf.seed: no #: doc comment",
    ]
    assert f"conf/index/: {unmapped}" in problems
    assert f"conf/policy/: {unmapped}" in problems  # myschema has no policies field
    assert "conf/ranker/bm25.yaml: no comment at the top saying what it is" in problems
    assert not [p for p in problems if p.startswith(("conf/ranker/:", "conf/eval/"))]


# --- the API ---------------------------------------------------------------------------------


def test_the_api_reference_documents_exactly_the_public_api() -> None:
    assert ".. public-api:: evidence_bench\n" in (DOCS / "reference" / "api.rst").read_text()
    groups = _extension("apiref").public_api("evidence_bench")
    documented = [name for names in groups.values() for name, _ in names]
    assert sorted(documented) == sorted(evidence_bench.__all__)
    assert all(not module.rsplit(".", 1)[-1].startswith("_") for module in groups)


@pytest.mark.parametrize("name", [n for n in evidence_bench.__all__ if n != "__version__"])
def test_every_public_name_has_a_docstring(name: str) -> None:
    obj = getattr(evidence_bench, name)
    doc = (obj.__doc__ or "").strip()
    assert doc and not doc.startswith(f"{name}("), f"evidence_bench.{name} has no docstring"


# --- the commands the manual shows -----------------------------------------------------------


def _shell_commands() -> list[tuple[str, list[str], bool]]:
    """``(page, argv, fails)`` for every command line of every ``sh`` code block of the
    manual (blocks inside lists too), with ``\\`` continuations joined. ``fails``: the
    block's ``docs-test`` mark expects it to fail (``exit=N``, N > 0), as a command showing a
    mistake on purpose does; the doc-command tests run it and check that exit."""
    commands = []
    for page, text in _pages().items():
        lines = text.splitlines()
        for number, line in enumerate(lines):
            if line.strip() != ".. code-block:: sh":
                continue
            marks = [m for m in lines[max(0, number - 3) : number] if "docs-test:" in m]
            fails = bool(marks and re.search(r"\bexit=[1-9]", marks[-1]))
            indent = len(line) - len(line.lstrip())
            block = []
            for body in lines[number + 1 :]:
                if body.strip() and len(body) - len(body.lstrip()) <= indent:
                    break
                block.append(body)
            joined = textwrap.dedent("\n".join(block)).replace("\\\n", " ")
            for command in joined.splitlines():
                words = shlex.split(command, comments=True)
                if words and words[0] != "export":
                    commands.append((page, words, fails))
    return commands


def _override_problem(override: str, keys: set[str], options: dict[str, set[str]]) -> str:
    """What is wrong with one Hydra override shown in the manual ("" when nothing is)."""
    if override.lstrip("+").startswith(("hydra", "~")):  # Hydra's own, or a launcher's
        return ""
    key, sep, value = override.lstrip("+").partition("=")
    if not sep:
        return f"{override!r} is not key=value"
    group = key.partition("@")[0]
    if group in options:  # group=option, +policy@policies.LABEL=option
        return "" if value in options[group] else f"{group}/{value}.yaml does not exist"
    parts = key.split(".")
    if parts[0] == "policies" and len(parts) == 3:
        parts[1] = "<label>"
    if parts[:2] == ["experiment", "grid"] and len(parts) == 3:
        parts = ["ranker", parts[2]]  # a grid sweeps ranker keys
    return "" if ".".join(parts) in keys else f"{key!r} is not a config key"


def _example_projects() -> tuple[set[str], set[str]]:
    """The experiments of the manual's example projects (``docs/**/conf/experiment/``, a
    tutorial's files of a user's own, and the one ``init`` writes), and the keys their parts
    of the user's own take (``ranker.feedback_weight`` beside ``ranker._target_``)."""
    import yaml

    experiments, keys = set(), set()
    starter = ROOT / "evidence_bench" / "commands" / "starter" / "my_experiment.yaml"
    for path in [*DOCS.glob("**/conf/experiment/*.yaml"), starter]:  # init's, for the tutorial
        experiments.add(path.stem)
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for part in ("ranker", "refiner", "query_set"):
            if isinstance(config.get(part), dict) and "_target_" in config[part]:
                keys |= {f"{part}.{key}" for key in config[part]}
    return experiments, keys


def test_every_command_the_manual_shows_names_real_commands_keys_and_options() -> None:
    reference = _extension("configref").collect(CONF)
    keys = {f.key for g in reference.groups for f in g.fields}
    keys |= {f.key for f in reference.top_level}
    options = {g.directory: {o.name for o in g.options} for g in reference.groups if g.directory}
    experiments, own_keys = _example_projects()
    options["experiment"] |= experiments
    keys |= own_keys
    parser = cli._parser()
    checked: dict[str, int] = {}
    problems = []
    for page, argv, fails in _shell_commands():
        program = argv[0]
        if argv[:3] == ["python", "-m", "evidence_bench"]:
            command, args = argv[3], argv[4:]
            checked[command] = checked.get(command, 0) + 1
            if command not in _usage_commands():
                problems.append(f"{page}: unknown command {command!r}")
            elif command == "livefetch":
                with contextlib.redirect_stderr(io.StringIO()) as err:
                    try:
                        livefetch_cli._parser().parse_args(args)
                    except SystemExit:
                        problems.append(f"{page}: {' '.join(argv)}: {err.getvalue().strip()}")
            elif command in ("run", "record"):
                for arg in args:
                    if arg == "--multirun" or (command, arg) == ("record", "--force"):
                        continue
                    first = arg if "[" in arg else arg.split(",", 1)[0]  # a sweep's first value
                    if (problem := _override_problem(first, keys, options)) and not fails:
                        problems.append(f"{page}: {' '.join(argv)}: {problem}")
        elif program == "python" and argv[1].endswith(".py"):  # a script of the repository's
            if not (ROOT / argv[1]).is_file():
                problems.append(f"{page}: {argv[1]} is not a file of the repository")
        elif program == "evidence-fetcher":
            checked[program] = checked.get(program, 0) + 1
            with contextlib.redirect_stderr(io.StringIO()) as err:
                try:
                    parser.parse_args(argv[1:])
                except SystemExit:
                    problems.append(f"{page}: {' '.join(argv)}: {err.getvalue().strip()}")
        elif (
            program not in ("make", "mkdir", "cd")
            and argv[:4] != ["python", "-m", "pip", "install"]
            and argv[:2] != ["ray", "start"]  # the Ray tutorial's cluster
        ):
            problems.append(f"{page}: {program!r} is not a command the manual may show")
    assert problems == []
    assert checked["run"] >= 10 and checked["record"] >= 2 and checked["evidence-fetcher"] >= 2
    assert checked["livefetch"] >= 2


def test_the_override_checker_finds_what_drifted() -> None:
    keys = {"ranker.beta", "policies.<label>.p_relevant", "seed"}
    options = {"ranker": {"livefetch"}, "policy": {"random"}, "experiment": {"smoke"}}
    good = ["ranker=livefetch", "ranker.beta=0.5", "+experiment=smoke", "seed=1",
            "+policy@policies.random=random", "policies.noisy.p_relevant=0.6",
            "+experiment.grid.beta=[0.25,0.75]", "hydra/launcher=joblib",
            "~policies.noisy"]  # fmt: skip
    assert [_override_problem(o, keys, options) for o in good] == [""] * len(good)
    assert _override_problem("ranker=bm25", keys, options) == "ranker/bm25.yaml does not exist"
    assert _override_problem("ranker.bta=1", keys, options) == "'ranker.bta' is not a config key"
    assert _override_problem("+experiment.grid.k1=[1]", keys, options) == (
        "'experiment.grid.k1' is not a config key"
    )


def test_every_page_is_reachable_from_the_index() -> None:
    pages = _pages()
    listed = set(re.findall(r"^   (\S+)$", pages["index.rst"], re.MULTILINE))
    assert listed == {page.removesuffix(".rst") for page in pages if page != "index.rst"}


def test_the_readme_says_how_to_build_the_manual() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make docs" in readme and "docs/_build/html" in readme
