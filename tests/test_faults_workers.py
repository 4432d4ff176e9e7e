"""Issue 14.2: a worker's failure of any kind ends the run; it never hangs the parent.

A worker sends its exception to the parent by pickle. An error whose class cannot be
rebuilt from its pickle (``ProviderStatusError.__init__`` takes four arguments, the default
pickle replays one) killed the pool's result thread, and ``run`` waited forever.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import evidence_bench.errors as errors
from evidence_bench.errors import (
    BlockedAddressError,
    CacheError,
    ConfigurationError,
    DataError,
    EvidenceBenchError,
    FeedbackError,
    ProviderStatusError,
    QueryError,
    RateLimitError,
    RegressionError,
    ReplayMissError,
    RequestError,
    ResponseFormatError,
    WorkerError,
    WriteError,
)

ROOT = Path(__file__).resolve().parents[1]

#: One instance of every class in the hierarchy, with the message it must keep.
SAMPLES: list[tuple[EvidenceBenchError, str]] = [
    (EvidenceBenchError("base"), "base"),
    (ConfigurationError("workers=-1 must be 0"), "workers=-1 must be 0"),
    (QueryError("query is empty"), "query is empty"),
    (FeedbackError("no result 7"), "no result 7"),
    (DataError("qrels.tsv:2: bad"), "qrels.tsv:2: bad"),
    (RequestError("could not reach Brave"), "could not reach Brave"),
    (
        BlockedAddressError("169.254.169.254 is a link-local address, not the open web"),
        "169.254.169.254 is a link-local address",
    ),
    (
        ProviderStatusError(500, "INTERNAL", "boom", "http://127.0.0.1:1/res/v1/web/search"),
        "Brave answered HTTP 500 (INTERNAL: boom)",
    ),
    (ProviderStatusError(502, None, None), "Brave answered HTTP 502 (no error body)"),
    (
        RateLimitError(429, "RATE_LIMITED", "slow down", "http://x/web/search", retry_after=1.5),
        "Brave answered HTTP 429 (RATE_LIMITED: slow down)",
    ),
    (ResponseFormatError("web.results[0].url missing"), "web.results[0].url missing"),
    (ReplayMissError("no recorded response for query id '1'"), "no recorded response for"),
    (RegressionError("nDCG@10 fell"), "nDCG@10 fell"),
    (WriteError("could not write x.json: No space left"), "could not write x.json: No space"),
    (WorkerError("query '1' failed: TypeError: t"), "query '1' failed: TypeError: t"),
    (CacheError("LiveFetch cache lf.sqlite: database is locked"), "LiveFetch cache lf.sqlite"),
]


def test_every_class_of_the_hierarchy_has_a_sample() -> None:
    """A new error class must be added to SAMPLES, so its pickling is tested too."""
    classes = {getattr(errors, name) for name in errors.__all__}
    assert classes == {type(error) for error, _ in SAMPLES}


@pytest.mark.parametrize(
    ("error", "message"),
    SAMPLES,
    ids=[f"{type(e).__name__}-{i}" for i, (e, _) in enumerate(SAMPLES)],
)
def test_every_error_survives_pickling_with_its_message_and_attributes(
    error: EvidenceBenchError, message: str
) -> None:
    error.extra_note = "set after construction"  # type: ignore[attr-defined]
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(error, protocol=protocol))
        assert type(copy) is type(error)
        assert str(copy) == str(error) and str(copy).startswith(message)
        assert copy.args == error.args
        assert vars(copy) == vars(error)


def test_an_unpickled_provider_error_keeps_its_fields() -> None:
    error = RateLimitError(429, "RATE_LIMITED", "slow", "http://x/web/search", retry_after=2.0)
    error.args = ("query '1' (cassettes/1.json): " + str(error),)  # as the runner names it
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.code, copy.detail, copy.url, copy.retry_after) == (
        429,
        "RATE_LIMITED",
        "slow",
        "http://x/web/search",
        2.0,
    )
    assert str(copy) == "query '1' (cassettes/1.json): Brave answered HTTP 429 (RATE_LIMITED: slow)"
    assert isinstance(copy, ProviderStatusError) and isinstance(copy, RequestError)


_KILL_A_WORKER = textwrap.dedent(
    """
    import os, sys
    from evidence_bench.errors import WorkerError
    from evidence_bench.experiment import runner
    from evidence_bench.experiment.config import compose
    from evidence_bench.experiment.plan import plan_run

    cfg, _ = compose(["+experiment=smoke"])
    real = runner._run_query

    def dying(plan, query_id):
        if query_id == "3":
            os._exit(9)  # as the kernel's OOM killer would end it: no exception, no result
        return real(plan, query_id)

    runner._run_query = dying  # in the parent, before the fork: the workers inherit it
    try:
        list(runner.execute(plan_run(cfg), ["1", "2", "3", "4", "5"], workers=2))
    except WorkerError as exc:
        print(exc)
        sys.exit(3)
    sys.exit(0)
    """
)


def test_a_worker_process_that_dies_ends_the_run_instead_of_hanging() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _KILL_A_WORKER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,  # multiprocessing.Pool waited forever here
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("a worker process stopped unexpectedly (killed, or out of")


def test_a_bug_in_one_process_is_one_line_naming_the_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """workers=1 runs in process: the same translation, and the cause stays chained."""
    from evidence_bench.experiment import runner
    from evidence_bench.experiment.config import compose
    from evidence_bench.experiment.plan import plan_run

    cfg, _ = compose(["+experiment=smoke"])

    def broken(plan: object, query_id: str) -> object:
        return {}[query_id]  # a KeyError, not one of the package's errors

    monkeypatch.setattr(runner, "_run_query", broken)
    with pytest.raises(WorkerError) as caught:
        list(runner.execute(plan_run(cfg), ["1"], workers=1))
    assert str(caught.value).startswith("query '1' failed: KeyError: '1' at ")
    assert "test_faults_workers.py" in str(caught.value)
    assert isinstance(caught.value.__cause__, KeyError)
