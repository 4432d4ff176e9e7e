"""The one progress bar (run, record, tuning): drawn on a terminal, nothing elsewhere."""

from __future__ import annotations

import io

import pytest

from evidence_bench.experiment.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "enabled", "drawn"),
    [(Terminal(), True, True), (io.StringIO(), True, False), (Terminal(), False, False)],
    ids=["terminal", "log", "progress=false"],
)
def test_the_bar_is_drawn_on_a_terminal_only(
    stream: io.StringIO, enabled: bool, drawn: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stderr", stream)
    items = progress_bar(range(3), total=3, desc="record ci", unit="query", enabled=enabled)
    assert list(items) == [0, 1, 2]  # every item taken, whether drawn or not
    shown = stream.getvalue()
    assert ("record ci" in shown and "3/3" in shown) is drawn
    assert shown == "" or drawn
