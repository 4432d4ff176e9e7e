"""The progress bar of ``run``, ``record`` and tuning: tqdm's, on stderr, on a terminal only
(``progress=false``: nowhere); no monitor thread, as the runner forks while it counts.
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
