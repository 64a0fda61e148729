"""Trial 31g F4, the tuner's side: ``Trial.note_early_end(reason)`` (what the Lightning callback
calls where its framework's own early stopping ended the fit) travels with the trial's end, and
the journaled reason reads ``completed: <reason>``; the status stays ``completed``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tripwire.tune import Continuous, RandomSearch, Trial, Tuner, TuningResult
from tripwire.tune._errors import ReportError


def train_ends_early(params: dict[str, Any], trial: Any) -> None:
    """Trial 0 ends itself after step 2 (through a copy of the trial, as a callback that deep-copies
    it would), trial 1 with a long reason, trial 2 runs its budget (it says so too: ignored there)."""
    last = 2 if trial.number < 2 else trial.budget
    for step in range(1, last + 1):
        trial.report(step, params["x"] + step)
    if trial.number == 0:
        copy.deepcopy(trial).note_early_end("MyStopper(monitor='val'):   no improvement\nin 1 epoch")
    elif trial.number == 1:
        trial.note_early_end("x" * 300)
    else:
        trial.note_early_end("not said: the trial reached max_resource")


def test_an_early_end_is_the_completed_trials_reason(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    result = Tuner(train_ends_early, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=4), max_jobs=3,
                   seed=0, journal=str(path)).fit()
    t0, t1, t2 = result.trials
    assert (t0.status, t0.resource, t0.reason) == ("completed", 2, "completed: MyStopper(monitor='val'): no "
                                                                   "improvement in 1 epoch")
    assert t1.status == "completed" and t1.reason == "completed: " + "x" * 197 + "..."
    assert (t2.status, t2.resource, t2.reason) == ("completed", 4, "reached max_resource=4")
    assert result.best is not None and result.best.number == 2  # (a candidate as any completed trial)
    # journaled: read back from the file as written
    assert [t.reason for t in TuningResult.from_journal(path).trials] == [t0.reason, t1.reason, t2.reason]


def test_note_early_end_takes_a_reason_and_the_first_call_counts() -> None:
    trial = Trial(0, {"x": 1.0}, max_resource=3)
    with pytest.raises(ReportError, match=r"trial 0: reason=None must be a non-empty str"):
        trial.note_early_end(None)  # type: ignore[arg-type]
    with pytest.raises(ReportError, match=r"trial 0: reason='  ' must be a non-empty str"):
        trial.note_early_end("  ")
    trial.note_early_end("first")
    trial.note_early_end("second")
    assert trial.early_end_reason == "first"


def test_an_early_end_travels_from_a_dask_worker(tmp_path: Path) -> None:
    """Session 31 left the Dask executor dropping the reason (such a trial's journaled reason read a
    plain ``completed``); it now comes back with the trial's result, as from the local executor's
    workers."""
    pytest.importorskip("distributed")
    result = Tuner(train_ends_early, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=4), max_jobs=3,
                   max_parallel_jobs=1, seed=0, executor="dask", journal=str(tmp_path / "d.db")).fit()
    t0, t1, t2 = result.trials
    assert (t0.status, t0.resource, t0.reason) == ("completed", 2, "completed: MyStopper(monitor='val'): no "
                                                                   "improvement in 1 epoch")
    assert t1.reason == "completed: " + "x" * 197 + "..."
    assert (t2.status, t2.reason) == ("completed", "reached max_resource=4")
