# ruff: noqa: E501  (the probe is JavaScript, and the docstring a command line)
"""How wide a report is in headless Chromium, at a laptop's and a phone's width.

    python benchmarks/report_widths.py REPORT.html [...] [--widths 1400,390] [--screenshots DIR]

Prints, per report and window width, the document's width (``scrollWidth``; wider than the
window: the page scrolls sideways) and the elements reaching past the window's right edge.
The report itself runs no script (its CSP forbids it), so a copy is measured: the CSP
removed and one script added that writes the figures into the DOM, which ``--dump-dom``
prints. Headless Chromium's window is at least 500 px wide, so the copy is shown in an
``<iframe>`` of the width measured (a phone's 390 px), whose media queries answer to it. ``tests/test_report_browser.py`` asserts the widths with :func:`measure`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if str(_ROOT := Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # benchmarks/chromium.py, shared with tests/devtools.py
from benchmarks.chromium import FLAGS as CHROMIUM_FLAGS

#: Chromium's offline flags (benchmarks/chromium.py), and no scrollbar to measure.
FLAGS = (*CHROMIUM_FLAGS, "--hide-scrollbars")
_CSP = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>')
_PROBE = """<script>
window.addEventListener("load", () => {
  const w = document.documentElement.clientWidth, out = [];
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.right > w + 1 && r.width > 0) {
      let hidden = false;
      for (let p = e.parentElement; p; p = p.parentElement) {
        const s = getComputedStyle(p);
        if (s.overflowX !== "visible" && p.getBoundingClientRect().right <= w + 1) { hidden = true; break; }
      }
      if (!hidden) out.push(e.tagName.toLowerCase() + (e.className ? "." + String(e.className).split(" ").join(".") : "") + " " + Math.round(r.right));
    }
  }
  const host = parent.document, m = host.createElement("pre");
  m.id = "measured";
  m.textContent = JSON.stringify({width: document.documentElement.scrollWidth, viewport: w, wide: out.slice(0, 12)});
  host.body.appendChild(m);
});
</script>"""


def _framed(page: Path, width: int, height: int) -> Path:
    """A page showing ``page`` in an iframe ``width`` px wide."""
    frame = page.with_name(f"frame-{page.stem}.html")
    frame.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe src="{page.name}" width="{width}" height="{height}" style="border:0">'
        "</iframe></body></html>",
        "utf-8",
    )
    return frame


def _chromium(chromium: str, scratch: str, page: Path, *args: str) -> str:
    done = subprocess.run(
        [chromium, *FLAGS, "--allow-file-access-from-files", f"--user-data-dir={scratch}/profile",
         *args, page.as_uri()],
        capture_output=True, text=True, timeout=180, check=True,
    )  # fmt: skip
    return done.stdout


def measure(chromium: str, report: Path, width: int, height: int = 900) -> dict[str, object]:
    """``{"width": document width, "viewport": window width, "wide": [elements past it]}``."""
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "probe.html"
        html = _CSP.sub("", report.read_text("utf-8"))
        page.write_text(html.replace("</body>", _PROBE + "</body>"), "utf-8")
        frame = _framed(page, width, height)
        window = f"--window-size={max(width, 500) + 20},{height}"
        out = _chromium(
            chromium, scratch, frame, window, "--virtual-time-budget=5000", "--dump-dom"
        )
    found = re.search(r'<pre id="measured">(.*?)</pre>', out, re.S)
    if found is None:
        raise RuntimeError(f"{report}: the probe wrote nothing at {width} px")
    text = found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&gt;", ">")
    return dict(json.loads(text.replace("&lt;", "<")))


def screenshot(chromium: str, report: Path, width: int, out: Path, height: int = 2400) -> None:
    """A PNG of the report's top ``height`` pixels at ``width``."""
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        page.write_text(report.read_text("utf-8"), "utf-8")
        frame = _framed(page, width, height)
        window = f"--window-size={max(width, 500)},{height}"
        _chromium(chromium, scratch, frame, window, f"--screenshot={out.resolve()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--widths", default="1400,390")
    parser.add_argument("--screenshots", type=Path)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium not found (apt-get install chromium)", file=sys.stderr)
        return 1
    for report in args.reports:
        for width in (int(w) for w in args.widths.split(",")):
            got = measure(chromium, report, width)
            print(f"{report}  window {width} px: document {got['width']} px  {got['wide']}")
            if args.screenshots:
                args.screenshots.mkdir(parents=True, exist_ok=True)
                name = f"{report.parent.name}-{report.stem}-{width}.png"
                screenshot(chromium, report, width, args.screenshots / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
