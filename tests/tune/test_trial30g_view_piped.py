"""Trial 30g F8: ``Tuner.fit(progress=True)`` piped to a file drew its view 80 columns wide and cut
the best value (``0.00011287…``), the one number a log file keeps. Piped, the view is drawn 200
columns wide, and a number too wide for its cell wraps whole instead of ending in "…"."""
from __future__ import annotations

import io

import pytest

pytest.importorskip("rich")
from rich.console import Console  # noqa: E402

from tripwire.tune._view import PIPED_WIDTH, LiveView  # noqa: E402

_SNAPSHOT = {"running": 0, "completed": 4, "stopped": 8, "failed": 0, "best": 0.00011287215148819529,
             "resource_used": 50, "elapsed": 4.0, "phase": "ended", "max_jobs": 12}


def test_a_piped_view_prints_the_best_value_whole() -> None:
    view = LiveView("Tuner.fit() journal.db")  # (pytest's stdout is no terminal: piped)
    assert view.console.width == PIPED_WIDTH == 200
    out = Console(file=io.StringIO(), width=view.console.width)
    out.print(view._render(_SNAPSHOT))
    text = out.file.getvalue()
    assert "0.000112872151488" in text and "…" not in text


def test_a_narrow_console_wraps_a_number_instead_of_cutting_it() -> None:
    out = Console(file=io.StringIO(), width=60)
    view = LiveView("Tuner.fit() journal.db", console=out)
    out.print(view._render(_SNAPSHOT))
    text = out.file.getvalue()
    assert "…" not in text
    rows = text.split("┩", 1)[1].split("└", 1)[0].splitlines()
    best = "".join(line.split("│")[5].strip() for line in rows if "│" in line)
    assert best == "0.000112872151488"
