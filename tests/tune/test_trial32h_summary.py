"""Trial 32h F4: the summary of a killed job said "resource used: none yet (no trial has reported a
step)" while its interrupted attempts had journaled their steps, and "max_total_resource counts them"
for a job that sets no ``max_total_resource``."""

from __future__ import annotations

from pathlib import Path

import tune_trainables as tt

from tripwire.tune import Continuous, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal


def _killed(path: Path, **limits: int) -> None:
    """A job as kill -9 leaves it: its only trial running (its 5 reports journaled), no tuner holding it."""
    Tuner(tt.train_five_steps, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(5), seed=0, journal=str(path),
          **{"max_jobs": 1, **limits}).fit()
    with Journal(path) as j:
        j._db.execute("UPDATE trials SET status='running', ended=NULL, value=NULL, reason=NULL WHERE number=0")
        j._db.execute("UPDATE reports SET stop=0 WHERE trial=0")


def test_a_killed_job_whose_steps_were_all_interrupted_says_what_was_reported_and_lost(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    _killed(path)
    result = TuningResult.from_journal(path)
    assert (result.resource_used, result.resource_lost) == (0, 5)
    lines = result.summary().splitlines()
    assert not any("no trial has reported" in ln for ln in lines), lines
    assert ("resource used: 0 (the 5 unit(s) reported so far were trained by interrupted attempts: lost, below)"
            in lines), lines
    # no max_total_resource set: the line does not name it
    assert ("resource lost: 5 (attempts interrupted; 1 trial(s) will rerun on resume, from scratch; "
            "used and lost: 5 in all)") in lines, lines
    assert not any("max_total_resource" in ln for ln in lines), lines


def test_the_lost_line_names_max_total_resource_where_the_job_sets_it(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    _killed(path, max_total_resource=100)
    lines = TuningResult.from_journal(path).summary().splitlines()
    assert ("resource lost: 5 (attempts interrupted; 1 trial(s) will rerun on resume, from scratch; "
            "max_total_resource counts them: 5 in all)") in lines, lines
