"""Compute independent parts of a run's tail at once, in processes forked from this one."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar, cast

from evidence_bench.errors import WorkerError

__all__ = ["both", "in_parallel"]

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")

#: The tasks of the pool being run, as the forked processes inherit them.
_TASKS: Sequence[Callable[[], Any]] = ()


def in_parallel(tasks: Sequence[Callable[[], T]], *, processes: int) -> list[T]:
    """Each task's result, in ``tasks`` order; the same whatever ``processes`` is, for
    tasks that depend only on what exists when they are handed over (and change none of it).

    ``processes`` 1 or less (or one task): each task in turn, here. More: the first task
    here while up to ``processes - 1`` processes forked from this one run the others. They
    see this process' memory as it is when called (nothing is pickled to them, as a
    spawned process would need), and send their results back pickled; what a task changes
    there stays there. A task's error is raised here as it was raised; a forked process
    that dies (killed, out of memory) is a :class:`~evidence_bench.errors.WorkerError`."""
    if processes <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    global _TASKS
    _TASKS = tasks
    context = multiprocessing.get_context("fork")
    try:
        with ProcessPoolExecutor(min(processes - 1, len(tasks) - 1), mp_context=context) as pool:
            futures = [pool.submit(_run, at) for at in range(1, len(tasks))]
            first = tasks[0]()
            return [first, *(future.result() for future in futures)]
    except BrokenProcessPool as exc:
        message = "a process of the run's tail stopped unexpectedly (killed, or out of memory?)"
        raise WorkerError(f"{message}: {exc}") from exc
    finally:
        _TASKS = ()


def both(first: Callable[[], A], second: Callable[[], B], *, processes: int) -> tuple[A, B]:
    """``(first(), second())``, as :func:`in_parallel` computes them."""
    one, two = in_parallel([first, second], processes=processes)
    return cast(A, one), cast(B, two)


def _run(at: int) -> Any:
    return _TASKS[at]()
