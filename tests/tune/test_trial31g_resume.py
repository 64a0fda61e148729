"""Trial 31g, the tuner killed with ``kill -9`` and resumed:

- F1: ``Tuner.resume(journal).fit()`` from a directory where the journaled ``train`` cannot be
  imported raised its ``ConfigError`` only after it had requeued the interrupted trials (running ->
  pending, attempt 2, reports moved to ``earlier_reports``, ``resource_lost`` written). A refused
  resume now leaves the journal as it was, byte for byte in its rows (the dead tuner's lock row
  too), and the error names the journaled entry point, the file that defined it and the fix.
- F3: ``tune-report --json``'s ``tuner`` after ``kill -9`` is ``{"pid", "host", "alive": false}``
  (the text report names that pid too); docs/cli.md said null.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tripwire import ConfigError
from tripwire.tune import Continuous, RandomSearch, Tuner
from tripwire.tune._journal import Journal

TRAIN = '''
import time

def train(params, trial):
    trial.report(1, params["x"])
    if trial.attempt == 1:
        time.sleep(300)  # (killed with its tuner)
    for step in range(2, trial.budget + 1):
        if trial.report(step, params["x"] + step):
            break
    return None

def setup():
    return "ctx"
'''

JOB = '''
import sys
sys.path.insert(0, {mods!r})
from tripwire.tune import Continuous, RandomSearch, Tuner
from t31g_strain import setup, train

if __name__ == "__main__":
    Tuner(train, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=3), max_jobs=2,
          max_parallel_jobs=2, seed=0, journal={journal!r}, setup=setup).fit()
'''


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def _dump(path: Path) -> list[str]:
    """Every row of every table (the lock's included), as SQL."""
    con = sqlite3.connect(path)
    try:
        return list(con.iterdump())
    finally:
        con.close()


def _killed_job(tmp_path: Path) -> tuple[Path, Path, int]:
    """A job whose tuner was killed with SIGKILL while its 2 trials ran (each reported step 1):
    ``(journal, folder of train's module, the dead tuner's pid)``."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "t31g_strain.py").write_text(TRAIN)
    journal = tmp_path / "job" / "tuning.db"
    journal.parent.mkdir()
    script = journal.parent / "run.py"
    script.write_text(JOB.format(mods=str(mods), journal=str(journal)))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=journal.parent, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"the job ended early: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
            if journal.exists():
                try:
                    con = sqlite3.connect(journal)
                    n = con.execute("SELECT COUNT(DISTINCT trial) FROM reports").fetchone()[0]
                    con.close()
                except sqlite3.Error:
                    n = 0
                if n == 2:
                    break
            time.sleep(0.2)
        else:
            raise AssertionError("the 2 trials did not report in 120 s")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()  # type: ignore[union-attr]
    return journal, mods, proc.pid


def _resume_elsewhere(tmp_path: Path, journal: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    where = tmp_path / "elsewhere"
    where.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code).format(journal=str(journal))], cwd=where,
                          env=_env(**env), capture_output=True, text=True, timeout=240)


def _report_json(journal: Path) -> dict:
    from tripwire.tune._cli import report_data
    from tripwire.tune import TuningResult
    return json.loads(json.dumps(report_data(TuningResult.from_journal(journal), str(journal), 5)))


def test_a_resume_refused_for_its_train_leaves_the_journal_as_it_was(tmp_path: Path) -> None:
    journal, mods, dead = _killed_job(tmp_path)
    before = _dump(journal)
    rows = {r["number"]: r for r in Journal(journal, readonly=True).trials()}
    assert [(r["status"], r["attempt"]) for r in rows.values()] == [("running", 1), ("running", 1)]

    refused = _resume_elsewhere(tmp_path, journal, """
        from tripwire import ConfigError
        from tripwire.tune import Tuner
        try:
            Tuner.resume({journal!r}, max_jobs=5).fit()
        except ConfigError as e:
            print(e)
    """)
    assert refused.returncode == 0, refused.stderr
    # nothing was written: no requeue, no attempt 2, no resource_lost, no new max_jobs, the dead tuner's lock row
    assert _dump(journal) == before
    message = refused.stdout.strip()
    # the journaled entry points, why, the file that defined train, and the fixes
    assert message.startswith("the journal names train='t31g_strain:train' and setup='t31g_strain:setup', which "
                              "cannot be imported here: module 't31g_strain' does not import (No module named "
                              "'t31g_strain'); the job's train was defined in "
                              f"{os.path.realpath(mods / 't31g_strain.py')}"), message
    root = os.path.realpath(mods)
    assert f"put {root} (where 't31g_strain' was imported from when the job ran) on the import path " \
           f"(PYTHONPATH={root}, or sys.path.insert(0, {root!r}) before Tuner.resume" in message, message
    assert message.endswith("or pass Tuner.resume(journal, train=..., setup=...) to run the job with the functions "
                            "you pass"), message
    tuner = _report_json(journal)["tuner"]
    assert tuner == {"pid": dead, "host": tuner["host"], "alive": False}

    # the fix the message gives: the job goes on, the interrupted trials rerun as their attempt 2
    ok = _resume_elsewhere(tmp_path, journal, """
        from tripwire.tune import Tuner
        r = Tuner.resume({journal!r}).fit()
        print([(t.number, t.status, t.attempt, t.resource) for t in r.trials])
    """, PYTHONPATH=root)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "[(0, 'completed', 2, 3), (1, 'completed', 2, 3)]"
    with Journal(journal, readonly=True) as j:
        assert sorted({(t, a) for t, a, *_ in j.earlier_reports()}) == [(0, 1), (1, 1)]
        assert j.get_meta("resource_lost") == 2


def test_the_resume_that_passes_train_runs_the_job(tmp_path: Path) -> None:
    """The other fix the message gives: ``train=``/``setup=`` of the caller's (same functions here)."""
    journal, mods, _ = _killed_job(tmp_path)
    ok = _resume_elsewhere(tmp_path, journal, f"""
        import sys
        from tripwire.tune import Tuner
        sys.path.insert(0, {str(mods)!r})
        import t31g_strain
        r = Tuner.resume({{journal!r}}, train=t31g_strain.train, setup=t31g_strain.setup).fit()
        print([(t.number, t.status, t.attempt) for t in r.trials])
    """)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "[(0, 'completed', 2), (1, 'completed', 2)]"


def test_tune_report_json_names_the_killed_tuner_and_null_once_released(tmp_path: Path) -> None:
    """F3: after ``kill -9`` the lock row of the dead tuner stays: ``tuner`` is that object with
    ``alive`` False and no ``copy_of``, as the text report names its pid; a job that ended (its
    tuner released the lock) has ``tuner`` null."""
    journal, _, dead = _killed_job(tmp_path)
    data = _report_json(journal)
    assert data["tuner"] == {"pid": dead, "host": data["tuner"]["host"], "alive": False}
    assert data["counts"]["running"] == 2
    from tripwire.tune import TuningResult
    assert f"the one that ran it (pid {dead} on {data['tuner']['host']}) ended before its 2 running" in \
        TuningResult.from_journal(journal).summary()
    done = tmp_path / "done.db"
    Tuner(_objective, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(), max_jobs=1, seed=0,
          journal=str(done)).fit()
    assert _report_json(done)["tuner"] is None


def _objective(params: dict, trial: object) -> float:
    return float(params["x"])


# ---- the journal's session transaction (Journal.begin): what a refused start leaves ---------------------------

def test_a_rolled_back_session_start_restores_the_rows_and_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal(path, create=True) as j:
        j.init_job({"train": "m:f", "objective": "objective", "mode": "max"})
        j.start_trial(0, {"x": 1}, 0, 1.0)
        j.add_report(0, 1, 0.5, False, "", [], 0)
    con = sqlite3.connect(path)  # a dead tuner's lock row (pid 1 on another host: never alive here)
    con.execute("INSERT INTO lock VALUES (1, 999999, 'elsewhere', NULL, 0.0, 0.0)")
    con.commit()
    con.close()
    before = _dump(path)
    j = Journal(path, create=True)
    j.begin()
    j.acquire_lock()
    assert j.requeue_running() == [0]
    j.set_meta("resource_lost", 7)
    with pytest.raises(sqlite3.IntegrityError):  # (a failed write inside: its savepoint only is undone)
        with j._tx():
            j._db.execute("INSERT INTO trials (number, params, bracket, status) VALUES (0, '{}', 0, 'x')")
    assert j.trials()[0]["status"] == "pending"
    j.rollback()
    j.close()
    assert _dump(path) == before
    # closed without a commit: rolled back too, never written half done
    j = Journal(path, create=True)
    j.begin()
    j.acquire_lock()
    j.requeue_running()
    j.close()
    assert _dump(path) == before
    # committed: the lock and the requeue together
    j = Journal(path, create=True)
    j.begin()
    j.acquire_lock()
    j.requeue_running()
    j.commit()
    assert j.holder() == {"pid": os.getpid(), "host": j.holder()["host"], "alive": True}
    j.close()
    with Journal(path, readonly=True) as r:
        assert r.trials()[0]["status"] == "pending" and r.holder() is None


def test_a_refused_new_job_writes_no_job(tmp_path: Path) -> None:
    """A ``train`` the workers cannot be sent (a lambda does not pickle) is refused before the
    session writes anything: the journal holds no job, and a fixed rerun starts afresh."""
    path = tmp_path / "j.db"
    with pytest.raises(ConfigError, match=r"train=<function .*<lambda> at .*> cannot be sent to worker processes"):
        Tuner(lambda params, trial: 1.0, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(), max_jobs=1,
              seed=0, journal=str(path)).fit()
    with Journal(path, readonly=True) as j:
        assert j.job is None and j.trials() == [] and j.holder() is None
    result = Tuner(_objective, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(), max_jobs=1, seed=0,
                   journal=str(path)).fit()
    assert [t.status for t in result.trials] == ["completed"]
