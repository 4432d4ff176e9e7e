"""Hydra for ``run`` and ``record``: one-line errors for a bad override, every job of a
multirun checked before the first runs.

``__main__``-level wiring only: the task functions (:mod:`evidence_bench.commands.run`) hand
their resolved config to the plain functions that do the work.
"""

from __future__ import annotations

import gc
import itertools
import sys
from typing import Any

from evidence_bench.commands._common import fail

__all__ = ["collecting", "config_dir_option", "hydra_task", "one_line", "resolved"]


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


def _jobs(argv: list[str]) -> list[list[str]] | None:
    """The overrides of each of a multirun's jobs, in Hydra's order (None when Hydra's
    sweeper would refuse them: Hydra then reports it).

    The cartesian product Hydra's basic sweeper makes (``BasicSweeper.split_arguments``,
    hydra/_internal/core_plugins/basic_sweeper.py, 1.3), through the public override
    parser: a later override of a key replaces an earlier one in its place, and only
    enumerable sweeps (choices, ranges) are expanded.
    """
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
    """Compose the config once before Hydra runs, so a bad override is one clear line
    (Hydra's own report is several lines and a stack hint), and plan it as a run would, for
    the values only the plan refuses. A multirun is checked job by job, before Hydra
    creates its sweep directory (``<runs_dir>/<experiment.name>``): a bad value of its
    third job fails at once, naming the job, not after the first two ran."""
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
    _precheck(argv, config_dir)
    sys.argv = [f"evidence_bench {task.__name__.removeprefix('_')}", *argv]
    hydra.main(config_path=primary, config_name=ROOT_CONFIG, version_base=None)(task)()


def hydra_task(task: Any, argv: list[str]) -> None:
    """:func:`_hydra` with the cyclic garbage collector off until the task starts its work.

    Start-up imports numpy, Hydra, OmegaConf, httpx and the package (~80,000 objects, none
    of them garbage) and composes the config: each collection in between walks them all
    again, ~10-15% of start-up's CPU, which every run pays before its first episode (and,
    with workers, before they fork). The task turns it back on (:func:`collecting`), and
    it is on again whatever happens here.

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


def resolved(cfg: Any) -> tuple[dict[str, Any], str]:
    from omegaconf import OmegaConf

    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}, OmegaConf.to_yaml(cfg, resolve=True)
