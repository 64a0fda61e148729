"""Trial 29c, finding 3: a worker that re-ran a script's module-level "start fresh"
``os.remove(journal)`` removed the journal while the job ran; every later write went to a file no
path leads to, and ``fit()`` returned normally, the journal gone. The tuner now checks that the
file it locked is still at the journal's path (every second, and when the job ends): if not, the
job stops with a JournalError that names the file and the likely cause, and what the tuner wrote
is saved beside it (``NAME.rescued.db``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trial29c_trainables as tr

from tripwire.tune import Continuous, JournalError, RandomSearch, Tuner, TuningResult
from tripwire.tune._journal import Journal

CAUSE = ("Likely cause: code at the script's module level that removes or rewrites the journal (a \"start fresh\" "
         "os.remove) ran again in a worker: the local executor's workers run the main script's module-level code, up "
         "to its Tuner.fit(), while the job runs; put that code under `if __name__ == \"__main__\":` (else: another "
         "program removed or replaced the file)")


def _tuner(train: object, path: Path, max_jobs: int) -> Tuner:
    return Tuner(train, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=3), max_jobs=max_jobs,
                 max_parallel_jobs=1, seed=0, journal=str(path))  # type: ignore[arg-type]


def test_a_journal_removed_while_the_job_runs_stops_it_and_is_rescued(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tuning.db"
    monkeypatch.setenv(tr.JOURNAL_ENV, str(path))
    with pytest.raises(JournalError) as err:
        _tuner(tr.train_removes_journal, path, max_jobs=8).fit()
    text = str(err.value)
    rescued = tmp_path / "tuning.rescued.db"
    assert text.startswith(f"journal {str(path)!r} was removed while the job ran (no file is at {str(path)!r} now): "
                           "the tuner was writing the job to a file that no path leads to, so the job was stopped "
                           "(its running trials are pending); the job's records (")
    assert (f") are saved in {str(rescued)!r} (`tripwire tune-report {rescued}` reads it; to continue the job, move it "
            "to the journal's path (without the old file's -wal and -shm) and resume it). " + CAUSE) in text
    assert not path.exists()
    saved = TuningResult.from_journal(rescued)
    assert 1 <= len(saved.trials) < 8   # stopped: not every trial ran
    assert saved.holder is None         # no tuner holds the copy
    assert f"({', '.join(f'{k} {v}' for k, v in saved.counts().items() if v)})" in text
    # the rescued job continues where it stopped
    shutil.move(str(rescued), str(path))
    result = Tuner.resume(path).fit()
    assert [t.status for t in result.trials] == ["completed"] * 8


def test_a_journal_replaced_while_the_job_runs_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tuning.db"
    monkeypatch.setenv(tr.JOURNAL_ENV, str(path))
    with pytest.raises(JournalError, match=re.escape(f"journal {str(path)!r} was replaced while the job ran (the file at "
                                                     f"{str(path)!r} now is another one: device ")):
        _tuner(tr.train_replaces_journal, path, max_jobs=8).fit()
    assert path.read_text() == "not the journal\n"  # (left as it is)
    assert TuningResult.from_journal(tmp_path / "tuning.rescued.db").trials


def test_a_journal_removed_in_a_job_shorter_than_the_check_period_is_found_at_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "short.db"
    monkeypatch.setenv(tr.JOURNAL_ENV, str(path))
    (tmp_path / "short.rescued.db").write_text("")  # taken: the next name is used
    with pytest.raises(JournalError, match=re.escape(
            "the job ended, but the tuner had written it to a file that no path leads to; the job's records "
            f"(completed 1) are saved in {str(tmp_path / 'short.rescued-2.db')!r} (`tripwire tune-report "
            f"{tmp_path / 'short.rescued-2.db'}` reads it). Likely cause")):
        _tuner(tr.train_removes_journal_at_once, path, max_jobs=1).fit()
    assert [t.value is not None for t in TuningResult.from_journal(tmp_path / "short.rescued-2.db").trials] == [True]


def test_file_problem_says_removed_replaced_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "j.db"
    monkeypatch.chdir(tmp_path)
    with Journal("j.db", create=True) as j:  # a relative path
        assert j.file_problem() is None  # not locked: nothing to check
        j.acquire_lock()
        assert j.file_problem() is None
        monkeypatch.chdir(tmp_path.parent)  # (its real path is checked, not one relative to the working folder)
        assert j.file_problem() is None
        os.rename(path, tmp_path / "moved.db")
        assert j.file_problem() == f"was removed while the job ran (no file is at {str(path)!r} now)"
        path.write_text("x")
        assert (j.file_problem() or "").startswith(f"was replaced while the job ran (the file at {str(path)!r} now is "
                                                   "another one: device ")


SCRIPT = textwrap.dedent("""
    import os, time
    from tripwire.tune import Continuous, RandomSearch, Tuner

    JOURNAL = "deleted.db"
    for suffix in ("", "-wal", "-shm"):   # "start fresh": runs again in every worker (no guard)
        if os.path.exists(JOURNAL + suffix):
            os.remove(JOURNAL + suffix)

    def train(params, trial):
        for step in range(1, 4):
            time.sleep(0.2)
            if trial.report(step=step, value=params["x"] * step):
                break
        return params["x"] * step

    result = Tuner(train, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=3), max_jobs=8,
                   max_parallel_jobs=1, seed=0, journal=JOURNAL).fit()
    print("fit returned", flush=True)
""")


def test_the_reproducers_unguarded_start_fresh_script_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "job.py"], capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 1 and "fit returned" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tripwire.tune._errors.JournalError: journal 'deleted.db' was removed while the job ran")
    assert last.endswith(CAUSE)
    assert TuningResult.from_journal(tmp_path / "deleted.rescued.db").trials
