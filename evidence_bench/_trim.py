"""Hand freed heap memory back to the system between the steps of a run's tail."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
from collections.abc import Iterator
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_memory() -> None:
    """Collect cycles, then glibc's ``malloc_trim(0)``: numpy's and pandas' arrays of a few
    MB come from the heap once glibc has raised its mmap threshold (``mallopt(3)``), and a
    freed one stays resident until trimmed (a sweep's tail held ~70 MB so). Elsewhere
    (musl, macOS) only the collection."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def old_objects_frozen() -> Iterator[None]:
    """Every object alive on entry moved to the collector's permanent generation
    (:func:`gc.freeze`) until exit: a collection, :func:`release_memory`'s and the
    automatic ones the tail's allocations trigger, then walks only what was made since (a
    sweep's parent holds ~130k older objects, ~0.1 s a full collection, to find none of
    them garbage). A cycle among the older objects that becomes garbage meanwhile waits for
    the exit. Nothing is frozen when the caller has frozen objects itself."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside, as it was after (a nested pause leaves it
    paused): for work that allocates many containers that form no cycles (a query's
    episodes, the simulator's index), whose automatic collections would walk every object
    of the process each time and find nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
