"""Trial 28b, the journal of a long job: the executor given on resume (F5), the wall time of a
SIGKILLed session (F2), a journal copied while its job runs (F3), and a URL as the journal (28f F2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire._cli import main
from tripwire.tune import Continuous, LocalExecutor, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal

HERE = Path(tt.__file__).parent
SPACE = {"x": Continuous(0.0, 1.0)}


def _job(path: Path) -> dict[str, Any]:
    with Journal(path, readonly=True) as j:
        return j.job  # type: ignore[return-value]


# ---- F5: the executor given on resume is journaled ------------------------------------------------
FRESH = {"type": "local", "start_method": "spawn", "reuse_workers": False}


def test_an_executor_given_on_resume_is_journaled_and_kept_by_a_plain_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = tmp_path / "ex.db"
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=2, seed=0, journal=str(journal)).fit()
    assert _job(journal)["executor"] == {"type": "local", "start_method": "spawn", "reuse_workers": True}
    # the repro: Tuner.resume(path, executor="dask", max_jobs=420): max_jobs journaled, the executor not
    resumed = Tuner.resume(journal, executor=FRESH, max_jobs=3)
    assert resumed.executor.to_dict() == FRESH            # used ...
    result = resumed.fit()
    assert len(result.trials) == 3 and result.trials[2].status == "completed"
    job = _job(journal)
    assert (job["max_jobs"], job["executor"]) == (3, FRESH)   # ... and journaled, as the limits
    assert result.job["executor"] == FRESH
    again = Tuner.resume(journal)                          # a plain resume (after the next crash, say)
    assert isinstance(again.executor, LocalExecutor) and again.executor.to_dict() == FRESH
    capsys.readouterr()
    assert main(["tune-report", str(journal), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["job"]["executor"] == FRESH


def test_a_dask_executor_given_on_resume_is_journaled(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    journal = tmp_path / "ed.db"
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, seed=0, journal=str(journal)).fit()
    Tuner.resume(journal, executor="dask").fit()   # (a finished job: no worker starts)
    assert _job(journal)["executor"] == {"type": "dask", "address": None}
    from tripwire.tune import DaskExecutor

    again = Tuner.resume(journal)
    assert isinstance(again.executor, DaskExecutor) and again.executor.to_dict() == {"type": "dask", "address": None}


def test_a_plain_resume_leaves_the_journaled_executor_as_it_is(tmp_path: Path) -> None:
    journal = tmp_path / "keep.db"
    Tuner(tt.train_curve, SPACE, strategy=RandomSearch(3), max_jobs=1, seed=0, journal=str(journal),
          executor=FRESH).fit()
    Tuner.resume(journal, max_jobs=2).fit()
    assert (_job(journal)["max_jobs"], _job(journal)["executor"]) == (2, FRESH)


YAML = """\
train: tune_trainables:train_curve
space:
  x: {{type: continuous, low: 0.0, high: 1.0}}
strategy: {{type: random, max_resource: 3}}
max_jobs: {max_jobs}
seed: 0
journal: tuning.db
{executor}"""


def test_the_yamls_executor_on_resume_is_journaled(tmp_path: Path) -> None:
    config = tmp_path / "tune.yaml"
    config.write_text(YAML.format(max_jobs=1, executor=""))
    assert main(["tune", "--no-progress", str(config)]) == 0
    config.write_text(YAML.format(max_jobs=2, executor="executor: {type: local, reuse_workers: false}\n"))
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 0
    assert _job(tmp_path / "tuning.db")["executor"] == FRESH
    # `executor: local` in the YAML is the YAML's executor too (it was read as "the journaled one")
    config.write_text(YAML.format(max_jobs=3, executor="executor: local\n"))
    assert main(["tune", "--resume", "--no-progress", str(config)]) == 0
    assert _job(tmp_path / "tuning.db")["executor"] == {"type": "local", "start_method": "spawn",
                                                         "reuse_workers": True}


# ---- F2: a SIGKILLed session's time counts towards max_wall_time -----------------------------------
WALL_TRAIN = textwrap.dedent('''
    import time

    def train(params, trial):
        """The first attempt sits in a long epoch (it is killed there); a rerun reports at once."""
        if trial.attempt == 1:
            time.sleep(600)
        for step in (1, 2):
            if trial.report(step=step, value=float(params["x"])):
                break
        return float(params["x"])
''')

WALL_JOB = textwrap.dedent('''
    import sys
    sys.path.insert(0, {here!r})
    import t28b_wall
    import tripwire.tune._tuner as tuner_module
    from tripwire.tune import Continuous, RandomSearch, Tuner

    tuner_module.HEARTBEAT_S = {beat!r}
    if __name__ == "__main__":
        Tuner(t28b_wall.train, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=2), max_jobs=2,
              seed=0, journal={journal!r}, max_wall_time=1000).fit()
''')


def _meta(path: Path, key: str) -> Any:
    with Journal(path, readonly=True) as j:
        return j.get_meta(key)


def test_a_sigkilled_session_counts_its_time_to_its_last_heartbeat(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # the repro: sessions SIGKILLed 15 s into a 20 s epoch, 4 times: wall_seconds stayed 0.0 (60 s of a 40 s budget)
    beat = 0.5
    (tmp_path / "t28b_wall.py").write_text(WALL_TRAIN)
    journal = tmp_path / "wall.db"
    script = tmp_path / "job.py"
    script.write_text(WALL_JOB.format(here=str(tmp_path), beat=beat, journal=str(journal)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        running = False
        while not running and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            try:
                with Journal(journal, readonly=True) as j:
                    running = any(t["status"] == "running" for t in j.trials())
            except Exception:  # (not written yet)
                pass
        assert running, proc.stderr.read().decode() if proc.poll() is not None else "no trial started in 60 s"
        time.sleep(3.0)  # mid-trial: no trial ends in this session
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.time()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    session = killed_at - float(_meta(journal, "created"))   # (the session began just after the job was written)
    counted = float(_meta(journal, "wall_seconds"))
    assert session >= 3.0
    # charged up to its last heartbeat: within the heartbeat period (and the time the check took)
    assert session - beat - 1.0 <= counted <= session, (counted, session)

    # the resume counts it once: a budget below it is spent already (the interrupted trial is rerun and
    # stopped at its first report, as a live job stops its running trials; no new trial starts)
    monkeypatch.syspath_prepend(str(tmp_path))
    t0 = time.monotonic()
    result = Tuner.resume(journal, max_wall_time=counted - 0.5).fit()
    took = time.monotonic() - t0
    assert result.halt == f"max_wall_time={counted - 0.5:g} s reached"
    assert [(t.number, t.attempt, t.status) for t in result.trials] == [(0, 2, "stopped")]
    total = float(_meta(journal, "wall_seconds"))
    assert counted <= total <= counted + took, (counted, total, took)


# ---- F3: a journal copied while its job runs -------------------------------------------------------
COPY_TRAIN = textwrap.dedent('''
    import os
    import time

    def train(params, trial):
        """1 s a step in the job that is copied; at once where $T28B_FAST is set (the copy's resume)."""
        for step in range(1, trial.max_resource + 1):
            if not os.environ.get("T28B_FAST"):
                time.sleep(1.0)
            if trial.report(step=step, value=float(params["x"]) * step):
                break
        return float(params["x"]) * step
''')

COPY_JOB = textwrap.dedent('''
    import sys
    sys.path.insert(0, {here!r})
    import t28b_copy
    from tripwire.tune import Continuous, RandomSearch, Tuner

    if __name__ == "__main__":
        Tuner(t28b_copy.train, {{"x": Continuous(0.0, 1.0)}}, strategy=RandomSearch(max_resource=3), max_jobs=4,
              seed=0, journal={journal!r}).fit()
''')


def test_a_journal_copied_while_its_job_runs_is_not_held_by_the_original_tuner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil
    import sqlite3

    (tmp_path / "t28b_copy.py").write_text(COPY_TRAIN)
    original = tmp_path / "orig.db"
    script = tmp_path / "job.py"
    script.write_text(COPY_JOB.format(here=str(tmp_path), journal=str(original)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        running = False
        while not running and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            try:
                with Journal(original, readonly=True) as j:
                    running = any(t["status"] == "running" and t["resource"] >= 1 for t in j.trials())
            except Exception:  # (not written yet)
                pass
        assert running, proc.stderr.read().decode() if proc.poll() is not None else "no trial ran in 60 s"
        # the repro's copy (the file and its -wal), and the documented backup (sqlite3's .backup)
        copied = tmp_path / "cp_copy.db"
        shutil.copyfile(original, copied)
        shutil.copyfile(f"{original}-wal", f"{copied}-wal")
        backup = tmp_path / "backup.db"
        with sqlite3.connect(original) as src, sqlite3.connect(backup) as dst:
            src.backup(dst)
        src.close()
        dst.close()

        for copy in (copied, backup):
            report = TuningResult.from_journal(copy)
            assert report.holder == {"pid": proc.pid, "host": __import__("socket").gethostname(), "alive": False,
                                     "copy_of": os.path.realpath(original)}
            assert f"no tuner is running this copy: it is a copy of {os.path.realpath(original)!r}, made while a " \
                   f"tuner (pid {proc.pid} on " in report.summary()
            assert "a tuner is running this job now" not in report.summary()
            assert main(["tune-report", str(copy)]) == 0
            assert "a tuner is running this job now" not in capsys.readouterr().out
        assert TuningResult.from_journal(original).holder["alive"] is True   # the original is its tuner's still
        assert "copy_of" not in TuningResult.from_journal(original).holder

        # the copy resumes while the original's tuner runs (it was "held by another tuner (pid N)")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setenv("T28B_FAST", "1")
        result = Tuner.resume(copied).fit()
        assert [t.status for t in result.trials] == ["completed"] * 4
        assert TuningResult.from_journal(copied).holder is None            # released: it was its own
        assert proc.poll() is None and TuningResult.from_journal(original).holder["alive"] is True
        with pytest.raises(Exception, match="is held by another tuner"):   # the original stays locked
            Tuner.resume(original).fit()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def _lock_row(path: Path, pid: int, dev: int | None, ino: int | None) -> None:
    """A lock row of a live process on this host (``pid``) naming the file ``(dev, ino)`` (its
    ``lock_file`` row); ``ino=None``: a row without it, as an earlier tripwire wrote."""
    import socket
    import sqlite3

    from tripwire.tune._journal import _proc_start

    now, host = time.time(), socket.gethostname()
    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO lock VALUES (1, ?, ?, ?, ?, ?)", (pid, host, _proc_start(pid), now, now))
        db.execute("DELETE FROM lock_file")
        if ino is not None:
            db.execute("INSERT INTO lock_file VALUES (1, ?, ?, ?, ?, ?, ?)",
                       (pid, host, now, "/elsewhere/orig.db", dev, ino))
    db.close()


def _lock_file(j: Journal) -> tuple[Any, ...] | None:
    return j._db.execute("SELECT pid, path FROM lock_file").fetchone()  # type: ignore[no-any-return]


def test_a_lock_row_locks_the_file_it_names_and_an_old_row_locks_as_before(tmp_path: Path) -> None:
    from tripwire.tune import JournalLockedError

    path = tmp_path / "j.db"
    Journal(path, create=True).close()
    st = path.stat()
    _lock_row(path, 1, st.st_dev, st.st_ino)             # this very file: held
    with Journal(path) as j, pytest.raises(JournalLockedError, match="is held by another tuner \\(pid 1 on "):
        j.acquire_lock()
    _lock_row(path, 1, None, None)                       # a row written before trial 28b: held, as before
    with Journal(path) as j, pytest.raises(JournalLockedError, match="is held by another tuner"):
        j.acquire_lock()
    _lock_row(path, 1, st.st_dev, st.st_ino + 1)         # another file's (this one is its copy): taken
    with Journal(path) as j:
        assert j.holder() == {"pid": 1, "host": __import__("socket").gethostname(), "alive": False,
                              "copy_of": "/elsewhere/orig.db"}
        j.acquire_lock()
        assert j.holder()["pid"] == os.getpid() and "copy_of" not in j.holder()
        assert _lock_file(j) == (os.getpid(), os.path.realpath(path))
    with Journal(path, readonly=True) as j:               # released with its lock_file row
        assert (j.holder(), _lock_file(j)) == (None, None)
    with Journal(path) as j:                             # a new job replacing one that never started keeps it
        j.acquire_lock()
        j.init_job({"objective": "v"})
        j.init_job({"objective": "w"})
        assert (j.job, _lock_file(j)) == ({"objective": "w"}, (os.getpid(), os.path.realpath(path)))
    # an earlier tripwire takes the lock of a journal this one wrote (the lock table is as it was)
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("INSERT OR REPLACE INTO lock VALUES (1, 1, 'h', NULL, 1.0, 1.0)")
    db.close()


def test_a_journal_copied_without_its_wal_says_where_its_content_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from tripwire.tune import JournalError

    live = tmp_path / "t2.db"
    j = Journal(live, create=True)
    try:
        j.init_job({"objective": "v"})                # (all of it in the -wal: no checkpoint yet)
        copy = tmp_path / "t2copy_nowal.db"
        shutil.copyfile(live, copy)                   # the main file only: 4096 bytes
    finally:
        j.close()
    hint = (r"is not a tripwire journal \(tables \[\]\); it is a SQLite database in WAL mode of one page and no "
            r"table, as a tripwire journal is before SQLite's first checkpoint: its content is in the original's "
            r"write-ahead log \(the file ORIGINAL.db-wal beside it\)")
    with pytest.raises(JournalError, match=hint):
        TuningResult.from_journal(copy)
    assert main(["tune-report", str(copy)]) == 2
    assert 'back a live journal up with sqlite3 ORIGINAL.db ".backup t2copy_nowal.db"' in capsys.readouterr().err
    # an empty SQLite database that is no WAL copy: no hint
    import sqlite3

    empty = tmp_path / "empty.db"
    with sqlite3.connect(empty) as db:
        db.execute("PRAGMA user_version=1")
    db.close()
    with pytest.raises(JournalError, match=r"\(tables \[\]\)$"):
        TuningResult.from_journal(empty)


def test_a_journal_being_made_is_not_said_to_be_a_copy_without_its_wal(tmp_path: Path) -> None:
    import sqlite3

    from tripwire.tune import JournalError

    path = tmp_path / "new.db"
    writer = sqlite3.connect(path)     # a tuner between PRAGMA journal_mode=WAL and its tables
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("CREATE TABLE meta (key TEXT)")
    try:
        with pytest.raises(JournalError, match=r"is not a tripwire journal \(tables \[\]\)$"):
            TuningResult.from_journal(path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
