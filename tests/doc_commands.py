"""The shell commands of README.md and docs/, read as /work/DOCS_CONVENTION.md (and
docs/reference/development.rst) writes them, and a page's runnable blocks as one script.

A block is an ``sh`` code block (RST ``.. code-block:: sh``, Markdown ```` ```sh ````); a
comment line right above it marks it (RST ``.. docs-test: MARK (reason)``, Markdown
``<!-- docs-test: MARK (reason) -->``); ``.. docs-test: setup`` with an indented body (in
Markdown, the lines up to ``-->``) holds commands run before the next block, not rendered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MARKS", "SHELLS", "Block", "page_script", "read_blocks"]

ROOT = Path(__file__).resolve().parents[1]
SHELLS = ("sh", "bash", "shell", "console")
MARKS = ("slow", "needs-key", "needs-network", "background", "skip", "sample")
#: the port the docs write a server on; the test starts it on port 0 and puts its own here
DOC_PORT = "8765"

_RST_BLOCK = re.compile(r"^(\s*)\.\. code-block:: *(\S+)\s*$")
_RST_MARK = re.compile(r"^\s*\.\. docs-test: *(.*)$")
_MD_FENCE = re.compile(r"^\s*```(\S*)\s*$")
_MD_MARK = re.compile(r"^\s*<!-- docs-test: *(.*?)\s*(-->)?\s*$")


@dataclass(frozen=True)
class Block:
    """One shell block: where it is, how it is marked, its text and the set-up before it."""

    page: str
    line: int
    text: str
    marks: tuple[str, ...] = ()
    reason: str = ""
    name: str = ""  # a sample's name
    setup: str = ""
    problems: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def exit_code(self) -> int:
        """The exit the block's last command must give (``exit=N``; 0 without)."""
        return next((int(m[5:]) for m in self.marks if m.startswith("exit=")), 0)

    def runs_with(self, runnable: set[str]) -> bool:
        """Whether a run of the ``runnable`` marks runs it (``sample`` and ``exit=N`` say
        what to check, not whether it runs)."""
        return set(self.marks) - {"sample", f"exit={self.exit_code}"} <= runnable

    def commands(self) -> list[str]:
        """The block's commands, ``\\``-continued lines joined, comments and blanks left out."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        return [
            line.strip()
            for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]


def _parse_mark(text: str) -> tuple[tuple[str, ...], str, str, list[str]]:
    reason = ""
    if "(" in text:
        text, _, rest = text.partition("(")
        reason = rest.rsplit(")", 1)[0].strip()
    words = text.split()
    marks, name, problems = [], "", []
    iterator = iter(words)
    for word in iterator:
        if re.fullmatch(r"exit=[1-9][0-9]*", word):
            marks.append(word)
            continue
        if word not in MARKS:
            problems.append(f"unknown mark {word!r} (known: {', '.join(MARKS)})")
            continue
        marks.append(word)
        if word == "sample":
            name = next(iterator, "")
            if not name:
                problems.append("sample without a name")
    if "skip" in marks and not reason:
        problems.append("skip without a reason in parentheses")
    return tuple(marks), reason, name, problems


def _rst_blocks(page: str, lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    pending: tuple[tuple[str, ...], str, str, list[str]] | None = None
    setup: list[str] = []
    number = 0
    while number < len(lines):
        line = lines[number]
        mark = _RST_MARK.match(line)
        block = _RST_BLOCK.match(line)
        if mark and mark.group(1).strip() == "setup":
            number += 1
            body = []
            while number < len(lines) and (not lines[number].strip() or lines[number][:1] == " "):
                body.append(lines[number])
                number += 1
            setup.extend(_dedent(body))
            continue
        if mark:
            pending = _parse_mark(mark.group(1))
        elif block and block.group(2) in SHELLS:
            indent = len(block.group(1))
            body: list[str] = []
            start = number + 1
            number += 1
            while number < len(lines):
                text = lines[number]
                if text.strip() and len(text) - len(text.lstrip()) <= indent:
                    break
                body.append(text)
                number += 1
            while (body and body[0].strip() == "") or (body and body[0].lstrip().startswith(":")):
                body.pop(0)
            marks, reason, name, problems = pending or ((), "", "", [])
            text = "\n".join(_dedent(body)).strip("\n") + "\n"
            blocks.append(
                Block(
                    page,
                    start,
                    text,
                    marks,
                    reason,
                    name,
                    "\n".join(setup).strip(),
                    tuple(problems),
                )
            )
            pending, setup = None, []
            continue
        elif line.strip():
            pending = None
        number += 1
    return blocks


def _md_blocks(page: str, lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    pending: tuple[tuple[str, ...], str, str, list[str]] | None = None
    setup: list[str] = []
    number = 0
    while number < len(lines):
        line = lines[number]
        mark = _MD_MARK.match(line)
        fence = _MD_FENCE.match(line)
        if mark and mark.group(1).strip().startswith("setup"):
            number += 1
            while number < len(lines) and "-->" not in lines[number]:
                setup.append(lines[number].strip())
                number += 1
            number += 1
            continue
        if mark:
            pending = _parse_mark(mark.group(1))
        elif fence and fence.group(1):
            language, start = fence.group(1), number + 1
            body: list[str] = []
            number += 1
            while number < len(lines) and not _MD_FENCE.match(lines[number]):
                body.append(lines[number])
                number += 1
            if language in SHELLS:
                marks, reason, name, problems = pending or ((), "", "", [])
                blocks.append(
                    Block(page, start, "\n".join(body) + "\n", marks, reason, name,
                          "\n".join(setup).strip(), tuple(problems))
                )  # fmt: skip
                setup = []
            pending = None
        elif line.strip():
            pending = None
        number += 1
    return blocks


def _dedent(lines: list[str]) -> list[str]:
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:] for line in lines]


def read_blocks(root: Path = ROOT) -> dict[str, list[Block]]:
    """Every page's shell blocks, in page order: README.md, then docs/ by path."""
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.rst"))]
    found: dict[str, list[Block]] = {}
    for path in pages:
        if "_build" in path.parts:
            continue
        page = str(path.relative_to(root))
        lines = path.read_text("utf-8").splitlines()
        blocks = _md_blocks(page, lines) if path.suffix == ".md" else _rst_blocks(page, lines)
        if blocks:
            found[page] = blocks
    return found


def page_script(blocks: list[Block], runnable: set[str]) -> str:
    """One bash script of a page's blocks whose marks are all in ``runnable``: in order, in
    one shell (an ``export`` holds for later blocks), each announced on stderr by ``@@ WHERE``
    so a failure names its block. A ``background`` block starts on port 0, waits for the
    address it prints, and the page's later ``8765`` is that port."""
    out = [
        "set -euo pipefail",
        "BACKGROUND=()",
        # a sample is kept where the page started: a block may have changed directory
        'SAMPLES="$PWD/.samples"',
        'mkdir -p "$SAMPLES"',
        # SIGTERM: a non-interactive bash starts background commands with SIGINT ignored
        'trap \'for p in "${BACKGROUND[@]}"; do kill "$p" 2>/dev/null; done; wait\' EXIT',
    ]
    port_known = False
    for number, block in enumerate(blocks):
        if not block.runs_with(runnable):
            continue
        out.append(f"echo '@@ {block.where}' >&2")
        if block.setup:
            out.append(block.setup)
        text = block.text.replace(DOC_PORT, "${DOC_PORT}") if port_known else block.text
        if "background" in block.marks:
            (command,) = block.commands()
            log = f".background-{number}.log"
            out.append(f"{command.replace('port=' + DOC_PORT, 'port=0')} >{log} 2>&1 &")
            out.append("BACKGROUND+=($!)")
            out.append(
                f"for _ in $(seq 600); do grep -q 'http://127.0.0.1:[0-9]' {log} && break; "
                f"kill -0 $! 2>/dev/null || {{ cat {log} >&2; exit 1; }}; sleep 0.1; done"
            )
            out.append(
                f"DOC_PORT=$(grep -o 'http://127.0.0.1:[0-9]*' {log} | head -1 | cut -d: -f3)"
            )
            port_known = True
        elif "sample" in block.marks and block.exit_code:  # an error on purpose: its message
            code, kept = block.exit_code, f'"$SAMPLES/{block.name}.txt"'
            out.append(f"set +e\n{{\n{text}}} >{kept} 2>&1\nstatus=$?\nset -e")
            out.append(f"cat {kept}")
            out.append(
                f"[ $status -eq {code} ] || "
                f'{{ echo "expected exit {code}, got $status" >&2; exit 1; }}'
            )
        elif "sample" in block.marks:  # its stdout kept for the sample check too
            out.append(f'{{\n{text}}} | tee "$SAMPLES/{block.name}.txt"')
        elif block.exit_code:  # its last command fails on purpose: with this exit
            code = block.exit_code
            out.append(f"set +e\n{text}status=$?\nset -e")
            out.append(
                f"[ $status -eq {code} ] || "
                f'{{ echo "expected exit {code}, got $status" >&2; exit 1; }}'
            )
        else:
            out.append(text)
    return "\n".join(out) + "\n"
