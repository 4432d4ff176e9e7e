"""``python -m evidence_bench COMMAND``: run, record, serve, report, gather, export, check,
livefetch.

``run`` and ``record`` take Hydra overrides (``+experiment=NAME``, ``ranker.beta=0.5``,
``--multirun``); ``__main__`` only wires configs to the plain functions that do the work.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

USAGE = """\
usage: python -m evidence_bench COMMAND [ARGS]

commands:
  run +experiment=NAME [overrides]     replay cassettes, simulate users, write a run + report
  record +experiment=NAME [overrides]  record the cassettes an experiment needs
  serve collection=NAME [port=8765]    a Brave-compatible simulator on 127.0.0.1
  report RUN_DIR                       re-render RUN_DIR/report.html (or a multirun dir)
  gather SHARD_DIR...                  gather a run's shards (shards=N shard=i) into that run
  export RUN_DIR --format csv|trec     write a run's CSVs or TREC runs and qrels [--out DIR]
  check RUN_DIR --baseline FILE        compare a run with a baseline; --update rewrites it
  livefetch QUERY [--mode news] ...    fetch, extract, score and quote pages (LiveFetch)
  pool RUN_DIR --depth K --out FILE    the run's unjudged results to judge [--qrels --budget]
  assess POOL.jsonl --qrels QRELS.tsv  judge a pool by keyboard on 127.0.0.1 [--port P]

experiments: smoke, ci, rocchio_sweep, rocchio_tune, policy_compare, ranker_compare
(conf/experiment/)
"""


def _fail(message: str, code: int = 1) -> None:
    from evidence_bench._printable import printable  # (a message can quote the web's text)

    print(printable(f"evidence_bench: {message}"), file=sys.stderr)
    raise SystemExit(code)


def _one_line(exc: BaseException) -> str:
    """Hydra's and OmegaConf's several-line composition errors as one line that names the
    key and, where it can, the valid choices."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    options = [
        line for line in lines[1:] if not line.startswith(("Config search path", "provider="))
    ]
    if options and options[0].startswith("Available options"):
        text += f" ({options[0].rstrip(':').lower()}: {', '.join(options[1:])})"
    cause = exc.__cause__
    if cause is not None:
        detail = str(cause).splitlines()[0].strip()
        text = f"{text.rstrip('.')}: {detail}"
        schema = getattr(cause, "object_type", None)
        if schema is not None and "not in" in detail:
            fields = getattr(schema, "__dataclass_fields__", {})
            text += f" (valid: {', '.join(fields)})"
    return text


def _jobs(argv: list[str]) -> list[list[str]] | None:
    """The overrides of each of a multirun's jobs, in Hydra's order (None when Hydra's
    sweeper would refuse them: Hydra then reports it)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([a for a in argv if a[:1] != "-"])
        return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    except Exception:
        return None


def _precheck(argv: list[str], config_dir: str | None = None) -> None:
    """Compose the config once before Hydra runs, so a bad override is one clear line
    (Hydra's own report is several lines and a stack hint), and plan it as a run would, for
    the values only the plan refuses. A multirun is checked job by job (~0.1 s each),
    before Hydra creates its sweep directory (``<runs_dir>/<experiment.name>``): a bad
    value of its third job fails at once, naming the job, not after the first two ran."""
    jobs: list[list[str]] | None = [argv]
    multirun = any(arg.startswith("-") or ("," in arg and "=" in arg) for arg in argv)
    if multirun:
        jobs = _jobs(argv)
    if jobs is None:
        return
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.config import compose
    from evidence_bench.experiment.plan import plan_run

    for number, job in enumerate(jobs):
        # the job's own values (those the sweep gave it), to name it
        own = " ".join(a for a in job if a not in argv)
        where = "" if not multirun else f"job {number}{f' ({own})' if own else ''}: "
        try:
            plain, _text = compose(
                [arg for arg in job if not arg.lstrip("+~").startswith("hydra")], config_dir
            )
        except Exception as exc:
            _fail(where + _one_line(exc))
        try:
            plan_run(plain)  # the config's checks, and the values a run would refuse
        except EvidenceBenchError as exc:
            _fail(where + str(exc))


def _config_dir(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without Hydra's ``--config-dir DIR`` (``-cd DIR``, ``--config-dir=DIR``),
    and that DIR: the user's configs are searched before the shipped ones
    (:func:`~evidence_bench.experiment.config.config_dirs`), where Hydra's own flag would
    search them after."""
    rest: list[str] = []
    config_dir = None
    args = iter(argv)
    for arg in args:
        if arg in ("--config-dir", "-cd"):
            config_dir = next(args, None)
            if config_dir is None:
                _fail(f"{arg} needs a directory", 2)
        elif arg.startswith("--config-dir="):
            config_dir = arg.partition("=")[2]
        else:
            rest.append(arg)
    return rest, config_dir


def _hydra(task: Any, argv: list[str]) -> None:
    import hydra

    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.config import ROOT_CONFIG, config_dirs, register_configs

    register_configs()
    argv, config_dir = _config_dir(argv)
    try:
        primary = str(config_dirs(config_dir)[0])
    except EvidenceBenchError as exc:
        _fail(str(exc), 2)
    if _run_once(task, argv, primary):
        return
    _precheck(argv, config_dir)
    sys.argv = [f"evidence_bench {task.__name__.removeprefix('_')}", *argv]
    hydra.main(config_path=primary, config_name=ROOT_CONFIG, version_base=None)(task)()


def _run_once(task: Any, argv: list[str], primary: str | None = None) -> bool:
    """Run ``task`` as ``hydra.main`` would for a plain run, composing its config once.

    ``hydra.main`` composes it twice (once to learn ``hydra.mode``, once to run) and
    :func:`_precheck` a third time, ~0.2 s of CPU each. Here the run's own composition is
    checked and run, through the calls ``hydra.main`` makes (``Hydra.run``, ``run_job``, the
    callbacks; hydra/_internal/hydra.py, 1.3). False, having run nothing, when this is not a
    plain run (a flag, a sweep, an experiment that sets ``hydra.mode: MULTIRUN``) or the
    config does not compose or check: the usual path then runs, or reports, it as before.
    """
    if any(arg.startswith("-") or ("," in arg and "=" in arg) for arg in argv):
        return False
    from hydra import version
    from hydra._internal import utils as hydra_utils
    from hydra._internal.hydra import Hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict

    from evidence_bench.experiment.config import ROOT_CONFIG, check_config, config_dirs

    version.setbase(None)  # hydra.main(version_base=None)
    primary = primary or str(config_dirs()[0])
    calling_file, calling_module = hydra_utils.detect_calling_file_or_module_from_task_function(
        task
    )
    task_name = hydra_utils.detect_task_name(calling_file, calling_module)
    search_path = hydra_utils.create_automatic_config_search_path(
        calling_file, calling_module, primary
    )
    app = Hydra.create_main_hydra2(task_name=task_name, config_search_path=search_path)
    try:
        try:
            cfg = app.compose_config(ROOT_CONFIG, list(argv), run_mode=RunMode.RUN)
            if cfg.hydra.mode not in (None, RunMode.RUN):
                return False
            check_config(  # the job's config, resolved, as _precheck checks it
                {
                    str(key): OmegaConf.to_container(node, resolve=True)
                    if OmegaConf.is_config(node)
                    else node
                    for key, node in cfg.items()
                    if key != "hydra"
                }
            )
        except Exception:
            return False
        if cfg.hydra.mode is None:  # as hydra.main: _run_app's override, Hydra.run's mode
            with open_dict(cfg.hydra):
                cfg.hydra.overrides.hydra.append("hydra.mode=RUN")
            cfg.hydra.mode = RunMode.RUN
        sys.argv = [f"evidence_bench {task.__name__.removeprefix('_')}", *argv]
        hydra_utils.run_and_report(lambda: _run_job(app, cfg, task))
    finally:
        GlobalHydra.instance().clear()
    return True


def _run_job(app: Any, cfg: Any, task: Any) -> None:
    """``Hydra.run`` after its composition (hydra/_internal/hydra.py, 1.3)."""
    from hydra._internal.callbacks import Callbacks
    from hydra.core.utils import configure_log, run_job
    from hydra.types import HydraContext

    from evidence_bench.experiment.config import ROOT_CONFIG

    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    callbacks = Callbacks(cfg)
    callbacks.on_run_start(config=cfg, config_name=ROOT_CONFIG)
    ret = run_job(
        hydra_context=HydraContext(config_loader=app.config_loader, callbacks=callbacks),
        task_function=task,
        config=cfg,
        job_dir_key="hydra.run.dir",
        job_subdir_key=None,
        configure_logging=True,
    )
    callbacks.on_run_end(config=cfg, config_name=ROOT_CONFIG, job_return=ret)
    _ = ret.return_value  # a failed job raises here, as in Hydra.run


def _resolved(cfg: Any) -> tuple[dict[str, Any], str]:
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}, OmegaConf.to_yaml(cfg, resolve=True)


def _run(cfg: Any) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.run import RunOutcome, RunReport, perform_run
    from evidence_bench.report.fresh import new_run_report

    plain, text = _resolved(cfg)
    perform: Callable[..., RunOutcome] = perform_run
    report: RunReport = new_run_report
    tune = bool(plain["experiment"].get("tune"))
    if tune:  # a tuning experiment (rocchio_tune)
        from evidence_bench.experiment.tune import perform_tune
        from evidence_bench.report.fresh import new_tuning_report

        if int(plain.get("shards", 1)) > 1:
            _fail("shards: a tuning experiment (experiment.tune) cannot be sharded")
        perform = perform_tune
        report = new_tuning_report
    hydra_cfg = HydraConfig.get()
    job_dir = None
    if hydra_cfg.mode == RunMode.MULTIRUN:
        job_dir = Path(hydra_cfg.runtime.output_dir) / "run"
    # one run whose episodes run in this process: what start-up made lives as long as it
    _collecting(keep=plain.get("workers") == 1 and job_dir is None and not tune)
    try:
        outcome = perform(
            plain,
            text,
            run_dir=job_dir,
            overrides=list(hydra_cfg.overrides.task),
            report=report,
        )
    except EvidenceBenchError as exc:
        _fail(str(exc))
    print(outcome.announce(), end="")


def _record(cfg: Any) -> None:
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.plan import plan_run
    from evidence_bench.experiment.record import record

    plain, _text = _resolved(cfg)
    _collecting()
    try:
        summary = record(
            plan_run(plain),
            provider=str(plain.get("provider", "simulator")),
            rounds=int(plain.get("record_rounds", 1)),
            deep=bool(plain.get("record_deep", True)),
            searches=bool(plain.get("record_searches", True)),
            page_timeout_s=float((plain.get("pages") or {}).get("timeout_s", 5.0)),
            allow_private=bool((plain.get("pages") or {}).get("allow_private", False)),
        )
    except EvidenceBenchError as exc:
        _fail(str(exc))
    for path in summary.replaced:
        print(f"evidence_bench: {path} could not be read; recorded it afresh", file=sys.stderr)
    for note in summary.afresh:
        print(f"evidence_bench: {note}", file=sys.stderr)
    print(
        f"recorded {summary.interactions} interactions for {summary.queries} queries "
        f"in {summary.directory}; manifest {summary.manifest}"
    )
    if summary.pages is not None:
        failed = ", ".join(f"{n} {reason}" for reason, n in summary.page_failures.items())
        print(f"recorded {summary.pages} new pages{f' ({failed})' if failed else ''}")


def _key_values(argv: list[str], allowed: dict[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in allowed:
            valid = ", ".join(f"{k}=<{v}>" for k, v in allowed.items())
            _fail(f"serve: unexpected argument {arg!r} (valid: {valid})", 2)
        values[key] = value
    return values


def _integer(args: dict[str, str], key: str, default: str | None) -> int | None:
    value = args.get(key, default)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{key}={value!r} is not a whole number") from None


def _serve(argv: list[str]) -> None:
    allowed = {"collection": "name or path", "port": "int", "token": "text"}
    allowed["rate_limit"] = "requests/s"
    _asks_help(
        argv,
        "usage: python -m evidence_bench serve "
        + " ".join(f"[{key}=<{kind}>]" for key, kind in allowed.items()),
    )
    args = _key_values(argv, allowed)
    from evidence_bench.collections.beir import load_collection
    from evidence_bench.collections.queryset import resolve_path
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.web.simulator import BraveSimulator, run_server

    name = args.get("collection", "cranfield")
    try:
        path = (
            Path(name)
            if Path(name).is_dir()
            else resolve_path(f"pkg://collections/{name}", "collection")
        )
        port = _integer(args, "port", "8765") or 0
        rate = _integer(args, "rate_limit", None)
        simulator = BraveSimulator(
            load_collection(path, name=path.name), token=args.get("token"), rate_limit=rate
        )
        run_server(simulator, "127.0.0.1", port)
    except ValueError as exc:
        _fail(f"serve: {exc}", 2)
    except EvidenceBenchError as exc:
        _fail(str(exc))


def _asks_help(argv: list[str], usage: str) -> None:
    """Print ``usage`` and exit 0 when ``argv`` is ``-h`` or ``--help``: before the command
    imports what it needs to work."""
    if argv in (["-h"], ["--help"]):
        print(usage)
        raise SystemExit(0)


def _report(argv: list[str]) -> None:
    usage = "usage: python -m evidence_bench report RUN_DIR"
    _asks_help(argv, usage)
    if len(argv) != 1:
        _fail(usage, 2)
    target = Path(argv[0])
    if not target.is_dir():
        _fail(f"report: {target} is not a directory", 2)
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.report.page import report

    try:
        path, note = report(target)  # a run directory, or a multirun of them
    except EvidenceBenchError as exc:
        _fail(str(exc))
    print(f"report: {note}", file=sys.stderr)  # whether the stored analysis was used, or why not
    print(f"report: {path}")


def _gather(argv: list[str]) -> None:
    usage = "usage: python -m evidence_bench gather SHARD_DIR... (or a multirun dir)"
    _asks_help(argv, usage)
    if not argv or any(arg.startswith("-") for arg in argv):
        _fail(usage, 2)
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.gather import gather_shards
    from evidence_bench.report.fresh import new_run_report

    try:
        outcome = gather_shards([Path(arg) for arg in argv], report=new_run_report)
    except EvidenceBenchError as exc:
        _fail(f"gather: {exc}")
    print(outcome.announce(), end="")


#: ``export``'s formats: :class:`evidence_bench.experiment.export.ExportFormat`'s values
#: (tests/test_main.py checks they agree), here so that ``export --help`` and a bad
#: argument answer before the exporter and its dependencies are imported.
EXPORT_FORMATS = ("csv", "trec")


def export_parser() -> argparse.ArgumentParser:
    """``python -m evidence_bench export``'s options (the CLI reference shows them)."""
    parser = argparse.ArgumentParser(
        prog="python -m evidence_bench export",
        description=(
            "Write a run's results in an interchange format: its CSVs (per_query.csv, "
            "summary.csv, feedback.csv, episodes.jsonl) or its TREC runs and qrels (trec/)."
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory to export")
    parser.add_argument(
        "--format",
        required=True,
        choices=EXPORT_FORMATS,
        help="csv: the tables as CSV, as runs wrote them before Parquet; trec: trec/qrels.txt "
        "and one gzipped TREC run per config, policy, round and stage",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="where to write (default: RUN_DIR itself); created if missing",
    )
    return parser


def _export(argv: list[str]) -> None:
    args = export_parser().parse_args(argv)
    target = Path(args.run_dir)
    if not target.is_dir():
        _fail(f"export: {target} is not a directory", 2)
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.export import export_run, written

    try:
        paths = export_run(target, args.format, args.out)
    except EvidenceBenchError as exc:
        _fail(f"export: {exc}")
    print(written(paths), end="")


def _check(argv: list[str]) -> None:
    from evidence_bench.gate import main as gate_main

    raise SystemExit(gate_main(argv))


def _livefetch(argv: list[str]) -> None:
    from evidence_bench.livefetch._cli import main as livefetch_main

    raise SystemExit(livefetch_main(argv))


def _collect_later(task: Any, argv: list[str]) -> None:
    """:func:`_hydra` with the cyclic garbage collector off until the task starts its work.

    Start-up imports numpy, Hydra, OmegaConf, httpx and the package (~80,000 objects, none
    of them garbage) and composes the config: each collection in between walks them all
    again, ~10-15% of start-up's CPU, which every run pays before its first episode (and,
    with workers, before they fork). The task turns it back on (:func:`_collecting`), and
    it is on again whatever happens here.
    """
    gc.disable()
    try:
        _hydra(task, argv)
    finally:
        gc.enable()


def _collecting(*, keep: bool = False) -> None:
    """The collector on again: the task's own work makes the garbage it is for.

    ``keep``: what exists now (start-up's modules and config) is moved out of its view for
    good (``gc.freeze``), for a process that runs one experiment's episodes itself and
    ends: the runner then leaves what it froze for the episodes (the replay worker, which
    this process keeps to its end) frozen too, and the tail's full collections
    (``release_memory``, three of them) walk only what the tail makes, not every object
    alive (~0.2 s each in a small run, a fifth of its CPU). Not with workers: the parent
    frees what it built for them once they fork, which a freeze would keep from being
    collected; nor for a multirun's or a tuning's several runs in one process.
    """
    gc.enable()
    if keep:
        gc.freeze()


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        raise SystemExit(0 if args else 2)
    command, rest = args[0], args[1:]
    try:
        _dispatch(command, rest)
    except KeyboardInterrupt:
        # Ctrl-C: what was being written is removed on the way out (a run's staging
        # directory, a baseline's or a cassette's temporary file); one line, not a traceback
        _fail("interrupted", 130)


def _dispatch(command: str, rest: list[str]) -> None:
    if command == "run":
        _collect_later(_run, rest)
    elif command == "record":
        _collect_later(_record, rest)
    elif command == "serve":
        _serve(rest)
    elif command == "report":
        _report(rest)
    elif command == "gather":
        _gather(rest)
    elif command == "export":
        _export(rest)
    elif command == "check":
        _check(rest)
    elif command == "livefetch":
        _livefetch(rest)
    elif command in ("pool", "assess"):
        from evidence_bench.assess import cli

        (cli.pool_command if command == "pool" else cli.assess_command)(rest)
    else:
        commands = "run, record, serve, report, gather, export, check, livefetch, pool, assess"
        _fail(f"unknown command {command!r}; commands: {commands}", 2)


if __name__ == "__main__":
    main()
