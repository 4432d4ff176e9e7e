"""A plain ``run`` composes its config once (``commands._hydra._run_once``) and hands the task
exactly what ``hydra.main``'s path, which composes it three times, hands it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import evidence_bench.commands._hydra as entry
import evidence_bench.experiment.run as run_module
from evidence_bench.__main__ import main


class _Outcome:
    def announce(self) -> str:
        return ""


def _seen(
    args: list[str], monkeypatch: pytest.MonkeyPatch, *, once: bool
) -> tuple[dict[str, Any], bool]:
    """What ``perform_run`` and Hydra's job config are given for ``run ARGS``, through the
    one-composition path (``once``) or ``hydra.main``'s; and whether ``_run_once`` ran it."""
    seen: dict[str, Any] = {}

    def perform(cfg: Any, text: str, *, run_dir: Any, overrides: Any, report: Any) -> _Outcome:
        from hydra.core.hydra_config import HydraConfig

        hydra_cfg = HydraConfig.get()
        seen.update(
            cfg=cfg,
            text=text,
            run_dir=run_dir,
            overrides=overrides,
            mode=hydra_cfg.mode,
            hydra_overrides=list(hydra_cfg.overrides.hydra),
            output_dir=hydra_cfg.runtime.output_dir,
            job_name=hydra_cfg.job.name,
        )
        return _Outcome()

    monkeypatch.setattr(run_module, "perform_run", perform)
    monkeypatch.setattr(sys, "argv", ["evidence_bench", "run", *args])
    used = False
    real = entry._run_once

    def run_once(task: Any, argv: list[str], *primary: str) -> bool:
        nonlocal used
        used = once and real(task, argv, *primary)
        return used

    monkeypatch.setattr(entry, "_run_once", run_once)
    main(["run", *args])
    return seen, used


@pytest.mark.parametrize(
    "extra",
    [[], ["hydra.run.dir={tmp}/hydra_run", "eval.measures=[nDCG@10,AP]", "workers=1"]],
)
def test_a_plain_run_gets_what_hydra_main_gives_it(
    extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["+experiment=smoke", f"runs_dir={tmp_path}", *(a.format(tmp=tmp_path) for a in extra)]
    # a list override has a comma: it takes hydra.main's path
    expect_once = not any("," in a for a in args)
    once, used = _seen(args, monkeypatch, once=True)
    usual, _ = _seen(args, monkeypatch, once=False)
    assert used is expect_once
    assert once == usual
    assert once["mode"].name == "RUN"
    assert once["hydra_overrides"] == [a for a in args if a.startswith("hydra.")] + [
        "hydra.mode=RUN"
    ]
    assert once["overrides"] == [a for a in args if not a.startswith("hydra.")]
    assert once["cfg"]["experiment"]["name"] == "smoke"


def test_the_run_directory_hydra_run_dir_names_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "made" / "here"
    seen, used = _seen(
        ["+experiment=smoke", f"runs_dir={tmp_path}", f"hydra.run.dir={target}"],
        monkeypatch,
        once=True,
    )
    assert used
    assert target.is_dir()
    assert seen["output_dir"] == str(target)


@pytest.mark.parametrize(
    "args",
    [
        ["+experiment=smoke", "ranker.bta=0.5"],  # does not compose
        ["+experiment=smoke", "workers=-1"],  # composes, fails check_config
        ["+experiment=ranker_compare"],  # sets hydra.mode: MULTIRUN
        ["+experiment=smoke", "--cfg", "job"],  # a flag
        ["+experiment=smoke", "seed=1,2"],  # a sweep
    ],
)
def test_anything_but_a_plain_valid_run_is_left_to_the_usual_path(args: list[str]) -> None:
    ran: list[Any] = []

    def _run(cfg: Any) -> None:
        ran.append(cfg)

    assert entry._run_once(_run, args) is False
    assert ran == []
