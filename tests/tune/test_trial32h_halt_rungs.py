"""Trial 32h F3: the report that ends the job on a completion criterion was not recorded in the
rungs, against Decision rule 1 and "the journal's rungs table is always the scheduler's state": a
resume with raised limits judged its new trials without it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trial32h_trainables as t32

from tripwire.tune import Continuous, Hyperband, Tuner


def test_the_report_that_reaches_max_total_resource_is_recorded_at_its_rung(tmp_path: Path) -> None:
    path = tmp_path / "halt.db"
    result = Tuner(t32.train_decreasing, {"x": Continuous(0.0, 1.0)}, objective="loss", mode="min",
                   strategy=Hyperband(1, 9, 3), seed=1, journal=str(path), max_total_resource=12,
                   max_jobs=50).fit()
    assert result.halt == "max_total_resource=12 reached"
    last = max(result.trials, key=lambda t: t.number)
    assert (last.bracket, last.resource, last.status) == (1, 3, "stopped")
    assert last.reason == "tuning job complete: max_total_resource=12 reached"
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT bracket, rung, value FROM rungs WHERE trial=? ORDER BY rung",
                          (last.number,)).fetchall()
        step3 = db.execute("SELECT value FROM reports WHERE trial=? AND step=3", (last.number,)).fetchone()[0]
    # level 1 (below its bracket's first rung: -1) and level 3 (its bracket's rung 0), where step 3 reached
    assert rows == [(1, -1, 1.332), (1, 0, step3)]
