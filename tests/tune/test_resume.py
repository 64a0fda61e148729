"""Resume after the tuning process is SIGKILLed mid-job (a real subprocess)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import tune_trainables

from tripwire.tune import Continuous, Hyperband, Tuner, TuningResult
from tripwire.tune._journal import Journal

HERE = Path(tune_trainables.__file__).parent

SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import tune_trainables as tt
    from tripwire.tune import Continuous, Hyperband, Tuner

    if __name__ == "__main__":
        Tuner(tt.train_slow, {{"x": Continuous(0.0, 1.0)}}, strategy=Hyperband(1, 27, 3), max_jobs=30,
              max_parallel_jobs=2, seed=11, journal={journal!r}).fit()
        print("finished")
""")


def _ended(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with Journal(path, readonly=True) as j:
            return sum(1 for t in j.trials() if t["status"] in ("completed", "stopped", "failed"))
    except Exception:
        return 0


def test_resume_after_sigkill(tmp_path: Path) -> None:
    journal = tmp_path / "tuning.db"
    script = tmp_path / "job.py"
    script.write_text(SCRIPT.format(here=str(HERE), journal=str(journal)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": ""})
    deadline = time.monotonic() + 60
    while _ended(journal) < 10 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    # kill once a trial is running past its first rung: its rung values stay, and its rerun's replace them (trial 27b)
    while time.monotonic() < deadline and proc.poll() is None:
        with Journal(journal, readonly=True) as j:
            # (and not told to stop yet: such a trial is ended on resume, not rerun, trial 27b)
            running = [t for t in j.trials() if t["status"] == "running" and t["resource"] >= 2
                       and not any(r[4] for r in j.reports(t["number"]))]
        if running:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()

    with Journal(journal, readonly=True) as j:
        before = {t["number"]: t for t in j.trials()}
        rungs_before = j.rung_records()
        lock = j._db.execute("SELECT pid FROM lock").fetchone()
    assert lock == (proc.pid,)  # the dead tuner still holds the lock row ...
    # tune-report's summary says the job is not running, and how to go on (it read as a live job)
    report = TuningResult.from_journal(journal)
    assert report.holder == {"pid": proc.pid, "host": socket.gethostname(), "alive": False}
    assert (f"no tuner is running this job: the one that ran it (pid {proc.pid} on {socket.gethostname()}) ended "
            "before its") in report.summary() and "tripwire tune --resume TUNE.yaml" in report.summary()
    # (a running trial told to stop already, its stop journaled, is ended on resume, not rerun: trial 27b)
    with Journal(journal, readonly=True) as j:
        told = {n for n in before if before[n]["status"] == "running" and any(r[4] for r in j.reports(n))}
    interrupted = sorted(n for n, t in before.items() if t["status"] == "running" and n not in told)
    assert interrupted and len(before) < 30
    ended = {n: t for n, t in before.items() if t["status"] != "running"}

    result = Tuner.resume(journal).fit()  # ... which a dead process does not hold

    after = {t.number: t for t in result.trials}
    assert sorted(after) == list(range(30))                      # nothing lost, nothing duplicated
    assert all(t.status in ("completed", "stopped") for t in after.values())
    for n, t in ended.items():                                    # finished trials untouched
        assert (after[n].status, after[n].value, after[n].resource, after[n].ended, after[n].attempt) == \
            (t["status"], t["value"], t["resource"], t["ended"], 1)
    for n in interrupted:                                         # running ones rerun under their number
        assert after[n].attempt == 2 and after[n].params == before[n]["params"]
    for n in told:                                                # ended with their journaled stop
        assert after[n].attempt == 1 and after[n].resource == before[n]["resource"]
    with Journal(journal, readonly=True) as j:
        rungs_after = j.rung_records()
        reports = j.reports()
        state = j.load_scheduler_state()
        assert j._db.execute("SELECT COUNT(*) FROM lock").fetchone() == (0,)
    kept = [r for r in rungs_before if r[2] not in interrupted]
    assert set(kept) <= set(rungs_after)                          # the rungs' state survived
    assert [tuple(r) for r in state["records"]] == rungs_after
    steps: dict[int, list[int]] = {}
    for trial, step, *_ in reports:
        steps.setdefault(trial, []).append(step)
    assert all(s == list(range(1, len(s) + 1)) for s in steps.values())  # no duplicate report of a rerun
    assert all(after[n].resource == len(steps[n]) for n in after)

    # same seed, same configurations as a run that was never interrupted
    clean = Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 27, 3),
                  max_jobs=30, seed=11, journal=str(tmp_path / "clean.db"), max_parallel_jobs=2).fit()
    assert [t.params for t in clean.trials] == [after[n].params for n in range(30)]
    assert [t.bracket for t in clean.trials] == [after[n].bracket for n in range(30)]


def test_resume_of_a_finished_job_reruns_nothing(tmp_path: Path) -> None:
    from tripwire.tune import LocalExecutor

    journal = tmp_path / "done.db"
    first = Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 9, 3),
                  max_jobs=6, max_parallel_jobs=2, seed=5, journal=str(journal)).fit()
    with Journal(journal, readonly=True) as j:
        reports_before, rows_before = j.reports(), j.trials()
        wall_before = j.get_meta("wall_seconds")
    executor = LocalExecutor()
    again = Tuner.resume(journal, executor=executor).fit()
    assert executor.worker_starts == 0                           # no worker process was even started
    assert [(t.number, t.status, t.value, t.resource, t.started, t.ended, t.attempt) for t in again.trials] == \
        [(t.number, t.status, t.value, t.resource, t.started, t.ended, t.attempt) for t in first.trials]
    assert again.best == first.best and again.resource_used == first.resource_used
    with Journal(journal, readonly=True) as j:
        assert j.reports() == reports_before and j.trials() == rows_before
        assert j.get_meta("wall_seconds") == wall_before
    more = Tuner.resume(journal, max_jobs=8).fit()                # a raised limit does continue the job
    assert [t.number for t in more.trials] == list(range(8))
    assert [t.ended for t in more.trials[:6]] == [t.ended for t in first.trials]


def test_resume_with_max_jobs_below_the_trials_held_says_nothing_new_starts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = tmp_path / "done.db"
    Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 9, 3),
          max_jobs=6, seed=5, journal=str(journal)).fit()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        again = Tuner.resume(journal, max_jobs=4).fit()
    assert len(again.trials) == 6
    said = [r.getMessage() for r in caplog.records if "max_jobs" in r.getMessage()]
    assert said == ["tripwire.tune: resume with max_jobs=4, below the 6 trials the journal already holds: no new "
                    "trial starts (trials that were running are rerun); pass a max_jobs above 6 to run more"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        Tuner.resume(journal).fit()  # the journal keeps max_jobs=4 now: said again, as long as it holds
    assert len([r for r in caplog.records if "max_jobs=4" in r.getMessage()]) == 1


def test_max_total_resource_counts_the_units_of_attempts_that_were_rerun(tmp_path: Path) -> None:
    # trial 17b: an interrupted attempt's reports are deleted when it is rerun, and its units went
    # out of the budget too: 73 units trained against a max_total_resource of 61
    from tripwire.tune import RandomSearch

    path = tmp_path / "j.db"
    Tuner(tune_trainables.train_curve, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(5), max_jobs=2, seed=0,
          journal=str(path)).fit()
    with Journal(path) as j:  # trial 1 as a killed tuner leaves it: running, its 5 reports journaled
        j._db.execute("UPDATE trials SET status='running' WHERE number=1")
        # (not told to stop yet: a trial told so is ended on resume, not rerun, trial 27b)
        j._db.execute("UPDATE reports SET stop=0 WHERE trial=1")
        j._db.commit()
    snapshots: list[dict] = []
    result = Tuner.resume(path, max_jobs=10, max_total_resource=12).fit(progress=snapshots.append)
    with Journal(path, readonly=True) as j:
        assert j.get_meta("resource_lost") == 5
    # trial 18c: the live view's "resource used" counted the lost units, the summary under it did not
    assert snapshots[-1]["resource_used"] == result.resource_used == 7 and snapshots[-1]["resource_lost"] == 5
    # 5 (trial 0) + 5 (trial 1's lost attempt) + 2 of its rerun reach 12: no third trial starts
    assert [(t.number, t.attempt, t.status, t.resource) for t in result.trials] == [
        (0, 1, "completed", 5), (1, 2, "stopped", 2)]
