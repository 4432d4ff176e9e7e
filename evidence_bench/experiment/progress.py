"""The progress bar of ``run``, ``record`` and tuning: tqdm's, on a terminal only.

On a terminal, a bar on stderr; elsewhere (a CI log, a pipe, a file) nothing, so logs hold
what the commands print and no bar's carriage returns. ``progress=false`` turns it off
everywhere. No monitor thread: the runner's worker processes are forked while it counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, overload

from tqdm import tqdm

__all__ = ["progress_bar"]

T = TypeVar("T")


@overload
def progress_bar(
    items: Iterable[T], *, total: int | None, desc: str, unit: str, enabled: bool = True
) -> tqdm[T]: ...


@overload
def progress_bar(
    items: None, *, total: int | None, desc: str, unit: str, enabled: bool = True
) -> tqdm[Any]: ...


def progress_bar(
    items: Iterable[T] | None, *, total: int | None, desc: str, unit: str, enabled: bool = True
) -> tqdm[Any]:
    """``items``, counted on a bar while they are taken (``total`` of them), when
    ``enabled`` and stderr is a terminal; else taken as they are. Without ``items``, a bar
    its ``update()`` moves."""
    tqdm.monitor_interval = 0
    # disable=None: tqdm's own test, off unless its stream (stderr) is a terminal
    return tqdm(items, total=total, desc=desc, unit=unit, disable=None if enabled else True)
