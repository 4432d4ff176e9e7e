"""``assess`` in a real browser: headless Chromium, driven by the keyboard alone.

Keys go in as the keyboard sends them (DevTools ``Input.dispatchKeyEvent``, over a pipe:
``tests/devtools.py``); the page's own script answers them, and the test reads only what
the page shows and what ``assess`` wrote to disk.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from devtools import Browser

from evidence_bench.collections.queryset import load_query_set

pytestmark = pytest.mark.slow

# Cranfield documents that its qrels do not judge for queries 1 and 2
POOL = [("1", "100"), ("1", "101"), ("2", "300"), ("2", "301")]
PROGRESS = "document.getElementById('progress')?.textContent ?? ''"
GRADE = "document.getElementById('grade').textContent"
HELP_SHOWN = "!document.getElementById('help').hidden"


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    path = tmp_path / "pool.jsonl"
    rows = [
        {
            "query_id": query_id,
            "query": f"query {query_id}",
            "doc_id": doc_id,
            "url": f"https://cranfield.evidence-bench.test/doc/{doc_id}",
            "title": f"document {doc_id}",
            "snippet": f"the snippet of {doc_id}",
        }
        for query_id, doc_id in POOL
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@contextmanager
def assess(pool: Path, qrels: Path) -> Iterator[str]:
    """``evidence-bench assess`` as a user starts it; its address, then Ctrl-C."""
    command = [sys.executable, "-m", "evidence_bench", "assess", str(pool), "--qrels", str(qrels)]
    server = subprocess.Popen(
        [*command, "--assessor", "browser"],
        # a background job inherits SIGINT ignored (Python then installs no handler): the
        # server takes the default one, as a terminal's foreground process has it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if found := re.search(r"open (http://127\.0\.0\.1:\d+/)", line):
                break
        else:
            raise AssertionError(f"assess printed no address: {server.stderr.read()}")
        yield found.group(1)
        server.send_signal(signal.SIGINT)
        _, errors = server.communicate(timeout=20)
        assert server.returncode == 0, errors
        assert errors == "assess: stopped; every judgment is saved\n"
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()


@contextmanager
def browser(chromium: str, profile: Path, url: str) -> Iterator[Browser]:
    page = Browser(chromium, profile, url)
    try:
        page.wait_for(PROGRESS, lambda text: text.startswith("overall"))
        yield page
    finally:
        page.close()


def shows(page: Browser, progress: str, grade: str = "not judged yet") -> None:
    page.wait_for(PROGRESS, lambda text: text == progress)
    assert page.evaluate(GRADE) == grade


def rows(qrels: Path) -> list[str]:
    return qrels.read_text().splitlines()


def test_judged_by_keyboard_saved_at_once_and_resumed(
    chromium: str, pool: Path, tmp_path: Path
) -> None:
    qrels = tmp_path / "mine.tsv"
    header = "query-id\tcorpus-id\tscore"
    with assess(pool, qrels) as url, browser(chromium, tmp_path / "p1", url) as page:
        shows(page, "overall 0/4 judged · query 1: 0/2 · result 1 of 4")
        page.press("?")  # help; the next key only closes it
        assert page.evaluate(HELP_SHOWN) is True
        page.press("j")
        assert page.evaluate(HELP_SHOWN) is False
        shows(page, "overall 0/4 judged · query 1: 0/2 · result 1 of 4")
        page.press("3")  # saved at once, and on to the next result not judged
        shows(page, "overall 1/4 judged · query 1: 1/2 · result 2 of 4")
        assert rows(qrels) == [header, "1\t100\t3"]
        page.press("k")  # back: the grade given is shown, and can be changed
        shows(
            page, "overall 1/4 judged · query 1: 1/2 · result 1 of 4", "judged 3: highly relevant"
        )
        page.press("0")
        shows(page, "overall 1/4 judged · query 1: 1/2 · result 2 of 4")
        assert rows(qrels) == [header, "1\t100\t0"]
        page.press("2")
        shows(page, "overall 2/4 judged · query 2: 0/2 · result 3 of 4")
        page.press("u")  # undo takes back the 2 and shows its result again
        shows(page, "overall 1/4 judged · query 1: 1/2 · result 2 of 4")
        assert rows(qrels) == [header, "1\t100\t0"]
        page.press("1")
        shows(page, "overall 2/4 judged · query 2: 0/2 · result 3 of 4")
        page.press("j")
        shows(page, "overall 2/4 judged · query 2: 0/2 · result 4 of 4")
        page.evaluate("window.before_reload = true")
        page.send("Page.reload")  # a reload starts at the first result not judged
        page.wait_for("window.before_reload === undefined", bool)
        shows(page, "overall 2/4 judged · query 2: 0/2 · result 3 of 4")
    assert rows(qrels) == [header, "1\t100\t0", "1\t101\t1"]
    # Ctrl-C and a closed tab lost nothing: a new assess resumes there
    with assess(pool, qrels) as url, browser(chromium, tmp_path / "p2", url) as page:
        shows(page, "overall 2/4 judged · query 2: 0/2 · result 3 of 4")
        page.press("2")
        page.press("3")
        page.wait_for(PROGRESS, lambda text: text == "overall 4/4 judged")
        assert page.evaluate("document.getElementById('query').textContent") == (
            "nothing left to judge"
        )
    assert rows(qrels) == [header, "1\t100\t0", "1\t101\t1", "2\t300\t2", "2\t301\t3"]
    log = [
        json.loads(line)
        for line in qrels.with_name("mine.tsv.log.jsonl").read_text().split("\n")[:-1]
    ]
    assert [(entry["act"], entry["doc_id"], entry["grade"]) for entry in log] == [
        ("judge", "100", 3),
        ("judge", "100", 0),
        ("judge", "101", 2),
        ("undo", "101", None),
        ("judge", "101", 1),
        ("judge", "300", 2),
        ("judge", "301", 3),
    ]
    assert {entry["assessor"] for entry in log} == {"browser"}
    # the file is one a run reads: query_set.qrels adds it to Cranfield's own judgments
    conf = {"name": "cranfield", "path": "pkg://collections/cranfield", "cassettes": "c"}
    added = load_query_set({**conf, "qrels": str(qrels)}, limit=None).qrels["2"]
    assert added["https://cranfield.evidence-bench.test/doc/301"] == 3
