"""Trial 27b, findings 1 and 2: a resume decides as the uninterrupted job did.

1. The rung values of the trials a killed tuner left running stay in the rungs (deleting them
   changed the rungs that judged the others, and the rerun of trial 8 was stopped at a rung its
   attempt had passed, with the same value); a rerun's report replaces its attempt's value, and a
   rerun that reports the same value at a step its attempt passed passes it again.
2. A trial whose stop decision was journaled before the kill (or SIGTERM) is ended as the live job
   would have ended it, not rerun from scratch (its units used, not lost).
"""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import trial27b_trainables
import tune_trainables as tt

from tripwire.tune import Continuous, Hyperband, JournalError, LocalExecutor, RandomSearch, Tuner, TuningResult
from tripwire.tune._hyperband import HyperbandPlan
from tripwire.tune._journal import Journal
from tripwire.tune._scheduler import HyperbandScheduler, rank_decision

HERE = Path(tt.__file__).parent
SPACE = {"x": Continuous(0.0, 1.0)}
NOTE = " (train had not returned when its tuner stopped: its last reported value is the objective)"


def _job(path: Path) -> list[dict]:
    Tuner(tt.train_curve, SPACE, strategy=Hyperband(1, 9, 3), max_jobs=24, seed=3, journal=str(path)).fit()
    with Journal(path, readonly=True) as j:
        return j.trials()


def _as_killed(path: Path, number: int, last_step: int | None = None) -> None:
    """Trial ``number`` as a tuner SIGKILLed while it ran leaves it: ``running``, its reports up to
    ``last_step`` journaled (all of them: None), no stop among them unless its own."""
    with sqlite3.connect(path) as db:
        if last_step is not None:
            db.execute("DELETE FROM reports WHERE trial=? AND step>?", (number, last_step))
            db.execute("UPDATE reports SET stop=0 WHERE trial=?", (number,))
            db.execute("UPDATE trials SET resource=? WHERE number=?", (last_step, number))
        db.execute("UPDATE trials SET status='running', value=NULL, reason=NULL, ended=NULL WHERE number=?",
                   (number,))


# ---- 1. the rungs a rerun is judged at ---------------------------------------------------------------
def test_a_reruns_report_replaces_its_attempts_value_at_a_level() -> None:
    plan = HyperbandPlan(1, 9, 3)
    first = HyperbandScheduler(plan, "min", seed=0)
    trials = [n for n in range(500) if first.bracket(n) == 0][:8]
    values = [0.1, 0.2, 0.9, 0.8, 0.7, 0.6, 0.5, 0.3]   # the last trial's 0.3: 2 better of 8
    for n, v in zip(trials, values):
        first.on_report(n, 1, v)
    # resumed: the rungs as the journal keeps them (the last trial's value included), then its rerun
    again = HyperbandScheduler(plan, "min", seed=0)
    again.load_state_dict({"type": "hyperband", "plan": plan.to_dict(), "mode": "min", "seed": 0,
                           "records": [list(r) for r in first.records()], "priors": {}, "progress": {}})
    dec = again.on_report(trials[-1], 1, 0.3)
    # replaced, not recorded twice: still 8 values (a second copy made it 9, and k 3 instead of 2)
    assert "value 0.3 has 2 better of 8 (continue needs < 2" in dec.reason and dec.stop
    assert [r for r in again.records() if r[2] == trials[-1]] == [(0, 0, trials[-1], 0.3)]
    assert again.records() == first.records()


def test_a_requeued_trial_keeps_its_rung_values_in_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    rows = _job(path)
    n = next(t["number"] for t in rows if t["status"] == "completed")
    with Journal(path, readonly=True) as j:
        mine = [r for r in j.rung_records() if r[2] == n]
    assert mine
    _as_killed(path, n, last_step=3)
    with Journal(path) as j:
        assert j.requeue_running() == [n]
        assert [r for r in j.rung_records() if r[2] == n] == mine   # (they were deleted: trial 27b)
        assert [t["status"] for t in j.trials() if t["number"] == n] == ["pending"]


def test_a_rerun_reporting_the_same_values_passes_the_rungs_its_attempt_passed(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    rows = _job(path)
    with Journal(path, readonly=True) as j:
        rungs = j.rung_records()
        reports = j.reports()
    level = {0: sorted(v for b, i, t, v in rungs if b + i == 0), 1: sorted(v for b, i, t, v in rungs if b + i == 1)}

    def stopped_late(t: dict) -> bool:
        """A trial of bracket 0 that passed levels 1 and 3 early, which the full rungs would stop."""
        vals = {s: v for n, s, v, *_ in reports if n == t["number"]}
        return any(not rank_decision(level[j], vals[step], 3)[0] for j, step in ((0, 1), (1, 3)))

    late = [t for t in rows if t["bracket"] == 0 and t["status"] == "completed" and stopped_late(t)]
    assert late, "the job has no trial that passed a rung early and the full rung would stop"
    x = late[0]
    _as_killed(path, x["number"], last_step=3)       # killed after its report at step 3

    result = Tuner.resume(path).fit()

    rerun = result.trials[x["number"]]
    assert (rerun.attempt, rerun.status, rerun.resource, rerun.value) == (2, "completed", 9, x["value"])
    with Journal(path, readonly=True) as j:
        mine = j.reports(x["number"])
        assert j.rung_records() == rungs                      # the rungs as the uninterrupted job left them
        assert [tuple(r) for r in j.load_scheduler_state()["records"]] == rungs
        assert j.get_meta("resource_lost") == 3
    assert [(s, st) for _, s, _, _, st, _ in mine] == [(s, s == 9) for s in range(1, 10)]
    assert mine[0][5] == "bracket 0: passed the rung at resource 1 (as attempt 1 did, with the same value)"
    assert mine[2][5] == "bracket 0: passed the rung at resource 3 (as attempt 1 did, with the same value)"
    assert mine[1][5] == "bracket 0: passed the rung at resource 1"   # (no rung at step 2: nothing replayed)


def test_a_rerun_that_differs_from_its_attempt_is_decided_afresh() -> None:
    plan = HyperbandPlan(1, 9, 3)
    s = HyperbandScheduler(plan, "max", seed=0)
    a, b = [n for n in range(500) if s.bracket(n) == 0][:2]
    s.on_report(a, 1, 0.9)
    assert s.on_report(b, 1, 0.1, passed=True).stop is False     # passed before with this value
    assert s.on_report(b, 3, 0.2).stop is False                   # (the first value at level 3)
    c = [n for n in range(500) if s.bracket(n) == 0][2]
    assert s.on_report(c, 1, 0.1).stop                            # the same value, not passed before: judged


def test_a_rerun_stopped_below_its_attempts_levels_takes_their_values_out(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    rows = _job(path)
    x = next(t for t in rows if t["bracket"] == 0 and t["status"] == "completed")
    _as_killed(path, x["number"], last_step=3)
    with Journal(path, readonly=True) as j:
        held = {(b, i) for b, i, t, _ in j.rung_records() if t == x["number"]}
    assert held == {(0, 0), (0, 1)}
    # the budget is spent already (the other trials' units and the 3 of the killed attempt): the
    # rerun is stopped at its first report, at step 1
    used = sum(t["resource"] for t in rows if t["number"] != x["number"]) + 3
    result = Tuner.resume(path, max_total_resource=used).fit()
    assert (result.trials[x["number"]].status, result.trials[x["number"]].resource) == ("stopped", 1)
    with Journal(path, readonly=True) as j:
        # its attempt's value at level 3 is out; at level 1 the rerun's own report (the one that met the
        # criterion) is recorded, as Decision rule 1 says (trial 32h F3: it was not recorded at all)
        assert {(b, i) for b, i, t, _ in j.rung_records() if t == x["number"]} == {(0, 0)}
        mine = {(b, i): v for b, i, t, v in j.rung_records() if t == x["number"]}
        first = j._db.execute("SELECT value FROM reports WHERE trial=? AND step=1", (x["number"],)).fetchone()[0]
        assert mine[(0, 0)] == first
        assert [tuple(r) for r in j.load_scheduler_state()["records"]] == j.rung_records()


# ---- 2. a trial told to stop before the kill ------------------------------------------------------------
def test_a_trial_told_to_stop_before_the_kill_is_ended_not_rerun(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    rows = _job(path)
    stopped = next(t for t in rows if t["status"] == "stopped" and t["resource"] < 9)
    completed = next(t for t in rows if t["status"] == "completed")
    for t in (stopped, completed):
        _as_killed(path, t["number"])                 # its reports, with the stop, are journaled
    # before the resume, the report says what it does, and counts them as the trials they end as (trial
    # 37e: "runs them", and their units, not max_resource, on the side without early stopping)
    before = TuningResult.from_journal(path)
    assert ("`Tuner.resume(journal)` ends the 2 it had told to stop already (stopped, or completed where its last "
            "report was at max_resource)") in before.summary()
    executor = LocalExecutor()

    result = Tuner.resume(path, executor=executor).fit()
    assert before.resource_without_early_stopping == result.resource_without_early_stopping

    assert executor.worker_starts == 0                # nothing to rerun: no worker started
    s, c = result.trials[stopped["number"]], result.trials[completed["number"]]
    assert (s.attempt, s.status, s.resource, s.rung, s.value) == (1, "stopped", stopped["resource"],
                                                                   stopped["rung"], stopped["value"])
    assert s.reason == stopped["reason"] + NOTE
    assert (c.attempt, c.status, c.resource, c.value) == (1, "completed", 9, completed["value"])
    assert c.reason == "reached max_resource=9" + NOTE
    assert result.resource_lost == 0 and result.earlier_reports() == []
    assert result.resource_used == sum(t["resource"] for t in rows)
    with Journal(path, readonly=True) as j:                     # ended when their stop was decided
        first_stop = {t: tm for t, st, _, tm, stop, _ in j.reports() if stop}
        assert s.ended == first_stop[s.number] and c.ended == first_stop[c.number]


def test_a_trial_told_to_stop_with_a_nan_last_value_fails_as_a_live_job_fails_it(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    rows = _job(path)
    stopped = next(t for t in rows if t["status"] == "stopped" and t["resource"] < 9)
    _as_killed(path, stopped["number"])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE reports SET value=NULL WHERE trial=? AND step=?", (stopped["number"], stopped["resource"]))
    result = Tuner.resume(path).fit()
    t = result.trials[stopped["number"]]
    assert (t.attempt, t.status, t.reason, t.value) == (1, "failed", "failed (objective is nan)", None)
    assert t.error == (f"the objective is nan: its last report (step={stopped['resource']}) was nan, and train had "
                       "not returned when its tuner stopped")
    with Journal(path, readonly=True) as j:
        assert all(r[2] != t.number for r in j.rung_records())   # a broken run leaves the rungs


SIGTERM_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import trial27b_trainables as tt
    from tripwire.tune import Continuous, RandomSearch, Tuner

    if __name__ == "__main__":
        Tuner(tt.train_linger, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=2), max_jobs=3,
              seed=0, journal={journal!r}).fit()
""")


def test_sigterm_while_a_trial_told_to_stop_finishes_its_epoch_ends_it_not_pending(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    script = tmp_path / "job.py"
    script.write_text(SIGTERM_SCRIPT.format(here=str(HERE), journal=str(journal)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": "", trial27b_trainables.LINGER_ENV: "60"})
    deadline, told = time.monotonic() + 120, False
    while not told and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        if journal.exists():
            try:
                with Journal(journal, readonly=True) as j:
                    told = any(t["status"] == "running" and any(r[4] for r in j.reports(t["number"]))
                               for t in j.trials())
            except JournalError:  # (the subprocess is still creating it: its tables are not there yet)
                continue
    assert told, proc.stderr.read().decode() if proc.poll() is not None else "no trial was told to stop"
    os.kill(proc.pid, signal.SIGTERM)     # trial 0 reported step 2 (max_resource: stop) and lingers
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGTERM, proc.stderr.read().decode()
    with Journal(journal, readonly=True) as j:
        trials = j.trials()
        assert j.get_meta("resource_lost", 0) == 0 and j.earlier_reports() == []
    assert [(t["number"], t["status"], t["attempt"], t["resource"]) for t in trials] == [(0, "completed", 1, 2)]
    assert trials[0]["value"] == pytest.approx(tt.curve(trials[0]["params"], 2))
    assert trials[0]["reason"] == "reached max_resource=2" + NOTE
    result = Tuner.resume(journal).fit()   # (no linger here) the job goes on with trials 1 and 2
    assert [(t.number, t.status, t.attempt) for t in result.trials] == [
        (0, "completed", 1), (1, "completed", 1), (2, "completed", 1)]
    assert not math.isnan(result.best.value)
