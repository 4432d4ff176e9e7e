"""Where configs are looked up, and the experiments found there with their descriptions;
light (PyYAML, no Hydra), so ``--help`` lists them before anything heavy is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from evidence_bench._resources import packaged
from evidence_bench.errors import ConfigurationError

__all__ = ["CONF_DIR", "Experiment", "experiments", "search_dirs", "shown"]

#: The shipped configs (the checkout's ``conf/``, package data in a wheel)
CONF_DIR = packaged("conf")


def search_dirs(config_dir: str | Path | None = None) -> tuple[Path, ...]:
    """Where configs are looked up, the first that has one winning: the user's directory
    (``config_dir``, else ``conf/`` in the working directory if there is one), then the
    shipped one. So a user's experiments, query sets and policies sit beside the shipped
    ones, can name them (``defaults: [/policy@policies.oracle: oracle]``) and can shadow them.
    """
    if config_dir is None:
        user = Path("conf")
        if not user.is_dir():
            return (CONF_DIR,)
    else:
        user = Path(config_dir).expanduser()
        if not user.is_dir():
            raise ConfigurationError(f"--config-dir {config_dir}: no such directory")
    user = user.resolve()
    return (CONF_DIR,) if user == CONF_DIR else (user, CONF_DIR)


@dataclass(frozen=True)
class Experiment:
    """One ``experiment/NAME.yaml`` on the config search path."""

    #: What ``+experiment=NAME`` names.
    name: str
    #: Its ``experiment.description`` ("" when it has none).
    description: str
    #: The file (a user's shadows a shipped one of the same name).
    path: Path


def experiments(config_dir: str | Path | None = None) -> list[Experiment]:
    """Every experiment :func:`search_dirs` finds, sorted by name, the user's first where
    both have one. A file that does not parse is listed with the parse error as its
    description: ``--help`` still answers, and ``run`` then says what is wrong."""
    found: dict[str, Experiment] = {}
    for directory in search_dirs(config_dir):
        for path in sorted((directory / "experiment").glob("*.yaml")):
            if path.stem not in found:
                found[path.stem] = Experiment(path.stem, _description(path), path)
    return [found[name] for name in sorted(found)]


def _description(path: Path) -> str:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return f"(unreadable: {str(exc).splitlines()[0]})"
    experiment = data.get("experiment") if isinstance(data, dict) else None
    description = experiment.get("description") if isinstance(experiment, dict) else None
    return " ".join(str(description).split()) if description else ""


def shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is under it (as messages show it)."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path
