"""Trial 25f, the tuner as a user of the framework callbacks found it:

1. a trial that failed (it raised, timed out, its worker died) kept its rung values, and they
   stopped healthy trials: the best healthy configuration was stopped at a rung by two crashed
   trials ranked above it. A failed trial is a broken run, as a rule-stopped one: its values leave
   the rungs when it fails (scheduler and journal), a resume and a warm start leave them out;
2. ``max_wall_time`` spent before any trial began (the workers' ``setup()``): the journal's
   ``wall_seconds`` stayed 0.0 (a resume did not count that session), and the 0-trial job read
   "best: none yet", with no WARNING and exit 0;
3. the units of interrupted attempts (``resource_lost``), which ``max_total_resource`` counts, were
   shown nowhere: ``TuningResult.resource_lost``, ``summary()`` and ``tune-report`` show them.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tripwire._cli import main
from tripwire.tune import Continuous, Hyperband, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal
from tripwire.tune._scheduler import HyperbandScheduler

DIVERGES_ABOVE = 0.885   # configurations above it crash after their report at step 3


def train_crashes_when_high(params: dict[str, Any], trial: Any) -> float:
    """The report's repro: a high ``x`` (a diverged learning rate, say) raises after step 3's report."""
    for step in range(1, trial.max_resource + 1):
        if trial.report(step=step, value=params["x"]):
            break
        if step == 3 and params["x"] > DIVERGES_ABOVE:
            raise RuntimeError("loss is NaN at step 3")
    return float(params["x"])


def train_hangs_when_high(params: dict[str, Any], trial: Any) -> float:
    """A high ``x`` reports a great value at step 1, then hangs past the trial's time limit."""
    for step in range(1, trial.max_resource + 1):
        if trial.report(step=step, value=params["x"]):
            break
        if params["x"] > 0.5:
            time.sleep(60)
    return float(params["x"])


def setup_slow() -> None:
    time.sleep(2.0)   # loading the data: longer than the job's max_wall_time


def train_quick(params: dict[str, Any], trial: Any) -> float:
    trial.report(step=1, value=params["x"])
    return float(params["x"])


def train_five(params: dict[str, Any], trial: Any) -> float:
    value = 0.0
    for step in range(1, 6):
        value = params["x"] * step
        if trial.report(step=step, value=value):
            break
    return value


def _crash_job(journal: Path, max_jobs: int = 8, seed: int = 0, **kw: Any) -> Tuner:
    return Tuner(train_crashes_when_high, {"x": Continuous(0.0, 1.0)}, objective="o", mode="max",
                 strategy=Hyperband(1, 9, 3), max_jobs=max_jobs, seed=seed, journal=str(journal), **kw)


def _rung_trials(journal: Path) -> set[int]:
    with Journal(journal, readonly=True) as j:
        return {r[2] for r in j.rung_records()}


# ---- 1. failed trials leave the rungs --------------------------------------------------------------------
def test_a_failed_trials_values_leave_the_rungs_and_stop_no_healthy_trial(tmp_path: Path) -> None:
    journal = tmp_path / "crash.db"
    result = _crash_job(journal).fit()
    by = {t.number: t for t in result.trials}
    failed = {n for n, t in by.items() if t.status == "failed"}
    assert failed == {1, 3} and all(by[n].params["x"] > DIVERGES_ABOVE for n in failed)
    # trial 4 (0.883) is the best healthy configuration: before the fix the two crashed trials' values
    # at resource 3 (0.890, 0.895) stopped it there ("has 2 better of 4"), and result.best was trial 0
    assert (by[4].status, by[4].reason) == ("completed", "reached max_resource=9")
    assert result.best is not None and result.best.number == 4
    assert by[1].rung == 1 and by[1].resource == 3      # how far it got stays journaled, as its reports
    with Journal(journal, readonly=True) as j:
        assert {r[0] for r in j.reports()} >= failed
        state = j.load_scheduler_state()
    assert _rung_trials(journal).isdisjoint(failed) and _rung_trials(journal)
    assert {r[2] for r in state["records"]} == _rung_trials(journal)    # the scheduler's state is the table's
    # the state round-trips without them
    again = HyperbandScheduler(Hyperband(1, 9, 3).plan, mode="max", seed=0)
    again.load_state_dict(state)
    assert again.state_dict()["records"] == state["records"]


def test_a_resume_leaves_out_the_failed_trials_rung_values_of_an_older_journal(tmp_path: Path) -> None:
    journal = tmp_path / "old.db"
    _crash_job(journal, max_jobs=4).fit()            # trials 1 and 3 fail
    with Journal(journal) as j:                      # as a journal written before the fix holds them
        bracket = {r["number"]: r["bracket"] for r in j.trials()}
        rows = [(bracket[t], level - bracket[t], t, v) for t, step, v, *_ in j.reports() if t in (1, 3)
                for level, at in ((0, 1), (1, 3)) if step == at]
        assert rows
        j._db.executemany("INSERT OR REPLACE INTO rungs VALUES (?, ?, ?, ?)", rows)
    resumed = Tuner.resume(journal, max_jobs=8).fit()
    whole = _crash_job(tmp_path / "whole.db").fit()
    assert [(t.params, t.status, t.reason, t.resource) for t in resumed.trials] == \
        [(t.params, t.status, t.reason, t.resource) for t in whole.trials]
    assert resumed.trials[4].status == "completed"
    with Journal(journal, readonly=True) as j:
        assert {r[2] for r in j.load_scheduler_state()["records"]}.isdisjoint({1, 3})


def test_warm_start_leaves_out_the_failed_trials_of_the_earlier_job(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    _crash_job(old).fit()
    new = _crash_job(tmp_path / "new.db", max_jobs=1, seed=1, warm_start=str(old))
    priors = new._load_priors(new.strategy.scheduler("max", 1))
    assert priors and all(v <= DIVERGES_ABOVE for _level, v in priors), priors


def test_a_trial_past_its_time_limit_leaves_the_rungs_too(tmp_path: Path) -> None:
    # trial 25f: a timed-out trial can never finish within trial_timeout nor become best: a broken run
    journal = tmp_path / "slow.db"
    result = Tuner(train_hangs_when_high, {"x": Continuous(0.0, 1.0)}, objective="o", mode="max",
                   strategy=Hyperband(1, 3, 3), max_jobs=3, seed=0, journal=str(journal), trial_timeout=1.5).fit()
    timed_out = {t.number for t in result.trials if t.reason == "failed (timeout)"}
    assert timed_out and all(result.trials[n].params["x"] > 0.5 for n in timed_out)
    assert _rung_trials(journal).isdisjoint(timed_out)


# ---- 2. max_wall_time spent before any trial began -------------------------------------------------------
def _slow_setup_job(journal: Path) -> Tuner:
    return Tuner(train_quick, {"x": Continuous(0.0, 1.0)}, objective="o", mode="max", strategy=RandomSearch(1),
                 max_jobs=5, seed=0, journal=str(journal), setup=setup_slow, max_wall_time=0.5)


def test_a_job_whose_wall_time_went_to_setup_says_it_ended_with_no_trial(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "wall.db"
    with caplog.at_level(logging.WARNING, logger="tripwire.tune"):
        result = _slow_setup_job(journal).fit()
    assert result.trials == [] and result.halt == "max_wall_time=0.5 s reached"
    with Journal(journal, readonly=True) as j:
        spent = j.get_meta("wall_seconds")
    assert spent >= 0.5                               # it said 0.0: a resume did not count this session
    said = [r.getMessage() for r in caplog.records if "no trial returned an objective" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(
        "tripwire.tune: no trial returned an objective: the job ended (max_wall_time=0.5 s reached) before any "
        "trial started; max_wall_time counts the workers' start-up and setup() too"), said
    line = ("best: none: no trial returned an objective: the job ended (max_wall_time=0.5 s reached) before any "
            "trial started")
    assert line in result.summary().splitlines() and "none yet" not in result.summary()
    capsys.readouterr()
    for verb in ("tune-report", "report"):            # exit 1, as for a job whose every trial failed
        assert main([verb, str(journal)]) == 1
        out = capsys.readouterr()
        assert line in out.out.splitlines()
        assert out.err.strip() == (f"tripwire {verb}: error: the job ended (max_wall_time=0.5 s reached) before "
                                   "any trial started (no objective)")
    # a resume counts the session's time: the limit is reached already, no worker starts
    t0 = time.monotonic()
    again = Tuner.resume(journal).fit()
    assert time.monotonic() - t0 < 1.5 and again.trials == [] and again.halt == "max_wall_time=0.5 s reached"
    with Journal(journal, readonly=True) as j:
        assert j.get_meta("wall_seconds") == spent


def test_tripwire_tune_exits_1_for_a_job_that_ended_before_any_trial(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tune.yaml"
    config.write_text(yaml.safe_dump({
        "train": f"{__name__}:train_quick", "setup": f"{__name__}:setup_slow", "objective": "o", "mode": "max",
        "space": {"x": {"type": "continuous", "low": 0.0, "high": 1.0}}, "strategy": {"type": "random",
                                                                                       "max_resource": 1},
        "max_jobs": 5, "seed": 0, "journal": "t.db", "max_wall_time": 0.5}))
    assert main(["tune", str(config), "--no-progress"]) == 1
    out = capsys.readouterr()
    assert "before any trial started" in out.out
    assert out.err.strip().splitlines()[-1] == ("tripwire tune: error: no trial returned an objective: the job "
                                                "ended (max_wall_time=0.5 s reached) before any trial started")


# ---- 3. the resource of interrupted attempts is shown --------------------------------------------------
def test_the_units_of_interrupted_attempts_are_shown_where_max_total_resource_counts_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lost.db"
    first = Tuner(train_five, {"x": Continuous(0.0, 1.0)}, objective="o", strategy=RandomSearch(5), max_jobs=2,
                  seed=0, journal=str(path)).fit()
    assert first.resource_lost == 0 and "resource lost" not in first.summary()
    with Journal(path) as j:  # trial 1 as a killed tuner leaves it: running, its 5 reports journaled
        j._db.execute("UPDATE trials SET status='running' WHERE number=1")
        j._db.execute("UPDATE reports SET stop=0 WHERE trial=1")  # (not told to stop yet: trial 27b)
    result = Tuner.resume(path, max_jobs=10, max_total_resource=12).fit()
    assert result.halt == "max_total_resource=12 reached"
    assert (result.resource_used, result.resource_lost) == (7, 5)    # 7 + 5 = 12: the limit
    line = "resource lost: 5 (attempts interrupted and rerun on resume; max_total_resource counts them: 12 in all)"
    assert line in result.summary().splitlines()
    read = TuningResult.from_journal(path)
    assert read.resource_lost == 5 and line in read.summary().splitlines()
    capsys.readouterr()
    assert main(["tune-report", str(path)]) == 0
    assert line in capsys.readouterr().out.splitlines()


def test_a_result_built_without_a_journal_has_no_lost_units() -> None:
    assert TuningResult([], "o", "max", 3).resource_lost == 0
