"""The report in a real browser: headless Chromium loads it offline, logs nothing, draws it.

The report holds no script, so any console message is a fault: a Content-Security-Policy
violation (something tried to load or run) or an error. Chromium logs both as ``:CONSOLE``.
"""

from __future__ import annotations

import runpy
import subprocess
from pathlib import Path

import numpy as np
import pytest
from devtools import FLAGS
from PIL import Image
from report_fixtures import PAYLOAD_SCRIPT, write_run_dir

from evidence_bench.report import render_report

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_report(write_run_dir(tmp_path_factory.mktemp("browser")), trials=100)


def run_chromium(
    chromium: str, profile: Path, report: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    profile.mkdir()
    return subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *args, report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_dom_loads_without_console_messages(chromium: str, report: Path, tmp_path: Path) -> None:
    result = run_chromium(chromium, tmp_path / "profile", report, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_lines(result.stderr) == []
    dom = result.stdout
    assert '<table class="summary"' in dom
    assert 'id="verdict"' in dom
    # The summary's three rankings and the gain over the control, and an episode's breakdown.
    assert "Gain attributable to feedback: with feedback − control" in dom
    assert "Judgments add: with feedback − shuffled" in dom
    assert dom.count('class="mean shuffled"') > 40
    assert dom.count('class="mean control"') > 40
    assert '<table class="breakdown">' in dom
    assert "isolates the scorer switch" in dom
    assert "<script" not in dom.lower()
    assert PAYLOAD_SCRIPT.replace("<", "&lt;").replace(">", "&gt;") in dom


def test_screenshot_shows_the_report(chromium: str, report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = run_chromium(
        chromium,
        tmp_path / "profile",
        report,
        f"--screenshot={shot}",
        "--window-size=1280,2400",
        "--hide-scrollbars",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_lines(result.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(shot) as png:
        pixels = np.asarray(png.convert("RGB"), dtype=np.float64) / 255.0
    drawn = (pixels < 0.9).any(axis=-1).mean()
    assert drawn > 0.03  # text, tables and charts, not a blank page
    greens = ((pixels[..., 1] > pixels[..., 0] + 0.15) & (pixels[..., 1] > 0.3)).mean()
    assert greens > 0.0005  # colour-coded changes and the verdict's accent were drawn


@pytest.mark.parametrize("width", [1400, 390])
def test_the_page_never_scrolls_sideways(chromium: str, report: Path, width: int) -> None:
    """At a laptop's and a phone's width the document is no wider than the window: wide
    tables and charts scroll inside their own box, long cells wrap or fold."""
    widths = runpy.run_path(str(ROOT / "benchmarks" / "report_widths.py"), run_name="widths")
    got = widths["measure"](chromium, report, width)
    assert got["viewport"] == width
    assert got["width"] <= width, got["wide"]


def test_every_chromium_started_resolves_no_host_but_loopback() -> None:
    """The benchmark and the browser tests start Chromium with one list of flags, whose
    resolver rule maps every host but 127.0.0.1 to nothing: no page, font or prefetch can
    leave loopback."""
    widths = runpy.run_path(str(ROOT / "benchmarks" / "report_widths.py"), run_name="widths")
    rule = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    assert rule in FLAGS
    assert set(widths["FLAGS"]) - set(FLAGS) == {"--hide-scrollbars"}
    assert set(FLAGS) - set(widths["FLAGS"]) == {"--enable-logging=stderr", "--v=0"}
