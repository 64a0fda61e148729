"""Trial 28b, finding 6: ``tripwire tune``'s live view showed no progress towards the job's limits: no
``N / max_jobs``, no pending trials (a resume's reruns are pending first), no resource against
``max_total_resource``, and nothing said which criterion ended the job until the final summary."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire.tune import Continuous, RandomSearch, Tuner

pytest.importorskip("rich")

from tripwire.tune._view import SHUTTING_DOWN, LiveView as _LiveView  # noqa: E402

HALTING = "ending:"


def _cells(snapshot: dict[str, Any], width: int = 200) -> tuple[list[str], list[str], str]:
    """The header's cells, the row's cells and the whole text of the view of ``snapshot``."""
    from rich.console import Console

    console = Console(record=True, width=width, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(_LiveView("tripwire tune tune2.yaml")._render(snapshot))
    text = console.export_text()
    lines = text.splitlines()
    header = next(line for line in lines if "running" in line)
    row = next(line for line in lines if re.search(r"\d+\.\d s", line))
    return ([c.strip() for c in header.split("┃") if c.strip()], [c.strip() for c in row.split("│") if c.strip()],
            text)


SNAPSHOT = {"running": 2, "completed": 100, "stopped": 10, "failed": 1, "pending": 1, "best": 0.93,
            "resource_used": 893, "resource_lost": 8, "elapsed": 123.4, "halt": None, "max_jobs": 400,
            "max_total_resource": 900, "max_wall_time": 3600.0, "phase": "running"}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_the_live_view_shows_progress_towards_the_limits_that_are_set() -> None:
    header, cells, text = _cells(SNAPSHOT)
    assert header == ["running", "completed", "stopped", "failed", "best so far", "resource used", "elapsed"]
    # the resource against max_total_resource, which counts the lost units too; the time against max_wall_time
    assert cells == ["2", "100", "10", "1", "0.93", "893 (+8 lost) / 900", "123.4 s / 3600 s"]
    # under the title: 114 trials of max_jobs=400 (2 + 100 + 10 + 1 + 1 pending), and the pending ones
    assert _lines(text)[:2] == ["tripwire tune tune2.yaml", "114 / 400 trials, 1 pending"]
    assert HALTING not in text and SHUTTING_DOWN not in text


def test_without_limits_the_view_shows_the_counts_alone() -> None:
    _header, cells, text = _cells({**SNAPSHOT, "max_jobs": None, "max_total_resource": None, "max_wall_time": None,
                                   "resource_lost": 0, "pending": 0})
    assert cells == ["2", "100", "10", "1", "0.93", "893", "123.4 s"]
    assert _lines(text)[1] == "113 trials"


def test_the_view_names_the_halt_once_the_job_is_ending() -> None:
    halt = "fail_fast: 2 trials failed with the same error before any trial succeeded: NameError: [x]"
    _header, _cells_, text = _cells({**SNAPSHOT, "halt": "max_total_resource=900 reached"})
    assert "ending: max_total_resource=900 reached" in _lines(text)
    _header, _cells_, text = _cells({**SNAPSHOT, "halt": halt, "phase": "shutting down"})
    assert _lines(text)[-2:] == [f"ending: {halt}", SHUTTING_DOWN]     # (brackets are no rich markup)


def test_the_view_keeps_its_columns_readable_in_80_characters() -> None:
    header, cells, text = _cells({**SNAPSHOT, "max_total_resource": None, "max_wall_time": None}, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "best so far" in text and "…" not in text
    assert cells[:5] == ["2", "100", "10", "1", "0.93"]


def test_a_jobs_snapshots_carry_its_limits_and_the_view_of_its_last_one_shows_them(tmp_path: Path) -> None:
    snapshots: list[dict[str, Any]] = []
    result = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3), max_jobs=50,
                   max_total_resource=12, max_wall_time=600, seed=0, journal=str(tmp_path / "v.db")).fit(
        progress=snapshots.append)
    assert result.halt == "max_total_resource=12 reached"
    last = snapshots[-1]
    assert (last["max_jobs"], last["max_total_resource"], last["max_wall_time"]) == (50, 12, 600.0)
    _header, cells, text = _cells(last)
    assert _lines(text)[1] == f"{len(result.trials)} / 50 trials"
    assert cells[5] == f"{result.resource_used} / 12" and cells[6].endswith(" s / 600 s")
    assert "ending: max_total_resource=12 reached" in _lines(text)
