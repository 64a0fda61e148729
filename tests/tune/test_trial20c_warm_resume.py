"""Trial 20c, finding 2: ``Tuner.resume`` of a warm-started job reads its priors from its own journal's
meta, so the earlier journals may have moved (archived, renamed) and the resume may run from another
working directory (the journaled warm_start paths are relative there). A new job still refuses a
warm_start journal that does not exist."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import tune_trainables as tt

from tripwire._errors import ConfigError
from tripwire.tune import Continuous, Hyperband, Tuner
from tripwire.tune._journal import Journal

SPACE = {"x": Continuous(0.0, 1.0)}


def _tuner(journal: str, **kw: Any) -> Tuner:
    base: dict[str, Any] = dict(space=SPACE, strategy=Hyperband(1, 9, 3), max_jobs=6, max_parallel_jobs=2, seed=0,
                                journal=journal)
    base.update(kw)
    train = base.pop("train", tt.train_curve)
    return Tuner(train, **base)


def _warm_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Any:
    """An earlier job old.db near the optimum, then new.db warm-started from it, both by relative path."""
    monkeypatch.chdir(tmp_path)
    _tuner("old.db", max_jobs=6, space={"x": Continuous(0.28, 0.32)}).fit()
    return _tuner("new.db", seed=3, warm_start="old.db", **kw)


def _priors(path: Path) -> Any:
    with Journal(path, readonly=True) as j:
        return j.get_meta("priors")


def test_finished_warm_job_resumes_with_its_earlier_journal_archived_and_from_another_cwd(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _warm_job(tmp_path, monkeypatch).fit()
    priors = _priors(tmp_path / "new.db")
    assert priors
    shutil.move(str(tmp_path / "old.db"), str(tmp_path / "old_archived.db"))
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    before = (tmp_path / "new.db").read_bytes()
    tuner = Tuner.resume("../new.db")
    assert tuner.warm_start == ["old.db"]  # as journaled: the job's description is kept
    again = tuner.fit()  # was: ConfigError warm_start journal 'old.db' does not exist
    assert [(t.number, t.status, t.resource, t.value) for t in again.trials] == \
        [(t.number, t.status, t.resource, t.value) for t in first.trials]
    assert again.best == first.best
    assert (tmp_path / "new.db").read_bytes() == before  # a finished job is not rerun
    # the CLI's resume goes through Tuner.resume too; a new job still refuses the missing journal
    with pytest.raises(ConfigError, match=r"warm_start journal 'old.db' does not exist"):
        _tuner("other.db", warm_start="old.db")


def test_interrupted_warm_job_resumes_with_the_priors_of_its_meta(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(snapshot: dict[str, Any]) -> None:  # the tuning process dies mid-job
        if snapshot["completed"] + snapshot["stopped"] >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _warm_job(tmp_path, monkeypatch, max_jobs=8, train=tt.train_slow).fit(progress=crash)
    priors = _priors(tmp_path / "new.db")
    with Journal(tmp_path / "new.db", readonly=True) as j:
        assert priors and sum(t["status"] in ("completed", "stopped") for t in j.trials()) < 8
    shutil.move(str(tmp_path / "old.db"), str(tmp_path / "old_archived.db"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    result = Tuner.resume(tmp_path / "new.db").fit()
    assert len(result.trials) == 8 and all(t.status in ("completed", "stopped") for t in result.trials)
    assert _priors(tmp_path / "new.db") == priors
    with Journal(tmp_path / "new.db", readonly=True) as j:
        state = j.load_scheduler_state()
    assert state is not None
    assert sorted(v for vals in state["priors"].values() for v in vals) == sorted(v for _, v in priors)
    # and resuming it once more, finished, returns the result
    assert Tuner.resume(tmp_path / "new.db").fit().best == result.best


def test_a_job_killed_before_its_priors_were_saved_reads_the_earlier_journal_on_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _warm_job(tmp_path, monkeypatch, max_jobs=2).fit()
    priors = _priors(tmp_path / "new.db")
    db = sqlite3.connect(tmp_path / "new.db")
    with db:
        db.execute("DELETE FROM meta WHERE key='priors'")  # as if killed between the job and its priors
    db.close()
    shutil.move(str(tmp_path / "old.db"), str(tmp_path / "gone.db"))
    with pytest.raises(ConfigError, match=r"warm_start journal 'old.db' does not exist \(this job's journal holds "
                                          r"no priors read from it yet: put it back at that path\)"):
        Tuner.resume("new.db").fit()
    shutil.move(str(tmp_path / "gone.db"), str(tmp_path / "old.db"))
    Tuner.resume("new.db").fit()
    assert _priors(tmp_path / "new.db") == priors
