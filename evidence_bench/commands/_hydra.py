"""Hydra for ``run`` and ``record``: one-line errors for a bad override, every job of a
multirun checked before the first runs."""

from __future__ import annotations

import gc
import itertools
import sys
from typing import Any

from evidence_bench.commands._common import fail

__all__ = ["collecting", "config_dir_option", "hydra_task", "one_line"]


def one_line(exc: BaseException) -> str:
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


#: Hydra's launchers that an extra installs: override value -> (its plugin module, the extra).
_LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "joblib"),
    "ray": ("hydra_plugins.hydra_ray_launcher", "ray"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
}


def _require_launcher(argv: list[str]) -> None:
    """Exit with one line naming the extra of a ``hydra/launcher=NAME`` not installed
    (Hydra's own error would only list the launchers it has)."""
    import importlib.util

    for arg in argv:
        key, _, name = arg.lstrip("+").partition("=")
        if key != "hydra/launcher" or name not in _LAUNCHERS:
            continue
        module, extra = _LAUNCHERS[name]
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # no plugin at all: no hydra_plugins package
            found = False
        if not found:
            fail(
                f"{arg} needs Hydra's {name} launcher, an optional extra: "
                f"pip install 'evidence_bench[{extra}]'"
            )


def _jobs(argv: list[str]) -> list[list[str]] | None:
    """The overrides of each of a multirun's jobs, in Hydra's order: the product its basic
    sweeper makes (``BasicSweeper.split_arguments``, Hydra 1.3), through the public override
    parser; None where the sweeper would refuse them (Hydra then reports it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides([a for a in argv if a[:1] != "-"])
        choices: dict[str, list[str]] = {}
        for override in parsed:
            key = override.get_key_element()
            if not override.is_sweep_override():
                choices[key] = [f"{key}={override.get_value_element_as_str()}"]
            elif override.is_discrete_sweep():
                choices[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
            else:
                return None  # an interval sweep: the basic sweeper refuses it
        return [list(job) for job in itertools.product(*choices.values())]
    except Exception:
        return None


def _precheck(argv: list[str], config_dir: str | None = None) -> None:
    """Compose and plan the config (each job of a multirun) before Hydra runs, so a bad
    override is one line naming its job, before any job runs."""
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
            fail(where + one_line(exc))
        try:
            plan_run(plain)  # the config's checks, and the values a run would refuse
        except EvidenceBenchError as exc:
            fail(where + str(exc))


def config_dir_option(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``--config-dir DIR`` (``-cd DIR``, ``--config-dir=DIR``), and that DIR,
    searched before the shipped configs (Hydra's own flag would search it after)."""
    rest: list[str] = []
    config_dir = None
    args = iter(argv)
    for arg in args:
        if arg in ("--config-dir", "-cd"):
            config_dir = next(args, None)
            if config_dir is None:
                fail(f"{arg} needs a directory", 2)
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
    argv, config_dir = config_dir_option(argv)
    try:
        primary = str(config_dirs(config_dir)[0])
    except EvidenceBenchError as exc:
        fail(str(exc), 2)
    _require_launcher(argv)
    _precheck(argv, config_dir)
    sys.argv = [f"evidence_bench {task.__name__.removeprefix('_')}", *argv]
    hydra.main(config_path=primary, config_name=ROOT_CONFIG, version_base=None)(task)()


def hydra_task(task: Any, argv: list[str]) -> None:
    """:func:`_hydra` with the cyclic garbage collector off until the task turns it back on
    (:func:`collecting`): start-up makes many objects and no garbage.

    Kept with :func:`collecting` (issue 27's rule: a gain of 20% or more):
    ``benchmarks/bench_ab.py -- run +experiment=smoke workers=1``, CPU 2.69 s without the
    two, 1.87 s with them (-30%), wall 9.4 s -> 6.3 s (load 10).
    """
    gc.disable()
    try:
        _hydra(task, argv)
    finally:
        gc.enable()


def collecting(*, keep: bool = False) -> None:
    """The collector on again. ``keep``: what exists now is frozen out of its view
    (``gc.freeze``), for a process that runs one experiment's episodes itself and ends (not
    with workers, whose parent frees what it built for them, nor several runs at once)."""
    gc.enable()
    if keep:
        gc.freeze()
