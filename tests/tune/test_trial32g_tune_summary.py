"""Trial 32g F5: a tuning job whose every trial failed before its first report (a ``trial_metric``
typo) said ``resource used: 0 of 0 without early stopping`` in its summary (and ``tripwire
tune-report``), a line that meant nothing. Where no trial reported a step, the line now says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tripwire._cli import main
from tripwire.tune import Continuous, Hyperband, RandomSearch, TrialRecord, Tuner, TuningResult


def fails_before_reporting(params: dict[str, Any], trial: Any) -> None:
    raise KeyError("val_loss")  # (the metric is named val_los)


def test_a_job_whose_trials_all_failed_before_reporting_says_none_was_used(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "typo.db"
    result = Tuner(fails_before_reporting, {"lr": Continuous(0.01, 1.0)}, objective="val_loss", mode="min",
                   strategy=Hyperband(min_resource=1, max_resource=3, reduction_factor=3), max_jobs=2, seed=0,
                   journal=str(path)).fit()
    assert [t.status for t in result.trials] == ["failed", "failed"]
    assert (result.resource_used, result.resource_without_early_stopping) == (0, 0)
    lines = result.summary().splitlines()
    assert "resource used: none (no trial reported a step)" in lines
    assert not any("0 of 0" in line for line in lines)
    assert main(["tune-report", str(path)]) == 1  # (every trial failed: an error exit, as before)
    out = capsys.readouterr().out
    assert "resource used: none (no trial reported a step)" in out and "0 of 0" not in out


def _record(number: int, status: str, resource: int) -> TrialRecord:
    return TrialRecord(number=number, params={"lr": 0.1}, status=status, value=None, metrics=None, resource=resource,
                       bracket=0, rung=0, reason=None, error=None, attempt=0, started=None, ended=None)


def test_the_resource_line_while_no_trial_has_reported_yet_and_without_a_budget() -> None:
    running = TuningResult([_record(0, "running", 0), _record(1, "pending", 0)], "val_loss", "min", 3)
    assert "resource used: none yet (no trial has reported a step)" in running.summary().splitlines()
    empty = TuningResult([], "val_loss", "min", 3)
    assert "resource used: none (no trial ran)" in empty.summary().splitlines()
    unbudgeted = TuningResult([_record(0, "failed", 0)], "val_loss", "min", None)
    assert "resource used: none (no trial reported a step)" in unbudgeted.summary().splitlines()
    # a job that used resource keeps its line
    used = TuningResult([_record(0, "completed", 3), _record(1, "stopped", 1)], "val_loss", "min", 3)
    assert "resource used: 4 of 6 without early stopping (66.7%)" in used.summary().splitlines()
    assert "resource used: 2 (reported steps; the strategy has no max_resource)" in TuningResult(
        [_record(0, "completed", 2)], "val_loss", "min", None).summary().splitlines()


def test_random_search_trials_that_all_failed_say_so_too(tmp_path: Path) -> None:
    result = Tuner(fails_before_reporting, {"lr": Continuous(0.01, 1.0)}, strategy=RandomSearch(max_resource=4),
                   max_jobs=1, seed=0, journal=str(tmp_path / "r.db")).fit()
    assert "resource used: none (no trial reported a step)" in result.summary().splitlines()
