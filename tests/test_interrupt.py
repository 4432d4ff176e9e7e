"""Ctrl-C during ``python -m evidence_bench run``: one line on stderr, exit 130, and
nothing of the run left behind (its staging and reserved directories are removed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.fault_fixtures import ROOT


def test_ctrl_c_during_a_run_says_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # a background job inherits SIGINT ignored (Python then installs no handler): the child
    # takes the default one, as a terminal's foreground process has it
    script = textwrap.dedent(
        """
        import signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from evidence_bench.__main__ import main
        main(sys.argv[1:])
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, "run", "+experiment=ci", f"runs_dir={runs}",
         "progress=false"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        # interrupted once the run has reserved its directory (its episodes are under way)
        while not any((runs / "ci").glob(".*.tmp")) and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert err == "evidence_bench: interrupted\n"
    assert sorted(p.name for p in (runs / "ci").iterdir()) == []
