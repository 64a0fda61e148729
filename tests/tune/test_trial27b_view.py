"""Trial 27b, finding 3: while the workers stop after the last trial ended (seconds, for workers that
imported torch), the progress snapshots and ``tripwire tune``'s live view say that every trial has
ended (the view showed the last trial ``running``, its clock stopped, for 3 to 4 s)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire.tune import Continuous, LocalExecutor, RandomSearch, Tuner


class _Recording(LocalExecutor):
    """A local executor that notes the snapshots the tuner had sent when it stops the workers."""

    def __init__(self, snapshots: list[dict[str, Any]]) -> None:
        super().__init__()
        self.snapshots = snapshots
        self.seen_at_shutdown: list[dict[str, Any]] = []

    def shutdown(self) -> None:
        self.seen_at_shutdown = list(self.snapshots)
        super().shutdown()


def test_a_snapshot_says_every_trial_ended_before_the_workers_stop(tmp_path: Path) -> None:
    snapshots: list[dict[str, Any]] = []
    executor = _Recording(snapshots)
    result = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(3), max_jobs=3,
                   max_parallel_jobs=2, seed=0, journal=str(tmp_path / "j.db"), executor=executor).fit(
        progress=snapshots.append)
    last = executor.seen_at_shutdown[-1]       # what the view showed while the workers stopped
    assert (last["running"], last["completed"], last["pending"]) == (0, 3, 0)
    assert last["phase"] == "shutting down"
    assert last["best"] == result.best.value
    assert all(s["phase"] == "running" for s in executor.seen_at_shutdown[:-1])
    end = snapshots[-1]
    assert end["phase"] == "ended" and end["running"] == 0 and end["elapsed"] >= last["elapsed"]


def _row(view: Any, snapshot: dict[str, Any] | None = None) -> tuple[list[str], str]:
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(view._current() if snapshot is None else view._render(snapshot))
    text = console.export_text()
    row = next(line for line in text.splitlines() if re.search(r"\d+\.\d s", line))
    return [c.strip() for c in row.split("│") if c.strip()], text


def test_the_live_view_shows_no_trial_running_and_a_running_clock_while_the_workers_stop() -> None:
    pytest.importorskip("rich")
    from tripwire.tune._view import SHUTTING_DOWN, LiveView as _LiveView

    view = _LiveView("t")
    view({"running": 0, "completed": 3, "stopped": 0, "failed": 0, "pending": 0, "best": 0.5,
          "resource_used": 9, "resource_lost": 0, "elapsed": 10.0, "halt": None, "max_jobs": 3,
          "phase": "shutting down"})
    cells, text = _row(view)
    assert cells[0] == "0" and cells[1] == "3" and SHUTTING_DOWN in text
    time.sleep(0.3)
    later, _ = _row(view)
    assert float(later[-1].split()[0]) >= 10.3      # the clock runs on between snapshots
    view({"running": 0, "completed": 3, "stopped": 0, "failed": 0, "pending": 0, "best": 0.5,
          "resource_used": 9, "resource_lost": 0, "elapsed": 12.5, "halt": None, "max_jobs": 3, "phase": "ended"})
    time.sleep(0.2)
    cells, text = _row(view)
    assert cells[-1] == "12.5 s" and SHUTTING_DOWN not in text   # the job's own time, once ended
